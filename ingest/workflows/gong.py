"""`gong-ingest`: a Gong call's transcript becomes facts, step by step.

    search-attributes       (version 2) call_id, and account when the params carry one
    fetch-transcript        only when the params carry no transcript (webhooks): Gong API
    keyword-prefilter       the tenant's keyword list (KeywordList table)
    insert-engagement-only  no keyword hit: one low-confidence fact, and the instance ends
    llm-extract             retries 3, exponential from 5 s; budget checked, cost recorded
    persist-facts-{i}       one step per fact: insert-or-supersede by deterministic id
    schedule-embeddings     fail-open
    emit-signal-eval        one signal_evaluations row with the committed fact ids

Instance id `gong-{tenant}-{call_id}`: a redelivered call hits the duplicate id and is
acknowledged as already processed (`gong_ingest_start`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ingest.engine import (
    InstanceAlreadyExists,
    NonRetryableError,
    RowUnchanged,
    Workflow,
    WorkflowEvent,
    create,
)
from ingest.extraction import Fact
from ingest.extraction.patterns import SPEAKER_LINE
from ingest.pipelines.fact_writes import fact_insert_or_supersede
from ingest.pipelines.models import SourceAuthority
from ingest.pipelines.selectors import gong_config_get, keyword_list_get
from ingest.sources.errors import SourceError
from ingest.sources.gong import GongCall, GongClient, GongExtensiveCall, GongParty, GongTranscript
from ingest.sources.outbound import InvalidLimit, SharedBucket, provider_limit
from ingest.workflows.common import (
    DEFAULT_RETRIES,
    PATIENT_RETRIES,
    QUICK_RETRIES,
    id_part,
    llm_extract,
    persist_embed_and_emit,
    source_error_step,
)
from ingest.workflows.search_attributes import search_slug, searchable
from ingest.workflows.sharing import FAIR_KEY, LIVE_PRIORITY, tenant_concurrency, tenant_overrides

if TYPE_CHECKING:
    from ingest.engine import StepApi

WORKFLOW = "gong-ingest"
ENGAGEMENT_CONFIDENCE = 0.2
log = logging.getLogger("runledger.ingest")  # inside a step, its lines are kept with the attempt


class TranscriptNotReady(SourceError):
    """Gong has no transcript for the call yet (it is still processing); retry later."""

    retryable = True


def gong_instance_id(tenant: str, call_id: str) -> str:
    return f"gong-{id_part(tenant)}-{id_part(call_id)}"


def account_of(title: str, fallback: str) -> str:
    """Gong titles read "Acme Logistics <> Northwind: Demo"; the account is before " <> "."""
    head = re.split(r"\s+<>\s+|\s+[|/-]\s+", title or "", maxsplit=1)[0].strip()
    return head or fallback


def transcript_text(transcript: GongTranscript, parties: Sequence[GongParty] = ()) -> str:
    """ "Name: text" per monologue; an unnamed speaker reads "Speaker <id>", never a bare id,
    so every line stays a speaker line for the prefilter and the extractor."""
    names = {party.speaker_id: party.name for party in parties if party.speaker_id and party.name}
    return "\n".join(
        f"{names.get(m.speaker_id) or f'Speaker {m.speaker_id or 0}'}: " + " ".join(s.text for s in m.sentences)
        for m in transcript.monologues
    )


# ---- the steps -----------------------------------------------------------------------------------


def gong_bucket_key(access_key: str) -> str:
    """The shared token bucket of a Gong access key (Gong limits a company's key, not a tenant);
    named by a digest, so the key itself is in no row an operator lists."""
    return "gong:" + hashlib.sha256(access_key.encode()).hexdigest()[:16]


def gong_client(tenant: str, *, base_url: str | None = None, max_inline_wait: float = 2.0) -> GongClient:
    """A client for the tenant's Gong. Every worker's clients of one access key take their calls
    from one durable token bucket at the connection's `rate_limit` (else the setting's, else
    Gong's 3 calls/s); a slot further than `max_inline_wait` seconds away is `GongRateLimited`
    with `retry_after`, so a step gives its worker back instead of sleeping. `base_url` points
    it elsewhere than the connection says (a fake, a sandbox)."""
    config = gong_config_get(tenant=tenant, base_url=base_url)
    try:
        limit = provider_limit("gong", config.options)
    except InvalidLimit as error:
        raise NonRetryableError.wrap(
            error, f"the Gong connection of tenant {tenant}: {error}; fix it in the admin, then retry the instance"
        ) from error
    limiter = SharedBucket(gong_bucket_key(config.access_key), limit=limit, max_inline_wait=max_inline_wait)
    return GongClient(
        access_key=config.access_key, access_key_secret=config.secret, base_url=config.base_url, limiter=limiter
    )


def fetch_transcript(*, tenant: str, call_id: str) -> dict[str, Any]:
    client = gong_client(tenant)
    try:
        extensive = next(client.iter_extensive([call_id]), None)
        transcript = client.transcript(call_id)
    except SourceError as error:
        raise source_error_step(error) from error
    if transcript is None:
        raise TranscriptNotReady(f"Gong has no transcript for call {call_id} of tenant {tenant} yet; retrying later")
    parties = extensive.parties if extensive else ()
    result: dict[str, Any] = {"text": transcript_text(transcript, parties)}
    log.info("fetched the transcript of call %s: %d characters, %d parties", call_id, len(result["text"]), len(parties))
    if extensive is not None:
        result |= {
            "title": extensive.call.title,
            "started": extensive.call.started.isoformat() if extensive.call.started else None,
        }
    return result


def keyword_prefilter(*, tenant: str, call_id: str, transcript: Any) -> dict[str, Any]:
    """Which of the tenant's keywords the call mentions. A transcript that is not speaker
    lines cannot be extracted: that is non-retryable (fix the call data, then replay)."""
    if not isinstance(transcript, str) or not any(SPEAKER_LINE.match(line.strip()) for line in transcript.splitlines()):
        shown = repr(transcript)[:80]
        raise NonRetryableError(
            f"transcript of Gong call {call_id} (tenant {tenant}) is malformed: expected 'Speaker: text' "
            f"lines, got {shown}; fix the call data and replay the instance with corrected params"
        )
    keywords = keyword_list_get(tenant=tenant)
    if keywords is None:
        return {"filtered": False, "hits": [], "keywords": 0}
    lowered = transcript.lower()
    hits = [k for k in keywords if k.lower() in lowered]
    log.info(
        "call %s mentions %d of the tenant's %d keywords%s",
        call_id,
        len(hits),
        len(keywords),
        f": {', '.join(hits[:10])}" if hits else "; only its engagement is recorded",
    )
    return {"filtered": True, "hits": hits, "keywords": len(keywords)}


def insert_engagement_only(
    *, tenant: str, call_id: str, subject: str, title: str, observed_at: str, instance_id: str
) -> dict[str, Any]:
    fact = Fact(subject, "engagement", f"gong call {call_id}", ENGAGEMENT_CONFIDENCE, title)
    return fact_insert_or_supersede(
        tenant=tenant,
        fact=fact,
        source_ref=f"gong:call:{call_id}",
        authority=SourceAuthority.GONG_ENGAGEMENT,
        observed_at=datetime.fromisoformat(observed_at),
        instance_id=instance_id,
    ).as_dict()


def gong_search_attributes(params: Mapping[str, Any]) -> dict[str, str | int]:
    """What an operator finds a call's run by: the Gong call id, and the account as a slug when
    the params name it. Never derived from the title: a title may name a person."""
    account = params.get("account")
    return searchable(call_id=str(params["call_id"]), account=search_slug(account) if account else None)


# ---- the workflow --------------------------------------------------------------------------------


class GongIngest(Workflow):
    name = WORKFLOW
    concurrency_key = FAIR_KEY  # tenants served round robin (ingest/workflows/sharing.py)
    concurrency = tenant_concurrency(WORKFLOW)
    concurrency_overrides = tenant_overrides(WORKFLOW)
    version = 2  # 2: "search-attributes" first (docs/engine-contract.md, "Versions")

    def run(self, event: WorkflowEvent, step: StepApi) -> dict[str, Any]:
        p = event.payload
        tenant, call_id = event.tenant, str(p["call_id"])
        if step.version_at_least(2):  # before the fetch, so a call Gong keeps failing is found too
            step.set_search_attributes(**gong_search_attributes(p))
        title, started = str(p.get("title") or ""), p.get("started")
        transcript = p.get("transcript")
        if transcript is None:
            fetched = step.do(
                "fetch-transcript",
                lambda ctx: fetch_transcript(tenant=tenant, call_id=call_id),
                retries=PATIENT_RETRIES,
                timeout="2 minutes",
            )
            transcript = fetched["text"]
            title, started = title or fetched.get("title") or "", started or fetched.get("started")
        subject = str(p.get("account") or account_of(title, f"call {call_id}"))
        observed_at = started or event.timestamp.isoformat()
        source_ref = f"gong:call:{call_id}"

        # Deferred (docs/engine-contract.md): it reads the keyword list and writes nothing, so
        # its completion commits with the search attributes', before the LLM step starts.
        prefilter = step.do(
            "keyword-prefilter",
            lambda ctx: keyword_prefilter(tenant=tenant, call_id=call_id, transcript=transcript),
            retries=QUICK_RETRIES,
            checkpoint="deferred",
        )
        if prefilter["filtered"] and not prefilter["hits"]:
            write = step.do(
                "insert-engagement-only",
                lambda ctx: insert_engagement_only(
                    tenant=tenant,
                    call_id=call_id,
                    subject=subject,
                    title=title,
                    observed_at=observed_at,
                    instance_id=event.instance_id,
                ),
                retries=QUICK_RETRIES,
            )
            return {"source_ref": source_ref, "engagement_only": True, "facts": 1, "fact_ids": [write["id"]]}

        extracted = step.do(
            "llm-extract",
            lambda ctx: llm_extract(
                ctx,
                tenant=tenant,
                text=transcript,
                subject=subject,
                source="call transcript",
                key=call_id,
                authority=SourceAuthority.GONG_CALL,
            ),
            retries=DEFAULT_RETRIES,
            timeout="2 minutes",
        )
        output = persist_embed_and_emit(
            step, event, extracted["facts"], workflow=WORKFLOW, source_ref=source_ref, observed_at=observed_at
        )
        return {**output, "keyword_hits": prefilter["hits"], "model": extracted["model"]}


# ---- starting it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    instance_id: str
    created: bool  # False: the id existed, so this was already processed


def gong_params(call: GongCall | GongExtensiveCall | Mapping[str, Any], transcript: str | None) -> dict[str, Any]:
    if isinstance(call, GongExtensiveCall):
        call = call.call
    if isinstance(call, GongCall):
        params: dict[str, Any] = {
            "call_id": call.id,
            "title": call.title,
            "started": call.started.isoformat() if call.started else None,
        }
    else:
        params = {
            "call_id": str(call["call_id"] if "call_id" in call else call["id"]),
            **{k: call[k] for k in ("title", "started", "account") if call.get(k) is not None},
        }
    if transcript is not None:
        params["transcript"] = transcript
    return params


def gong_ingest_start(
    tenant: str,
    call: GongCall | GongExtensiveCall | Mapping[str, Any],
    *,
    transcript: str | None = None,
    actor: str = "",
    only_if: RowUnchanged | None = None,
    priority: int = LIVE_PRIORITY,
) -> Started:
    """Start `gong-ingest` for a call; the instance id is derived from the call, so a duplicate
    id means already processed.

    Without `transcript` the instance fetches it from Gong in its first step. A backfill passes
    `priority=BACKFILL_PRIORITY`, below live webhooks.
    """
    params = gong_params(call, transcript)
    params["tenant"] = tenant
    instance_id = gong_instance_id(tenant, params["call_id"])
    try:
        create(WORKFLOW, id=instance_id, params=params, tenant=tenant, actor=actor, only_if=only_if, priority=priority)
    except InstanceAlreadyExists:
        return Started(instance_id, False)
    return Started(instance_id, True)
