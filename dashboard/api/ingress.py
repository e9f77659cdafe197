"""`POST /api/routes/{route}`: signed HTTP ingress. Translates HTTP to `route_trigger` and back.

Async by default: 202 with the instance id and its status URL. Sync with `?wait=30s` (or the
route's `sync_default`): waits for the output by polling the ledger, outside any transaction,
and answers 200 with it, or 202 if the instance has not finished in time.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from dashboard.api.errors import error_response, from_engine_error, from_trigger_error
from ingest.alerts.callbacks import ROUTE_CALLBACK_ALSO, route_callback_attach
from ingest.engine import EngineError, trace_ingress_request
from ingest.engine.models import Status
from ingest.triggers.errors import BodyTooLarge, InvalidWait, TriggerError
from ingest.triggers.limits import input_limits, parsed_body
from ingest.triggers.selectors import Outcome, instance_outcome_wait
from ingest.triggers.services import route_trigger

_WAIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def max_wait() -> float:
    return float(getattr(settings, "RUNLEDGER_INGRESS_MAX_WAIT_SECONDS", 60.0))


def parse_wait(raw: str | None, *, default: float) -> float:
    """`30s`, `30`, `1500ms`, `1m` → seconds, capped at the configured maximum."""
    if raw is None:
        return default
    match = _WAIT.match(raw)
    if not match:
        raise InvalidWait(f"wait={raw[:40]!r} is not a duration; use e.g. wait=30s, wait=500ms or wait=0 for async")
    value = float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match.group(2)]
    if value > max_wait():
        raise InvalidWait(
            f"wait={raw!r} is longer than the {max_wait():g} s maximum; poll the status URL for longer runs"
        )
    return value


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _read_body(request: HttpRequest) -> bytes:
    most = input_limits().body_bytes  # RUNLEDGER_MAX_BODY_BYTES; the input guard checked it first
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > most:
        raise BodyTooLarge(
            f"the body is {declared:,} bytes; ingress accepts at most {most:,} "
            "bytes — store large data elsewhere and send its reference"
        )
    # Read one byte past the limit: a chunked body without Content-Length is caught here too.
    body = request.read(most + 1)
    if len(body) > most:
        raise BodyTooLarge(f"the body is over {most:,} bytes; send less")
    return body


@csrf_exempt
def route_ingress(request: HttpRequest, route: str) -> HttpResponse:
    if request.method != "POST":
        response = error_response(405, "method_not_allowed", "ingress routes take POST only")
        response["Allow"] = "POST"
        return response
    try:
        asked = parse_wait(request.GET.get("wait"), default=-1.0)  # validated before any write
        body = _read_body(request)
        with trace_ingress_request(route, request.headers.get("traceparent")):
            triggered = route_trigger(
                route=route,
                token=_bearer(request),
                timestamp=request.headers.get("X-Runledger-Timestamp"),
                signature=request.headers.get("X-Runledger-Signature"),
                body=body,
                idempotency_key=request.headers.get("Idempotency-Key"),
                now=timezone.now(),
                parsed=parsed_body(request),
                also=ROUTE_CALLBACK_ALSO,
            )
        route_default = min(triggered.route.wait_seconds, max_wait()) if triggered.route.sync_default else 0.0
        wait = route_default if asked < 0 else asked
        joined = triggered.coalesced
        if triggered.route.coalesce:
            # The window's instance starts when the window closes: nothing to wait for now. A
            # repeat of a request that joined one (its Idempotency-Key again) is answered at once
            # too, with what its key read, rather than holding the caller for the sync wait.
            wait = 0.0
        if triggered.created and (joined is None or joined.opened):
            route_callback_attach(
                route=route,
                instance_id=triggered.instance_id,
                now=timezone.now(),
                url=triggered.also,
                url_read=triggered.also_read,
            )
    except TriggerError as exc:
        return from_trigger_error(exc)
    except EngineError as exc:
        return from_engine_error(exc)
    status_url = f"/api/instances/{triggered.instance_id}"
    data: dict[str, Any] = {
        "instance_id": triggered.instance_id,
        "created": triggered.created,
        "status_url": status_url,
    }
    if joined is not None:
        data["coalesced"] = {
            "mode": joined.mode,
            "key": joined.key,
            "events": joined.count,
            "starts_at": joined.starts_at.isoformat(),
            "opened": joined.opened,
        }
    if wait <= 0 and triggered.created:
        # Asynchronous, and this request inserted the instance queued: what a read would say
        # (a worker may claim it at any moment; the status URL tells what it is now).
        outcome: Outcome | None = Outcome(triggered.instance_id, Status.QUEUED, None, None, False)
    elif wait <= 0 and triggered.outcome is not None:
        outcome = triggered.outcome  # a replay: read with its key, in the same statement
    else:
        outcome = instance_outcome_wait(instance_id=triggered.instance_id, timeout=wait)
    if outcome is not None:
        data["status"] = outcome.status
        if outcome.finished:
            data.update(output=outcome.output, error=outcome.error)
    finished = outcome is not None and outcome.finished
    code = 200 if finished or not triggered.created else 202
    response = JsonResponse(data, status=code)
    response["Location"] = status_url
    return response
