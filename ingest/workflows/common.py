"""Step bodies both pipelines share: extraction with budget and cost, per-fact persistence,
embeddings, the signal evaluation row. Each takes what it needs as arguments and returns JSON.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from ingest.engine import NonRetryableError
from ingest.engine import now as engine_now
from ingest.extraction import Fact, FactsMalformed, facts_from_result
from ingest.pipelines.fact_writes import FactSpec, fact_insert_or_supersede, facts_insert_or_supersede
from ingest.pipelines.pricing import PriceNotFound
from ingest.pipelines.selectors import llm_config_get
from ingest.pipelines.services import fact_embeddings_store, signal_evaluation_record
from ingest.sources.errors import SourceError
from ingest.sources.usage import Usage
from ingest.workflows.providers import embedder, extractor_for, reservation, usage_meter

if TYPE_CHECKING:
    from ingest.engine import StepApi, WorkflowEvent

log = logging.getLogger("runledger.ingest")

# Retry presets: quick for local writes, default for most calls, patient for slow providers.
QUICK_RETRIES = {"limit": 2, "delay": "1 second", "backoff": "constant"}
DEFAULT_RETRIES = {"limit": 3, "delay": "5 seconds", "backoff": "exponential"}
PATIENT_RETRIES = {"limit": 4, "delay": "10 seconds", "backoff": "exponential"}
ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class FactItem(TypedDict):
    subject: str
    predicate: str
    object: str
    confidence: float
    evidence: str
    authority: str


def id_part(value: str) -> str:
    """A value made safe for an instance id (letters, digits, '_' and '-')."""
    return ID_UNSAFE.sub("-", str(value)).strip("-") or "x"


def source_error_step(error: SourceError) -> Exception:
    """Retryable source errors propagate (the engine retries, honouring retry_after); the
    others end the step, since retrying cannot help."""
    if error.retryable:
        return error
    return NonRetryableError.wrap(error)


def _record(ctx: Any, service: str, usages: Sequence[Usage], *, success: bool, metadata: dict[str, Any]) -> None:
    for usage in usages:
        ctx.track_cost(usage.service or service, success=success, metadata=metadata, **usage.as_track_cost_kwargs())


def llm_extract(
    ctx: Any, *, tenant: str, text: str, subject: str, source: str, key: str, authority: str
) -> dict[str, Any]:
    """One extraction call: reserve its most expensive outcome on the budgets, call, record
    what every provider answer cost (failed ones too), return the facts."""
    extractor = extractor_for(llm_config_get(tenant=tenant))
    try:
        estimate = reservation(extractor, text, at=engine_now())
    except PriceNotFound as error:
        raise NonRetryableError.wrap(
            error, f"cannot reserve budget for step {ctx.step_label!r} of {ctx.instance_id}: {error}"
        ) from error
    ctx.check_budget(extractor.service, estimate)
    log.info(
        "extracting facts from %d characters of %s with %s (reserved $%s)",
        len(text),
        source,
        extractor.service,
        estimate,
    )
    metadata = {"source": source, "key": key, "estimate": str(estimate)}
    with usage_meter() as seen:
        try:
            result = extractor.extract(text, subject=subject, source=source, key=key, attempt=ctx.attempt)
            facts = facts_from_result(result)
        except (SourceError, FactsMalformed) as error:
            spent = seen if extractor.metered else []
            _record(ctx, extractor.service, spent, success=False, metadata={**metadata, "error": type(error).__name__})
            if isinstance(error, SourceError):
                raise source_error_step(error) from error
            raise
    spent = list(seen) if extractor.metered else [result.usage]
    _record(ctx, extractor.service, spent, success=True, metadata={**metadata, "facts": len(facts)})
    items = [FactItem(**fact.as_dict(), authority=authority) for fact in facts]
    log.info("%s (%s) found %d fact(s)", extractor.service, result.model, len(items))
    return {"facts": items, "model": result.model, "service": extractor.service}


def persist_fact(
    *, tenant: str, item: FactItem, ordinal: int, source_ref: str, observed_at: str, instance_id: str
) -> dict[str, Any]:
    fact = Fact(item["subject"], item["predicate"], str(item["object"]), float(item["confidence"]), item["evidence"])
    write = fact_insert_or_supersede(
        tenant=tenant,
        fact=fact,
        source_ref=source_ref,
        authority=item["authority"],
        observed_at=datetime.fromisoformat(observed_at),
        instance_id=instance_id,
        ordinal=ordinal,
    )
    return write.as_dict()


def persist_facts(
    *, tenant: str, items: Sequence[FactItem], first: int, source_ref: str, observed_at: str, instance_id: str
) -> list[dict[str, Any]]:
    """`persist_fact` for `items` in order, the first at ordinal `first`, in one transaction and,
    on PostgreSQL, one round trip."""
    facts = [
        Fact(item["subject"], item["predicate"], str(item["object"]), float(item["confidence"]), item["evidence"])
        for item in items
    ]
    writes = facts_insert_or_supersede(
        tenant=tenant,
        facts=[
            FactSpec(fact, authority=item["authority"], ordinal=first + n)
            for n, (fact, item) in enumerate(zip(facts, items, strict=True))
        ],
        source_ref=source_ref,
        observed_at=datetime.fromisoformat(observed_at),
        instance_id=instance_id,
    )
    return [write.as_dict() for write in writes]


def fact_text(item: FactItem) -> str:
    return f"{item['subject']} {item['predicate'].replace('_', ' ')}: {item['object']}"


def schedule_embeddings(ctx: Any, *, tenant: str, items: Sequence[tuple[str, FactItem]]) -> dict[str, Any]:
    """Embed the committed facts. Fail-open (the facts matter more than their vectors): a failure is logged and reported
    in the
    step's result, never fails the ingest; the facts are stored either way."""
    if os.environ.get("RUNLEDGER_EMBEDDINGS", "wordllama") == "off" or not items:
        return {"embedded": 0, "skipped": True}
    try:
        model = embedder()
        texts = [fact_text(item) for _, item in items]
        result = model.embed(texts)
        count = fact_embeddings_store(
            tenant=tenant,
            model=result.model,
            items=[
                (fact_id, text, vector) for (fact_id, _), text, vector in zip(items, texts, result.vectors, strict=True)
            ],
        )
        ctx.track_cost(
            result.usage.service or "wordllama", metadata={"facts": count}, **result.usage.as_track_cost_kwargs()
        )
    except Exception as error:  # noqa: BLE001 - fail-open by design
        log.warning("embedding facts of %s failed (fail-open, facts are kept): %s", ctx.instance_id, error)
        return {"embedded": 0, "error": f"{type(error).__name__}: {error}"}
    return {"embedded": count, "model": result.model}


