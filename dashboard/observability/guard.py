"""Who may scrape /metrics: a bearer token, or a client address on the allow-list.

The figures name workflows, tenants and spend, so they are not public. Settings:
RUNLEDGER_METRICS_TOKEN (a bearer token; empty: none accepted) and RUNLEDGER_METRICS_ALLOW
(addresses or networks, comma-separated; default loopback only). The address is the request's
REMOTE_ADDR: behind a proxy that is the proxy's, so use the token there.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Refusal:
    status: int  # 401: a token is wanted (or was wrong); 403: this address may not scrape
    code: str
    message: str


def networks(entries: Iterable[str]) -> list[Network]:
    """Parse the allow-list; an entry that is not an address or network is an error naming it."""
    out: list[Network] = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"RUNLEDGER_METRICS_ALLOW entry {entry!r} is not an IP address or network") from None
    return out


def allowed(address: str, allow: list[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in allow)


def check(*, authorization: str, address: str, token: str, allow: list[Network]) -> Refusal | None:
    """None when the scrape may proceed. A presented token is judged on its own: a wrong one is
    refused even from an allowed address, so a misconfigured scraper is noticed."""
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() == "bearer" and presented:
        if token and hmac.compare_digest(presented.strip().encode(), token.encode()):
            return None
        return Refusal(401, "invalid_token", "the bearer token is not the metrics token (RUNLEDGER_METRICS_TOKEN)")
    if allowed(address, allow):
        return None
    if token:
        return Refusal(401, "not_authenticated", "send Authorization: Bearer <RUNLEDGER_METRICS_TOKEN>")
    return Refusal(
        403, "forbidden", f"address {address} is not in RUNLEDGER_METRICS_ALLOW and no metrics token is configured"
    )


def check_request(request: HttpRequest) -> Refusal | None:
    return check(
        authorization=request.headers.get("Authorization", ""),
        address=request.META.get("REMOTE_ADDR", ""),
        token=settings.RUNLEDGER_METRICS_TOKEN,
        allow=networks(settings.RUNLEDGER_METRICS_ALLOW),
    )
