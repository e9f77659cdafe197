"""Configuration read from the environment, with errors that name the variable at fault.

Pure functions of a mapping so they can be tested without touching os.environ.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

N = TypeVar("N", int, float)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_float(env: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    return _env_number(env, name, default, minimum=minimum, parse=float, kind="a number")


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    return _env_number(env, name, default, minimum=minimum, parse=int, kind="an integer")


def _env_number(
    env: Mapping[str, str], name: str, default: N, *, minimum: N, parse: Callable[[str], N], kind: str
) -> N:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_caps(env: Mapping[str, str], name: str) -> dict[str, int]:
    """`gong-ingest=4,domain-onboard=2` as {"gong-ingest": 4, "domain-onboard": 2}; unset: {}.
    A key may name one tenant of a workflow, `gong-ingest/acme=8`, kept as "gong-ingest/acme"."""
    caps: dict[str, int] = {}
    for part in (p.strip() for p in env.get(name, "").split(",")):
        if not part:
            continue
        key, sep, raw = part.partition("=")
        try:
            value = int(raw.strip()) if sep and key.strip() else 0
        except ValueError:
            value = 0
        if value < 1:
            raise ImproperlyConfigured(
                f"{name}: {part!r} is not workflow=N or workflow/tenant=N with N a whole number of at "
                "least 1, e.g. gong-ingest=4,domain-onboard=2,gong-ingest/acme=8"
            )
        caps[key.strip()] = value
    return caps


def env_rate_limits(env: Mapping[str, str], name: str) -> dict[str, dict[str, float | int]]:
    """`gong=3:1,dataforseo=30:200` (calls a second : burst) as
    {"gong": {"per_second": 3.0, "burst": 1}, ...}; unset: {} (the code's defaults apply)."""
    limits: dict[str, dict[str, float | int]] = {}
    for part in (p.strip() for p in env.get(name, "").split(",")):
        if not part:
            continue
        provider, sep, raw = part.partition("=")
        rate, colon, burst = raw.partition(":")
        try:
            per_second, most = float(rate), int(burst)
        except ValueError:
            per_second, most = 0.0, 0
        if not (sep and colon and provider.strip()) or not 0 < per_second < float("inf") or most < 1:
            raise ImproperlyConfigured(
                f"{name}: {part!r} is not provider=R:B with R calls a second (above 0) and B a burst "
                "of at least 1, e.g. gong=3:1,dataforseo=30:200"
            )
        limits[provider.strip()] = {"per_second": per_second, "burst": most}
    return limits


def env_divisor_of_hour(env: Mapping[str, str], name: str, default: int) -> int:
    """Whole minutes that divide an hour (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60): a cron
    `*/N` of another N fires unevenly across the hour."""
    value = env_int(env, name, default, minimum=1)
    if 60 % value:
        raise ImproperlyConfigured(
            f"{name}={value} does not divide an hour; use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60"
        )
    return value


def database_config(env: Mapping[str, str], *, base_dir: Path) -> dict[str, Any]:
    """DATABASE_URL, or a SQLite file under var/ (the embedded default)."""
    raw = env.get("DATABASE_URL", "").strip()
    if not raw:
        raw = f"sqlite:///{base_dir / 'var' / 'runledger.sqlite3'}"
    try:
        # Persistent connections: a PostgreSQL backend per request or per worker turn would cost
        # more than the work; health checks drop ones the server closed.
        config: dict[str, Any] = dict(dj_database_url.parse(raw, conn_max_age=600, conn_health_checks=True))
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(
            f"DATABASE_URL={raw!r} is not a database URL Runledger understands ({exc}); "
            "use sqlite:///path/to/file.sqlite3 or postgres://user@host:5432/dbname"
        ) from None
    engine = config.get("ENGINE", "")
    if engine == "django.db.backends.sqlite3":
        config.setdefault("OPTIONS", {})
        # IMMEDIATE takes the write lock at BEGIN, so two writers queue on busy_timeout instead
        # of failing with "database is locked" when a read transaction upgrades to a write.
        config["OPTIONS"].update(
            {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": ("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"),
            }
        )
        name = str(config.get("NAME", ""))
        if name and name != ":memory:":
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        # Tests get a file, not Django's shared-cache in-memory database: shared cache locks
        # whole tables and ignores busy_timeout, which breaks tests where worker threads write.
        # In the temporary directory, never in the checkout (tests/conftest.py clones a migrated
        # template there for each test process).
        config["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"runledger-test-{os.getpid()}.sqlite3")}
    elif engine == "django.db.backends.postgresql":
        config.setdefault("OPTIONS", {})
        pool = env_int(env, "RUNLEDGER_DB_POOL", 0, minimum=0)
        if pool:
            # Web processes (dashboard/asgi.py turns this on): daphne runs each request's sync
            # code on a thread of its own, so a thread-local persistent connection is never
            # reused and every request paid for a new PostgreSQL backend (about 2/3 of an
            # ingress request's cost). The pool hands a connection to each request and takes it
            # back when the request ends (CONN_MAX_AGE must be 0 with a pool).
            # The pool checks a connection it hands out unless it served a request in the last
            # half second (dashboard/db_pool.py, through the backend dashboard/postgres): Django's
            # check is a round trip per request.
            config["ENGINE"] = "dashboard.postgres"
            config["CONN_MAX_AGE"] = 0
            config["OPTIONS"]["pool"] = {"min_size": min(2, pool), "max_size": pool, "timeout": 10.0}
    else:
        raise ImproperlyConfigured(
            f"DATABASE_URL={raw!r} names the {engine or 'unknown'} backend; Runledger supports "
            "SQLite (embedded default) and PostgreSQL"
        )
    config["ATOMIC_REQUESTS"] = False
    return config


def redis_url(env: Mapping[str, str]) -> str | None:
    raw = env.get("REDIS_URL", "").strip()
    if not raw:
        return None
    if not raw.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"REDIS_URL={raw!r} must start with redis://, rediss:// or unix://")
    return raw


def channel_layers(redis: str | None, *, prefix: str = "") -> dict[str, Any]:
    """channels-redis when REDIS_URL is set, else the in-process layer (see settings). `prefix`
    (RUNLEDGER_CHANNEL_PREFIX) keeps installations that share one Redis apart: each one's groups
    and flushes stay under its own key prefix."""
    if redis:
        # redis-py 8 reads with a 5 s socket timeout by default, shorter than the layer's
        # blocking 5 s BZPOPMIN: every idle websocket consumer crashed after 5 s. 15 s is above
        # the pop's timeout and still notices a dead server.
        host = {"address": redis, "socket_timeout": 15, "socket_connect_timeout": 5}
        return {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [host], "capacity": 1000, "prefix": prefix or "asgi"},
            }
        }
    # Capacity above the default 100: a socket's queue must not drop a burst before it is coalesced.
    return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}


