"""`salesforce-ingest`: an opportunity's fields become facts.

    search-attributes     (version 2) object_type, object_id, and account/account_id when the record has them
    fetch-record          when the params carry no record with its account (CDC, Outbound Message)
    search-attributes     (version 2) again after fetch-record, when that told account or account_id
    translate-fields      structured fields → facts, deterministically, with their source authority
    llm-extract           only for free text (Description, Notes__c), when there is any
    persist-facts-{i}     one step per fact: insert-or-supersede by deterministic id
    schedule-embeddings   fail-open
    emit-signal-eval      one signal_evaluations row with the committed fact ids

Instance id `sfdc-{tenant}-{object_type}-{object_id}`, plus `-v{version}` when the change has a
version (LastModifiedDate, the CDC commit timestamp, or the Outbound Message notification id):
the same change delivered twice is already processed; a later change is a new instance.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ingest.engine import InstanceAlreadyExists, RowUnchanged, Workflow, WorkflowEvent, create
from ingest.pipelines.models import ConnectionKind, SourceAuthority
from ingest.pipelines.selectors import SalesforceConfig, connection_token_get, salesforce_config_get
from ingest.pipelines.services import connection_token_store
from ingest.sources.errors import SourceError
from ingest.sources.salesforce import ClientCredentials, RefreshToken, SalesforceClient
from ingest.workflows.common import (
    DEFAULT_RETRIES,
    PATIENT_RETRIES,
    QUICK_RETRIES,
    FactItem,
    id_part,
    llm_extract,
    persist_embed_and_emit,
    source_error_step,
)
from ingest.workflows.gong import Started
from ingest.workflows.search_attributes import search_slug, searchable
from ingest.workflows.sharing import FAIR_KEY, LIVE_PRIORITY, tenant_concurrency, tenant_overrides

if TYPE_CHECKING:
    from ingest.engine import StepApi

WORKFLOW = "salesforce-ingest"
FREE_TEXT_FIELDS = ("Description", "Notes__c")
# field → (predicate, authority); custom `__c` fields not listed are SfdcCustomField facts.
STRUCTURED: dict[str, tuple[str, str]] = {
    "StageName": ("deal_stage", SourceAuthority.SFDC_OPPORTUNITY_STAGE),
    "Amount": ("deal_amount", SourceAuthority.SFDC_OPPORTUNITY_STAGE),
    "CloseDate": ("close_date", SourceAuthority.SFDC_OPPORTUNITY_STAGE),
    "Probability": ("win_probability", SourceAuthority.SFDC_OPPORTUNITY_STAGE),
    "ForecastCategoryName": ("forecast_category", SourceAuthority.SFDC_OPPORTUNITY_STAGE),
    "Industry": ("industry", SourceAuthority.SFDC_CUSTOM_FIELD),
    "Type": ("opportunity_type", SourceAuthority.SFDC_CUSTOM_FIELD),
    "LeadSource": ("lead_source", SourceAuthority.SFDC_CUSTOM_FIELD),
}
MAX_ID = 100


def account_name(record: Mapping[str, Any]) -> str:
    account = record.get("Account")
    return str(account.get("Name") or "") if isinstance(account, Mapping) else ""


def industry_of(record: Mapping[str, Any]) -> Any:
    account = record.get("Account")
    nested = account.get("Industry") if isinstance(account, Mapping) else None
    return record.get("Industry") or nested


def version_of(value: Any) -> str:
    """A compact, id-safe version: `2025-03-03T09:37:00.000Z` → `20250303093700000`."""
    if isinstance(value, datetime):
        stamp = value
    else:
        try:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return id_part(str(value))[:40]
    stamp = stamp.astimezone(UTC) if stamp.tzinfo else stamp
    return f"{stamp:%Y%m%d%H%M%S}{stamp.microsecond // 1000:03d}"


def sfdc_instance_id(tenant: str, object_type: str, object_id: str, version: str | None = None) -> str:
    base = f"sfdc-{id_part(tenant)}-{id_part(object_type)}-{id_part(object_id)}"
    if not version:
        return base
    suffix = f"-v{id_part(version)}"
    if len(base) + len(suffix) > MAX_ID:
        suffix = "-v" + hashlib.sha256(version.encode()).hexdigest()[: max(8, MAX_ID - len(base) - 2)]
    return (base + suffix)[:MAX_ID]


def _amount(value: Any, currency: str) -> str | None:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    text = f"{number:.0f}" if number == number.to_integral_value() else f"{number:.2f}"
    return f"{currency} {text}"


def translate_fields(record: Mapping[str, Any], *, subject: str) -> list[FactItem]:
    """Structured fields → facts, in a stable order; no LLM, no guesses (confidence 1)."""
    values = dict(record)
    values["Industry"] = industry_of(record)
    items: list[FactItem] = []
    custom = sorted(k for k in values if k.endswith("__c") and k not in FREE_TEXT_FIELDS)
    for field in [*STRUCTURED, *custom]:
        value = values.get(field)
        if value is None or value == "" or isinstance(value, Mapping | list):
            continue
        predicate, authority = STRUCTURED.get(
            field, (field.removesuffix("__c").lower(), SourceAuthority.SFDC_CUSTOM_FIELD)
        )
        if field == "Amount":
            value = _amount(value, str(values.get("CurrencyIsoCode") or "USD"))
            if value is None:
                continue
        elif isinstance(value, date | datetime):
            value = value.isoformat()
        items.append(
            FactItem(
                subject=subject,
                predicate=predicate,
                object=str(value),
                confidence=1.0,
                evidence=f"{field} = {value}",
                authority=authority,
            )
        )
    return items


def free_text(record: Mapping[str, Any]) -> str:
    return "\n".join(str(record[f]).strip() for f in FREE_TEXT_FIELDS if str(record.get(f) or "").strip())


_clients: dict[SalesforceConfig, SalesforceClient] = {}
_clients_lock = threading.Lock()


def salesforce_client(tenant: str) -> SalesforceClient:
    """One client per connection and process, so its access token is reused across steps; a new
    process starts from the token another one kept (encrypted, with its expiry) instead of
    authenticating again."""
    config = salesforce_config_get(tenant=tenant)
    with _clients_lock:
        if config not in _clients:
            credentials: ClientCredentials | RefreshToken = (
                RefreshToken(config.client_id, config.client_secret, config.refresh_token)
                if config.refresh_token
                else ClientCredentials(config.client_id, config.client_secret)
            )
            kept = connection_token_get(tenant=tenant, kind=ConnectionKind.SALESFORCE, now=timezone.now())
            _clients[config] = SalesforceClient(
                credentials=credentials,
                login_url=config.login_url,
                access_token=kept.access_token if kept else None,
                instance_url=kept.instance_url if kept else None,
                on_token=functools.partial(_keep_token, tenant),
            )
        return _clients[config]


def _keep_token(tenant: str, access_token: str, instance_url: str, lifetime: float) -> None:
    connection_token_store(
        tenant=tenant,
        kind=ConnectionKind.SALESFORCE,
        access_token=access_token,
        instance_url=instance_url,
        expires_at=timezone.now() + timedelta(seconds=lifetime),
    )


def fetch_record(*, tenant: str, object_type: str, object_id: str) -> dict[str, Any]:
    try:
        return salesforce_client(tenant).record(object_type, object_id)
    except SourceError as error:
        raise source_error_step(error) from error


def record_search_attributes(record: Any) -> dict[str, str | int]:
    """The account an operator finds a record's runs by: its name as a slug (the same as
    gong-ingest's `account`, so one filter finds both) and its Salesforce id."""
    if not isinstance(record, Mapping):
        return {}
    name, account_id = account_name(record), record.get("AccountId")
    return searchable(account=search_slug(name) if name else None, account_id=str(account_id) if account_id else None)


