"""Fuzz figures: runs the fuzz suites and prints cases, 5xx answers and refused requests that
changed rows, per suite and in total, with the wall time.

    .venv/bin/python bench/fuzz.py                       # SQLite (the default test database)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_fuzz \\
        RUNLEDGER_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/h_fuzz .venv/bin/python bench/fuzz.py

The suites (tests/fuzzing.py holds their shared contract): signed ingress, webhooks, the REST
API beyond its schema, schemathesis over the OpenAPI schema with response conformance, and the
dashboard's pages and forms. Every generated request must answer below 500, in the JSON envelope
under /api/ and /hooks/, and, when refused, leave the row count of every ledger table unchanged.
The test run prints the tally (`fuzz <suite>: N cases, …`); this script runs pytest on the
suites alone and repeats those lines. Exit status: pytest's.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = [
    "tests/triggers/test_ingress_fuzz.py",
    "tests/ingest/test_hooks_fuzz.py",
    "tests/api/test_rest_fuzz.py",
    "tests/api/test_openapi_schemathesis.py",
    "tests/dashboard/test_forms_fuzz.py",
]


def main() -> int:
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *SUITES], cwd=ROOT, capture_output=True, text=True
    )
    elapsed = time.monotonic() - started
    lines = run.stdout.splitlines()
    figures = [line for line in lines if line.startswith("fuzz ")]
    closing = lines[-1] if lines else ""
    if run.returncode != 0:
        print(run.stdout[-4000:], run.stderr[-2000:], sep="\n")
    for line in figures:
        print(line)
    print(f"pytest: {closing}")
    print(f"wall time: {elapsed:.1f} s")
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
