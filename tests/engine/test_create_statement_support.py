from __future__ import annotations

from typing import Any

from ingest.engine import Workflow


class Plain(Workflow):
    name = "plain-create"

    def run(self, event: Any, step: Any) -> Any:
        return None
