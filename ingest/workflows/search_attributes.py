"""Search attribute values as the shipped workflows set them (`step.set_search_attributes`), so an
operator can type them into the instances list's `attr=key:value` filter.

That filter matches a value exactly and splits its field on spaces, so a value worth setting is
one token: ids and domains as they are, names folded to a slug (`Acme Logistics` →
`acme-logistics`). A value the engine would refuse (over 200 characters) is left out rather
than failing the run over a tag. Which workflow sets which keys: docs/engine-contract.md,
"Search attributes".
"""

from __future__ import annotations

import re

from ingest.engine.services.attributes import MAX_VALUE

_NOT_WORD = re.compile(r"[\W_]+")


def search_slug(name: str) -> str:
    """A name as one lower-case token: words joined by '-', letters of any script kept
    (`Acme Logistics, Inc.` → `acme-logistics-inc`, `Müller GmbH` → `müller-gmbh`)."""
    return _NOT_WORD.sub("-", str(name).casefold()).strip("-")


def searchable(**values: str | int | None) -> dict[str, str | int]:
    """The attributes worth setting: without the unknown (None or empty) and the over-long."""
    return {
        key: value
        for key, value in values.items()
        if value is not None and value != "" and len(str(value)) <= MAX_VALUE
    }
