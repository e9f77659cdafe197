"""A local SMTP server (aiosmtpd) on 127.0.0.1 that keeps every message it is given."""

from __future__ import annotations

import email
import socket
import threading
from email.message import Message
from typing import Any, Self

from aiosmtpd.controller import Controller


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpServer:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], Message]] = []
        self._arrived = threading.Condition()
        self.port = _free_port()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook
        message = email.message_from_bytes(envelope.content)
        with self._arrived:
            self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), message))
            self._arrived.notify_all()
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[tuple[str, list[str], Message]]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.messages) >= count, timeout)
            return list(self.messages)

    def __enter__(self) -> Self:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
