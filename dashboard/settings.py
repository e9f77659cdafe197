"""Runledger settings. Everything that differs between deployments comes from the environment.

Variables (all optional): DATABASE_URL, REDIS_URL, SECRET_KEY, DEBUG, ALLOWED_HOSTS, TIME_ZONE,
RUNLEDGER_LEASE_SECONDS, RUNLEDGER_POLL_SECONDS, RUNLEDGER_MARKER_MS, RUNLEDGER_DEFERRED_LANE,
RUNLEDGER_PARALLEL_THREADS.
README.md ("Configuration") describes each.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from dashboard import config

BASE_DIR = Path(__file__).resolve().parent.parent
ENV = os.environ

DEBUG = config.env_bool(ENV, "DEBUG", False)
SECRET_KEY = ENV.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and config.env_bool(ENV, "RUNLEDGER_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("SECRET_KEY is not set; generate one with `python -c 'import secrets; print(secrets.token_urlsafe(50))'`")
    # A development key: fine for the embedded default, refused when RUNLEDGER_REQUIRE_SECRET_KEY=1.
    SECRET_KEY = "runledger-dev-insecure-key-set-SECRET_KEY-in-production"

ALLOWED_HOSTS = [h.strip() for h in ENV.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in ENV.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "daphne",
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
    "ingest.engine",
    "ingest.triggers",
    "ingest.alerts",
    "ingest",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "dashboard.nul.RejectNulMiddleware",  # PostgreSQL text holds no NUL: a 400, not a 500
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = config.redis_url(ENV)
# Web and worker processes never talk through the channel layer: live updates follow the history
# table (dashboard/live), so the in-memory layer serves one web process; Redis shares it.
CHANNEL_LAYERS = config.channel_layers(REDIS_URL)

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

# The engine's knobs (the engine reads them from django.conf.settings; README "Configuration").
RUNLEDGER_LEASE_SECONDS = config.env_float(ENV, "RUNLEDGER_LEASE_SECONDS", 30.0, minimum=1.0)
RUNLEDGER_POLL_SECONDS = config.env_float(ENV, "RUNLEDGER_POLL_SECONDS", 1.0, minimum=0.01)
# A step still running after this many milliseconds gets its start marker written (PostgreSQL);
# a quicker one is written once, complete (ingest/engine/runtime/markers.py).
RUNLEDGER_MARKER_MS = config.env_float(ENV, "RUNLEDGER_MARKER_MS", 100.0, minimum=0.0)
# Concurrent instances' step and instance completions share one transaction per batch
# (PostgreSQL; ingest/engine/writes/commits.py). Off: one transaction per write, as on SQLite.
RUNLEDGER_GROUP_COMMIT = config.env_bool(ENV, "RUNLEDGER_GROUP_COMMIT", True)
# How many deferred steps (checkpoint="deferred") a process runs at once; 0: no limit
# (ingest/engine/runtime/lane.py).
RUNLEDGER_DEFERRED_LANE = config.env_int(ENV, "RUNLEDGER_DEFERRED_LANE", 1, minimum=0)
# Threads per process that help run parallel groups of steps (step.all); each keeps a database
# connection once it has run a step (docs/engine-contract.md, connection sizing).
RUNLEDGER_PARALLEL_THREADS = config.env_int(ENV, "RUNLEDGER_PARALLEL_THREADS", 8, minimum=1)
# Extra modules whose workflows every process registers (comma-separated), beside ingest.workflows.
RUNLEDGER_WORKFLOW_MODULES = [m.strip() for m in ENV.get("RUNLEDGER_WORKFLOW_MODULES", "").split(",") if m.strip()]
# Prices usage when a step records a cost without an amount (the pipelines' price table, then list prices).
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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "runledger": {"handlers": ["console"], "level": ENV.get("RUNLEDGER_LOG_LEVEL", "INFO")},
    },
}
