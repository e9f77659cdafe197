"""Webhooks that start ingests: Gong automation rules, Salesforce CDC and Outbound Messages.

Each URL carries the tenant's webhook key (`Connection.webhook_key`): Gong and Salesforce
Outbound Messages cannot sign their posts with our secret, so the key in the URL is the
credential (HTTPS only in production; rotate it by editing the connection). An unknown key
answers 404, so keys cannot be told apart from missing routes.

Redelivery is harmless: instance ids are deterministic, and a duplicate is acknowledged as
already processed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingest.engine import CheckedRowsChanged, EngineError
from ingest.pipelines.models import ConnectionKind
from ingest.pipelines.selectors import webhook_connection_forget, webhook_connection_get
from ingest.pipelines.sql import WebhookConnection
from ingest.sources.gong import WebhookInvalid, parse_webhook
from ingest.sources.salesforce_events import (
    OUTBOUND_ACK_CONTENT_TYPE,
    SalesforceEventInvalid,
    outbound_ack,
    parse_change_event,
    parse_outbound_message,
)
from ingest.triggers import limits
from ingest.workflows.gong import Started, gong_ingest_start
from ingest.workflows.salesforce import salesforce_ingest_start, version_of

log = logging.getLogger("runledger.ingest")


def _error(status: int, code: str, message: str) -> JsonResponse:
    """The API's error envelope, so every client of Runledger reads one error shape."""
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _not_found() -> JsonResponse:
    return _error(404, "webhook_not_found", "no webhook has this key; check the URL")


def _invalid(error: Exception) -> JsonResponse:
    return _error(400, "invalid_webhook", str(error))


def _max_records() -> int:
    return int(getattr(settings, "RUNLEDGER_HOOK_MAX_RECORDS", 200))


def _too_many(count: int) -> JsonResponse:
    return _error(
        413,
        "too_many_records",
        f"this post names {count:,} records; one post may start "
        f"at most {_max_records()} — send them in smaller batches",
    )


def _refused(error: EngineError) -> JsonResponse:
    # The engine refused what the push asked for (an id or params it cannot take): nothing
    # started, and Salesforce or Gong should not see a server error to retry forever.
    return _error(422, "refused_by_engine", str(error))


_BODY = "runledger_hook_body"  # this request's body as the handler read it, kept for a retry


def _json_body(request: HttpRequest) -> Any:
    """The body within the input limits (ingest/triggers/limits.py); a body that breaks them
    raises an InputRejected error, which the input guard answers.

    Parsed at most once per request: `_hooked` may handle a post again (its kept connection had
    changed), and the second handling reads the same value."""
    if _BODY in request.__dict__:
        return request.__dict__[_BODY]
    if not request.body.strip():
        raise WebhookInvalid("the body is empty; send the event as JSON")
    parsed = limits.parsed_body(request)
    if parsed is None:  # the input guard parsed none (a JSON null is parsed here again)
        parsed = limits.json_parse(request.body, limits=limits.input_limits(), what="the body")
    request.__dict__[_BODY] = parsed
    return parsed


def _summary(results: list[Started]) -> dict[str, Any]:
    return {
        "started": [r.instance_id for r in results if r.created],
        "already_processed": [r.instance_id for r in results if not r.created],
    }


Handled = tuple[HttpResponse, bool]  # the answer, and whether a guarded statement confirmed the connection


def _hooked(kind: str, key: str, handle: Callable[[WebhookConnection], Handled]) -> HttpResponse:
    """Answer a post with the connection its key names, kept per process between posts.

    A kept connection is trusted only by the statements that create instances under its guard:
    a guard that no longer holds (the row was disabled, re-keyed or edited by any process)
    writes nothing and the post is handled again from a fresh lookup; an answer that no guarded
    statement confirmed (a test post, a refused body, nothing to start) is given again from a
    fresh lookup too, so a revoked key never learns more than a 404.
    """
    for attempt in range(3):
        found, kept = webhook_connection_get(kind=kind, key=key, kept=attempt == 0)
        if found is None:
            return _not_found()
        try:
            response, confirmed = handle(found)
        except CheckedRowsChanged:
            webhook_connection_forget(kind=kind, key=key)
            continue
        if kept and not confirmed:
            continue
        return response
    return _error(409, "connection_changed", "the webhook's connection changed while the post was handled; retry it")


@csrf_exempt
@require_POST
def gong_webhook(request: HttpRequest, key: str) -> HttpResponse:
    """`POST /hooks/gong/<key>` with `{"callData": {...}, "isTest": bool}`."""
    return _hooked(ConnectionKind.GONG, key, lambda found: _gong(request, found))


def _gong(request: HttpRequest, found: WebhookConnection) -> Handled:
    try:
        body = _json_body(request)
        if not isinstance(body, dict):
            raise WebhookInvalid(f"body is a JSON {type(body).__name__}, not an object")
        hook = parse_webhook(body)
    except WebhookInvalid as error:
        return _invalid(error), False
    if hook.is_test:
        return JsonResponse({"status": "test", "call_id": hook.call.call.id}), False
    try:
        started = gong_ingest_start(found.connection.tenant, hook.call, actor="gong-webhook", only_if=found.guard)
    except CheckedRowsChanged:
        raise
    except EngineError as error:
        return _refused(error), False
    status = 202 if started.created else 200
    return JsonResponse(
        {"status": "started" if started.created else "already processed", "instance_id": started.instance_id},
        status=status,
    ), True


