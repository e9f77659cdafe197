"""What every CLI command shares below the client: the usage error, JSON arguments, and the
question asked before an action that cannot be undone."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


class UsageError(Exception):
    """The command line is wrong."""


def json_object(raw: str, *, flag: str) -> dict[str, Any]:
    """`raw` as a JSON object, or UsageError naming `flag`."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON ({exc.msg}); give an object such as '{{\"a\": 1}}'") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object such as '{{\"a\": 1}}'; nothing was done")
    return value


def confirmed(out: Console, question: str, *, yes: bool) -> bool:
    """Whether to go on: `--yes`, or "y" typed at a terminal. Says so when not."""
    if yes or (sys.stdin.isatty() and input(f"{question} [y/N] ").strip().lower() == "y"):
        return True
    out.print("nothing was done (confirm with --yes)")
    return False
