"""daphne's access log through logging, so it is redacted and can be JSON.

daphne writes its access log (`AccessLogGenerator`) straight to a stream, full query strings and
webhook keys included, bypassing logging and so every filter. `AccessLogger` is a daphne
"action logger" that logs the same events to `runledger.access` instead. Run daphne as

    python -m dashboard.observability.access -b 0.0.0.0 -p 8000 dashboard.asgi:application

(the same arguments as `daphne`): with `-v 1` or `--access-log` it logs each request there.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.server import Server

from dashboard.serving import AnswersOversizedHeads
from ingest.engine import redact

log = logging.getLogger("runledger.access")


class AccessLogger:
    """daphne's action-logger interface: called with (protocol, action, details)."""

    def __call__(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        # Redacted here, not only by the handler's filter: the path is the line (a webhook's key).
        path, client = redact(str(details.get("path", ""))), details.get("client") or "-"
        if protocol == "http" and action == "complete":
            method, status = details.get("method", "-"), details.get("status")
            took = details.get("time_taken")
            log.info(
                "%s %s %s %s",
                client,
                method,
                path,
                status,
                extra={
                    "method": method,
                    "path": path,
                    "status": status,
                    "client": client,
                    "duration_ms": None if took is None else round(float(took) * 1000, 3),
                    "size": details.get("size"),
                },
            )
        elif protocol == "websocket":
            log.info("%s WS%s %s", client, action.upper(), path, extra={"path": path, "client": client, "ws": action})


class RedactingServer(AnswersOversizedHeads, Server):  # type: ignore[misc]  # daphne ships no types
    """daphne's server with its access log sent through `AccessLogger`, answering 414/431 for a
    request line or headers over its limit (`dashboard.serving`)."""

    def __init__(self, *args: Any, action_logger: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, action_logger=AccessLogger() if action_logger else None, **kwargs)


class RedactingCommandLineInterface(CommandLineInterface):  # type: ignore[misc]
    server_class = RedactingServer


def main(argv: list[str] | None = None) -> None:
    RedactingCommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