def unique_facts(items: Sequence[FactItem]) -> list[FactItem]:
    """One item per fact id (same subject, predicate and object): the first wins, so a
    structured Salesforce field keeps its authority over the same fact found in free text."""
    seen: set[tuple[str, str, str]] = set()
    unique: list[FactItem] = []
    for item in items:
        key = (item["subject"].lower(), item["predicate"].lower(), str(item["object"]).lower())
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def persist_embed_and_emit(
    step: StepApi, event: WorkflowEvent, items: list[FactItem], *, workflow: str, source_ref: str, observed_at: str
) -> dict[str, Any]:
    """`persist-facts-{i}` one step per fact (of `event`'s tenant and instance), then
    `schedule-embeddings` and `emit-signal-eval`.

    The fact steps run one after another, and the first to run writes the later ones' facts too
    (below). Fanning them out with `step.all` measured no quicker than running them in order
    (docs/pipelines.md); conflicts would resolve the same in any order.

    All of these steps are `checkpoint="deferred"`: each acts on nothing outside this process
    and this database (WordLlama embeds in-process), and each write is keyed by a deterministic
    id (the fact's, the fact's embedding, the instance's evaluation row), so the workflow need
    not wait for a completion's commit before the next step. A crash can lose the last few
    completions, never a middle one, and replay runs those steps again: the same rows, written
    again. The instance's completion is queued behind them.
    """
    tenant, instance_id = event.tenant, event.instance_id
    items = unique_facts(items)
    # The first fact step that runs writes its fact and every later one as a batch (one round
    # trip, one transaction); the later steps record their fact's answer from it. Replay
    # returns the recorded answers and runs none of this; a step left unrecorded by a crash
    # writes its fact and the rest again (the same rows: deterministic ids).
    answers: dict[int, dict[str, Any]] = {}

    def persist(i: int) -> dict[str, Any]:
        if i not in answers:
            written = persist_facts(
                tenant=tenant,
                items=items[i:],
                first=i,
                source_ref=source_ref,
                observed_at=observed_at,
                instance_id=instance_id,
            )
            answers.update(enumerate(written, start=i))
        return answers.pop(i)

    writes: list[dict[str, Any]] = [
        step.do(f"persist-facts-{i}", lambda ctx, i=i: persist(i), retries=QUICK_RETRIES, checkpoint="deferred")
        for i in range(len(items))
    ]
    committed = [w["id"] for w in writes]
    embedded = step.do(
        "schedule-embeddings",
        lambda ctx: schedule_embeddings(ctx, tenant=tenant, items=list(zip(committed, items, strict=True))),
        retries=QUICK_RETRIES,
        checkpoint="deferred",
    )
    evaluation = step.do(
        "emit-signal-eval",
        lambda ctx: {
            "id": signal_evaluation_record(
                instance_id=instance_id, tenant=tenant, workflow=workflow, source_ref=source_ref, fact_ids=committed
            ).id
        },
        retries=QUICK_RETRIES,
        checkpoint="deferred",
    )
    return {
        "source_ref": source_ref,
        "facts": len(committed),
        "fact_ids": committed,
        "superseded": sum(len(w["superseded"]) for w in writes),
        "embedded": embedded.get("embedded", 0),
        "signal_evaluation": evaluation["id"],
    }
