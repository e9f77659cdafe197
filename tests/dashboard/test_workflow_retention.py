"""The workflow page says how long finished instances are kept, how many of the reader's are due,
and when the last purge ran."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from ledger_factories import make_instance

from ingest.engine.models import RetentionBatch

pytestmark = pytest.mark.db


def test_the_workflow_page_shows_retention_and_the_readers_due_count(operator, stranger):
    old = timezone.now() - timedelta(days=45)
    for i in range(2):
        make_instance(f"gi-old-{i}", workflow="gong-ingest", status="complete", ended_at=old)
    make_instance("gi-new", workflow="gong-ingest", status="complete", ended_at=timezone.now())
    make_instance("gi-initech", tenant="initech", workflow="gong-ingest", status="complete", ended_at=old)
    RetentionBatch.objects.create(
        workflow="gong-ingest", ran_at=timezone.now() - timedelta(hours=2), cutoff=old, purged=3, archive="x"
    )
    r = operator.get("/workflows/gong-ingest/")
    assert r.context["retention"]["days"] == 30 and r.context["retention"]["due"] == 2
    html = r.content.decode()
    assert 'id="retention"' in html and "30 days" in html and "<strong>2</strong> of yours are due" in html
    assert "Last purge" in html
    assert stranger.get("/workflows/gong-ingest/").context["retention"]["due"] == 1
