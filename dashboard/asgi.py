"""ASGI entry point: HTTP through Django, websockets through Channels consumers."""

from __future__ import annotations

import os

import django

from dashboard.asgi_handler import RequestHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# A web process pools its PostgreSQL connections (dashboard/config.py says why). Only here:
# the worker and the scheduler keep one persistent connection per thread, which also carries
# their session-level advisory locks; so the default is not left in the environment for the
# processes this one starts. `manage.py up` has loaded its settings before this line.
_POOL_DEFAULTED = "RUNLEDGER_DB_POOL" not in os.environ
if _POOL_DEFAULTED:
    os.environ["RUNLEDGER_DB_POOL"] = "20"
django.setup(set_prefix=False)  # what get_asgi_application() does before building its handler

# Django's handler, with one crossing into a reused thread per request (dashboard/asgi_handler.py).
django_asgi_app = RequestHandler()
if _POOL_DEFAULTED:
    del os.environ["RUNLEDGER_DB_POOL"]

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402
from dashboard.warm import warm_and_freeze  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
# Last: everything above is loaded and lives as long as the process; the collector skips it from
# here on (dashboard/warm.py says why: full collections were the list's p99).
warm_and_freeze()
