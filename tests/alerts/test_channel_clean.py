"""What a channel's settings must hold, as the service checks them for the dashboard's forms and
the API alike (the API's schema declares the same: dashboard/api/alert_schemas.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.alerts.errors import InvalidChannel, InvalidRule
from ingest.alerts.services import _name_checked, channel_clean

EMAIL = {"to": ["ops@example.com"]}


@pytest.mark.parametrize(("port", "kept"), [(25, 25), (25.0, 25), ("587", 587), (" 465 ", 465), (65535, 65535),
                                            (None, None), ("", None)])
def test_an_smtp_port_is_kept_as_a_number(port: Any, kept: int | None) -> None:
    config, _ = channel_clean(kind="email", config={**EMAIL, "smtp": {"host": "mail.example.com", "port": port}},
                              secrets={})
    assert config["smtp"]["host"] == "mail.example.com"
    assert config["smtp"].get("port") == kept


@pytest.mark.parametrize("port", [0, 65536, -25, 25.5, "25a", True, [25], "1e3"])
def test_an_smtp_port_outside_1_to_65535_is_refused_by_name(port: Any) -> None:
    with pytest.raises(InvalidChannel, match=r"smtp port .* is not a port number \(1 to 65535\)"):
        channel_clean(kind="email", config={**EMAIL, "smtp": {"host": "mail.example.com", "port": port}}, secrets={})


@pytest.mark.parametrize("name", ["\x0b", "\x1e", " \t", "\u3000", "\x85"])
def test_a_name_of_spaces_alone_is_refused(name: str) -> None:
    with pytest.raises(InvalidRule, match="1 to 100 characters besides spaces; got 0"):
        _name_checked(name, InvalidRule)


def test_a_name_is_trimmed() -> None:
    assert _name_checked("\u3000 page ops\x1e", InvalidRule) == "page ops"
