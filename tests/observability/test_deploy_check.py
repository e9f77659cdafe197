"""`manage.py check --deploy` passes with the production settings docs/operators.md lists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "SECRET_KEY": "k3Y-" + "x9Qm2vLr8TzP4wNc7bHs1dFg6jKa5uYe0oIpZ3" * 2,
    "DEBUG": "0",
    "ALLOWED_HOSTS": "runledger.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://runledger.example.com",
    "RUNLEDGER_HTTPS": "1",
    "RUNLEDGER_HSTS_SECONDS": "31536000",
    "RUNLEDGER_HSTS_SUBDOMAINS": "1",
    "RUNLEDGER_HSTS_PRELOAD": "1",
    "RUNLEDGER_PROXY_SSL_HEADER": "1",
    "RUNLEDGER_SECRET_KEYS": "oxp6J3SoqUxkDRBOMrD0Ndq3v3b0dHd1Hk5uPEeQ7mw=",
    "RUNLEDGER_REQUIRE_SECRET_KEY": "1",
}


def _check(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUNLEDGER_", "SECRET_KEY", "DEBUG"))}
    clean["DATABASE_URL"] = f"sqlite:///{tmp_path}/check.sqlite3"
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.pure
def test_check_deploy_passes_with_the_documented_production_settings(tmp_path: Path) -> None:
    result = _check(PRODUCTION, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.pure
def test_check_deploy_fails_without_https_settings(tmp_path: Path) -> None:
    plain = {k: v for k, v in PRODUCTION.items() if not k.startswith("RUNLEDGER_")}
    result = _check(plain, tmp_path)
    assert result.returncode != 0
    assert "SESSION_COOKIE_SECURE" in result.stderr + result.stdout
