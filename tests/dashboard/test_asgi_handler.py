"""The web process's HTTP handler (dashboard/asgi_handler.py) crosses into a thread once per
request and reuses that thread: all of a request's synchronous code still runs on one thread,
never shared by two requests at once, behind the project's whole middleware chain."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.http import HttpRequest, JsonResponse
from django.test import override_settings
from django.urls import path

from dashboard.asgi_handler import ExecutorPool, RequestHandler

pytestmark = pytest.mark.pure

seen: dict[str, list[int]] = {"started": [], "view": [], "finished": []}
gate = threading.Event()


def _here(request: HttpRequest) -> JsonResponse:
    seen["view"].append(threading.get_ident())
    if request.GET.get("hold"):
        gate.wait(5)
    return JsonResponse({"thread": threading.get_ident()})


def _boom(request: HttpRequest) -> JsonResponse:
    raise RuntimeError("a bug in a view")


urlpatterns = [path("api/here", _here), path("here", _here), path("api/boom", _boom)]


def _on_started(**kwargs: Any) -> None:
    seen["started"].append(threading.get_ident())


def _on_finished(**kwargs: Any) -> None:
    seen["finished"].append(threading.get_ident())


@pytest.fixture
def handler():
    for ids in seen.values():
        ids.clear()
    gate.clear()
    request_started.connect(_on_started)
    request_finished.connect(_on_finished)
    with override_settings(ROOT_URLCONF=__name__):
        yield RequestHandler(ExecutorPool(idle=2))
    request_started.disconnect(_on_started)
    request_finished.disconnect(_on_finished)


async def _call(app: Any, target: str) -> tuple[int, dict[str, str], bytes]:
    route, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    messages = [{"type": "http.request", "body": b"", "more_body": False}]
    done = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    done.set()
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body


def test_a_request_runs_its_signals_middleware_and_view_on_one_thread_behind_the_whole_chain(handler):
    status, headers, body = asyncio.run(_call(handler, "/here"))
    assert status == 200
    thread = json.loads(body)["thread"]
    assert seen == {"started": [thread], "view": [thread], "finished": [thread]}
    assert thread != threading.get_ident()  # not the event loop's
    # Headers the project's middleware adds: the security middleware, clickjacking, Vary on htmx.
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert "HX-Request" in headers["vary"]


def test_the_next_request_reuses_the_thread_the_last_one_gave_back(handler):
    async def two() -> list[int]:
        first = await _call(handler, "/api/here")
        second = await _call(handler, "/api/here")
        return [json.loads(first[2])["thread"], json.loads(second[2])["thread"]]

    first, second = asyncio.run(two())
    assert first == second
    assert len(handler.executors) == 1


def test_requests_in_flight_together_never_share_a_thread(handler):
    async def together() -> list[int]:
        held = [asyncio.ensure_future(_call(handler, f"/api/here?hold=1&n={n}")) for n in range(3)]
        while len(seen["view"]) < 3:
            await asyncio.sleep(0.01)
        gate.set()
        return [json.loads(body)["thread"] for _, _, body in await asyncio.gather(*held)]

    threads = asyncio.run(together())
    assert len(set(threads)) == 3
    assert len(handler.executors) == 2  # the pool keeps `idle` of them; the third is shut down


def test_errors_under_the_api_are_still_the_json_envelope(handler):
    async def both() -> list[tuple[int, dict[str, str], bytes]]:
        return [await _call(handler, "/api/nothing-here"), await _call(handler, "/api/boom")]

    (missing, missing_headers, missing_body), (boom, boom_headers, boom_body) = asyncio.run(both())
    assert missing == 404 and missing_headers["content-type"] == "application/json"
    assert json.loads(missing_body)["error"]["code"] == "not_found"
    assert boom == 500 and boom_headers["content-type"] == "application/json"
    assert json.loads(boom_body)["error"]["code"] == "internal_error"
