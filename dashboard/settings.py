"""Runledger settings. Everything that differs between deployments comes from the environment.

Variables (all optional): DATABASE_URL, REDIS_URL, SECRET_KEY, DEBUG, ALLOWED_HOSTS, TIME_ZONE,
RUNLEDGER_LEASE_SECONDS, RUNLEDGER_POLL_SECONDS, RUNLEDGER_MARKER_MS, RUNLEDGER_DEFERRED_LANE,
RUNLEDGER_PARALLEL_THREADS, RUNLEDGER_MAX_STEPS, RUNLEDGER_MAX_BODY_BYTES, RUNLEDGER_MAX_JSON_DEPTH,
RUNLEDGER_MAX_NUMBER_DIGITS, RUNLEDGER_MAX_STRING_CHARS, RUNLEDGER_MAX_JSON_ITEMS,
RUNLEDGER_HOOK_MAX_RECORDS, RUNLEDGER_SECRET_KEYS, RUNLEDGER_PROGRESS_SECONDS,
RUNLEDGER_SECRET_KEY_FILE, RUNLEDGER_STEP_LOG_LINES, RUNLEDGER_STEP_LOG_BYTES, RUNLEDGER_STEP_LOG_SECONDS.
docs/operators.md ("Configuration") describes each.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from dashboard import config
from dashboard.observability import logconfig

BASE_DIR = Path(__file__).resolve().parent.parent
ENV = os.environ

DEBUG = config.env_bool(ENV, "DEBUG", False)
SECRET_KEY = ENV.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and config.env_bool(ENV, "RUNLEDGER_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured(
            "SECRET_KEY is not set; generate one with `python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
        )
    # A development key: fine for the embedded default, refused when RUNLEDGER_REQUIRE_SECRET_KEY=1.
    SECRET_KEY = "runledger-dev-insecure-key-set-SECRET_KEY-in-production"

ALLOWED_HOSTS = [
    h.strip() for h in ENV.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h.strip()
]
CSRF_FAILURE_VIEW = "dashboard.views.errors.csrf_failure"  # the app's layout, not Django's bare page
CSRF_TRUSTED_ORIGINS = [o.strip() for o in ENV.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# A `manage.py worker` process serves no page, and its start is time its instances wait
# (bench/worker_boot.py): it leaves out daphne's app (which only replaces `runserver`, and
# installs Twisted's reactor when imported) and the live pages' renderers (dashboard/apps.py).
# Read from the command line: settings are loaded before Django knows the command.
RUNLEDGER_WORKER_PROCESS = Path(sys.argv[0]).name in ("manage.py", "django-admin") and sys.argv[1:2] == ["worker"]

INSTALLED_APPS = [
    *([] if RUNLEDGER_WORKER_PROCESS else ["daphne"]),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "ninja",  # /api/docs renders Swagger UI from the package's own static files, not from a CDN
    "ingest.engine",
    "ingest.triggers",
    "ingest.alerts",
    "ingest.rankdisco",
    "ingest",
    "ingest.classify",
    "dashboard",
    "dashboard.observability",
]

MIDDLEWARE = [
    "dashboard.observability.ingress.IngressCountMiddleware",  # outermost: counts every ingress answer
    "dashboard.observability.middleware.TraceContextMiddleware",  # log lines carry the traceparent's id
    "django.middleware.security.SecurityMiddleware",
    "dashboard.guard.ErrorEnvelopeMiddleware",  # every error under /api/ and /hooks/ is JSON
    "dashboard.unavailable.DatabaseUnavailableMiddleware",  # the database failing: a 503, not a 500
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "dashboard.guard.InputGuardMiddleware",  # size, NUL, media type, JSON limits: a 4xx, not a 500
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "dashboard.flash.LazyMessageMiddleware",  # Django's, its storage built only when a request uses it
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "dashboard.vary.VaryOnHtmxMiddleware",  # a page and its htmx fragment share a URL, not a cache entry
]

# Behind HTTPS in production (docs/operators.md "Running in production"): secure cookies, a redirect to
# https (not for the probes and the scrape, which load balancers call over plain HTTP), HSTS.
# Off by default: the embedded default serves http://127.0.0.1:8000.
RUNLEDGER_HTTPS = config.env_bool(ENV, "RUNLEDGER_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = RUNLEDGER_HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = config.env_int(ENV, "RUNLEDGER_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = config.env_bool(ENV, "RUNLEDGER_HSTS_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = config.env_bool(ENV, "RUNLEDGER_HSTS_PRELOAD", False)
if config.env_bool(ENV, "RUNLEDGER_PROXY_SSL_HEADER", False):  # the proxy sets X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": config.database_config(ENV, base_dir=BASE_DIR)}
# Keys that encrypt secrets at rest (ingest/engine/secrets.py; docs/secrets.md). In production
# (RUNLEDGER_REQUIRE_SECRET_KEY=1) a missing RUNLEDGER_SECRET_KEYS stops the process here; the
# embedded default reads the key file `manage.py up` creates.
RUNLEDGER_SECRET_KEY_FILE = config.secret_key_file(ENV, DATABASES["default"], base_dir=BASE_DIR)
RUNLEDGER_SECRET_KEYS = config.secret_keys(
    ENV,
    key_file=RUNLEDGER_SECRET_KEY_FILE,
    required=not DEBUG and config.env_bool(ENV, "RUNLEDGER_REQUIRE_SECRET_KEY", False),
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The covering indexes (INCLUDE columns, engine 0016/0018) are a PostgreSQL read path; on SQLite
# Django builds them without the extra columns, which is what the embedded default wants, so
# its warning about that would only greet every `migrate` and `manage.py up` on SQLite.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

REDIS_URL = config.redis_url(ENV)
# Web and worker processes never talk through the channel layer: live updates follow the history
# table (dashboard/live), so the in-memory layer serves one web process; Redis shares it.
CHANNEL_LAYERS = config.channel_layers(REDIS_URL, prefix=ENV.get("RUNLEDGER_CHANNEL_PREFIX", "").strip())

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = ENV.get("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise expects it; `collectstatic` fills it in production
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# The engine's knobs (the engine reads them from django.conf.settings; docs/operators.md "Configuration").
RUNLEDGER_LEASE_SECONDS = config.env_float(ENV, "RUNLEDGER_LEASE_SECONDS", 30.0, minimum=1.0)
RUNLEDGER_POLL_SECONDS = config.env_float(ENV, "RUNLEDGER_POLL_SECONDS", 1.0, minimum=0.01)
# A step still running after this many milliseconds gets its start marker written (PostgreSQL);
# a quicker one is written once, complete (ingest/engine/runtime/markers.py).
RUNLEDGER_MARKER_MS = config.env_float(ENV, "RUNLEDGER_MARKER_MS", 100.0, minimum=0.0)
# At most one `ctx.progress` report per step attempt this often (ingest/engine/runtime/progress.py).
RUNLEDGER_PROGRESS_SECONDS = config.env_float(ENV, "RUNLEDGER_PROGRESS_SECONDS", 1.0, minimum=0.0)
# What a step attempt logged is kept with it: its last N lines, at most N bytes of them; an attempt
# running longer than RUNLEDGER_STEP_LOG_SECONDS has its lines written (and pushed live) that often
# while it runs (ingest/engine/runtime/steplog.py).
RUNLEDGER_STEP_LOG_LINES = config.env_int(ENV, "RUNLEDGER_STEP_LOG_LINES", 200, minimum=1)
RUNLEDGER_STEP_LOG_BYTES = config.env_int(ENV, "RUNLEDGER_STEP_LOG_BYTES", 32768, minimum=256)
RUNLEDGER_STEP_LOG_SECONDS = config.env_float(ENV, "RUNLEDGER_STEP_LOG_SECONDS", 1.0, minimum=0.1)
# Concurrent instances' step and instance completions share one transaction per batch
# (PostgreSQL; ingest/engine/writes/commits.py). Off: one transaction per write, as on SQLite.
RUNLEDGER_GROUP_COMMIT = config.env_bool(ENV, "RUNLEDGER_GROUP_COMMIT", True)
# How many deferred steps (checkpoint="deferred") a process runs at once; 0 (the default): no
# limit (ingest/engine/runtime/lane.py).
RUNLEDGER_DEFERRED_LANE = config.env_int(ENV, "RUNLEDGER_DEFERRED_LANE", 0, minimum=0)
# Threads per process that help run parallel groups of steps (step.all); each keeps a database
# connection once it has run a step (docs/engine-contract.md, connection sizing).
RUNLEDGER_PARALLEL_THREADS = config.env_int(ENV, "RUNLEDGER_PARALLEL_THREADS", 8, minimum=1)
# Steps one instance may run (every step.do, sleep, wait and child counts); the next one fails
# the instance with StepLimitExceeded. A runaway loop stops here instead of growing the ledger.
RUNLEDGER_MAX_STEPS = config.env_int(ENV, "RUNLEDGER_MAX_STEPS", 10_000, minimum=1)
# Extra modules whose workflows every process registers (comma-separated), beside ingest.workflows.
RUNLEDGER_WORKFLOW_MODULES = [m.strip() for m in ENV.get("RUNLEDGER_WORKFLOW_MODULES", "").split(",") if m.strip()]
# The circuit breaker of every outbound call a step makes, one per provider and tenant
# (ingest/sources/breakers.py): `THRESHOLD` failures (network errors, 5xx) within `WINDOW` s open
# it; then no call goes until `COOLDOWN` s have passed and one probe does; a probe that has not
# reported after `PROBE_TIMEOUT` s (its worker died) lets the next caller probe. 0 turns them off.
RUNLEDGER_BREAKER_THRESHOLD = config.env_int(ENV, "RUNLEDGER_BREAKER_THRESHOLD", 5, minimum=0)
RUNLEDGER_BREAKER_WINDOW = config.env_float(ENV, "RUNLEDGER_BREAKER_WINDOW", 60.0, minimum=0.1)
RUNLEDGER_BREAKER_COOLDOWN = config.env_float(ENV, "RUNLEDGER_BREAKER_COOLDOWN", 30.0, minimum=0.1)
RUNLEDGER_BREAKER_PROBE_TIMEOUT = config.env_float(ENV, "RUNLEDGER_BREAKER_PROBE_TIMEOUT", 120.0, minimum=0.1)
# How long domain-onboard serves a DataForSEO answer again instead of paying for it (per tenant,
# endpoint and task; ingest/rankdisco/answer_cache.py); 0 turns the cache off.
RUNLEDGER_DATAFORSEO_CACHE_HOURS = config.env_float(ENV, "RUNLEDGER_DATAFORSEO_CACHE_HOURS", 24.0, minimum=0.0)
# Per-tenant caps on the shipped workflows' running instances: "gong-ingest=4,domain-onboard=2"
# (ingest/workflows/sharing.py); a workflow left out has no cap (its tenants are still served
# round robin).
RUNLEDGER_TENANT_CONCURRENCY = config.env_caps(ENV, "RUNLEDGER_TENANT_CONCURRENCY")
# Outbound rate limits shared by every worker through the token buckets (ingest/sources/outbound.py):
# "gong=3:1,dataforseo=30:200" is calls a second and burst per provider, over the code's defaults
# (those two); a connection's `rate_limit` option wins over both.
RUNLEDGER_RATE_LIMITS = config.env_rate_limits(ENV, "RUNLEDGER_RATE_LIMITS")
# The scheduled pulls that start what lost webhooks did not (ingest/workflows/reconcile.py):
# every N minutes per tenant, re-reading the last M minutes of Gong calls (by start time: Gong
# lists a call once its recording is processed) and of Salesforce changes (by SystemModstamp).
RUNLEDGER_RECONCILE_MINUTES = config.env_divisor_of_hour(ENV, "RUNLEDGER_RECONCILE_MINUTES", 5)
RUNLEDGER_RECONCILE_GONG_LOOKBACK_MINUTES = config.env_int(
    ENV, "RUNLEDGER_RECONCILE_GONG_LOOKBACK_MINUTES", 180, minimum=1
)
RUNLEDGER_RECONCILE_SALESFORCE_LOOKBACK_MINUTES = config.env_int(
    ENV, "RUNLEDGER_RECONCILE_SALESFORCE_LOOKBACK_MINUTES", 10, minimum=1
)
# Prices usage when a step records a cost without an amount (the pipelines' price table, then list prices).
# Where retention writes archived instances (gzip JSON lines, one file per workflow and day).
RUNLEDGER_ARCHIVE_DIR = Path(ENV.get("RUNLEDGER_ARCHIVE_DIR", "") or BASE_DIR / "var" / "archive")
RUNLEDGER_PRICER = ENV.get("RUNLEDGER_PRICER", "ingest.pipelines.pricer.price_usage")
# Alerts and callbacks (ingest/alerts): links in messages, the sender, the delivery retries.
# Email goes through Django's mail backend (EMAIL_BACKEND, EMAIL_HOST...) unless a channel
# names its own SMTP server.
RUNLEDGER_BASE_URL = ENV.get("RUNLEDGER_BASE_URL", "")
RUNLEDGER_ALERT_SENDER = ENV.get("RUNLEDGER_ALERT_SENDER", "runledger@localhost")
RUNLEDGER_DELIVERY_RETRY_DELAY = ENV.get("RUNLEDGER_DELIVERY_RETRY_DELAY", "2 seconds")
EMAIL_BACKEND = ENV.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = ENV.get("EMAIL_HOST", "localhost")
EMAIL_PORT = config.env_int(ENV, "EMAIL_PORT", 25, minimum=1)

# What one request may carry (ingest/triggers/limits.py; docs/operators.md "Configuration"). Checked
# before parsing where possible, at every door: signed ingress, the REST API, webhooks, forms.
RUNLEDGER_MAX_BODY_BYTES = config.env_int(ENV, "RUNLEDGER_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
RUNLEDGER_MAX_JSON_DEPTH = config.env_int(ENV, "RUNLEDGER_MAX_JSON_DEPTH", 32, minimum=2)
RUNLEDGER_MAX_NUMBER_DIGITS = config.env_int(ENV, "RUNLEDGER_MAX_NUMBER_DIGITS", 40, minimum=19)
RUNLEDGER_MAX_STRING_CHARS = config.env_int(ENV, "RUNLEDGER_MAX_STRING_CHARS", 256 * 1024, minimum=256)
RUNLEDGER_MAX_JSON_ITEMS = config.env_int(ENV, "RUNLEDGER_MAX_JSON_ITEMS", 10_000, minimum=100)
# Records one webhook post may start (CDC recordIds across its events, Outbound notifications).
RUNLEDGER_HOOK_MAX_RECORDS = config.env_int(ENV, "RUNLEDGER_HOOK_MAX_RECORDS", 200, minimum=1)
# Django's own cap on a body read into memory: the same limit, so a form is refused as a 413 too.
DATA_UPLOAD_MAX_MEMORY_SIZE = RUNLEDGER_MAX_BODY_BYTES

# /metrics: a bearer token, or client addresses allowed without one (docs/observability.md).
RUNLEDGER_METRICS_TOKEN = ENV.get("RUNLEDGER_METRICS_TOKEN", "")
RUNLEDGER_METRICS_ALLOW = [
    a.strip() for a in ENV.get("RUNLEDGER_METRICS_ALLOW", "127.0.0.1,::1").split(",") if a.strip()
]
# /readyz fails when instances are overdue this long with no worker seen; 0 turns that check off.
RUNLEDGER_READY_WORKER_SECONDS = config.env_float(ENV, "RUNLEDGER_READY_WORKER_SECONDS", 60.0, minimum=0.0)
# Traces: an ingress request's traceparent is linked from the instance's trace (`link`) or the
# instance joins the caller's trace (`continue`); ingest/engine/tracing.py reads the same variable.
RUNLEDGER_TRACE_INGRESS = ENV.get("RUNLEDGER_TRACE_INGRESS", "").strip().lower() or "link"
if RUNLEDGER_TRACE_INGRESS not in ("link", "continue"):
    raise ImproperlyConfigured(
        f"RUNLEDGER_TRACE_INGRESS={RUNLEDGER_TRACE_INGRESS!r} is not a choice; use link (the default) or continue"
    )
# /readyz waits at most this long for a database connection (a load balancer gives up after 1-5 s).
RUNLEDGER_READY_DATABASE_SECONDS = config.env_float(ENV, "RUNLEDGER_READY_DATABASE_SECONDS", 1.5, minimum=0.1)

# Plain lines by default; RUNLEDGER_LOG_FORMAT=json for JSON lines; secrets redacted in both
# (dashboard/observability/logconfig.py, docs/observability.md).
LOGGING = logconfig.logging_config(ENV)
RUNLEDGER_LOG_FORMAT = logconfig.log_format(ENV)
