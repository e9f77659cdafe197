"""Chaos over paid steps: worker processes SIGKILLed between a paid call's answer and its step's
commit, on PostgreSQL, and the providers are paid once per step all the same.

Two instances of `e2e-paid` (tests/engine/e2e_paid_workflows.py), three paid steps each (an
LLM completion, a DataForSEO task, a ZenRows page) against local fake providers. Every step
SIGKILLs its own worker once, at the place its params name: right after the provider's answer
came back (instance `kill-answer`), or after its cost was booked too (`kill-booked`); either way
before the step's completion commits. Two workers run at a time, one instance each; a dead one
is replaced. Figure: the calls the fake providers recorded for the steps that completed, and the
api_costs rows booked for them (printed; run with -s to see it).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PG_URL
from tests.engine.e2e_paid_workflows import PAID_STEPS
from tests.engine.procs import WORKFLOWS, Database, python, start_worker, stop, wait_ready
from tests.fakes.dataforseo import ROUTE_BACKLINKS, FakeDataForSEO
from tests.fakes.llm import CHAT, FakeOpenAI
from tests.fakes.zenrows import ROUTE_API, FakeZenRows

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PAID_WORKFLOWS = "tests.engine.e2e_paid_workflows"
INSTANCES = {"kill-answer": "answer", "kill-booked": "booked"}
WORKERS = 2


class PaidDatabase(Database):
    """A throwaway database whose workers also know `e2e-paid`."""

    def env(self, **extra: str) -> dict[str, str]:
        env = super().env(**extra)
        env["RUNLEDGER_WORKFLOW_MODULES"] = f"{WORKFLOWS},{PAID_WORKFLOWS}"
        return env


@pytest.fixture
def db():
    with PaidDatabase(PG_URL) as database:
        yield database


def unfinished(db: Database) -> int:
    return int(
        db.execute("SELECT count(*) FROM engine_instance WHERE status NOT IN ('complete', 'errored', 'terminated')")[0][
            0
        ]
    )


def run_with_kills(db: Database, log_dir: Path, *, timeout: float = 240.0) -> int:
    """Keep WORKERS workers (one instance each) running until every instance has finished,
    replacing each that dies; returns how many died of SIGKILL."""
    started = 0

    def worker() -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        return start_worker(db, concurrency=1, lease=3.0, log=log_dir / f"w{started}.log", wait=False)

    procs = [worker() for _ in range(WORKERS)]
    kills = 0
    deadline = time.monotonic() + timeout
    try:
        while unfinished(db):
            assert time.monotonic() < deadline, f"instances still unfinished after {timeout:g} s"
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    assert proc.returncode == -signal.SIGKILL, proc.log_path.read_text()  # type: ignore[attr-defined]
                    kills += 1
                    procs[i] = worker()
            time.sleep(0.1)
        wait_ready(*procs)  # a worker still starting would die of the SIGTERM instead of draining
    finally:
        for proc in procs:
            if proc.poll() is None:
                stop(proc)
    return kills


def test_workers_killed_between_a_paid_answer_and_the_commit_pay_each_provider_once_per_step(db, tmp_path):
    with FakeOpenAI() as llm, FakeDataForSEO() as dfs, FakeZenRows() as zr:
        common: dict[str, Any] = {
            "llm_url": llm.url,
            "dfs_url": dfs.url,
            "zr_url": zr.url,
            "marks": str(tmp_path),
            "how": "kill",
        }
        batch = [
            {"id": iid, "params": {**common, "die": dict.fromkeys(PAID_STEPS, where)}}
            for iid, where in INSTANCES.items()
        ]
        python(
            db,
            f"import json\nfrom ingest.engine import create_batch\n"
            f"create_batch('e2e-paid', json.loads({json.dumps(json.dumps(batch))}))",
        )
        kills = run_with_kills(db, tmp_path)
        sent = {"llm": llm.count(CHAT), "dataforseo": dfs.count(ROUTE_BACKLINKS), "zenrows": zr.count(ROUTE_API)}
        billed = dfs.billed + zr.billed
    steps = db.execute(
        "SELECT count(*) FROM engine_step WHERE status = 'complete' AND name = ANY(%s)", (list(PAID_STEPS),)
    )[0][0]
    booked = {
        service: (n, total)
        for service, n, total in db.execute("SELECT service, count(*), sum(cost) FROM api_costs GROUP BY service")
    }
    print(
        f"\n{steps} paid steps completed, {kills} SIGKILLs between a paid answer and the step's commit: "
        f"{sum(sent.values())} provider calls {sent}, {sum(n for n, _ in booked.values())} api_costs rows; "
        f"DataForSEO and ZenRows booked ${booked['dataforseo'][1] + booked['zenrows'][1]} of ${billed} billed"
    )
    assert db.execute("SELECT id, status FROM engine_instance ORDER BY id") == [
        ("kill-answer", "complete"),
        ("kill-booked", "complete"),
    ]
    assert steps == 6 and kills == 6 and len(list(tmp_path.glob("kill-*"))) == 6
    assert sent == {"llm": 2, "dataforseo": 2, "zenrows": 2}  # N calls for N steps
    assert {service: n for service, (n, _) in booked.items()} == {"dataforseo": 2, "openai": 2, "zenrows": 2}
    assert booked["dataforseo"][1] + booked["zenrows"][1] == billed > Decimal(0)
