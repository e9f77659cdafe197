"""The step bodies of url-classify, one per stage. Each takes what it needs as arguments and
returns JSON; each paid call reserves its budget first (`ctx.check_budget`) and records an
api_costs row after (`ctx.track_cost`) with its `stage` and `domain` in the metadata."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from ingest.classify.llm_verify import MAX_OUTPUT_TOKENS, LLMAnswerInvalid, llm_answer, llm_messages
from ingest.classify.matcher import rules_classify, split_url
from ingest.classify.result import (
    Candidate,
    ClassificationResult,
    candidate,
    content_candidate,
    rules_candidate,
    similarity_candidate,
)
from ingest.classify.selectors import domain_cache_get, fetch_method_get
from ingest.classify.services import (
    domain_classification_upsert,
    fetch_method_remember,
    url_classification_upsert,
    url_hash,
    url_vector_add,
)
from ingest.classify.signals import content_signals
from ingest.classify.taxonomy import CACHE_MIN_CONFIDENCE
from ingest.engine import NonRetryableError
from ingest.engine import now as engine_now
from ingest.engine.models import Instance
from ingest.pipelines.pricer import estimate_usage_cost
from ingest.pipelines.pricing import PriceNotFound
from ingest.sources.errors import SourceError
from ingest.sources.llm import LLMInvalidOutput
from ingest.sources.page_fetch import CASCADE, FetchMethod
from ingest.sources.seo_services import ZENROWS_BASIC, ZENROWS_PREMIUM
from ingest.sources.zenrows import fetch_cascade
from ingest.workflows.common import source_error_step
from ingest.workflows.url_classify.clients import (
    EmbedderChoice,
    embedder_choice,
    llm_choice,
    native_fetcher,
    usage_meter,
    zenrows_client,
)

_WORDS = re.compile(r"[a-z0-9]+")


def url_text(url: str, host: str) -> str:
    """The words of a URL that say what it is: the host's labels and the path's words."""
    _, path, _ = split_url(url)
    return " ".join(_WORDS.findall(host.replace(".", " ")) + _WORDS.findall(path))


def _money(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.000001")))


def stage_cache(*, tenant: str, host: str, url: str) -> dict[str, Any]:
    """Stage 0: the host's domain-level classification, when known at >= 60. Its page type is
    read off the URL's structure by the rules (free, no stage of its own).

    It also records whether the tenant has an LLM for stage 4, so a replay after the connection
    changed takes the same path as the first run."""
    llm = llm_choice(tenant) is not None
    known = domain_cache_get(tenant=tenant, host=host)
    if known is None or known.confidence < CACHE_MIN_CONFIDENCE:
        return {"hit": False, "confidence": known.confidence if known else None, "llm": llm}
    labels = dict(known.labels)
    page = rules_classify(url).page_type
    if page:
        labels["page_type"] = page
    return {"hit": True, "candidate": candidate(known.confidence, labels, known.modifiers).as_dict(), "llm": llm}


def stage_rules(*, url: str) -> dict[str, Any]:
    result = rules_classify(url)
    return {"candidate": rules_candidate(result).as_dict(), "rule": result.rule, "rules": list(result.rules)}


def _embed(ctx: Any, choice: EmbedderChoice, text: str, *, stage: str, host: str) -> tuple[list[float], Decimal]:
    """One embedding call, budget reserved before (priced like its input) and costed after."""
    if choice.service != "wordllama":
        try:
            estimate = estimate_usage_cost(choice.service, choice.model, input_tokens=max(1, len(text) // 2),
                                           output_tokens=0, at=engine_now())  # fmt: skip
        except PriceNotFound as error:
            raise NonRetryableError.wrap(
                error, f"cannot reserve budget for step {ctx.step_label!r}: {error}"
            ) from error
        ctx.check_budget(choice.service, estimate)
    try:
        result = choice.embedder.embed([text])
    except SourceError as error:
        raise source_error_step(error) from error
    usage = result.usage
    cost = ctx.track_cost(usage.service or choice.service, metadata={"stage": stage, "domain": host},
                          **usage.as_track_cost_kwargs())  # fmt: skip
    return result.vectors[0], cost


def stage_similarity(ctx: Any, *, tenant: str, host: str, url: str) -> dict[str, Any]:
    """Stage 2: embed the URL's words, find the 3 nearest classified URLs, let them vote."""
    choice = embedder_choice()
    if choice is None:
        return {"ran": False}
    vector, cost = _embed(ctx, choice, url_text(url, host), stage="similarity", host=host)
    # Here, not at the top: the index is numpy, which a worker's start would pay ~0.15 s for
    # before it claims anything (bench/worker_boot.py).
    from ingest.classify.neighbours import nearest

    found = nearest(tenant=tenant, model=choice.model, vector=vector, exclude=url_hash(url))
    proposed = similarity_candidate(found)
    return {
        "ran": True, "model": choice.model, "cost": _money(cost),
        "neighbours": [n.as_dict() for n in found],
        "candidate": proposed.as_dict() if proposed else None,
    }  # fmt: skip


