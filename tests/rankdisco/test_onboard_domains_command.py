"""`manage.py onboard_domains`: domains from arguments and a file, bad names refused, run once."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from ingest.engine.models import Budget, Instance

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_it_starts_one_onboarding_per_domain_and_refuses_names_that_are_not_domains(tmp_path: Path, capsys) -> None:
    listing = tmp_path / "domains.txt"
    listing.write_text(
        "# our clients\nglobex.example\n\nhttps://www.Acme.example/  # dup of the argument\nnot a domain\n"
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 name\\(s\\) are not domains"):
        call_command(
            "onboard_domains",
            "acme.example",
            "--file",
            str(listing),
            "--tenant",
            "acme",
            "--keyword-limit",
            "20",
            "--skip-brand-properties",
            "--no-progress",
            stdout=out,
            stderr=err,
        )
    assert "2 onboardings started, 0 already there" in out.getvalue()
    assert "'not a domain' is not a domain name" in err.getvalue()
    made = {i.id: i.params for i in Instance.objects.filter(workflow="domain-onboard")}
    assert set(made) == {"onboard-acme-acme-example", "onboard-acme-globex-example"}
    assert made["onboard-acme-acme-example"]["keyword_limit"] == 20
    assert made["onboard-acme-acme-example"]["skip_brand_properties"] is True
    assert Budget.objects.get(scope="service", key="dataforseo", period="day").limit == 10
    # Bulk work: below live traffic (priority 0), served round robin by tenant.
    assert set(Instance.objects.values_list("priority", "concurrency_key")) == {(-10, "acme")}
    capsys.readouterr()
    with pytest.raises(SystemExit):
        call_command("onboard_domains", "--help")
    assert "start at priority -10, below live traffic (priority 0)" in " ".join(capsys.readouterr().out.split())

    out = StringIO()
    call_command("onboard_domains", "acme.example", "--tenant", "acme", "--no-progress", stdout=out)
    assert "0 onboardings started, 1 already there" in out.getvalue()
    call_command("onboard_domains", "acme.example", "--tenant", "acme", "--again", "--no-progress", stdout=out)
    assert Instance.objects.filter(workflow="domain-onboard").count() == 3


def test_it_needs_a_domain_and_a_readable_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="name at least one domain"):
        call_command("onboard_domains", "--no-progress")
    with pytest.raises(CommandError, match="cannot read --file"):
        call_command("onboard_domains", "--file", str(tmp_path / "missing.txt"), "--no-progress")
    assert not Instance.objects.exists()
