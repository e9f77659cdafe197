"""What a channel's settings must hold, as the service checks them for the dashboard's forms and
the API alike (the API's schema declares the same: dashboard/api/alert_schemas.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.alerts.errors import InvalidChannel, InvalidRule
from ingest.alerts.services import _name_checked, channel_clean

EMAIL = {"to": ["ops@example.com"]}


@pytest.mark.parametrize(
    ("port", "kept"), [(25, 25), (25.0, 25), ("587", 587), (" 465 ", 465), (65535, 65535), (None, None), ("", None)]
)
def test_an_smtp_port_is_kept_as_a_number(port: Any, kept: int | None) -> None:
    config, _ = channel_clean(
        kind="email", config={**EMAIL, "smtp": {"host": "mail.example.com", "port": port}}, secrets={}
    )
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


@pytest.mark.parametrize(
    "url",
    [
        "https://b:12663*",
        " https://hooks.example.com/x",
        "https://hooks.example.com/a b",
        "https://hooks.example.com:80x/",
        "ftp://hooks.example.com/",
        "https://user:pw@h.example/",
    ],
)
def test_a_webhook_url_outside_the_schemas_pattern_is_refused(url: str) -> None:
    """The API's schema states URL_PATTERN; the strict run sent `https://b:12663*`, which the
    service took while the schema refused it."""
    import re

    from ingest.sources.notify import URL_PATTERN

    assert re.match(URL_PATTERN, url) is None
    with pytest.raises(InvalidChannel):
        channel_clean(kind="slack", config={}, secrets={"url": url})


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T0/B0/abc", "http://127.0.0.1:8080/hook?x=1#top"])
def test_a_webhook_url_inside_the_pattern_is_taken(url: str) -> None:
    import re

    from ingest.sources.notify import URL_PATTERN

    assert re.match(URL_PATTERN, url) is not None
    _, secrets = channel_clean(kind="slack", config={}, secrets={"url": url})
    assert secrets["url"] == url
