"""``manage.py rocketmq_consume``: run the registered listeners until SIGTERM / SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from ...dbretry import reset_connection
from ...listeners import prune_consumed_messages, select, start_listeners, stop_listeners

log = logging.getLogger("rocketmq_sdk.integrations.django")

#: seconds before a failed prune is tried again (at most the prune interval)
PRUNE_RETRY_S = 60.0


class Command(BaseCommand):
    help = ("Run the RocketMQ listeners (@rocketmq_listener in <app>/listeners.py) until SIGTERM or SIGINT; "
            "offsets are persisted on the way out. Database errors of the command's own bookkeeping (the "
            "consumed-message prune) are logged and retried, never fatal.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--group", action="append", default=[], help="only the listener(s) of this consumer "
                            "group (repeatable)")
        parser.add_argument("--listener", action="append", default=[], help="only this listener, by name or "
                            "dotted path (repeatable)")
        parser.add_argument("--check", action="store_true", help="print the resolved subscriptions and exit")
        parser.add_argument("--transaction-checks", action="store_true", help="also start the transactional "
                            "producer so this process answers the broker's transaction checks")
        parser.add_argument("--prune-interval", type=float, default=3600.0, help="seconds between prunings of "
                            "the consumed-message table (0: never; default 3600)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            specs = select(options["listener"] or None, options["group"] or None)
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        if options["check"]:
            from ...listeners import ListenerContainer

            for spec in specs:
                try:
                    container = ListenerContainer(spec)
                except ImproperlyConfigured as exc:
                    raise CommandError(str(exc)) from None
                self.stdout.write(container.describe())
            self.stdout.write(f"{len(specs)} listener(s)")
            return
        if not specs:
            raise CommandError("no listeners registered (put @rocketmq_listener functions in <app>/listeners.py)")
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            containers = start_listeners([s.name for s in specs])
        except ImproperlyConfigured as exc:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            raise CommandError(str(exc)) from None
        try:
            if options["transaction_checks"]:
                from ...transactions import transaction_producer

                transaction_producer()
            self.stdout.write(f"rocketmq_consume: {len(containers)} listener(s) running")
            self.stdout.flush()
            interval = options["prune_interval"]
            next_prune = time.monotonic()
            while not stop.is_set():
                if interval > 0 and time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + (interval if self._prune() else min(interval, PRUNE_RETRY_S))
                stop.wait(min(interval, 1.0) if interval > 0 else 1.0)
        finally:
            stop_listeners(containers)
            from ...template import rocketmq_template

            rocketmq_template().close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.stdout.write("rocketmq_consume: stopped")

    def _prune(self) -> bool:
        """Prune the consumed-message table; a failure (e.g. "database is locked" while a
        backlog is consumed) is logged and retried later, never fatal. Returns success."""
        try:
            pruned = prune_consumed_messages()
        except Exception as exc:
            reset_connection()
            log.warning("pruning the consumed-message table failed (retrying in %s s): %s: %s", PRUNE_RETRY_S,
                        type(exc).__name__, exc)
            return False
        if pruned:
            self.stdout.write(f"pruned {pruned} consumed-message row(s)")
        return True
