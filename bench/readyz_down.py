"""/readyz with the database down: seconds until the web process answers 503. Prints figures; not a test.

    .venv/bin/python bench/readyz_down.py              # 5 probes, the configured wait
    .venv/bin/python bench/readyz_down.py --wait 10    # as before the probe bounded its wait

A load balancer gives up on a probe after 1-5 s, so a process whose database is gone must say
so well inside that. The web process is configured as in production (a PostgreSQL URL and the
connection pool, RUNLEDGER_DB_POOL) but pointed at a closed local port; each probe is a request
through Django's full stack in this process. `--wait` sets RUNLEDGER_READY_DATABASE_SECONDS.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--wait", type=float, default=None, help="RUNLEDGER_READY_DATABASE_SECONDS")
    args = parser.parse_args()
    os.environ.update(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed_port()}/runledger",
        RUNLEDGER_DB_POOL="4",
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )
    if args.wait is not None:
        os.environ["RUNLEDGER_READY_DATABASE_SECONDS"] = str(args.wait)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    client = Client()
    took, statuses = [], []
    for _ in range(args.probes):
        started = time.monotonic()
        statuses.append(client.get("/readyz").status_code)
        took.append(time.monotonic() - started)
    print(
        f"wait setting {settings.RUNLEDGER_READY_DATABASE_SECONDS:g} s, pool timeout 10 s, "
        f"{args.probes} probes, answers {sorted(set(statuses))}"
    )
    print(f"seconds to answer: median {statistics.median(took):.2f}, max {max(took):.2f}, min {min(took):.2f}")


if __name__ == "__main__":
    main()
