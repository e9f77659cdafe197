"""/metrics counts completed_with_errors as a finished outcome of its own, not as an error."""

from __future__ import annotations

import pytest
from django.test import Client

from ingest.engine import Workflow, WorkflowResult, create
from ingest.engine.worker.turns import run_until_idle
from tests.observability.conftest import scrape, value

pytestmark = pytest.mark.db


class Degrades(Workflow):
    name = "obs-degrades"

    def run(self, event, step):
        step.do("fetch", lambda ctx: 1)
        return WorkflowResult(success=False, errors=["one branch failed"])


def test_an_instance_completed_with_errors_is_counted_finished_under_its_own_outcome(db: object, web: Client) -> None:
    create("obs-degrades", id="degrades-1", tenant="acme")
    create("obs-degrades", id="degrades-2", tenant="acme")
    run_until_idle()
    s = scrape(web)
    assert value(s, "runledger_instances_finished_total", workflow="obs-degrades", outcome="completed_with_errors") == 2
    assert value(s, "runledger_instances_finished_total", workflow="obs-degrades", outcome="errored") is None
