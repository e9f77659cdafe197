"""Workflows the real-process tests run; worker processes import this via RUNLEDGER_WORKFLOW_MODULES.

Steps write their side effects to `e2e_effects` (a plain table, outside the ledger), so a test
can count how many times each step really ran and in which process.
"""

from __future__ import annotations

import os
import time

from django.db import connection

from ingest.engine import Workflow

CREATE_EFFECTS = """
CREATE TABLE IF NOT EXISTS e2e_effects (
    id bigserial PRIMARY KEY, instance_id text NOT NULL, step text NOT NULL, pid int NOT NULL,
    idempotency_key text NOT NULL, started double precision NOT NULL, ended double precision
)"""


def effect(ctx, *, hold: float = 0.0) -> dict:
    started = time.time()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO e2e_effects (instance_id, step, pid, idempotency_key, started) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [ctx.instance_id, ctx.name, os.getpid(), ctx.idempotency_key, started],
        )
        row_id = cursor.fetchone()[0]
    if hold:
        time.sleep(hold)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE e2e_effects SET ended = %s WHERE id = %s", [time.time(), row_id])
    return {"pid": os.getpid()}


class CrashMe(Workflow):
    name = "e2e-crash-me"

    def run(self, event, step):
        step.do("before-1", effect)
        step.do("before-2", effect)
        step.do("slow", lambda ctx: effect(ctx, hold=event.payload.get("hold", 3.0)))
        step.do("after", effect)
        return "done"


class ThreeEffects(Workflow):
    name = "e2e-three-effects"

    def run(self, event, step):
        for name in ("one", "two", "three"):
            step.do(name, effect)
        return event.payload.get("n")


class SleepUntil(Workflow):
    name = "e2e-sleep-until"

    def run(self, event, step):
        step.sleep_until("nap", event.payload["until"])
        return None
