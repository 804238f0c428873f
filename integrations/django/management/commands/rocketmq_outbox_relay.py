"""``manage.py rocketmq_outbox_relay``: send the transactional outbox's rows."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from ...outbox import relay


class Command(BaseCommand):
    help = "Send unsent rocketmq outbox rows in order; loops until SIGTERM/SIGINT unless --once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="send what is there now and exit")
        parser.add_argument("--batch-size", type=int, default=100, help="rows per database transaction (100)")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds to wait when idle (1.0)")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        if not options["once"]:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        total = 0
        while not stop.is_set():
            sent = relay(options["batch_size"])
            total += sent
            if options["once"] and sent < options["batch_size"]:
                break
            if sent == 0:
                stop.wait(options["interval"])
        from ...template import rocketmq_template

        rocketmq_template().close()
        self.stdout.write(f"rocketmq_outbox_relay: {total} message(s) sent")
