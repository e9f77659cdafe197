"""Secrets at rest: the key list, sealing, the startup error, `up`'s key file and rotation."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from dashboard import config
from ingest.engine import secrets as sec
from ingest.pipelines.models import Connection
from ingest.pipelines.selectors import connection_by_webhook_key
from ingest.pipelines.services import connection_upsert

ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_a_sealed_value_reads_back_and_holds_no_clear_text() -> None:
    with override_settings(RUNLEDGER_SECRET_KEYS=[OLD]):
        sealed = sec.seal("hunter2-password")
        assert sealed.startswith("enc:") and "hunter2" not in sealed
        assert sec.unseal(sealed) == "hunter2-password"
        assert sec.seal("") == "" and sec.unseal("") == ""
        value = sec.seal_value({"a": [1, "x"]})
        assert sec.unseal_value(value) == {"a": [1, "x"]} and sec.public_value({"p": value}) == {"p": "redacted"}


def test_plain_text_or_an_unknown_key_is_refused_not_used() -> None:
    with override_settings(RUNLEDGER_SECRET_KEYS=[OLD]):
        sealed = sec.seal("x")
        with pytest.raises(sec.SecretUnreadable, match="plain text"):
            sec.unseal("not-a-token")
    with override_settings(RUNLEDGER_SECRET_KEYS=[NEW]), pytest.raises(sec.SecretUnreadable, match="secrets_rotate"):
        sec.unseal(sealed)


def test_without_a_key_sealing_raises_an_error_naming_the_variable() -> None:
    with (
        override_settings(RUNLEDGER_SECRET_KEYS=[]),
        pytest.raises(ImproperlyConfigured, match="RUNLEDGER_SECRET_KEYS"),
    ):
        sec.seal("x")


def test_production_settings_without_a_key_fail_at_startup(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured, match="RUNLEDGER_SECRET_KEYS is not set"):
        config.secret_keys({}, key_file=tmp_path / "none", required=True)
    env = {k: v for k, v in os.environ.items() if k != "RUNLEDGER_SECRET_KEYS"}
    env.update(
        RUNLEDGER_REQUIRE_SECRET_KEY="1", SECRET_KEY="x" * 50, DEBUG="0", DJANGO_SETTINGS_MODULE="dashboard.settings"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "RUNLEDGER_SECRET_KEYS is not set" in done.stderr


def test_the_key_file_is_read_unless_the_variable_is_set(tmp_path: Path) -> None:
    key_file = tmp_path / "secret-keys"
    key_file.write_text(OLD + "\n")
    assert config.secret_keys({}, key_file=key_file, required=False) == [OLD]
    assert config.secret_keys({"RUNLEDGER_SECRET_KEYS": f"{NEW}, {OLD}"}, key_file=key_file, required=False) == [
        NEW,
        OLD,
    ]
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db.sqlite3")}
    assert config.secret_key_file({}, sqlite, base_dir=ROOT) == tmp_path / "secret-keys"


def test_up_creates_a_private_key_file_and_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.management.commands.up import Command

    monkeypatch.delenv("RUNLEDGER_SECRET_KEYS", raising=False)
    key_file = tmp_path / "var" / "secret-keys"
    out = io.StringIO()
    with override_settings(RUNLEDGER_SECRET_KEYS=[], RUNLEDGER_SECRET_KEY_FILE=key_file):
        Command(stdout=out)._secret_key()
        from django.conf import settings

        assert [key_file.read_text().strip()] == settings.RUNLEDGER_SECRET_KEYS
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert str(key_file) in out.getvalue()
    Fernet(key_file.read_text().strip().encode())  # a real key


@pytest.mark.django_db
def test_rotation_re_encrypts_everything_so_the_old_key_can_be_dropped() -> None:
    from ingest.engine.models import Instance, Step
    from ingest.engine.testing import run_workflow
    from ingest.triggers.models import IngressSecret
    from ingest.triggers.services import ingress_secret_create
    from tests.engine.test_sensitive import Vault  # noqa: F401  (registers the workflow)

    with override_settings(RUNLEDGER_SECRET_KEYS=[OLD]):
        conn = connection_upsert(tenant="acme", kind="gong", key="k", secret="gong-secret", webhook_key="hook-1")
        ingress, _, hmac_secret = ingress_secret_create(tenant="acme")
        result = run_workflow("vault", params={"password": "pw-1"})
        assert result["status"] == "complete"
        old_step = _raw("engine_step", "result", "name = 'open'")
    out = io.StringIO()
    with override_settings(RUNLEDGER_SECRET_KEYS=[NEW, OLD]):
        call_command("secrets_rotate", stdout=out)
    assert "done:" in out.getvalue()
    with override_settings(RUNLEDGER_SECRET_KEYS=[NEW]):
        assert Connection.objects.get(pk=conn.pk).secret == "gong-secret"
        assert connection_by_webhook_key(kind="gong", key="hook-1") is not None
        assert IngressSecret.objects.get(pk=ingress.pk).hmac_secret == hmac_secret
        step = Step.objects.get(name="open")
        assert (
            sec.unseal_value(step.result) == {"secret": "pw-1"}
            and _raw("engine_step", "result", "name = 'open'") != old_step
        )
        inst = Instance.objects.get(workflow="vault")
        assert sec.unseal_keys(inst.params) == {"password": "pw-1"}


def _raw(table: str, column: str, where: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT CAST({column} AS TEXT) FROM {table} WHERE {where}")
        return cursor.fetchone()[0]
