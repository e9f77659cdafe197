"""The circuit breaker across real processes on PostgreSQL: four processes of four threads each
race for the half-open probe of one shared key; exactly one call probes, every other fails fast."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PG_URL
from tests.engine.procs import ROOT, Database, python

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

RACE = """
import threading, time
from datetime import timedelta
from django.db import connection
from ingest.engine.breaker import BreakerPolicy
from ingest.engine.errors import CircuitOpen
from ingest.engine.services.breakers import breaker_admit
policy = BreakerPolicy(threshold=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=1))
start = float({start!r})
out = []
def caller():
    try:
        time.sleep(max(0.0, start - time.time()))
        try:
            out.append("probe" if breaker_admit(key="shared", policy=policy).probe else "go")
        except CircuitOpen:
            out.append("refused")
    finally:
        connection.close()
threads = [threading.Thread(target=caller) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print("RESULT", " ".join(out))
"""


def test_four_processes_racing_for_the_probe_let_exactly_one_through() -> None:
    import time

    with Database(PG_URL) as db:
        python(
            db,
            "from datetime import timedelta\n"
            "from ingest.engine.breaker import BreakerPolicy\n"
            "from ingest.engine.services.breakers import breaker_admit, breaker_record\n"
            "p = BreakerPolicy(threshold=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=1))\n"
            "for _ in range(3): breaker_record(breaker_admit(key='shared', policy=p), ok=False)\n",
        )
        assert db.execute("SELECT state FROM engine_circuitbreaker WHERE key = 'shared'") == [("open",)]
        start = time.time() + 6.0  # every process is up and connected by then; the cooldown is over
        procs = [
            subprocess.Popen(
                [sys.executable, "manage.py", "shell", "-c", RACE.format(start=start)],
                cwd=ROOT,
                env=db.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        outcomes: list[str] = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outcomes += next(line for line in out.splitlines() if line.startswith("RESULT")).split()[1:]
        assert sorted(outcomes) == ["probe"] + ["refused"] * 15
        assert db.execute(
            "SELECT count(*) FROM engine_breakertransition WHERE breaker_id = 'shared' "
            "AND from_state = 'open' AND to_state = 'half_open'"
        ) == [(1,)]
