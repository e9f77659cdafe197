"""The circuit breaker every outbound call of a step goes through, keyed by provider and tenant.

The clients' shared plumbing (`client.HttpClient._exchange` for Gong, ZenRows and DataForSEO,
`llm.common.JsonApi` for the LLM and embedding providers, and the Salesforce client) sends each
request through `guarded_send(provider, send)`. Inside a step it admits the request through the
breaker `"<provider>:<tenant>"` (the tenant of the running instance, one connection per tenant
and provider), so in an outage the first `threshold` failures within `window` open it, and then
no request of that tenant reaches the provider until `cooldown` has passed and one probe goes.
A request the open breaker turns away raises `CircuitOpen` without being sent; the engine then
suspends the step until the next probe without spending one of its retries, and the step's
budget reservations are released meanwhile (`ingest.engine.runtime.execution`).

What counts as a failure: a network error or timeout, or an HTTP 5xx answer. A 4xx (we asked
wrongly) or a 429 (we asked too often) is the provider answering, so it does not count, and a
probe that gets one closes the breaker.

Outside a step (a management command listing calls, the console testing a connection) the
request is sent as it is: no engine would wait for the breaker there. The thresholds are the
`RUNLEDGER_BREAKER_*` settings (README, "Configuration"); a threshold of 0 turns breakers off.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import requests
from django.conf import settings

from ingest.engine import BreakerPolicy, CircuitOpen, log_context_current
from ingest.engine.services.breakers import breaker_admit, breaker_record
from ingest.sources.outbound import outage

__all__ = ["breaker_key", "breaker_policy", "guarded_send"]

DEFAULTS = {"THRESHOLD": 5, "WINDOW": 60.0, "COOLDOWN": 30.0, "PROBE_TIMEOUT": 120.0}


def breaker_policy() -> BreakerPolicy | None:
    """The policy from settings, or None when breakers are off (a threshold of 0)."""
    threshold = int(getattr(settings, "RUNLEDGER_BREAKER_THRESHOLD", DEFAULTS["THRESHOLD"]))
    if threshold <= 0:
        return None
    cooldown = float(getattr(settings, "RUNLEDGER_BREAKER_COOLDOWN", DEFAULTS["COOLDOWN"]))
    return BreakerPolicy(
        threshold=threshold,
        window=timedelta(seconds=float(getattr(settings, "RUNLEDGER_BREAKER_WINDOW", DEFAULTS["WINDOW"]))),
        cooldown=timedelta(seconds=cooldown),
        probe_timeout=timedelta(
            seconds=float(getattr(settings, "RUNLEDGER_BREAKER_PROBE_TIMEOUT", DEFAULTS["PROBE_TIMEOUT"]))
        ),
        # Turned away while the probe is out: ask again soon, so the runs resume within about
        # a tenth of a cooldown of the probe's success rather than a whole probe timeout later.
        recheck=timedelta(seconds=max(1.0, cooldown / 10)),
    )


def breaker_key(provider: str, tenant: str) -> str:
    """`gong:acme`; a call made for no tenant shares the provider's `gong:-`."""
    return f"{provider}:{tenant or '-'}"


def guarded_send(provider: str, send: Callable[[], requests.Response]) -> requests.Response:
    """`send()` through the breaker of `provider` and the running step's tenant; raises
    `CircuitOpen` without sending when the breaker is open. Outside a step, just `send()`."""
    context = log_context_current()
    policy = breaker_policy() if "step" in context else None
    if policy is None:
        return send()
    tenant = str(context.get("tenant") or "")
    ticket = breaker_admit(key=breaker_key(provider, tenant), policy=policy, tenant=tenant)
    try:
        response = send()
    except BaseException as exc:
        if outage(exc):
            error = f"{type(exc).__name__}: {exc}"
            breaker_record(ticket, ok=False, error=error)
            if ticket.probe:
                raise CircuitOpen(ticket.key, policy.cooldown.total_seconds(), probe_failed=error) from exc
        elif ticket.probe:
            breaker_record(ticket, ok=True)  # the provider answered (a 4xx, a rate limit): it is up
        raise
    if response.status_code >= 500:
        error = f"{provider} answered HTTP {response.status_code}"
        breaker_record(ticket, ok=False, error=error)
        if ticket.probe:  # the breaker is open again: the step waits for the next probe, its retries kept
            raise CircuitOpen(ticket.key, policy.cooldown.total_seconds(), probe_failed=error)
    else:
        breaker_record(ticket, ok=True)
    return response
