"""`manage.py ingest_pull` against the fake Gong and Salesforce servers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingest.engine import get
from ingest.engine.models import Instance
from ingest.pipelines.models import Fact
from tests.fakes import FakeGong, FakeSalesforce

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def pull(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("ingest_pull", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_pulling_gong_starts_one_ingest_per_call_in_the_range_and_is_idempotent(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    calls = fake_gong.calls
    start, end = calls[0].started.isoformat(), calls[3].started.isoformat()  # the first three calls
    output = pull("gong", "--tenant", "acme", "--from", start, "--to", end)
    assert "3 ingest(s) started, 0 already processed" in output
    assert set(Instance.objects.values_list("id", flat=True)) == {f"gong-acme-{c.id}" for c in calls[:3]}
    for call in calls[:3]:  # fetched in batches with the speakers' names, passed inline
        assert Instance.objects.get(id=f"gong-acme-{call.id}").params["transcript"] == call.transcript_text()
    drain()
    assert {get(f"gong-acme-{c.id}").status()["status"] for c in calls[:3]} == {"complete"}
    assert Fact.objects.filter(tenant="acme", subject=calls[0].account).exists()
    assert "0 ingest(s) started, 3 already processed" in pull("gong", "--tenant", "acme", "--from", start, "--to", end)


def test_a_gong_backfill_queues_behind_live_webhooks_and_says_so_in_its_help(
    gong_tenant: str, fake_gong: FakeGong, capsys
) -> None:
    from ingest.workflows.gong import gong_ingest_start

    calls = fake_gong.calls
    pull(
        "gong",
        "--tenant",
        "acme",
        "--from",
        calls[0].started.isoformat(),
        "--to",
        calls[3].started.isoformat(),
        "--no-progress",
    )
    live = gong_ingest_start(
        "acme", {"id": calls[4].id, "title": "live", "started": calls[4].started.isoformat()}, transcript="Ana: hello"
    )
    assert set(Instance.objects.exclude(id=live.instance_id).values_list("priority", flat=True)) == {-10}
    assert Instance.objects.get(id=live.instance_id).priority == 0
    assert Instance.objects.get(id=live.instance_id).concurrency_key == "acme"  # served round robin by tenant
    capsys.readouterr()
    with pytest.raises(SystemExit):
        call_command("ingest_pull", "--help")
    assert "at priority -10: below live webhooks (priority 0)" in " ".join(capsys.readouterr().out.split())


def test_pulling_salesforce_follows_query_pages_and_starts_versioned_ingests(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce, drain
) -> None:
    output = pull("salesforce", "--tenant", "acme", "--from", "2025-03-01", "--to", "2025-03-04", "--no-progress")
    assert f"{len(fake_salesforce.opportunities)} ingest(s) started" in output
    drain()
    statuses = {i.status for i in Instance.objects.filter(workflow="salesforce-ingest")}
    assert statuses == {"complete"}
    stage_facts = Fact.objects.filter(source_authority="SfdcOpportunityStage")
    assert stage_facts.count() >= 3 * len(fake_salesforce.opportunities)


def test_pulling_explains_bad_arguments_and_missing_credentials(db: None) -> None:
    with pytest.raises(CommandError, match="must be after"):
        pull("gong", "--tenant", "acme", "--from", "2025-03-02", "--to", "2025-03-01")
    with pytest.raises(CommandError, match="not an ISO date"):
        pull("gong", "--tenant", "acme", "--from", "yesterday", "--to", "2025-03-01")
    with pytest.raises(CommandError, match="no Gong access key for tenant nobody"):
        pull("gong", "--tenant", "nobody", "--from", "2025-03-01", "--to", "2025-03-02")


def test_pulling_from_an_unreachable_gong_reports_how_far_it_got(gong_tenant: str, fake_gong: FakeGong) -> None:
    with pytest.raises(CommandError, match="failed after 0 record"):
        pull(
            "gong", "--tenant", "acme", "--from", "2025-03-01", "--to", "2025-04-01", "--base-url", "http://127.0.0.1:9"
        )
