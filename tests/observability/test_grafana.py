"""The shipped Grafana dashboard asks only for metrics /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "runledger.json"


def test_every_runledger_metric_in_the_dashboard_is_exposed(db: object) -> None:
    text = Client().get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    exposed: set[str] = set()
    for family in text_string_to_metric_families(text):
        exposed |= {family.name + suffix for suffix in ("", "_total", "_bucket", "_sum", "_count")}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    used = {name for e in exprs for name in re.findall(r"\brunledger_[a-z_]+", e)}
    assert len(used) >= 15
    assert used <= exposed, sorted(used - exposed)


@pytest.mark.pure
def test_the_dashboard_is_importable_json_with_unique_panel_ids() -> None:
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "workflow", "tenant"}
