"""A fake Salesforce org: OAuth token endpoint, SOQL query paging, record reads, API limits.

Routes: "POST /services/oauth2/token", "GET /services/data/v[0-9.]+/query",
"GET /services/data/v[0-9.]+/query/(?P<locator>[^/]+)",
"GET /services/data/v[0-9.]+/sobjects/(?P<type>\\w+)/(?P<id>\\w+)".
`expire_tokens()` makes every issued token answer 401 INVALID_SESSION_ID; `api_limit`
(with `api_used`) drives `Sforce-Limit-Info` and REQUEST_LIMIT_EXCEEDED.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ingest.demo.corpus import DemoOpportunity, demo_opportunities
from tests.fakes.server import FakeServer, Planned, Recorded

API = r"/services/data/v[0-9.]+"
QUERY_ROUTE = f"GET {API}/query"
MORE_ROUTE = f"GET {API}/query/(?P<locator>[^/]+)"
RECORD_ROUTE = f"GET {API}/sobjects/(?P<type>\\w+)/(?P<id>\\w+)"
TOKEN_ROUTE = "POST /services/oauth2/token"


def sf_error(status: int, code: str, message: str) -> Planned:
    return Planned(status, [{"message": message, "errorCode": code}])


def account_id(name: str) -> str:
    """A stable 18-character Account id per account name, shaped as Salesforce's ("001…")."""
    return "001" + hashlib.sha256(name.encode()).hexdigest()[:15].upper()


def opportunity_json(opp: DemoOpportunity, version: str = "62.0") -> dict[str, Any]:
    return {
        "attributes": {"type": "Opportunity", "url": f"/services/data/v{version}/sobjects/Opportunity/{opp.id}"},
        "Id": opp.id, "Name": opp.name, "StageName": opp.stage_name, "Amount": opp.amount,
        "CloseDate": opp.close_date.isoformat(), "Description": opp.description,
        "Notes__c": opp.notes, "AccountId": account_id(opp.account),
        "Account": {"attributes": {"type": "Account"}, "Name": opp.account, "Industry": opp.industry},
        "LastModifiedDate": opp.last_modified.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "SystemModstamp": opp.last_modified.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }  # fmt: skip


