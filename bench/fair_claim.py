"""The worker's claim on a fair backlog (a workflow keyed by tenant, no cap): 4,000 of tenant A's
instances at priority -10 and 400 of each of tenants B..E; 400 claims of 8, each claimed batch
then marked finished. Prints the claim's p50 and p90. Not a test.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME .venv/bin/python bench/fair_claim.py [limit]

Run it from the checkout to measure (its `ingest` is imported); `limit` gives A an operator's
concurrency limit of 4 first. Migrates the database; empties the engine's tables.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
import django  # noqa: E402

django.setup()
from datetime import timedelta  # noqa: E402

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from ingest.engine import Workflow  # noqa: E402
from ingest.engine.models import Instance  # noqa: E402
from ingest.engine.services import instances  # noqa: E402
from ingest.engine.worker.turns import claim  # noqa: E402

call_command("migrate", verbosity=0)


class Fair(Workflow):
    name = "bench-fair-claim"
    concurrency_key = "tenant"

    def run(self, event, step):
        return None


with connection.cursor() as c:
    c.execute(
        "TRUNCATE engine_instance, engine_step, engine_attempt, engine_history, engine_pendingevent, "
        "engine_deadletter CASCADE"
    )
for t, n, prio in [("A", 4000, -10), ("B", 400, 0), ("C", 400, 0), ("D", 400, 0), ("E", 400, 0)]:
    for b in range(0, n, 100):
        instances.instance_create_batch(
            workflow="bench-fair-claim",
            items=[{"id": f"{t}-{i}", "tenant": t, "priority": prio} for i in range(b, min(n, b + 100))],
        )
with connection.cursor() as c:
    c.execute("VACUUM ANALYZE engine_instance")
if len(sys.argv) > 1 and sys.argv[1] == "limit":
    from ingest.engine.services.limits import concurrency_limit_set

    concurrency_limit_set(workflow="bench-fair-claim", key="A", max_concurrent=4, actor="bench")
times = []
for _ in range(400):
    t0 = time.perf_counter()
    _token, got = claim(worker_id="bench", limit=8, lease=timedelta(seconds=60))
    times.append(time.perf_counter() - t0)
    Instance.objects.filter(id__in=[g.id for g in got]).update(
        status="complete", lease_owner="", lease_token="", lease_expires_at=None, ready_at=None
    )
times.sort()
print(
    f"claim of 8 on a fair backlog: p50 {statistics.median(times) * 1000:.2f} ms "
    f"p90 {times[int(len(times) * 0.9)] * 1000:.2f} ms (400 claims)"
)
