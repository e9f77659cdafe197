"""Websocket routes (the dashboard's live consumers)."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
