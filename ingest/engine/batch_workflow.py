"""The built-in `runledger-batch` workflow: a bulk action by query, run as a durable instance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.engine.workflow import Workflow

if TYPE_CHECKING:
    from ingest.engine.step_api import StepApi


class RunledgerBatch(Workflow):
    """Acts on a frozen selection (ingest.engine.services.batches), one chunk per step."""

    name = "runledger-batch"

    def run(self, event: Any, step: StepApi) -> Any:
        from ingest.engine.services.batches import batch_run

        return batch_run(event, step)
