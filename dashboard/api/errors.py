"""Every API error as `{"error": {"code", "message"}}` with a 4xx status; never a 500 for a
known condition. Engine and trigger errors map by class; anything else is a real bug (500)."""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

import ingest.engine as engine
from ingest.triggers.errors import InvalidFields, RateLimited, ReplayedRequest, TriggerError

# Engine error class → (status, code). Subclasses not listed fall back to their nearest base.
ENGINE_STATUS: dict[type[Exception], int] = {
    engine.InstanceNotFound: 404,
    engine.UnknownWorkflow: 404,
    engine.UnknownStep: 404,  # the instance has no such step: a resource that is not there
    engine.InstanceAlreadyExists: 409,
    engine.InstanceFinished: 409,
    engine.InvalidTransition: 409,
    engine.DeadLetterError: 409,
    engine.InvalidSelection: 400,
    engine.BatchNotConfirmable: 409,  # the preview's state, not the request, is in the way
    engine.ApprovalError: 409,
    engine.InvalidInstanceId: 422,
    engine.InvalidParams: 422,
    engine.InvalidDuration: 422,
    engine.BatchTooLarge: 422,
    engine.InvalidStepConfig: 422,
    engine.VersionInUse: 409,
    engine.VersionRetired: 409,
    engine.ConcurrencyLimitChanged: 409,
    engine.ConcurrencyLimitNotFound: 404,
    engine.InvalidConcurrencyLimit: 422,
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def error_response(status: int, code: str, message: str, **extra: Any) -> JsonResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JsonResponse({"error": body}, status=status)


def engine_error_status(exc: Exception) -> int:
    for cls in type(exc).__mro__:
        if cls in ENGINE_STATUS:
            return ENGINE_STATUS[cls]
    return 400


def from_engine_error(exc: engine.EngineError) -> JsonResponse:
    # Every wrong field by name, where the engine names them (a concurrency limit's).
    fields = exc.problems if isinstance(exc, engine.InvalidConcurrencyLimit) and exc.problems else None
    return error_response(engine_error_status(exc), snake(type(exc).__name__), str(exc), fields=fields)


def from_trigger_error(exc: TriggerError) -> HttpResponse:
    replayed = exc.instance_id if isinstance(exc, ReplayedRequest) else None
    # Every wrong field by name, as the console shows them: one answer names them all.
    fields = exc.problems if isinstance(exc, InvalidFields) and exc.problems else None
    response = error_response(exc.status, exc.code, str(exc), instance_id=replayed, fields=fields)
    if isinstance(exc, RateLimited):
        from ingest.triggers.buckets import retry_after_header

        response["Retry-After"] = retry_after_header(exc.retry_after)
    return response


def not_found(what: str, key: str) -> JsonResponse:
    return error_response(
        404,
        f"{what}_not_found",
        f"no {what.replace('_', ' ')} {key!r} is visible to this token; check the id and the token's tenants",
    )


class ApiProblem(Exception):
    """Raised by API handlers to answer with an error envelope."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def handle_problem(request: HttpRequest, exc: ApiProblem) -> JsonResponse:
    return error_response(exc.status, exc.code, exc.message)
