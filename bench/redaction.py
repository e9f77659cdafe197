"""What the one redaction costs per text: a log line, a connection error, with remembered values.

    .venv/bin/python bench/redaction.py --lines 5000

Every log line, span status, stored failure and alert passes through
`ingest.engine.redaction.redact`. This times it on three texts (a plain log line with no secret,
a ZenRows connection error carrying its API key, a webhook access line) with 0, 100, 1,000 and
4,096 remembered connection secrets (the most it keeps), and prints microseconds per call (the
median of five runs of `--lines` calls each). Pure CPU: no database, no network.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingest.engine import redaction  # noqa: E402 - after the path

TEXTS = {
    "plain log line": (
        "2026-11-28 14:23:12,394 WARNING runledger.engine step export attempt 1 failed "
        "(RuntimeError: upstream answered 503); retrying in 2.0 s [instance=gong-acme-123 "
        "workflow=gong-ingest step=fetch-transcript attempt=1 tenant=acme]"
    ),
    "connection error": (
        "ZenRows fetching https://example.com/pricing failed to connect (HTTPConnectionPool("
        "host='api.zenrows.com', port=443): Max retries exceeded with url: /v1/?apikey="
        "zr0123456789abcdef&url=https%3A%2F%2Fexample.com%2Fpricing&js_render=true); retry later"
    ),
    "access line": "127.0.0.1:5000 POST /hooks/gong/wh-0123456789abcdef 202",
}


def per_call_us(text: str, lines: int) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(lines):
            redaction.redact(text)
        runs.append((time.perf_counter() - started) / lines * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000, help="calls per run (five runs per figure)")
    args = parser.parse_args()
    print(f"{'remembered':>10}  " + "  ".join(f"{name:>18}" for name in TEXTS) + "   (µs per call)")
    for count in (0, 100, 1000, redaction.MOST_LITERALS):
        redaction.forget_all()
        redaction.remember(*(secrets.token_urlsafe(18) for _ in range(count)))
        figures = [per_call_us(text, args.lines) for text in TEXTS.values()]
        print(f"{count:>10}  " + "  ".join(f"{f:>18.1f}" for f in figures))


if __name__ == "__main__":
    main()