def _events(body: Any) -> list[dict[str, Any]]:
    """One event, a list of events, or a CometD batch, as dicts."""
    items = body if isinstance(body, list) else [body]
    return [item for item in items if isinstance(item, dict)]


@csrf_exempt
@require_POST
def salesforce_cdc(request: HttpRequest, key: str) -> HttpResponse:
    """`POST /hooks/salesforce/<key>/cdc`: Change Data Capture events as JSON.

    Each changed record starts an ingest that reads the record through the REST API (change
    events carry only the changed fields), versioned by the commit timestamp. Deletes and
    events for other objects than opportunities are acknowledged and skipped.
    """
    return _hooked(ConnectionKind.SALESFORCE, key, lambda found: _cdc(request, found))


def _cdc(request: HttpRequest, found: WebhookConnection) -> Handled:
    try:
        events = [parse_change_event(item) for item in _events(_json_body(request))]
    except (WebhookInvalid, SalesforceEventInvalid) as error:
        return _invalid(error), False
    if (count := sum(len(event.record_ids) for event in events)) > _max_records():
        return _too_many(count), False  # checked before any start: one post cannot keep a web process busy
    try:
        return _cdc_start(found, events)
    except CheckedRowsChanged:
        raise
    except EngineError as error:
        return _refused(error), False


def _cdc_start(found: WebhookConnection, events: list[Any]) -> Handled:
    # A connection changed between two records of one post: the records before were started
    # under the unchanged row, the post is handled again from a fresh lookup and reports them
    # as already processed (or answers 404 when the key no longer names a connection).
    results: list[Started] = []
    skipped = 0
    for event in events:
        if event.entity_name != "Opportunity" or event.change_type in ("DELETE", "GAP_DELETE"):
            skipped += len(event.record_ids)
            continue
        for record_id in event.record_ids:
            results.append(
                salesforce_ingest_start(
                    found.connection.tenant,
                    object_id=record_id,
                    object_type=event.entity_name,
                    version=version_of(event.commit_timestamp),
                    observed_at=event.commit_timestamp.isoformat(),
                    trigger=f"cdc:{event.change_type}",
                    actor="salesforce-cdc",
                    only_if=found.guard,
                )
            )
    return JsonResponse({**_summary(results), "skipped": skipped}, status=202 if results else 200), bool(results)


@csrf_exempt
@require_POST
def salesforce_outbound(request: HttpRequest, key: str) -> HttpResponse:
    """`POST /hooks/salesforce/<key>/outbound`: an Outbound Message, answered `<Ack>true</Ack>`.

    A notification is versioned by the record's LastModifiedDate when the message carries it,
    else by the notification id (Salesforce redelivers a notification with the same id).
    """
    return _hooked(ConnectionKind.SALESFORCE, key, lambda found: _outbound(request, found))


def _outbound(request: HttpRequest, found: WebhookConnection) -> Handled:
    connection = found.connection
    try:
        message = parse_outbound_message(request.body)
        versions = [_outbound_version(note) for note in message.notifications]
    except SalesforceEventInvalid as error:
        return _invalid(error), False
    if len(message.notifications) > _max_records():
        return _too_many(len(message.notifications)), False
    expected_org = str(connection.options.get("organization_id") or "")
    if expected_org and message.organization_id[:15] != expected_org[:15]:
        log.warning(
            "outbound message for org %s refused on the webhook of %s", message.organization_id, connection.tenant
        )
        return _not_found(), False
    try:
        for note, version in zip(message.notifications, versions, strict=True):
            fields = {k: v for k, v in note.fields.items() if v is not None}
            salesforce_ingest_start(
                connection.tenant,
                object_id=note.record_id,
                object_type=note.sobject_type or "Opportunity",
                record=fields,
                version=version,
                trigger="outbound-message",
                actor="salesforce-outbound",
                only_if=found.guard,
            )
    except CheckedRowsChanged:
        raise
    except EngineError as error:
        return _refused(error), False
    return HttpResponse(outbound_ack(True), content_type=OUTBOUND_ACK_CONTENT_TYPE), bool(message.notifications)


def _outbound_version(note: Any) -> str:
    """The record's LastModifiedDate as a version (else the notification id), refusing a date
    that is not one or lies at the calendar's edge (converting it to UTC would overflow)."""
    modified = note.fields.get("LastModifiedDate")
    if not modified:
        return str(note.id)
    try:
        return version_of(datetime.fromisoformat(modified.replace("Z", "+00:00")).astimezone(UTC))
    except (ValueError, OverflowError):
        raise SalesforceEventInvalid(
            f"LastModifiedDate {modified[:40]!r} of record {note.record_id} is not an ISO-8601 date Salesforce sends"
        ) from None