_MODSTAMP = re.compile(r"\bSystemModstamp\s*(>=|<)\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


def modstamp_filter(soql: str) -> list[tuple[str, datetime]]:
    """The query's `SystemModstamp >= …` / `< …` bounds (SOQL dateTime literals, UTC)."""
    return [(op, datetime.fromisoformat(value.replace("Z", "+00:00"))) for op, value in _MODSTAMP.findall(soql)]


class FakeSalesforce(FakeServer):
    def __init__(
        self,
        opportunities: Sequence[DemoOpportunity] | None = None,
        *,
        client_id: str = "sf-client",
        client_secret: str = "sf-secret",
        refresh_token: str = "sf-refresh",
        page_size: int = 2,
        api_limit: int = 15000,
    ) -> None:
        super().__init__()
        self.opportunities = list(opportunities if opportunities is not None else demo_opportunities(count=5))
        self.client_id, self.client_secret, self.refresh_token = (
            client_id,
            client_secret,
            refresh_token,
        )
        self.page_size = page_size
        self.api_limit, self.api_used = api_limit, 0
        self.valid_tokens: set[str] = set()
        self.queries: list[str] = []
        self.tokens_issued = 0
        self._cursors: dict[str, list[dict[str, Any]]] = {}
        self._state = threading.Lock()
        self.route("POST", "/services/oauth2/token", self._token)
        self.route("GET", f"{API}/query", self._query)
        self.route("GET", f"{API}/query/(?P<locator>[^/]+)", self._more)
        self.route("GET", f"{API}/sobjects/(?P<type>\\w+)/(?P<id>\\w+)", self._record)

    def expire_tokens(self) -> None:
        with self._state:
            self.valid_tokens.clear()

    def _token(self, request: Recorded, _: re.Match[str]) -> Planned:
        form = request.form()
        client_ok = form.get("client_id") == self.client_id and form.get("client_secret") == self.client_secret
        grant = form.get("grant_type")
        if not client_ok:
            return Planned(400, {"error": "invalid_client", "error_description": "invalid client credentials"})
        if grant == "refresh_token" and form.get("refresh_token") != self.refresh_token:
            return Planned(400, {"error": "invalid_grant", "error_description": "expired access/refresh token"})
        if grant not in ("client_credentials", "refresh_token"):
            return Planned(
                400,
                {
                    "error": "unsupported_grant_type",
                    "error_description": "grant type not supported",
                },
            )
        with self._state:
            self.tokens_issued += 1
            token = f"00DFAKE!token-{self.tokens_issued}"
            self.valid_tokens.add(token)
        return Planned(200, {
            "access_token": token, "instance_url": self.url, "id": f"{self.url}/id/00DFAKE/005FAKE",
            "token_type": "Bearer", "issued_at": "1741000000000", "signature": "c2lnbmF0dXJl",
        })  # fmt: skip

    def _guard(self, request: Recorded) -> tuple[Planned | None, dict[str, str]]:
        """Session and API-limit checks shared by every REST route."""
        auth = request.header("Authorization") or ""
        with self._state:
            if auth.removeprefix("Bearer ") not in self.valid_tokens:
                return sf_error(401, "INVALID_SESSION_ID", "Session expired or invalid"), {}
            if self.api_used >= self.api_limit:
                headers = {"Sforce-Limit-Info": f"api-usage={self.api_used}/{self.api_limit}"}
                return sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded."), headers
            self.api_used += 1
            return None, {"Sforce-Limit-Info": f"api-usage={self.api_used}/{self.api_limit}"}

    def _serve_page(self, records: list[dict[str, Any]], offset: int, headers: dict[str, str]) -> Planned:
        page = records[offset : offset + self.page_size]
        body: dict[str, Any] = {
            "totalSize": len(records),
            "done": offset + self.page_size >= len(records),
            "records": page,
        }
        if not body["done"]:
            locator = f"01gFAKE{len(self._cursors):08d}-{offset + self.page_size}"
            with self._state:
                self._cursors[locator] = records
            body["nextRecordsUrl"] = f"/services/data/v62.0/query/{locator}"
        return Planned(200, body, headers)

    def _query(self, request: Recorded, _: re.Match[str]) -> Planned:
        denied, headers = self._guard(request)
        if denied:
            return Planned(denied.status, denied.body, {**denied.headers, **headers})
        soql = (request.query.get("q") or [""])[0]
        match = re.search(r"\bFROM\s+(\w+)", soql, re.I)
        if not match:
            return Planned(
                400,
                [{"message": f"unexpected token: '{soql[:40]}'", "errorCode": "MALFORMED_QUERY"}],
                headers,
            )
        if match[1].lower() != "opportunity":
            return Planned(
                400,
                [
                    {
                        "message": f"sObject type '{match[1]}' is not supported.",
                        "errorCode": "INVALID_TYPE",
                    }
                ],
                headers,
            )
        self.queries.append(soql)
        chosen = self.opportunities
        for op, bound in modstamp_filter(soql):  # the scheduled pulls' window; other filters are ignored
            chosen = [o for o in chosen if (o.last_modified >= bound if op == ">=" else o.last_modified < bound)]
        records = [opportunity_json(o) for o in chosen]
        limit = re.search(r"\bLIMIT\s+(\d+)", soql, re.I)
        return self._serve_page(records[: int(limit[1])] if limit else records, 0, headers)

    def _more(self, request: Recorded, match: re.Match[str]) -> Planned:
        denied, headers = self._guard(request)
        if denied:
            return Planned(denied.status, denied.body, {**denied.headers, **headers})
        locator = match["locator"]
        records = self._cursors.get(locator)
        if records is None:
            return Planned(
                400,
                [{"message": "invalid query locator", "errorCode": "INVALID_QUERY_LOCATOR"}],
                headers,
            )
        return self._serve_page(records, int(locator.rsplit("-", 1)[1]), headers)

    def _record(self, request: Recorded, match: re.Match[str]) -> Planned:
        denied, headers = self._guard(request)
        if denied:
            return Planned(denied.status, denied.body, {**denied.headers, **headers})
        found = next((o for o in self.opportunities if o.id == match["id"]), None)
        if match["type"] != "Opportunity" or found is None:
            return Planned(
                404,
                [{"message": "The requested resource does not exist", "errorCode": "NOT_FOUND"}],
                headers,
            )
        return Planned(200, opportunity_json(found), headers)