def stage_content(ctx: Any, *, tenant: str, host: str, url: str, prior: Candidate | None) -> dict[str, Any]:
    """Stage 3: fetch the page the cheapest way that worked for this host (native, then ZenRows
    basic, then premium), remember what worked, read the page's signals."""
    remembered = fetch_method_get(tenant=tenant, host=host)
    start: FetchMethod = next((m for m in CASCADE if m == remembered), "native")
    zenrows = zenrows_client(tenant)

    def reserve(method: FetchMethod) -> None:
        service = ZENROWS_PREMIUM if method == "zenrows_premium" else ZENROWS_BASIC
        ctx.check_budget(service.service, service.estimate(items=1))

    try:
        cascade = fetch_cascade(url, native=native_fetcher(), zenrows=zenrows, start=start, before_paid=reserve)
    except SourceError as error:
        raise source_error_step(error) from error
    cost = Decimal(0)
    for call in cascade.paid:
        kwargs = call.track_cost_kwargs()
        kwargs["metadata"] |= {"stage": "content", "domain": host}
        cost += ctx.track_cost(kwargs.pop("service"), **kwargs)
    tried = [{"method": a.method, "status": a.status, "blocked": a.blocked} for a in cascade.attempts]
    if cascade.page is None:
        return {"fetched": False, "attempts": tried, "cost": _money(cost), "method": None}
    if cascade.page.method != remembered:
        fetch_method_remember(tenant=tenant, host=host, method=cascade.page.method)
    signals = content_signals(cascade.page.html)
    proposed = content_candidate(signals, prior)
    return {
        "fetched": True, "method": cascade.page.method, "attempts": tried, "cost": _money(cost),
        "signals": signals.as_dict(), "candidate": proposed.as_dict(),
    }  # fmt: skip


def stage_llm(
    ctx: Any, *, tenant: str, host: str, url: str, partial: Candidate | None, signals: dict[str, Any] | None,
    round_no: int,
) -> dict[str, Any]:  # fmt: skip
    """Stage 4, one round: the LLM verifies within the taxonomy. An answer that is blank, not
    JSON or outside the taxonomy ends the round without a verdict (it is billed all the same)."""
    choice = llm_choice(tenant)
    if choice is None:
        raise NonRetryableError(f"tenant {tenant!r} has no LLM connection (openai or anthropic) for stage 4")
    messages = llm_messages(url, partial=partial, signals=signals, round_no=round_no)
    prompt = sum(len(m["content"]) for m in messages)
    try:
        estimate = estimate_usage_cost(choice.service, choice.model, input_tokens=prompt // 3 + 16,
                                       output_tokens=MAX_OUTPUT_TOKENS, at=engine_now())  # fmt: skip
    except PriceNotFound as error:
        raise NonRetryableError.wrap(error, f"cannot reserve budget for step {ctx.step_label!r}: {error}") from error
    ctx.check_budget(choice.service, estimate)
    metadata = {"stage": "llm", "domain": host, "round": round_no}
    verdict: Candidate | None = None
    problem = ""
    with usage_meter() as seen:
        try:
            answer = choice.client.complete_json(messages, max_tokens=MAX_OUTPUT_TOKENS)
            verdict = llm_answer(answer.data)
        except (LLMInvalidOutput, LLMAnswerInvalid) as error:
            problem = str(error)
        except SourceError as error:
            _record(ctx, choice.service, seen, metadata, success=False)
            raise source_error_step(error) from error
    cost = _record(ctx, choice.service, seen, metadata, success=verdict is not None)
    return {"candidate": verdict.as_dict() if verdict else None, "error": problem, "cost": _money(cost),
            "model": choice.model}  # fmt: skip


def _record(ctx: Any, service: str, usages: list[Any], metadata: dict[str, Any], *, success: bool) -> Decimal:
    total = Decimal(0)
    for usage in usages:
        total += ctx.track_cost(usage.service or service, success=success, metadata=metadata,
                                **usage.as_track_cost_kwargs())  # fmt: skip
    return total


def index_feedback(ctx: Any, *, tenant: str, host: str, url: str, decided: Candidate, source: str) -> dict[str, Any]:
    """At >= 85: the URL joins the similarity index and its domain-level labels become the
    host's cached classification. The URL is embedded again rather than carried from stage 2:
    most URLs that get here stopped at the rules and were never embedded, and a vector in a
    step's stored result would cost the ledger kilobytes per URL to save a fraction of a cent."""
    cost = Decimal(0)
    added = False
    choice = embedder_choice()
    if choice is not None:
        vector, cost = _embed(ctx, choice, url_text(url, host), stage="feedback", host=host)
        labels: dict[str, Any] = {**decided.labels, "modifiers": list(decided.modifiers)}
        added = url_vector_add(tenant=tenant, model=choice.model, url=url, vector=vector, labels=labels,
                               confidence=decided.confidence)  # fmt: skip
    if decided.get("domain_type"):
        domain_classification_upsert(tenant=tenant, host=host, confidence=decided.confidence, labels=decided.labels,
                                     modifiers=decided.modifiers, source=source, from_url=url)  # fmt: skip
    return {"indexed": added, "cost": _money(cost)}


def run_duration_ms(instance_id: str) -> int | None:
    """Milliseconds from the instance's start (its first pick-up by a worker, else its creation)
    to now; None for an instance the ledger does not hold. Called inside a step, so the value is
    memoised with the step's result and a replay reads the same figure."""
    row = Instance.objects.filter(id=instance_id).values("started_at", "created_at").first()
    if row is None:
        return None
    start = row["started_at"] or row["created_at"]
    return max(0, round((engine_now() - start).total_seconds() * 1000))


def store_classification(*, tenant: str, host: str, result: ClassificationResult, instance_id: str) -> dict[str, Any]:
    """The result, with the run's `duration_ms` so far (this is its last step), in the ledger."""
    duration = run_duration_ms(instance_id)
    stored = result.copy()
    stored["duration_ms"] = duration
    row = url_classification_upsert(tenant=tenant, host=host, result=stored, instance_id=instance_id)
    return {"id": row.pk, "duration_ms": duration}
