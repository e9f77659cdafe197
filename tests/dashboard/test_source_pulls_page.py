"""The workflows page's "Scheduled pulls" section: each Gong and Salesforce connection of the
reader's tenants with its cursor, lag, last pull and last error, and its tenant's schedule."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from ingest.pipelines.cursors import Window, cursor_advance, cursor_claim, cursor_fail
from ingest.pipelines.services import connection_upsert
from ingest.workflows.reconcile import reconcile_schedules_ensure

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def row(html: str, key: str) -> str:
    found = re.search(rf'<tr data-pull="{re.escape(key)}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {key}"
    return found[1]


def test_each_connection_shows_its_cursor_lag_last_pull_error_and_schedule(viewer: Client, stranger: Client) -> None:
    now = timezone.now()
    gong = connection_upsert(tenant="acme", kind="gong", key="k", secret="gong-secret-value")
    sfdc = connection_upsert(tenant="acme", kind="salesforce", key="c", secret="s")
    connection_upsert(tenant="initech", kind="gong", key="k", secret="s")
    cursor_claim(connection_id=gong.pk, holder="a", now=now, hold=timedelta(minutes=15))
    cursor_advance(
        connection_id=gong.pk,
        holder="a",
        window=Window(now - timedelta(hours=3), now - timedelta(minutes=42)),
        listed=100,
        started=10,
        now=now,
    )
    cursor_claim(connection_id=sfdc.pk, holder="b", now=now, hold=timedelta(minutes=15))
    cursor_fail(connection_id=sfdc.pk, holder="b", error="SalesforceAuthError: check the connected app", now=now)
    reconcile_schedules_ensure(now)

    html = viewer.get("/workflows/").content.decode()

    assert 'id="source-pulls"' in html
    gong_row = row(html, "acme/gong")
    assert (now - timedelta(minutes=42)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M") in gong_row
    assert "42m" in gong_row  # the lag behind now
    assert ">100<" in gong_row and ">10<" in gong_row and "none" in gong_row
    assert 'href="/schedules/reconcile-acme/"' in gong_row
    sfdc_row = row(html, "acme/salesforce")
    assert "never pulled to the end" in sfdc_row and "check the connected app" in sfdc_row
    assert "initech" not in html and "gong-secret-value" not in html
    assert row(stranger.get("/workflows/").content.decode(), "initech/gong")


def test_without_a_connection_the_section_says_how_pulls_begin(viewer: Client) -> None:
    html = viewer.get("/workflows/").content.decode()
    assert 'id="source-pulls-empty"' in html and "reconcile-&lt;tenant&gt;" in html
