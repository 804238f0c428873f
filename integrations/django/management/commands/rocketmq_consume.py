"""``manage.py rocketmq_consume``: run the registered listeners until SIGTERM / SIGINT."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...listeners import prune_consumed_messages, select, start_listeners, stop_listeners


class Command(BaseCommand):
    help = ("Run the RocketMQ listeners (@rocketmq_listener in <app>/listeners.py) until SIGTERM or SIGINT; "
            "offsets are persisted on the way out.")

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
                container = ListenerContainer(spec)
                self.stdout.write(container.describe())
            self.stdout.write(f"{len(specs)} listener(s)")
            return
        if not specs:
            raise CommandError("no listeners registered (put @rocketmq_listener functions in <app>/listeners.py)")
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
        containers = start_listeners([s.name for s in specs])
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
                    pruned = prune_consumed_messages()
                    if pruned:
                        self.stdout.write(f"pruned {pruned} consumed-message row(s)")
                    next_prune = time.monotonic() + interval
                stop.wait(min(interval, 1.0) if interval > 0 else 1.0)
        finally:
            stop_listeners(containers)
            from ...template import rocketmq_template

            rocketmq_template().close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.stdout.write("rocketmq_consume: stopped")
