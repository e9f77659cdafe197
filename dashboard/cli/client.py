"""The HTTP side of the CLI: one session with the bearer token; an API error becomes ApiRefused
carrying the API's own code and message."""

from __future__ import annotations

from typing import Any

import requests


class ApiRefused(Exception):
    """The API answered with an error; `fields` names each wrong field of the request, if it said."""

    def __init__(self, status: int, code: str, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status, self.code, self.message = status, code, message
        self.fields = fields or {}


class Client:
    def __init__(self, *, url: str, token: str, timeout: float = 30.0) -> None:
        self.base = url.rstrip("/") + "/api"
        self.session = requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {token}", "Accept": "application/json", "User-Agent": "runledger-cli"}
        )
        self.timeout = timeout

    def call(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: dict[str, Any] | None = None
    ) -> Any:
        try:
            answer = self.session.request(method, self.base + path, params=params, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ApiRefused(0, "unreachable", f"{self.base} did not answer ({type(exc).__name__})") from None
        if answer.status_code >= 400:
            try:
                error = answer.json()["error"]
                fields = error.get("fields") if isinstance(error.get("fields"), dict) else None
                raise ApiRefused(
                    answer.status_code,
                    str(error["code"]),
                    str(error["message"]),
                    {str(k): str(v) for k, v in (fields or {}).items()},
                )
            except (ValueError, KeyError, TypeError):
                raise ApiRefused(answer.status_code, "http_error", answer.text[:200]) from None
        return answer.json() if answer.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", path, body=body)

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("PATCH", path, body=body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)
