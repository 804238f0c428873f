"""``manage.py rocketmq_outbox_relay``: send the transactional outbox's rows."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...dbretry import DB_RETRY, bounded
from ...outbox import relay_batch

log = logging.getLogger("rocketmq_sdk.integrations.django")

#: database retries of one ``--once`` pass before it gives up (about 10 s of back-off)
ONCE_DB_RETRIES = 8


class Command(BaseCommand):
    help = ("Send unsent rocketmq outbox rows in order; loops until SIGTERM/SIGINT unless --once. Database "
            "errors are retried with back-off (the loop never exits on them); --once exits with status 1 when a "
            "row failed to send or the database stayed unavailable.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="send what is there now and exit")
        parser.add_argument("--batch-size", type=int, default=100, help="rows per database transaction (100)")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds to wait when idle (1.0)")

    def handle(self, *args: Any, **options: Any) -> None:
        once, batch = options["once"], options["batch_size"]
        if batch < 1:
            raise CommandError(f"--batch-size must be >= 1, not {batch}")
        stop = threading.Event()
        if not once:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        policy = bounded(ONCE_DB_RETRIES) if once else DB_RETRY
        if not once:
            self.stdout.write("rocketmq_outbox_relay: running")
            self.stdout.flush()
        total = failed = db_failures = 0
        db_error: BaseException | None = None
        while not stop.is_set():
            try:
                result = relay_batch(batch, policy=policy, stop=stop)
            except Exception as exc:  # the producer, the settings, a database error that outlived the policy
                if once:
                    raise
                result = None
                db_error = exc
                log.exception("outbox relay pass failed; retrying")
            else:
                total += result.sent
                failed += result.failed
                db_error = result.error
            if db_error is not None:
                db_failures += 1
                if once and not policy.retry_error(db_failures, db_error):
                    break
                stop.wait(policy.delay_s(db_failures, db_error))
                continue
            db_failures = 0
            assert result is not None
            if once and (result.sent < batch or result.failed):
                break
            if result.sent == 0:
                stop.wait(options["interval"])
        from ...template import rocketmq_template

        rocketmq_template().close()
        self.stdout.write(f"rocketmq_outbox_relay: {total} message(s) sent")
        if once and failed:
            raise CommandError(f"{failed} row(s) failed to send (see the rows' last_error); they stay unsent")
        if once and db_error is not None:
            raise CommandError(f"the database stayed unavailable: {type(db_error).__name__}: {db_error}")
