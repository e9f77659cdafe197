"""The connection services: every wrong field named at once and nothing written on a refusal,
secrets encrypted at rest and kept by an edit that leaves them empty, a stale edit refused, and
"test connection" making one unbilled call per kind against the local fakes, its outcome kept on
the row (no secret in it) and no cost recorded. The clients of domain-onboard and url-classify
read a tenant's DataForSEO and ZenRows rows before the environment."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ingest.engine.models import ApiCost
from ingest.pipelines.connections import (
    connection_create,
    connection_delete,
    connection_problems,
    connection_set_enabled,
    connection_test,
    connection_update,
    connection_version,
)
from ingest.pipelines.errors import (
    ConnectionChanged,
    ConnectionExists,
    ConnectionNotFound,
    InvalidConnection,
)
from ingest.pipelines.models import Connection
from ingest.pipelines.selectors import config_cache_clear, dataforseo_config_get, zenrows_config_get
from ingest.workflows.domain_onboard.clients import clients
from ingest.workflows.url_classify.clients import zenrows_client
from tests.fakes import FakeAnthropic, FakeGong, FakeOpenAI, FakeSalesforce
from tests.fakes.dataforseo import ROUTE_USER_DATA, FakeDataForSEO
from tests.fakes.zenrows import FakeZenRows

pytestmark = pytest.mark.django_db


def raw(column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM ingest_connection WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


def test_every_wrong_field_is_named_at_once_and_nothing_is_written() -> None:
    with pytest.raises(InvalidConnection) as refused:
        connection_create(
            tenant=" acme",
            kind="salesforce",
            base_url="ftp://x",
            key="",
            secret="a\x00b",
            refresh_token="r" * 5000,
            provider="openai",
            options={"reconcile": "no"},
            enabled="yes",
            colour="blue",
        )
    assert set(refused.value.problems) == {
        "tenant",
        "base_url",
        "key",
        "secret",
        "refresh_token",
        "provider",
        "options",
        "enabled",
        "__all__",
    }
    assert "salesforce connection takes no provider" in refused.value.problems["provider"]
    assert Connection.objects.count() == 0


def test_an_unknown_kind_is_named() -> None:
    assert set(connection_problems({}, kind="hubspot", tenant="acme")) == {"kind"}
    with pytest.raises(InvalidConnection):
        connection_create(tenant="acme", kind="hubspot")


def test_a_second_connection_of_a_kind_is_refused_and_the_first_kept() -> None:
    first = connection_create(tenant="acme", kind="zenrows", secret="zr-key-000000001")
    with pytest.raises(ConnectionExists) as refused:
        connection_create(tenant="acme", kind="zenrows", secret="zr-key-000000002")
    assert refused.value.status == 409 and "kind" in refused.value.problems
    assert Connection.objects.get().secret == "zr-key-000000001" == first.secret


def test_secrets_are_encrypted_at_rest_and_an_empty_one_keeps_what_is_stored() -> None:
    row = connection_create(tenant="acme", kind="dataforseo", key="dfs-login", secret="dfs-password-1234")
    for column, clear in (("key", "dfs-login"), ("secret", "dfs-password-1234")):
        stored = raw(column, row.pk)
        assert stored.startswith("enc:") and clear not in stored
    edited = connection_update(
        tenant="acme",
        kind="dataforseo",
        version=connection_version(row),
        key="",
        secret="",
        base_url="http://127.0.0.1:9/",
    )
    assert (edited.key, edited.secret, edited.base_url) == ("dfs-login", "dfs-password-1234", "http://127.0.0.1:9/")
    connection_update(tenant="acme", kind="dataforseo", secret="new-password-5678")
    assert Connection.objects.get().secret == "new-password-5678"


def test_an_edit_made_from_a_stale_version_is_refused_and_changes_nothing() -> None:
    row = connection_create(tenant="acme", kind="gong", key="k" * 12, secret="s" * 12)
    shown = connection_version(row)
    connection_update(tenant="acme", kind="gong", base_url="https://eu.api.gong.io")
    with pytest.raises(ConnectionChanged) as refused:
        connection_set_enabled(tenant="acme", kind="gong", enabled=False, version=shown)
    assert refused.value.status == 409 and "changed since you loaded it" in str(refused.value)
    assert Connection.objects.get().enabled is True
    with pytest.raises(ConnectionChanged):
        connection_delete(tenant="acme", kind="gong", version=shown)
    assert Connection.objects.count() == 1


def test_an_edit_that_would_empty_a_required_secret_is_refused() -> None:
    connection_create(tenant="acme", kind="llm", provider="openai")
    with pytest.raises(InvalidConnection) as refused:
        connection_update(tenant="acme", kind="llm", provider="anthropic")
    assert set(refused.value.problems) == {"secret"}
    assert Connection.objects.get().options == {"provider": "openai"}


def test_disable_enable_and_delete() -> None:
    connection_create(tenant="acme", kind="zenrows", secret="zr-key-000000001")
    assert connection_set_enabled(tenant="acme", kind="zenrows", enabled=False).enabled is False
    assert connection_set_enabled(tenant="acme", kind="zenrows", enabled=True).enabled is True
    gone = connection_delete(tenant="acme", kind="zenrows")
    assert gone.secret == "" and Connection.objects.count() == 0
    with pytest.raises(ConnectionNotFound):
        connection_delete(tenant="acme", kind="zenrows")


def _tested(tenant: str, kind: str) -> tuple[bool, str, Connection]:
    outcome = connection_test(tenant=tenant, kind=kind, now=timezone.now())
    row = Connection.objects.get(tenant=tenant, kind=kind)
    assert (row.last_test_ok, row.last_test_message) == (outcome.ok, outcome.message)
    return outcome.ok, outcome.message, row


def test_the_test_of_each_kind_makes_one_unbilled_call_to_its_provider() -> None:
    with (
        FakeGong() as gong,
        FakeSalesforce() as sf,
        FakeOpenAI() as openai,
        FakeAnthropic() as anthropic,
        FakeDataForSEO() as dfs,
        FakeZenRows() as zr,
    ):
        connection_create(tenant="acme", kind="gong", base_url=gong.url, key="gong-key", secret="gong-secret")
        connection_create(
            tenant="acme",
            kind="salesforce",
            base_url=sf.url,
            key="sf-client",
            secret="sf-secret",
            refresh_token="sf-refresh",
        )
        connection_create(
            tenant="acme",
            kind="llm",
            provider="openai",
            base_url=f"{openai.url}/v1",
            secret="sk-fake",
            model="gpt-4o-mini",
        )
        connection_create(tenant="beta", kind="llm", provider="anthropic", base_url=anthropic.url, secret="sk-ant-fake")
        connection_create(tenant="acme", kind="dataforseo", base_url=dfs.url, key="dfs-login", secret="dfs-password")
        connection_create(tenant="acme", kind="zenrows", base_url=f"{zr.url}/v1/", secret="zr-key")
        before = {k: row.updated_at for k, row in ((c.kind + c.tenant, c) for c in Connection.objects.all())}
        results = {kind: _tested("acme", kind) for kind in ("gong", "salesforce", "llm", "dataforseo", "zenrows")}
        results["anthropic"] = _tested("beta", "llm")
        for kind, (ok, message, row) in results.items():
            assert ok, (kind, message)
            assert row.last_tested_at is not None
            assert row.updated_at == before[row.kind + row.tenant]  # a test does not make an open form stale
        assert "gpt-4o-mini is among them" in results["llm"][1]
        assert "balance 42.5 USD" in results["dataforseo"][1]
        assert "Developer" in results["zenrows"][1]
        counts = (gong.count(), sf.count(), openai.count(), anthropic.count(), dfs.count(), zr.count())
        assert counts == (1, 1, 1, 1, 1, 1)
        assert dfs.count(ROUTE_USER_DATA) == 1 and dfs.billed == 0 and zr.billed == 0
    assert ApiCost.objects.count() == 0  # nothing counts against a budget


def test_a_failed_test_names_the_error_class_and_never_a_secret() -> None:
    with FakeDataForSEO() as dfs, FakeZenRows() as zr, FakeSalesforce() as sf:
        connection_create(
            tenant="acme", kind="dataforseo", base_url=dfs.url, key="dfs-login", secret="wrong-password-0001"
        )
        connection_create(tenant="acme", kind="zenrows", base_url=f"{zr.url}/v1/", secret="wrong-zenrows-key-42")
        connection_create(
            tenant="acme", kind="salesforce", base_url=sf.url, key="sf-client", secret="wrong-secret-value-77"
        )
        dfs_ok, dfs_said, _ = _tested("acme", "dataforseo")
        zr_ok, zr_said, _ = _tested("acme", "zenrows")
        sf_ok, sf_said, _ = _tested("acme", "salesforce")
    assert (dfs_ok, zr_ok, sf_ok) == (False, False, False)
    assert dfs_said.startswith("DataForSEOAuthError: ")
    assert zr_said.startswith("ZenRowsAuthError: ")
    assert sf_said.startswith("SalesforceAuthError: ")
    for said, secret in (
        (dfs_said, "wrong-password-0001"),
        (zr_said, "wrong-zenrows-key-42"),
        (sf_said, "wrong-secret-value-77"),
    ):
        assert secret not in said


def test_an_unreachable_provider_is_an_outcome_not_an_error() -> None:
    connection_create(tenant="acme", kind="gong", base_url="http://127.0.0.1:9", key="gong-key", secret="gong-secret")
    ok, said, row = _tested("acme", "gong")
    assert not ok and said.startswith("GongUnavailable: ") and row.last_test_ok is False


def test_an_offline_llm_provider_reaches_nothing_and_passes() -> None:
    connection_create(tenant="acme", kind="llm", provider="rules")
    ok, said, _ = _tested("acme", "llm")
    assert ok and "offline" in said


def test_the_clients_read_the_tenants_row_before_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("RUNLEDGER_DATAFORSEO_LOGIN", "env-login")
    monkeypatch.setenv("RUNLEDGER_DATAFORSEO_PASSWORD", "env-password")
    monkeypatch.setenv("RUNLEDGER_ZENROWS_API_KEY", "env-zr-key")
    connection_create(tenant="acme", kind="dataforseo", key="row-login", secret="row-password")
    connection_create(tenant="acme", kind="zenrows", secret="row-zr-key", base_url="http://127.0.0.1:9/v1/")
    config_cache_clear()
    assert dataforseo_config_get(tenant="acme").login == "row-login"
    assert dataforseo_config_get(tenant="other").login == "env-login"
    assert zenrows_config_get(tenant="acme").api_key == "row-zr-key"
    made = clients("acme")
    assert made.dataforseo._auth == ("row-login", "row-password")
    assert made.zenrows is not None and made.zenrows.base_url == "http://127.0.0.1:9/v1/"
    assert clients("other").dataforseo._auth == ("env-login", "env-password")
    zr = zenrows_client("acme")
    assert zr is not None and zr._api_key == "row-zr-key"
    connection_set_enabled(tenant="acme", kind="zenrows", enabled=False)  # a disabled row is as if absent
    fallback = zenrows_client("acme")
    assert fallback is not None and fallback._api_key == "env-zr-key"