class SalesforceIngest(Workflow):
    name = WORKFLOW
    concurrency_key = FAIR_KEY  # tenants served round robin (ingest/workflows/sharing.py)
    concurrency = tenant_concurrency(WORKFLOW)
    concurrency_overrides = tenant_overrides(WORKFLOW)
    version = 2  # 2: "search-attributes" first, and after fetch-record (docs/engine-contract.md, "Versions")

    def run(self, event: WorkflowEvent, step: StepApi) -> dict[str, Any]:
        p = event.payload
        tenant, object_type, object_id = event.tenant, str(p.get("object_type") or "Opportunity"), str(p["object_id"])
        record = p.get("record")
        tagged = record_search_attributes(record)
        if step.version_at_least(2):  # before the fetch, so a record Salesforce keeps refusing is found too
            step.set_search_attributes(**searchable(object_type=object_type, object_id=object_id), **tagged)
        if not isinstance(record, Mapping) or not account_name(record):
            record = step.do(
                "fetch-record",
                lambda ctx: fetch_record(tenant=tenant, object_type=object_type, object_id=object_id),
                retries=PATIENT_RETRIES,
            )
            learned = {k: v for k, v in record_search_attributes(record).items() if tagged.get(k) != v}
            if step.version_at_least(2) and learned:  # a CDC change names its account only now
                step.set_search_attributes(**learned)
        subject = account_name(record) or str(record.get("Name") or f"{object_type} {object_id}")
        observed_at = _observed(p, record, event)
        source_ref = f"sfdc:{object_type}:{object_id}"

        items: list[FactItem] = step.do(
            "translate-fields", lambda ctx: translate_fields(record, subject=subject), retries=QUICK_RETRIES
        )
        text = free_text(record)
        model = None
        if text:
            extracted = step.do(
                "llm-extract",
                lambda ctx: llm_extract(
                    ctx,
                    tenant=tenant,
                    text=text,
                    subject=subject,
                    source="CRM notes",
                    key=object_id,
                    authority=SourceAuthority.SFDC_FREE_TEXT,
                ),
                retries=DEFAULT_RETRIES,
                timeout="2 minutes",
            )
            items = [*items, *extracted["facts"]]
            model = extracted["model"]
        output = persist_embed_and_emit(
            step, event, items, workflow=WORKFLOW, source_ref=source_ref, observed_at=observed_at
        )
        return {**output, "free_text": bool(text), "model": model}


