"""Salesforce REST client: OAuth tokens, SOQL queries with paging, record reads.

Tokens come from `/services/oauth2/token` (client-credentials or refresh-token flow). An
expired session (401 INVALID_SESSION_ID) gets one new token and one retry. The org's API
usage from the `Sforce-Limit-Info` header is kept in `client.api_usage`.
Change Data Capture and Outbound Message parsing live in `salesforce_events.py`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

import requests

from ingest.sources import errors
from ingest.sources.breakers import guarded_send
from ingest.sources.errors import SourceError
from ingest.sources.http import (
    DEFAULT_TIMEOUT,
    Timeout,
    body_excerpt,
    new_session,
    retry_after_seconds,
)


class SalesforceError(SourceError):
    """Salesforce returned an unexpected answer."""


class SalesforceAuthError(SalesforceError, errors.AuthError):
    """Salesforce refused our credentials; fix the connected app or the refresh token."""


class SalesforceSessionExpired(SalesforceError):
    """The Salesforce session stayed invalid after one token refresh; check the connected app."""


class SalesforceLimitExceeded(SalesforceError, errors.RateLimited):
    """The org's daily API request limit is used up (REQUEST_LIMIT_EXCEEDED); retry later."""


class SalesforceServerError(SalesforceError, errors.ServerError):
    """Salesforce failed (5xx) or could not be reached; retry later."""


class SalesforceRequestRejected(SalesforceError, errors.RequestRejected):
    """Salesforce rejected the request (malformed query, unknown field…); fix it, do not retry."""


class ErrorDict(TypedDict):
    message: str
    errorCode: str


@dataclass(frozen=True)
class ClientCredentials:
    client_id: str
    client_secret: str


@dataclass(frozen=True)
class RefreshToken:
    client_id: str
    client_secret: str
    refresh_token: str


@dataclass(frozen=True)
class ApiUsage:
    used: int
    limit: int


@dataclass(frozen=True)
class QueryPage:
    records: tuple[dict[str, Any], ...]
    total_size: int
    done: bool
    next_records_url: str | None


_LIMIT_INFO = re.compile(r"api-usage=(\d+)/(\d+)")


def parse_limit_info(header: str | None) -> ApiUsage | None:
    """`api-usage=25/15000` (optionally with `per-app-api-usage=…`) → ApiUsage(25, 15000)."""
    match = _LIMIT_INFO.search(header or "")
    return ApiUsage(int(match[1]), int(match[2])) if match else None


def _errors(response: requests.Response) -> list[ErrorDict]:
    try:
        body = response.json()
    except ValueError:
        return []
    if isinstance(body, list):
        return [e for e in body if isinstance(e, dict)]  # type: ignore[misc]
    return [body] if isinstance(body, dict) and "errorCode" in body else []  # type: ignore[list-item]


# Salesforce's token answer has no expiry (the session policy decides, 2 hours by default):
# a kept token is trusted this long, and an INVALID_SESSION_ID before then refreshes it anyway.
TOKEN_LIFETIME_SECONDS = 3600.0


def _lifetime(token: Mapping[str, Any]) -> float:
    try:
        return float(token.get("expires_in") or TOKEN_LIFETIME_SECONDS)
    except (TypeError, ValueError):
        return TOKEN_LIFETIME_SECONDS


OPPORTUNITY_FIELDS = (
    "Id", "Name", "StageName", "Amount", "CloseDate", "Probability", "Type", "LeadSource", "Description",
    "Notes__c", "AccountId", "Account.Name", "Account.Industry", "LastModifiedDate", "SystemModstamp",
)  # fmt: skip


def soql_datetime(value: datetime) -> str:
    """A SOQL dateTime literal in UTC, to the second (SOQL's literals carry no fractions)."""
    if value.tzinfo is None:
        raise ValueError(f"SOQL needs timezone-aware times; got naive {value.isoformat()}")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def changed_soql(sobject: str, fields: Sequence[str], *, start: datetime, end: datetime) -> str:
    """The records of `sobject` whose SystemModstamp is in [start, end), oldest first.

    SystemModstamp, not LastModifiedDate: it also moves when the system changes a record
    (a roll-up, a workflow field update), and it is indexed, so the query stays selective.
    """
    return (
        f"SELECT {', '.join(fields)} FROM {sobject} WHERE SystemModstamp >= {soql_datetime(start)} "
        f"AND SystemModstamp < {soql_datetime(end)} ORDER BY SystemModstamp"
    )


