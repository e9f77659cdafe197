"""The runs list's filters as the URL carries them: workflow, status, tenant, time range, id
prefix, text, step, search attributes and the sort, parsed with every problem named, and written
back to a query string. Pure: nothing here reads the database."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.http import QueryDict
from django.utils.dateparse import parse_datetime

from dashboard.attr_query import AttrTerm, parse_attr_query
from dashboard.query_params import QueryReader, shown
from ingest.engine.models import Instance, Status

RANGES = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}

SORTS = {
    "created": "created_at",
    "started": "started_at",
    "updated": "updated_at",
    "duration": "duration",
    "cost": "cost",
}
SORT_LABELS = {
    "-created": "newest first",
    "created": "oldest first",
    "-started": "started, latest first",
    "started": "started, earliest first",
    "-updated": "updated, latest first",
    "updated": "updated, earliest first",
    "-duration": "longest first",
    "duration": "shortest first",
    "-cost": "costliest first",
    "cost": "cheapest first",
}
DEFAULT_SORT = "-created"
ATTR_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_PAGE = 200  # numbered pages (orders other than newest first) stop here: narrow the filters


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters, parsed from and written back to the URL query.

    `problems` names every value that did not parse (an unknown status, a bad attribute, an
    unknown sort): the page says so and shows nothing rather than a wider list, and a bulk action
    refuses to start from it."""

    workflow: str = ""
    statuses: tuple[str, ...] = ()
    tenant: str = ""
    range: str = ""
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str = ""
    text: str = ""
    step: str = ""
    attrs: tuple[AttrTerm, ...] = ()
    # Only instances that are nobody's fan-out item or child run (no parent): the default, so a
    # fan-out of 10,000 items does not bury the runs that started it. `parent` lists one run's
    # items and children, whatever this says.
    top_level: bool = True
    parent: str = ""
    sort: str = DEFAULT_SORT
    problems: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: QueryDict, *, paging: bool = True) -> InstanceFilters:
        """The filters of the list page's `query`, whose paging (page, after, before) is checked
        too, so a bad one is named with the filters rather than read as the first page. The live
        feed's subscription reuses `after` for its history cursor: it passes paging=False."""
        problems: list[str] = []
        statuses: list[str] = []
        for raw in query.getlist("status"):
            for value in (v.strip() for v in raw.split(",")):
                if value in Status.values:
                    statuses.append(value)
                elif value:
                    problems.append(f"status {value[:40]!r} is not a status (one of {', '.join(Status.values)})")
        rng = query.get("range", "")
        if rng and rng not in RANGES:
            problems.append(f"range {rng[:20]!r} is not one of {', '.join(RANGES)}")
        sort = query.get("sort", "").strip() or DEFAULT_SORT
        if sort.lstrip("-") not in SORTS and not attr_sort_key(sort):
            problems.append(f"sort {sort[:40]!r} is not one of {', '.join(SORT_LABELS)} or attr.<key>")
            sort = DEFAULT_SORT
        attrs, attr_problems = parse_attr_query(query.getlist("attr"))
        problems += attr_problems
        reader = QueryReader(query)
        top = [v.strip() for v in query.getlist("top") if v.strip()]
        for value in top:
            if value not in ("0", "1"):
                reader.problem(
                    f"top={shown(value)} is not 1 (top-level runs only, the default) or 0 (with "
                    "fan-out items and child runs)"
                )
        since, until = reader.when("since"), reader.when("until")
        if paging:
            reader.integer("page", default=1, low=1, high=MAX_PAGE)
        for name in ("after", "before") if paging else ():
            if reader.raw(name) and Cursor.decode(reader.raw(name)) is None:
                reader.problem(
                    f"{name}={shown(reader.raw(name))} is not a page cursor of this list; "
                    "follow the list's own Newer/Older links"
                )
        problems += reader.problems
        return cls(
            workflow=query.get("workflow", "").strip()[:200],
            statuses=tuple(dict.fromkeys(statuses)),
            tenant=query.get("tenant", "").strip()[:100],
            range=rng if rng in RANGES else "",
            since=since,
            until=until,
            id_prefix=query.get("id", "").strip()[:100],
            text=query.get("q", "").strip()[:200],
            step=query.get("step", "").strip()[:256],
            attrs=attrs,
            # A checkbox sends top=1 beside its hidden top=0: any 1 means on; absent means on.
            top_level="1" in top or not top,
            parent=query.get("parent", "").strip()[:100],
            sort=sort,
            problems=tuple(problems),
        )

    def as_params(self, *, sort: bool = True) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        if self.workflow:
            pairs.append(("workflow", self.workflow))
        pairs += [("status", s) for s in self.statuses]
        for key, value in (
            ("tenant", self.tenant),
            ("range", self.range),
            ("id", self.id_prefix),
            ("q", self.text),
            ("step", self.step),
        ):
            if value:
                pairs.append((key, value))
        if self.since:
            pairs.append(("since", self.since.strftime("%Y-%m-%dT%H:%M")))
        if self.until:
            pairs.append(("until", self.until.strftime("%Y-%m-%dT%H:%M")))
        pairs += [("attr", t.text) for t in self.attrs]
        if self.parent:
            pairs.append(("parent", self.parent))
        if not self.top_level:
            pairs.append(("top", "0"))
        if sort and self.sort != DEFAULT_SORT:
            pairs.append(("sort", self.sort))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.as_params())

    @property
    def active(self) -> bool:
        """Some filter narrows the list (the top-level toggle alone does not count: off, it widens)."""
        return any(k != "top" for k, _ in self.as_params(sort=False))

    @property
    def keyset(self) -> bool:
        """The default order pages by keyset; every other order by page number."""
        return self.sort == DEFAULT_SORT

    @property
    def attr_text(self) -> str:
        return " ".join(t.text for t in self.attrs)

    @property
    def attr_keys(self) -> list[str]:
        """The keys the attribute filters name, each once (the sort offers them)."""
        return list(dict.fromkeys(t.key for t in self.attrs))

    @property
    def hides_items(self) -> bool:
        """Fan-out items and child runs are left out: top-level only, and no parent asked for."""
        return self.top_level and not self.parent


@dataclass(frozen=True)
class Cursor:
    """A keyset position in the ledger's (created_at desc, id desc) order."""

    created_at: datetime
    id: str

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), self.id]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor | None:
        if not token:
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            created, ident = json.loads(raw)
            when = parse_datetime(created)
        except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
            return None
        if when is None or not isinstance(ident, str):
            return None
        return cls(when, ident)

    @classmethod
    def of(cls, row: Instance) -> Cursor:
        return cls(row.created_at, row.id)


def attr_sort_key(sort: str) -> str:
    """The attribute key of an `attr.<key>` sort (either direction), or "" for any other sort."""
    key = sort.lstrip("-").removeprefix("attr.") if sort.lstrip("-").startswith("attr.") else ""
    return key if ATTR_KEY.match(key) else ""