def _observed(params: Mapping[str, Any], record: Mapping[str, Any], event: WorkflowEvent) -> str:
    for value in (record.get("LastModifiedDate"), params.get("observed_at")):
        if value:
            try:
                return datetime.fromisoformat(str(value).replace("Z", "+00:00")).isoformat()
            except ValueError:
                continue
    return event.timestamp.isoformat()


def salesforce_ingest_start(
    tenant: str,
    *,
    object_id: str,
    object_type: str = "Opportunity",
    record: Mapping[str, Any] | None = None,
    version: str | None = None,
    observed_at: str | None = None,
    trigger: str = "",
    actor: str = "",
    only_if: RowUnchanged | None = None,
    priority: int = LIVE_PRIORITY,
) -> Started:
    """Start `salesforce-ingest` for one record change; a duplicate id means already processed.

    `version` defaults to the record's LastModifiedDate. Without a record carrying its account,
    the instance reads the record through the REST API in its first step.
    """
    if version is None and record is not None and record.get("LastModifiedDate"):
        version = version_of(record["LastModifiedDate"])
    params: dict[str, Any] = {
        "tenant": tenant,
        "object_type": object_type,
        "object_id": object_id,
        "version": version,
        "trigger": trigger,
    }
    if record is not None:
        params["record"] = {k: v for k, v in record.items() if k != "attributes"}
    if observed_at:
        params["observed_at"] = observed_at
    instance_id = sfdc_instance_id(tenant, object_type, object_id, version)
    try:
        create(WORKFLOW, id=instance_id, params=params, tenant=tenant, actor=actor, only_if=only_if, priority=priority)
    except InstanceAlreadyExists:
        return Started(instance_id, False)
    return Started(instance_id, True)
