"""The keyword-intent steps of `domain-onboard`: the rules decide what they can for free, the
tenant's LLM the rest, a batch of keywords a call. Each LLM call reserves its most expensive
outcome on the budgets first (`ctx.check_budget`) and books what every answer cost
(`ctx.track_cost`, failed answers too) under the stage `keyword_intent` and the domain, so the
domain's cost by stage shows it and adds up to what the onboarding spent. The LLM client sends
through the provider's circuit breaker, as every LLM call does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ingest.classify.keyword_intent import (
    LLM_BATCH,
    domain_brand,
    intent_answers,
    intent_max_tokens,
    intent_messages,
    intent_rules,
)
from ingest.engine import NonRetryableError
from ingest.engine import now as engine_now
from ingest.pipelines.pricer import estimate_usage_cost
from ingest.pipelines.pricing import PriceNotFound
from ingest.rankdisco import services
from ingest.rankdisco.selectors import keyword_llm_intents
from ingest.sources.errors import SourceError
from ingest.sources.llm import LLMInvalidOutput
from ingest.sources.usage import Usage
from ingest.workflows.common import source_error_step
from ingest.workflows.url_classify.clients import llm_choice, usage_meter

STAGE = "keyword_intent"


def intent_rules_step(ctx: Any, *, domain_id: int, domain: str, keywords: Sequence[str]) -> dict[str, Any]:
    """keyword-intent-rules: every keyword's intent by its words, stored; the keywords the rules
    leave undecided (stored with their guess, if any) go to the LLM, but for those an LLM
    classified in an earlier onboarding of the domain. Whether the tenant has an
    LLM, and how many keywords an LLM call takes, are decided here and kept in the result, so a
    replay after its connection or the code changed takes the path the run took."""
    brand = domain_brand(domain)
    guesses = {k: intent_rules(k, brand=brand) for k in keywords}
    # What an LLM answered for this domain's keyword before (a keyword's intent does not change
    # between onboardings) is kept and not asked again; what the rules decide is theirs.
    known = keyword_llm_intents(domain_id=domain_id, keywords=[k for k, g in guesses.items() if not g.decided])
    services.keyword_intents_store(
        domain_id=domain_id,
        verdicts={
            k: (g.intent, "rules" if g.intent else "", g.confidence if g.intent else None)
            for k, g in guesses.items()
            if k not in known
        },
    )
    undecided = [k for k, g in guesses.items() if not g.decided and k not in known]
    decided = Counter(g.intent for g in guesses.values() if g.decided)
    return {
        "decided": sum(decided.values()),
        "by_intent": dict(sorted(decided.items())),
        "undecided": undecided,
        "known": len(known),
        "llm": llm_choice(ctx.tenant) is not None,
        "batch": LLM_BATCH,
    }


def intent_llm_step(ctx: Any, *, domain_id: int, domain: str, keywords: Sequence[str]) -> dict[str, Any]:
    """keyword-intent-llm-<n>: one batch of undecided keywords through the tenant's LLM. An answer
    that is not JSON, or whose entries name no intent of the four, leaves those keywords with the
    rules' guess (it is billed all the same); a provider error fails the step (retried when it
    can help)."""
    choice = llm_choice(ctx.tenant)
    if choice is None:
        raise NonRetryableError(
            f"tenant {ctx.tenant!r} has no LLM connection (openai or anthropic) to classify "
            "keyword intents; add one on the Connections page, or start the onboarding with "
            "skip_keyword_intent"
        )
    brand = domain_brand(domain)
    messages = intent_messages(keywords, domain=domain, guesses=[intent_rules(k, brand=brand) for k in keywords])
    max_tokens = intent_max_tokens(len(keywords))
    prompt = sum(len(m["content"]) for m in messages)
    try:
        estimate = estimate_usage_cost(
            choice.service, choice.model, input_tokens=prompt // 3 + 16, output_tokens=max_tokens, at=engine_now()
        )
    except PriceNotFound as error:
        raise NonRetryableError.wrap(error, f"cannot reserve budget for step {ctx.step_label!r}: {error}") from error
    ctx.check_budget(choice.service, estimate)
    metadata = {"stage": STAGE, "domain": domain, "keywords": len(keywords)}
    verdicts: dict[int, tuple[str, int]] = {}
    problem = ""
    with usage_meter() as seen:
        try:
            answer = choice.client.complete_json(messages, max_tokens=max_tokens)
            verdicts = intent_answers(answer.data, count=len(keywords))
        except LLMInvalidOutput as error:
            problem = str(error)
        except SourceError as error:
            _book(ctx, choice.service, seen, metadata, success=False)
            raise source_error_step(error) from error
    cost = _book(ctx, choice.service, seen, metadata, success=bool(verdicts))
    services.keyword_intents_store(
        domain_id=domain_id,
        verdicts={keywords[i]: (intent, "llm", confidence) for i, (intent, confidence) in verdicts.items()},
    )
    by_intent = Counter(intent for intent, _ in verdicts.values())
    return {
        "asked": len(keywords),
        "classified": len(verdicts),
        "by_intent": dict(sorted(by_intent.items())),
        "cost": str(cost),
        "model": choice.model,
        "error": problem[:500],
    }


def _book(ctx: Any, service: str, usages: Sequence[Usage], metadata: dict[str, Any], *, success: bool) -> Decimal:
    total = Decimal(0)
    for usage in usages:
        total += ctx.track_cost(
            usage.service or service, success=success, metadata=metadata, **usage.as_track_cost_kwargs()
        )
    return total