def secret_key_file(env: Mapping[str, str], database: Mapping[str, Any], *, base_dir: Path) -> Path:
    """Where the embedded default keeps its secret key: RUNLEDGER_SECRET_KEY_FILE, else beside the
    SQLite file, else var/ (`manage.py up` creates it; docs/operators.md "Configuration")."""
    raw = env.get("RUNLEDGER_SECRET_KEY_FILE", "").strip()
    if raw:
        return Path(raw)
    name = str(database.get("NAME") or "")
    if database.get("ENGINE") == "django.db.backends.sqlite3" and name and name != ":memory:":
        return Path(name).parent / "secret-keys"
    return base_dir / "var" / "secret-keys"


def secret_keys(env: Mapping[str, str], *, key_file: Path, required: bool) -> list[str]:
    """RUNLEDGER_SECRET_KEYS (comma-separated Fernet keys, the first encrypts), else the key file.

    `required` (production: RUNLEDGER_REQUIRE_SECRET_KEY=1) makes a missing key a startup error;
    otherwise the first use of a secret raises one (ingest.engine.secrets), never plain text.
    """
    raw = env.get("RUNLEDGER_SECRET_KEYS", "").strip()
    if not raw and not required and key_file.is_file():
        raw = key_file.read_text().strip()
    keys = [k.strip() for k in raw.replace("\n", ",").split(",") if k.strip()]
    if not keys and required:
        raise ImproperlyConfigured(
            "RUNLEDGER_SECRET_KEYS is not set: secrets at rest (connection credentials, ingress HMAC "
            "secrets, sensitive step results) are encrypted with it. Set one or more comma-separated "
            "Fernet keys (the first encrypts); make one with `python -c 'from cryptography.fernet "
            "import Fernet; print(Fernet.generate_key().decode())'`"
        )
    return keys
