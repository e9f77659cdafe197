"""RUNLEDGER_TENANT_CONCURRENCY: per-workflow caps, read with errors that name the variable."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.config import env_caps


def test_caps_are_read_per_workflow_and_unset_means_none() -> None:
    env = {"RUNLEDGER_TENANT_CONCURRENCY": " gong-ingest=4, domain-onboard=2 ,"}
    assert env_caps(env, "RUNLEDGER_TENANT_CONCURRENCY") == {"gong-ingest": 4, "domain-onboard": 2}
    assert env_caps({}, "RUNLEDGER_TENANT_CONCURRENCY") == {}


@pytest.mark.parametrize("raw", ["gong-ingest", "gong-ingest=0", "gong-ingest=two", "=3"])
def test_a_bad_cap_is_refused_naming_the_variable_and_the_part(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=f"RUNLEDGER_TENANT_CONCURRENCY: '{raw}'"):
        env_caps({"RUNLEDGER_TENANT_CONCURRENCY": raw}, "RUNLEDGER_TENANT_CONCURRENCY")
