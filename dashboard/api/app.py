"""The REST API for programs: one NinjaAPI, its routers, and the error envelope.

django-ninja rather than Django REST framework: the request and response types are the schema
(pydantic validation in, OpenAPI out, both from the same annotations), it is small, and function
handlers fit the house style of thin views over services.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.schema import OpenAPISchema

from dashboard.api import (
    alerts,
    audit,
    bulk,
    connections,
    credentials,
    dead_letters,
    instances,
    limits,
    operations,
    routes,
    schedules,
    subscriptions,
    workflows,
)
from dashboard.api.auth import ApiTokenAuth
from dashboard.api.errors import (
    ApiProblem,
    error_response,
    from_engine_error,
    from_trigger_error,
    handle_problem,
)
from dashboard.api.links import LINKS
from dashboard.api.openapi import add_links, declare_limits, document_refusals
from dashboard.observability import api as metrics_api
from ingest.alerts.errors import AlertError
from ingest.engine import EngineError
from ingest.triggers.errors import TriggerError

# Request bodies whose `params` are an instance's params (no key the engine sets itself).
PARAMS_FIELDS = {
    name: frozenset({"params"}) for name in ("InstanceIn", "ReplayIn", "ForkIn", "ScheduleIn", "ScheduleEditIn")
}


class RunledgerAPI(NinjaAPI):
    """The API whose OpenAPI document also states the input guard's rules and the links."""

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        document = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        declare_limits(document, params_fields=PARAMS_FIELDS)
        document_refusals(document)
        add_links(document, LINKS)
        return document


api = RunledgerAPI(
    title="Runledger API",
    version="1",
    description=(
        "Start and control workflow instances, publish events, redrive dead letters, read costs "
        "and budgets; create, edit, enable, disable and delete schedules, routes and subscriptions; "
        "create, rotate, disable and delete ingress credentials; set up and test the tenants' source "
        "connections. Authenticate with `Authorization: Bearer <API token>`; a "
        "token acts with its user's roles and sees only its user's tenants. Errors are "
        '`{"error": {"code", "message"}}`, with `fields` naming every invalid field of a '
        "trigger's body at once. Signed ingress (`POST /api/routes/{route}`) is "
        "documented in ingest/triggers/README.md."
    ),
    auth=ApiTokenAuth(),
    urls_namespace="api",
)
api.add_router("/workflows", workflows.router)
api.add_router("/instances", instances.router)
api.add_router("/bulk-actions", bulk.router)
api.add_router("/schedules", schedules.router)
api.add_router("/dead-letters", dead_letters.router)
api.add_router("/audit", audit.router)
api.add_router("", operations.router)
api.add_router("", limits.router)
api.add_router("/metrics", metrics_api.router)  # per-workflow metrics (dashboard/observability)
api.add_router("", alerts.router)
api.add_router("", routes.router)
api.add_router("", subscriptions.router)
api.add_router("", credentials.router)
api.add_router("", connections.router)


@api.exception_handler(ApiProblem)
def _problem(request: HttpRequest, exc: ApiProblem) -> HttpResponse:
    return handle_problem(request, exc)


@api.exception_handler(EngineError)
def _engine(request: HttpRequest, exc: EngineError) -> HttpResponse:
    return from_engine_error(exc)


@api.exception_handler(AlertError)
def _alert(request: HttpRequest, exc: AlertError) -> HttpResponse:
    return error_response(exc.status, exc.code, str(exc))


@api.exception_handler(TriggerError)
def _trigger(request: HttpRequest, exc: TriggerError) -> HttpResponse:
    return from_trigger_error(exc)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = error_response(
        401,
        "not_authenticated",
        "send Authorization: Bearer <API token>; "
        "the token is missing, unknown, expired or revoked; make one on the "
        "console's API tokens page, /tokens/",
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    details = [{"loc": [str(p) for p in e.get("loc", [])], "msg": str(e.get("msg", ""))} for e in exc.errors]
    where = "; ".join(f"{'.'.join(d['loc'])}: {d['msg']}" for d in details[:5])
    return error_response(422, "validation_error", f"the request is invalid: {where}", details=details)


@api.exception_handler(HttpError)
def _http(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return error_response(exc.status_code, "http_error", str(exc))


@api.exception_handler(Http404)
def _missing(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(404, "not_found", str(exc) or "not found")
