"""`url-classify`: a cache check, then four stages of rising
cost, stopping as soon as one is confident enough.

    search-attributes      (version 2) host, and domain_id and url_id when the params carry them
    cache-check            stage 0, free: the host's domain-level classification at >= 60 ends it
    rules                  stage 1, free: the rules engine (ingest/classify/rules.json)
    similarity             stage 2: embed the URL, top 3 classified neighbours vote
    content                stage 3: native fetch → ZenRows basic → premium, the page's signals
    llm-verify-{n}         stage 4, below 65 (or force_llm): up to max_rounds, 30 s apart
    index-feedback         at >= 85: the URL joins the index, its domain labels the cache
    store-classification   the ClassificationResult in the ledger (UrlClassification)

A stage at or above 70 (PIPELINE_MIN_CONFIDENCE) ends the pipeline early, unless force_llm.
Params: url (required), url_id, domain_id, max_rounds (3), skip_content, skip_llm, force_llm.
The output is a ClassificationResult, with `duration_ms` (the run's wall time from its start to
store-classification, measured in that step); domain-onboard fans out to this workflow by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ingest.classify.matcher import split_url
from ingest.classify.result import Candidate, ClassificationResult, classification_result, combine
from ingest.classify.taxonomy import (
    HIGH_CONFIDENCE,
    LLM_VERIFICATION_THRESHOLD,
    PIPELINE_MIN_CONFIDENCE,
)
from ingest.engine import NonRetryableError, Workflow, WorkflowEvent, create
from ingest.workflows.common import DEFAULT_RETRIES, PATIENT_RETRIES, QUICK_RETRIES
from ingest.workflows.search_attributes import searchable
from ingest.workflows.sharing import FAIR_KEY, tenant_concurrency, tenant_overrides
from ingest.workflows.url_classify.stages import (
    index_feedback,
    stage_cache,
    stage_content,
    stage_llm,
    stage_rules,
    stage_similarity,
    store_classification,
)

if TYPE_CHECKING:
    from ingest.engine import StepApi

WORKFLOW = "url-classify"
_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*|\[?[0-9a-f:.]+\]?", re.IGNORECASE)
LLM_BACKOFF = "30 seconds"
DEFAULT_MAX_ROUNDS = 3


@dataclass
class Progress:
    """What the stages so far decided: replayed identically from the steps' stored results."""

    decided: Candidate | None = None
    source: str = ""
    stages_run: list[str] = field(default_factory=list)
    cost: Decimal = Decimal(0)
    rounds: int = 0
    fetch_method: str | None = None
    signals: dict[str, Any] | None = None

    def propose(self, stage: str, proposal: dict[str, Any] | None) -> None:
        """A stage's proposal joins the decision; the stage decides when its proposal is the
        stronger (on a tie the later stage, which saw more)."""
        if proposal is None:
            return
        new = Candidate.from_dict(proposal)
        if self.decided is None or new.confidence >= self.decided.confidence:
            self.source = stage
        self.decided = combine(self.decided, new)

    @property
    def confidence(self) -> int:
        return self.decided.confidence if self.decided else 0


def url_search_attributes(params: dict[str, Any], host: str) -> dict[str, str | int]:
    """The URL's host (not the URL: a query string may carry a token or an address), and the ids
    the params carry: `domain_id` is the onboarded domain's, so it finds a domain-onboard's
    children."""
    ids = {key: params.get(key) for key in ("domain_id", "url_id")}
    return searchable(host=host, **{k: v for k, v in ids.items() if isinstance(v, int) and not isinstance(v, bool)})


def _flag(payload: dict[str, Any], name: str) -> bool:
    value = payload.get(name, False)
    if not isinstance(value, bool):
        raise NonRetryableError(f"param {name!r} must be true or false, got {value!r}")
    return value