class SalesforceClient:
    def __init__(
        self,
        *,
        credentials: ClientCredentials | RefreshToken,
        login_url: str = "https://login.salesforce.com",
        api_version: str = "62.0",
        access_token: str | None = None,
        instance_url: str | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        on_token: Callable[[str, str, float], None] | None = None,
    ) -> None:
        """`on_token(access_token, instance_url, lifetime_seconds)` is called after each token
        refresh, so the caller can keep the token for other processes and restarts."""
        self.credentials = credentials
        self.on_token = on_token
        self.login_url = login_url.rstrip("/")
        self.api_version = api_version
        self.timeout = timeout
        self.api_usage: ApiUsage | None = None
        self._access_token = access_token
        self._instance_url = instance_url.rstrip("/") if instance_url else None
        self._session = session or new_session()
        self._token_lock = threading.Lock()

    @property
    def instance_url(self) -> str:
        if self._instance_url is None:
            self.refresh_token()
        assert self._instance_url is not None
        return self._instance_url

    def refresh_token(self, *, stale: str | None = None) -> str:
        """Fetch a new access token (once for all threads that saw the same stale token)."""
        with self._token_lock:
            if self._access_token is not None and self._access_token != stale:
                return self._access_token
            data = {
                "client_id": self.credentials.client_id,
                "client_secret": self.credentials.client_secret,
            }
            if isinstance(self.credentials, RefreshToken):
                data |= {
                    "grant_type": "refresh_token",
                    "refresh_token": self.credentials.refresh_token,
                }
            else:
                data["grant_type"] = "client_credentials"
            url = f"{self.login_url}/services/oauth2/token"
            response = self._post_form(url, data)
            if not response.ok:
                raise self._token_error(response, data["grant_type"])
            token = response.json()
            self._access_token = str(token["access_token"])
            self._instance_url = str(token.get("instance_url") or self._instance_url or self.login_url).rstrip("/")
            if self.on_token is not None:
                self.on_token(self._access_token, self._instance_url, _lifetime(token))
            return self._access_token

    def _post_form(self, url: str, data: Mapping[str, str]) -> requests.Response:
        try:
            return guarded_send("salesforce", lambda: self._session.post(url, data=data, timeout=self.timeout))
        except requests.RequestException as error:
            raise SalesforceServerError(
                f"Salesforce token endpoint {url} unreachable ({error}); retry later"
            ) from error

    def _token_error(self, response: requests.Response, grant: str) -> SalesforceError:
        said = f"Salesforce refused the {grant} token request (HTTP {response.status_code}): {body_excerpt(response)}"
        if response.status_code >= 500:
            return SalesforceServerError(f"{said} — retry later", status=response.status_code)
        return SalesforceAuthError(
            f"{said} — check the connected app's client id, secret and policies",
            status=response.status_code,
        )

    # -- REST ---------------------------------------------------------------------------------

    def query_page(self, soql: str | None = None, *, next_records_url: str | None = None) -> QueryPage:
        """One page of `GET /services/data/vXX.X/query?q=` (or of its `nextRecordsUrl`)."""
        if next_records_url:
            body = self.get(next_records_url)
        else:
            body = self.get(f"/services/data/v{self.api_version}/query", params={"q": soql or ""})
        return QueryPage(
            records=tuple(body.get("records") or ()),
            total_size=int(body.get("totalSize") or 0),
            done=bool(body.get("done", True)),
            next_records_url=body.get("nextRecordsUrl") or None,
        )

    def query(self, soql: str) -> Iterator[dict[str, Any]]:
        """Every record of a SOQL query, following `nextRecordsUrl`."""
        page = self.query_page(soql)
        yield from page.records
        while not page.done and page.next_records_url:
            page = self.query_page(next_records_url=page.next_records_url)
            yield from page.records

    def record(self, sobject: str, record_id: str, fields: list[str] | None = None) -> dict[str, Any]:
        params = {"fields": ",".join(fields)} if fields else None
        return self.get(f"/services/data/v{self.api_version}/sobjects/{sobject}/{record_id}", params=params)

    def get(self, path: str, *, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET a REST path; refreshes the token once on INVALID_SESSION_ID."""
        token = self._access_token or self.refresh_token()
        response = self._get(path, token, params)
        if response.status_code == 401 and self._code(response) == "INVALID_SESSION_ID":
            response = self._get(path, self.refresh_token(stale=token), params)
            if response.status_code == 401:
                raise SalesforceSessionExpired(
                    f"Salesforce answered INVALID_SESSION_ID to GET {path} even with a new token; "
                    "check the connected app's session policies and the user's API access",
                    status=401,
                )
        self._record_usage(response)
        if not response.ok:
            raise self._error(response, f"GET {path}")
        return dict(response.json())

    def _get(self, path: str, token: str, params: Mapping[str, str] | None) -> requests.Response:
        url = path if path.startswith("http") else f"{self.instance_url}{path}"
        try:
            return guarded_send(
                "salesforce",
                lambda: self._session.get(
                    url,
                    params=params,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=self.timeout,
                ),
            )
        except requests.Timeout as error:
            raise SalesforceServerError(
                f"Salesforce GET {url} timed out after {self.timeout[1]:g}s; retry later"
            ) from error
        except requests.RequestException as error:
            raise SalesforceServerError(f"Salesforce GET {url} failed to connect ({error}); retry later") from error

    def _record_usage(self, response: requests.Response) -> None:
        usage = parse_limit_info(response.headers.get("Sforce-Limit-Info"))
        if usage is not None:
            self.api_usage = usage

    @staticmethod
    def _code(response: requests.Response) -> str:
        answered = _errors(response)
        return str(answered[0].get("errorCode", "")) if answered else ""

    def _error(self, response: requests.Response, what: str) -> SalesforceError:
        answered = _errors(response)
        code = str(answered[0].get("errorCode", "")) if answered else ""
        message = answered[0].get("message", "") if answered else body_excerpt(response)
        status = response.status_code
        said = f"Salesforce answered HTTP {status} {code or ''} to {what}: {message}".replace("  ", " ")
        if code == "REQUEST_LIMIT_EXCEEDED":
            usage = f" (last seen usage {self.api_usage.used}/{self.api_usage.limit})" if self.api_usage else ""
            return SalesforceLimitExceeded(
                f"{said}{usage} — the org's API limit is used up; retry after it resets",
                status=status,
                retry_after=retry_after_seconds(response.headers) or 3600.0,
            )
        if status >= 500 or code == "SERVER_UNAVAILABLE":
            return SalesforceServerError(f"{said} — retry later", status=status)
        if status in (401, 403):
            return SalesforceAuthError(f"{said} — check the integration user's permissions", status=status)
        return SalesforceRequestRejected(f"{said} — fix the query or path; retrying will not help", status=status)
