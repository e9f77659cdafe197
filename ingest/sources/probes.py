"""One cheap call per outside system, through its real client, to tell an operator whether a
connection's settings reach it: the console's and the API's "test connection".

Each probe makes exactly one request with a short timeout and no in-process resend of a 429,
through the client's own rate limit (DataForSEO's shared bucket of the login, Gong's per-key
limiter), and picks a call the provider does not bill (nothing is journaled or costed; outside a step no
breaker or budget is involved, `breakers.guarded_send`):

    gong        GET /v2/calls over the last minute (at most one page, usually "no calls found")
    salesforce  the OAuth token request (refresh token, else client credentials)
    llm         the provider's model list (GET /models); the offline providers reach nothing
    dataforseo  GET /v3/appendix/user_data, which DataForSEO does not charge for
    zenrows     GET /v1/subscriptions/self/details, the plan's usage (not a scraping request)

A probe returns a short sentence on success and raises the client's own error otherwise; the
caller records either (`ingest.pipelines.connections.connection_test`). Nothing here reads a
table: the caller passes the settings as plain values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.gong import GongClient
from ingest.sources.http import Timeout
from ingest.sources.llm import AnthropicClient, OpenAIChatClient
from ingest.sources.salesforce import ClientCredentials, RefreshToken, SalesforceClient
from ingest.sources.zenrows import ZenRowsClient

__all__ = ["PROBE_TIMEOUT", "ProbeTarget", "probe"]

PROBE_TIMEOUT: Timeout = (3.0, 10.0)
OFFLINE_PROVIDERS = frozenset({"rules", "demo"})


@dataclass(frozen=True)
class ProbeTarget:
    """A connection's settings as its clients take them (the defaults where a field is empty)."""

    kind: str
    base_url: str = ""
    key: str = ""
    secret: str = ""
    refresh_token: str = ""
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def _gong(t: ProbeTarget, timeout: Timeout) -> str:
    client = GongClient(
        access_key=t.key,
        access_key_secret=t.secret,
        base_url=t.base_url or GongClient.BASE_URL,
        timeout=timeout,
        max_rate_limit_retries=0,
    )
    now = datetime.now(UTC)
    page = client.calls_page(from_time=now - timedelta(minutes=1), to_time=now)
    return f"Gong answered the call list: {len(page.items)} call(s) started in the last minute"


def _salesforce(t: ProbeTarget, timeout: Timeout) -> str:
    credentials: ClientCredentials | RefreshToken = (
        RefreshToken(t.key, t.secret, t.refresh_token) if t.refresh_token else ClientCredentials(t.key, t.secret)
    )
    client = SalesforceClient(
        credentials=credentials, login_url=t.base_url or "https://login.salesforce.com", timeout=timeout
    )
    client.refresh_token()
    grant = "refresh token" if t.refresh_token else "client credentials"
    return f"Salesforce issued an access token ({grant}) for {client.instance_url}"


def _llm(t: ProbeTarget, timeout: Timeout) -> str:
    provider = str(t.options.get("provider") or "openai")
    if provider in OFFLINE_PROVIDERS:
        return f"the {provider!r} provider runs offline: there is nothing to reach"
    model = str(t.options.get("model") or "")
    if provider == "anthropic":
        names = AnthropicClient(
            api_key=t.secret,
            model=model or "claude-3-5-haiku-latest",
            base_url=t.base_url or "https://api.anthropic.com",
            timeout=timeout,
            max_retries=0,
        ).models()
    else:
        names = OpenAIChatClient(
            base_url=t.base_url or "https://api.openai.com/v1",
            api_key=t.secret or None,
            model=model or "gpt-4o-mini",
            service=str(t.options.get("service") or "openai"),
            timeout=timeout,
            max_retries=0,
        ).models()
    said = f"{provider} listed {len(names)} model(s)"
    if model:
        said += f"; {model} is {'among them' if model in names else 'NOT among them: check the model name'}"
    return said


def _dataforseo(t: ProbeTarget, timeout: Timeout) -> str:
    client = DataForSEOClient(
        login=t.key,
        password=t.secret,
        base_url=t.base_url or DataForSEOClient.BASE_URL,
        timeout=timeout,
        max_rate_limit_retries=0,
    )
    data = client.user_data()
    money = data.get("money") if isinstance(data.get("money"), dict) else {}
    balance = money.get("balance") if isinstance(money, dict) else None
    return f"DataForSEO knows login {data.get('login') or t.key!s}" + (
        f"; balance {balance} USD" if balance is not None else ""
    )


def _zenrows(t: ProbeTarget, timeout: Timeout) -> str:
    client = ZenRowsClient(
        api_key=t.secret, base_url=t.base_url or ZenRowsClient.BASE_URL, timeout=timeout, max_rate_limit_retries=0
    )
    usage = client.usage()
    plan = usage.get("plan") or "a plan"
    used = usage.get("usage_percent")
    return f"ZenRows accepted the key: {plan}" + (f", {used}% used" if used is not None else "")


PROBES: dict[str, Callable[[ProbeTarget, Timeout], str]] = {
    "gong": _gong,
    "salesforce": _salesforce,
    "llm": _llm,
    "dataforseo": _dataforseo,
    "zenrows": _zenrows,
}


def probe(target: ProbeTarget, *, timeout: Timeout = PROBE_TIMEOUT) -> str:
    """Make the kind's one cheap call; what it answered, or the client's error raised."""
    return PROBES[target.kind](target, timeout)
