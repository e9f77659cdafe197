"""A step's retry policy in the REST API: every key, for rows stored before and after max_delay."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ingest.engine import Workflow
from ingest.engine.models import Step
from ingest.engine.worker.turns import run_until_idle
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]


class PatientCall(Workflow):
    name = "t-api-patient-call"

    def run(self, event: Any, step: Any) -> Any:
        step.sleep("settle", 0)
        return step.do(
            "call",
            lambda ctx: "ok",
            retries={
                "limit": 8,
                "delay": "5 seconds",
                "backoff_coefficient": 3,
                "max_delay": "2 minutes",
            },
        )


def test_a_step_shows_its_retry_policy_with_max_delay_and_backoff_coefficient(
    operator: ApiClient,
) -> None:
    created = operator.post("/api/instances", {"workflow": "t-api-patient-call", "tenant": "acme", "id": "patient-1"})
    assert created.status_code == 201, created.content
    run_until_idle(advance_clock=True)
    steps = {s["name"]: s for s in operator.get("/api/instances/patient-1").json()["steps"]}
    assert steps["settle"]["config"] is None
    assert steps["call"]["config"] == {
        "retries": {
            "limit": 8,
            "delay": 5.0,
            "backoff": "exponential",
            "backoff_coefficient": 3.0,
            "max_delay": 120.0,
        },
        "timeout": 600.0,
    }

    # A row written before the two keys existed shows the defaults it resolves to.
    Step.objects.filter(instance_id="patient-1", name="call").update(
        config={"retries": {"limit": 5, "delay": 10.0, "backoff": "exponential"}, "timeout": 600.0}
    )
    old = next(s for s in operator.get("/api/instances/patient-1").json()["steps"] if s["name"] == "call")
    assert old["config"]["retries"] == {
        "limit": 5,
        "delay": 10.0,
        "backoff": "exponential",
        "backoff_coefficient": 2.0,
        "max_delay": 600.0,
    }


def test_the_openapi_schema_describes_the_retry_policy(db: Any) -> None:
    schemas = Client().get("/api/openapi.json").json()["components"]["schemas"]
    retries = schemas["RetryPolicyOut"]["properties"]
    assert {"limit", "delay", "backoff", "backoff_coefficient", "max_delay"} == set(retries)
    assert "no delay between retries is longer" in retries["max_delay"]["description"]
    assert "config" in schemas["StepOut"]["properties"]
