"""How `manage.py up` serves: daphne on a socket bound before anything else starts, with answers
instead of dropped connections for requests over the HTTP server's size limits (the production
runner, `dashboard.observability.access`, answers them the same way).

Bound first: a port already in use is a clear error and a non-zero exit before migrations, the
demo or a worker start (the worker would otherwise keep running on the SQLite file while the web
server failed to listen). daphne adopts the bound socket (a `fd:` endpoint), so nothing can take
the port between the check and the listen.

Limits: Twisted's HTTP channel, which daphne uses, reads at most 16,384 bytes per line and in
the request line and headers together. Past either it closes the connection (a line) or writes a
bare 400. `LimitedHTTPChannel` answers 414 when the request line is too long and 431 when the
headers are, with a one-line message, then stops reading and closes.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.web.http import HTTPChannel

MAX_HEAD_BYTES = 16_384  # Twisted's own limit for one line and for the request line plus headers


class PortInUse(OSError):
    """The address and port to serve on cannot be bound."""


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port), or PortInUse saying which and why."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortInUse(f"cannot serve on {host}:{port}: {exc.strerror}") from exc
    family, _, _, _, address = infos[0]
    try:
        return socket.create_server(address, family=family, backlog=128)
    except OSError as exc:
        taken = exc.errno in (98, 48, 10048)  # EADDRINUSE on Linux, macOS, Windows
        why = "the port is already in use — stop the other server or choose another --port" if taken else exc.strerror
        raise PortInUse(f"cannot listen on {host}:{port}: {why}") from exc


def _answer(status: str, message: str) -> bytes:
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class LimitedHTTPChannel(HTTPChannel):
    """Twisted's HTTP channel answering 414/431 where it would drop the connection or say 400."""

    MAX_LENGTH = MAX_HEAD_BYTES
    totalHeadersSize = MAX_HEAD_BYTES
    _refused = False  # lines already read after the refusal are dropped, not answered again

    def _in_request_line(self) -> bool:
        return bool(getattr(self, "_HTTPChannel__first_line", 0))

    def _refuse_head(self) -> None:
        if self._refused:
            return
        self._refused = True
        if self._in_request_line():
            answer = _answer(
                "414 URI Too Long",
                f"The request line is over {MAX_HEAD_BYTES:,} bytes, the most "
                "this server reads: shorten the URL (fewer or shorter filters).",
            )
        else:
            answer = _answer(
                "431 Request Header Fields Too Large",
                f"The request's headers are over "
                f"{MAX_HEAD_BYTES:,} bytes, the most this server reads: send fewer or "
                "shorter headers or cookies.",
            )
        transport: Any = self.transport
        transport.write(answer)
        # Stop reading but let the client read the answer: closing with its unread bytes still
        # arriving would reset the connection and lose the answer. The timeout closes it.
        self.dataReceived = lambda data: None  # type: ignore[method-assign]
        self.setTimeout(10)  # type: ignore[no-untyped-call]
        half_close = getattr(transport, "loseWriteConnection", None)
        if half_close is not None:
            half_close()
        else:
            transport.loseConnection()

    def lineLengthExceeded(self, line: bytes) -> None:
        self._refuse_head()

    def lineReceived(self, line: bytes) -> None:
        if self._refused:
            return
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self._refuse_head()
            return
        super().lineReceived(line)  # type: ignore[no-untyped-call]


class AnswersOversizedHeads:
    """Mixed into a daphne Server: daphne makes its HTTP factory inside run(); each connection's
    channel is then a LimitedHTTPChannel."""

    @property
    def http_factory(self) -> Any:
        return self._limited_factory

    @http_factory.setter
    def http_factory(self, factory: Any) -> None:
        factory.protocol = LimitedHTTPChannel
        self._limited_factory = factory


def serve(application: Any, listener: socket.socket) -> None:
    """Run daphne on `listener` until it is stopped (SIGINT/SIGTERM); PortInUse if daphne could
    not listen after all."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    failures: list[str] = []

    class _Server(AnswersOversizedHeads, Server):  # type: ignore[misc]
        def listen_error(self, failure: Any) -> None:
            failures.append(failure.getErrorMessage())
            super().listen_error(failure)

    if listener.family == socket.AF_INET:
        # daphne's fd endpoint adopts (duplicates) the bound socket and closes the number it was given.
        endpoints = [f"fd:fileno={listener.detach()}"]
    else:  # daphne's fd endpoint adopts IPv4 sockets only: hand the port over and bind again
        host, port = listener.getsockname()[:2]
        listener.close()
        endpoints = build_endpoint_description_strings(host=host, port=port)
    _Server(application=application, endpoints=endpoints, signal_handlers=True).run()
    if failures:
        raise PortInUse(f"could not listen: {failures[0]}")
