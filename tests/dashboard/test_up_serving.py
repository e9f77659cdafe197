"""`manage.py up` as a person runs it: on a port already in use it exits non-zero with a clear
message before anything starts (no worker is left on the SQLite file); once up, a request line
or headers over the HTTP server's limit get 414/431 with a message, not a dropped connection."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.serving import MAX_HEAD_BYTES

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'up.sqlite3'}",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        DEBUG="0",
        RUNLEDGER_SECRET_KEY_FILE=str(tmp_path / "keys"),
    )
    env.pop("REDIS_URL", None)
    return env


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_up_on_a_port_in_use_exits_non_zero_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    said = out.decode() + err.decode()
    assert f"127.0.0.1:{port}" in said and "already in use" in said
    assert "is up at" not in said
    assert _group_gone(proc.pid)  # no worker or server process of its own is left
    assert not (tmp_path / "up.sqlite3").exists()  # nothing was migrated, seeded or run


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    tmp = tmp_path_factory.mktemp("up")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--no-demo", "--port", str(port)],
        cwd=ROOT,
        env=_env(tmp),
        stdout=(tmp / "out.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120  # migrations on a fresh SQLite file, on a shared machine
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp / "out.log").read_text()
            assert time.monotonic() < deadline, (tmp / "out.log").read_text()
            time.sleep(0.5)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_request_line_over_the_limit_is_a_414_with_a_message(served: int) -> None:
    query = b"q=" + b"x" * MAX_HEAD_BYTES
    answer = _exchange(served, b"GET /instances/?" + query + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414 URI Too Long\r\n")
    assert b"shorten the URL" in answer and answer.count(b"HTTP/1.1") == 1


def test_headers_over_the_limit_are_a_431_with_a_message(served: int) -> None:
    headers = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 1000) for i in range(20))
    answer = _exchange(served, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"fewer or shorter headers" in answer and answer.count(b"HTTP/1.1") == 1


def test_a_request_under_the_limits_is_served_as_before(served: int) -> None:
    answer = _exchange(
        served,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        + b"X-Filler: "
        + b"y" * 8000
        + b"\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200")
