"""Webhooks that start ingests: Gong automation rules, Salesforce CDC and Outbound Messages.

Each URL carries the tenant's webhook key (`Connection.webhook_key`): Gong and Salesforce
Outbound Messages cannot sign their posts with our secret, so the key in the URL is the
credential (HTTPS only in production; rotate it by editing the connection). An unknown key
answers 404, so keys cannot be told apart from missing routes.

Redelivery is harmless: instance ids are deterministic, and a duplicate is acknowledged as
already processed.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingest.pipelines.models import Connection, ConnectionKind
from ingest.pipelines.selectors import connection_by_webhook_key
from ingest.sources.gong import WebhookInvalid, parse_webhook
from ingest.sources.salesforce_events import (
    OUTBOUND_ACK_CONTENT_TYPE,
    SalesforceEventInvalid,
    outbound_ack,
    parse_change_event,
    parse_outbound_message,
)
from ingest.workflows.gong import Started, gong_ingest_start
from ingest.workflows.salesforce import salesforce_ingest_start, version_of

log = logging.getLogger("runledger.ingest")


def _not_found() -> JsonResponse:
    return JsonResponse({"error": "no such webhook"}, status=404)


def _json_body(request: HttpRequest) -> Any:
    try:
        return json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as error:
        raise WebhookInvalid(f"body is not JSON ({error})") from error


def _summary(results: list[Started]) -> dict[str, Any]:
    return {
        "started": [r.instance_id for r in results if r.created],
        "already_processed": [r.instance_id for r in results if not r.created],
    }


@csrf_exempt
@require_POST
def gong_webhook(request: HttpRequest, key: str) -> HttpResponse:
    """`POST /hooks/gong/<key>` with `{"callData": {...}, "isTest": bool}`."""
    connection = connection_by_webhook_key(kind=ConnectionKind.GONG, key=key)
    if connection is None:
        return _not_found()
    try:
        body = _json_body(request)
        if not isinstance(body, dict):
            raise WebhookInvalid(f"body is a JSON {type(body).__name__}, not an object")
        hook = parse_webhook(body)
    except WebhookInvalid as error:
        return JsonResponse({"error": str(error)}, status=400)
    if hook.is_test:
        return JsonResponse({"status": "test", "call_id": hook.call.call.id})
    started = gong_ingest_start(connection.tenant, hook.call, actor="gong-webhook")
    status = 202 if started.created else 200
    return JsonResponse({"status": "started" if started.created else "already processed",
                         "instance_id": started.instance_id}, status=status)


def _salesforce(key: str) -> Connection | None:
    return connection_by_webhook_key(kind=ConnectionKind.SALESFORCE, key=key)


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
    connection = _salesforce(key)
    if connection is None:
        return _not_found()
    try:
        events = [parse_change_event(item) for item in _events(_json_body(request))]
    except (WebhookInvalid, SalesforceEventInvalid) as error:
        return JsonResponse({"error": str(error)}, status=400)
    results: list[Started] = []
    skipped = 0
    for event in events:
        if event.entity_name != "Opportunity" or event.change_type in ("DELETE", "GAP_DELETE"):
            skipped += len(event.record_ids)
            continue
        for record_id in event.record_ids:
            results.append(salesforce_ingest_start(
                connection.tenant, object_id=record_id, object_type=event.entity_name,
                version=version_of(event.commit_timestamp), observed_at=event.commit_timestamp.isoformat(),
                trigger=f"cdc:{event.change_type}", actor="salesforce-cdc",
            ))
    return JsonResponse({**_summary(results), "skipped": skipped}, status=202 if results else 200)


@csrf_exempt
@require_POST
def salesforce_outbound(request: HttpRequest, key: str) -> HttpResponse:
    """`POST /hooks/salesforce/<key>/outbound`: an Outbound Message, answered `<Ack>true</Ack>`.

    A notification is versioned by the record's LastModifiedDate when the message carries it,
    else by the notification id (Salesforce redelivers a notification with the same id).
    """
    connection = _salesforce(key)
    if connection is None:
        return _not_found()
    try:
        message = parse_outbound_message(request.body)
    except SalesforceEventInvalid as error:
        return HttpResponse(str(error), status=400, content_type="text/plain; charset=utf-8")
    expected_org = str(connection.options.get("organization_id") or "")
    if expected_org and message.organization_id[:15] != expected_org[:15]:
        log.warning("outbound message for org %s refused on the webhook of %s", message.organization_id, connection.tenant)
        return _not_found()
    for note in message.notifications:
        fields = {k: v for k, v in note.fields.items() if v is not None}
        version = version_of(fields["LastModifiedDate"]) if fields.get("LastModifiedDate") else note.id
        salesforce_ingest_start(connection.tenant, object_id=note.record_id, object_type=note.sobject_type or "Opportunity",
                                record=fields, version=version, trigger="outbound-message", actor="salesforce-outbound")
    return HttpResponse(outbound_ack(True), content_type=OUTBOUND_ACK_CONTENT_TYPE)
