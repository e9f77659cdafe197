"""`manage.py onboard_domains example.com other.example --tenant acme [--file domains.txt] [--wait]`

Starts one `domain-onboard` per domain (arguments, and/or a file with one domain a line; blank
lines and `#` comments skipped), with a progress bar. A domain already onboarded under the same
`--run` label is counted as already there; `--again` onboards every domain anew (its rows are
upserted). Creates the `dataforseo daily $10` budget when there is none. With `--wait`,
a second bar follows the onboardings until each has ended or paused for an operator (a worker
must be running). The onboardings (and their url-classify children) run at the backfill
priority, below live traffic (ingest/workflows/sharing.py).
A name that is not a domain is reported and started for nothing; the command then exits 1.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from tqdm import tqdm

from ingest.engine.models import FINISHED_STATUSES, Instance
from ingest.rankdisco.services import InvalidDomain, domain_name_normalize
from ingest.workflows.domain_onboard import domain_onboard_start
from ingest.workflows.domain_onboard.workflow import (
    LIMITS,
    MAX_LIMIT,
    SKIPS,
    dataforseo_budget_ensure,
)
from ingest.workflows.sharing import BACKFILL_PRIORITY


def read_domains(names: list[str], file: str | None) -> list[str]:
    found = list(names)
    if file:
        try:
            text = Path(file).read_text()
        except OSError as error:
            raise CommandError(f"cannot read --file {file!r}: {error.strerror}") from None
        found += [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return [name for name in found if name]


class Command(BaseCommand):
    help = (
        "Onboard RankDisco domains: start domain-onboard for each, with a progress bar. Bulk work: "
        f"the onboardings and their url-classify runs start at priority {BACKFILL_PRIORITY}, below "
        "live traffic (priority 0); tenants are served round robin either way."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("domains", nargs="*", help="domains to onboard (example.com)")
        parser.add_argument("--file", help="a file with one domain a line (# comments allowed)")
        parser.add_argument("--tenant", default="default", help="the tenant the domains belong to (default: default)")
        parser.add_argument("--run", default="", help="a label: the same label twice is already processed")
        parser.add_argument("--again", action="store_true", help="onboard again under a new label (now's time)")
        for name in LIMITS:
            parser.add_argument(
                f"--{name.replace('_', '-')}", dest=name, type=int, default=100, help=f"1 to {MAX_LIMIT} (default 100)"
            )
        for name in SKIPS:
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, action="store_true")
        parser.add_argument("--wait", action="store_true", help="follow the onboardings until they end")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        names = read_domains(options["domains"], options["file"])
        if not names:
            raise CommandError("name at least one domain (arguments or --file)")
        valid, invalid = [], []
        for name in names:
            try:
                valid.append(domain_name_normalize(name))
            except InvalidDomain as error:
                invalid.append(str(error))
        valid = list(dict.fromkeys(valid))
        run = timezone.now().strftime("%Y%m%d%H%M%S") if options["again"] else options["run"]
        extra = {name: options[name] for name in (*LIMITS, *SKIPS)}
        if dataforseo_budget_ensure(actor="onboard_domains"):
            self.stdout.write("created the budget dataforseo per day: $10.00 (approval on breach)")
        started: list[str] = []
        already = 0
        with tqdm(total=len(valid), desc="starting", unit="domain", disable=options["no_progress"]) as bar:
            for name in valid:
                instance_id, created = domain_onboard_start(
                    options["tenant"], name, run=run, actor="onboard_domains", priority=BACKFILL_PRIORITY, **extra
                )
                started.append(instance_id)
                already += not created
                bar.update(1)
        self.stdout.write(f"{len(valid) - already} onboardings started, {already} already there")
        if options["wait"]:
            self._follow(started, disable=options["no_progress"])
        for message in invalid:
            self.stderr.write(f"skipped: {message}")
        if invalid:
            raise CommandError(f"{len(invalid)} name(s) are not domains; nothing was started for them")

    def _follow(self, ids: list[str], *, disable: bool) -> None:
        with tqdm(total=len(ids), desc="onboarded", unit="domain", disable=disable) as bar:
            done = 0
            while done < len(ids):
                statuses = dict(Instance.objects.filter(id__in=ids).values_list("id", "status"))
                # A paused onboarding waits for an operator (a balance, a budget): not for this command.
                now_done = sum(1 for s in statuses.values() if s in FINISHED_STATUSES or s == "paused")
                bar.update(now_done - done)
                done = now_done
                if done < len(ids):
                    time.sleep(1.0)
        counts: dict[str, int] = {}
        for status in Instance.objects.filter(id__in=ids).values_list("status", flat=True):
            counts[status] = counts.get(status, 0) + 1
        self.stdout.write("ended: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
