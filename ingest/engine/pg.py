"""PostgreSQL connection details for the engine's own connections (LISTEN)."""

from __future__ import annotations

from django.db import connection


def connection_string() -> str:
    params = connection.get_connection_params()
    parts = []
    for key in ("host", "port", "dbname", "user", "password"):
        value = params.get(key) or (params.get("database") if key == "dbname" else None)
        if value:
            parts.append(f"{key}={value}")
    return " ".join(parts)
