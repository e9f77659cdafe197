from __future__ import annotations

import base64
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from ingest.sources.http import RateLimiter, new_session, retry_after_seconds, should_retry_hint
from tests.fakes import FakeOpenAI
from tests.fakes.llm import CHAT

pytestmark = pytest.mark.pure


def test_the_limiter_hands_out_three_slots_per_second_with_a_fake_clock() -> None:
    now = [0.0]
    limiter = RateLimiter(3, 1.0, clock=lambda: now[0])

    waits = [limiter.reserve() for _ in range(7)]

    assert waits == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0]


def test_the_limiter_frees_slots_as_time_passes() -> None:
    now = [0.0]
    limiter = RateLimiter(3, 1.0, clock=lambda: now[0])
    for _ in range(3):
        limiter.reserve()

    now[0] = 1.0

    assert limiter.reserve() == 0.0


def test_the_limiter_never_lets_threads_exceed_the_rate() -> None:
    limiter = RateLimiter(3, 0.2)
    stamps: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        limiter.acquire()
        with lock:
            stamps.append(time.monotonic())

    threads = [threading.Thread(target=worker) for _ in range(9)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    stamps.sort()
    # Lower bounds only: every thread returns no earlier than its slot (slots k//3 * 0.2 s
    # after the start), and sorting keeps that order, so a slow machine cannot flake this.
    assert all(stamp - started >= (k // 3) * 0.2 - 1e-3 for k, stamp in enumerate(stamps))


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2025, 3, 3, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"Retry-After": "Mon, 03 Mar 2025 12:00:30 GMT"}, now=now) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_x_should_retry_is_read_as_a_bool() -> None:
    assert should_retry_hint({"x-should-retry": "true"}) is True
    assert should_retry_hint({"X-Should-Retry": "false"}) is False
    assert should_retry_hint({}) is None


# ---- the session: the environment read once per scheme and host ------------------------------


def _chat(session: requests.Session, url: str, **kwargs: object) -> requests.Response:
    return session.post(url, json={"model": "m", "messages": []}, timeout=(2, 5), **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    ):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("")
    monkeypatch.setenv("NETRC", str(netrc))
    return netrc


def test_the_environments_proxy_carries_requests_to_other_hosts(
    clean_env: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", fake_openai.url)
    session = new_session()
    assert _chat(session, "http://llm.invalid/v1/chat/completions").status_code == 401  # the fake, as a proxy
    assert _chat(session, "http://llm.invalid/v1/chat/completions").status_code == 401
    assert fake_openai.count(CHAT) == 2


def test_no_proxy_and_a_requests_own_proxies_are_honoured(
    clean_env: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    session = new_session()
    assert _chat(session, f"{fake_openai.url}/v1/chat/completions").status_code == 401  # direct
    with pytest.raises(requests.ConnectionError):  # the request's own proxy wins over NO_PROXY
        _chat(session, f"{fake_openai.url}/v1/chat/completions", proxies={"http": "http://127.0.0.1:9"})


def test_netrc_credentials_apply_unless_the_request_or_its_url_brings_its_own(
    clean_env: Path, fake_openai: FakeOpenAI
) -> None:
    clean_env.write_text("machine 127.0.0.1 login ana password from-netrc\n")
    session = new_session()
    _chat(session, f"{fake_openai.url}/v1/chat/completions")
    _chat(
        session, f"{fake_openai.url}/v1/chat/completions", headers={"Authorization": "Bearer sk-fake"}, auth=lambda r: r
    )
    _chat(session, f"{fake_openai.url}/v1/chat/completions".replace("://", "://bo:from-url@"))
    sent = [r.header("Authorization") for r in fake_openai.requests_to(CHAT)]
    assert sent[0] == "Basic " + base64.b64encode(b"ana:from-netrc").decode()
    assert sent[1] == "Bearer sk-fake"
    assert sent[2] == "Basic " + base64.b64encode(b"ana:from-netrc").decode()  # netrc wins, as in requests


def test_a_url_with_credentials_and_no_netrc_entry_uses_them(clean_env: Path, fake_openai: FakeOpenAI) -> None:
    session = new_session()
    _chat(session, f"{fake_openai.url}/v1/chat/completions")
    _chat(session, f"{fake_openai.url}/v1/chat/completions".replace("://", "://bo:from-url@"))
    sent = [r.header("Authorization") for r in fake_openai.requests_to(CHAT)]
    assert sent == [None, "Basic " + base64.b64encode(b"bo:from-url").decode()]


def test_the_environment_is_read_once_per_host(
    clean_env: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = new_session()
    assert _chat(session, f"{fake_openai.url}/v1/chat/completions").status_code == 401
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # set after the first request to this host
    assert _chat(session, f"{fake_openai.url}/v1/chat/completions").status_code == 401
    with pytest.raises(requests.ConnectionError):  # another host: read now, through the dead proxy
        _chat(session, "http://llm.invalid/v1/chat/completions")