class UrlClassify(Workflow):
    name = WORKFLOW
    concurrency_key = FAIR_KEY  # tenants served round robin (ingest/workflows/sharing.py)
    concurrency = tenant_concurrency(WORKFLOW)
    concurrency_overrides = tenant_overrides(WORKFLOW)
    version = 2  # 2: "search-attributes" before cache-check (docs/engine-contract.md, "Versions")

    def run(self, event: WorkflowEvent, step: StepApi) -> ClassificationResult:
        p = event.payload
        url = str(p.get("url") or "").strip()
        host = split_url(url)[0] if url else ""
        if not _HOST.fullmatch(host):
            raise NonRetryableError(f"param 'url' must be a URL with a host, got {p.get('url')!r}")
        max_rounds = p.get("max_rounds", DEFAULT_MAX_ROUNDS)
        if not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or not 1 <= max_rounds <= 10:
            raise NonRetryableError(f"param 'max_rounds' must be an integer from 1 to 10, got {max_rounds!r}")
        skip_content, skip_llm, force_llm = (_flag(p, f) for f in ("skip_content", "skip_llm", "force_llm"))
        tenant = event.tenant
        state = Progress()

        def confident() -> bool:
            return not force_llm and state.confidence >= PIPELINE_MIN_CONFIDENCE

        if step.version_at_least(2):
            step.set_search_attributes(**url_search_attributes(p, host))
        cached = step.do("cache-check", lambda ctx: stage_cache(tenant=tenant, host=host, url=url),
                         retries=QUICK_RETRIES, checkpoint="deferred")  # fmt: skip
        state.stages_run.append("cache")
        if cached["hit"]:
            state.propose("cache", cached["candidate"])
        if not (cached["hit"] and not force_llm):
            self._free_and_paid_stages(step, state, tenant=tenant, host=host, url=url, skip_content=skip_content,
                                       confident=confident)  # fmt: skip
            wants_llm = force_llm or state.confidence < LLM_VERIFICATION_THRESHOLD
            if wants_llm and not skip_llm and cached.get("llm", True):
                self._llm_rounds(step, state, tenant=tenant, host=host, url=url, max_rounds=max_rounds)

        decided = state.decided
        if decided is not None and state.confidence >= HIGH_CONFIDENCE and state.source != "cache":
            fed = step.do(
                "index-feedback",
                lambda ctx: index_feedback(
                    ctx, tenant=tenant, host=host, url=url, decided=decided, source=state.source
                ),
                retries=QUICK_RETRIES,
            )
            state.cost += Decimal(fed["cost"])
        url_id = p.get("url_id")
        result = classification_result(
            url=url, url_id=url_id if isinstance(url_id, int) else None, decided=state.decided,
            source=state.source or "rules", stages_run=state.stages_run, rounds=state.rounds, cost=state.cost,
            fetch_method=state.fetch_method, signals=state.signals,
        )  # fmt: skip
        stored = step.do("store-classification", lambda ctx: store_classification(
            tenant=tenant, host=host, result=result, instance_id=event.instance_id),
            retries=QUICK_RETRIES, checkpoint="deferred")  # fmt: skip
        # Measured inside the step and memoised with its result: a replay reports the same time.
        # A run stored before the step measured it has no duration.
        result["duration_ms"] = stored.get("duration_ms")
        return result

    def _free_and_paid_stages(self, step: StepApi, state: Progress, *, tenant: str, host: str, url: str,
                              skip_content: bool, confident: Any) -> None:  # fmt: skip
        rules = step.do("rules", lambda ctx: stage_rules(url=url), retries=QUICK_RETRIES,
                        checkpoint="deferred")  # fmt: skip
        state.stages_run.append("rules")
        state.propose("rules", rules["candidate"])
        if confident():
            return
        similar = step.do("similarity", lambda ctx: stage_similarity(ctx, tenant=tenant, host=host, url=url),
                          retries=DEFAULT_RETRIES)  # fmt: skip
        if similar["ran"]:
            state.stages_run.append("similarity")
            state.cost += Decimal(similar["cost"])
            state.propose("similarity", similar["candidate"])
            if confident():
                return
        if skip_content:
            return
        prior = state.decided
        content = step.do("content", lambda ctx: stage_content(ctx, tenant=tenant, host=host, url=url,
                                                                      prior=prior), retries=PATIENT_RETRIES,
                          timeout="5 minutes")  # fmt: skip
        state.stages_run.append("content")
        state.cost += Decimal(content["cost"])
        if content["fetched"]:
            state.fetch_method = content["method"]
            state.signals = content["signals"]
            state.propose("content", content["candidate"])

    def _llm_rounds(self, step: StepApi, state: Progress, *, tenant: str, host: str, url: str, max_rounds: int) -> None:
        """Up to `max_rounds` verifications, 30 s apart, until one answers at >= 70 within the
        taxonomy; the best valid answer decides."""
        state.stages_run.append("llm")
        partial, signals = state.decided, state.signals
        best: Candidate | None = None
        for round_no in range(1, max_rounds + 1):
            if round_no > 1:
                step.sleep(f"llm-backoff-{round_no - 1}", LLM_BACKOFF)
            answer = step.do(f"llm-verify-{round_no}", lambda ctx, n=round_no: stage_llm(
                ctx, tenant=tenant, host=host, url=url, partial=partial, signals=signals, round_no=n),
                retries=DEFAULT_RETRIES, timeout="2 minutes")  # fmt: skip
            state.rounds = round_no
            state.cost += Decimal(answer["cost"])
            if answer["candidate"] is not None:
                verdict = Candidate.from_dict(answer["candidate"])
                if best is None or verdict.confidence > best.confidence:
                    best = verdict
                if verdict.confidence >= PIPELINE_MIN_CONFIDENCE:
                    break
        if best is not None:
            # The LLM verifies: its labels and confidence stand, the earlier stages fill only
            # the axes it left empty.
            base = state.decided
            labels = {**(base.labels if base else {}), **best.labels}
            modifiers = tuple(sorted({*(base.modifiers if base else ()), *best.modifiers}))
            state.decided = Candidate(best.confidence, labels, modifiers)
            state.source = "llm"


def url_classify_start(tenant: str, url: str, *, actor: str = "", **params: Any) -> str:
    """Start url-classify for one URL (other params as listed in this module's docstring); returns
    the instance id. The id is new per start: classifying a URL again is a new run."""
    instance = create(WORKFLOW, params={"url": url, **params}, tenant=tenant, actor=actor)
    return str(instance.id)
