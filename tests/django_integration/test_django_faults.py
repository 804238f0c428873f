"""The Django fault suite (issue 25): request writers committing orders with outbox rows, the
outbox relay and ``rocketmq_consume`` (an idempotent and a plain listener) as real processes,
each SIGKILLed or SIGTERMed at random points of its progress and restarted. Printed counts:
events committed, messages sent, handler effects. Required: no committed event lost, the
idempotent listener's effects exactly once, duplicates only where at-least-once allows them
(messages re-sent by a killed relay, plain-listener redeliveries), no crash of the relay or the
command (a SIGTERM always ends with status 0).

Quick in ``make test`` (2 writers x 30 events, 2 kills of each process); ``FAULTS_FULL=1``
(``make faults``): 4 writers x 200 events, 6 kills each. Runs on SQLite and, in the PostgreSQL
pass, on PostgreSQL. ``FAULTS_SEED`` replays a run."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import close_old_connections, connection, transaction
from rocketmq_sdk.integrations.django.models import OutboxMessage
from rocketmq_sdk.integrations.django.outbox import enqueue

from django_integration.conftest import PY, REPO, child_env, create_topic, read_topic, unique
from django_integration.testapp.models import Handled, Order
from tests.faults.faults_helpers import FULL, record

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS, PER_WRITER, KILLS = (4, 200, 6) if FULL else (2, 30, 2)


class Child:
    """One restartable child process (output to files: a full pipe would block it)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logs: Path, ready: str) -> None:
        self.name, self.argv, self.env, self.logs, self.ready_line = name, argv, env, logs, ready
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.unexpected_exits: list[int] = []

    def start(self) -> None:
        self.starts += 1
        out = open(self.logs / f"{self.name}-{self.starts}.log", "w")  # noqa: SIM115 - closed by the child's exit
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def ready(self) -> bool:
        """Past its start-up (signal handlers installed): it printed its running line."""
        return self.ready_line in (self.logs / f"{self.name}-{self.starts}.log").read_text(errors="replace")

    def stop(self, sig: int, timeout_s: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout_s)
        self.proc = None
        return rc

    def check_alive(self) -> None:
        """A child that exited on its own crashed: record it and restart."""
        if self.proc is not None and self.proc.poll() is not None:
            self.unexpected_exits.append(self.proc.returncode)
            self.start()

    def log_tail(self) -> str:
        return (self.logs / f"{self.name}-{self.starts}.log").read_text(errors="replace")[-3000:]


def _write(topic: str, writer: int, rng: random.Random, errors: list[BaseException]) -> None:
    try:
        for i in range(PER_WRITER):
            time.sleep(rng.uniform(0, 0.1))  # requests arrive over a few seconds, not all at once
            for attempt in range(50):  # the application's own retry of "database is locked"
                try:
                    with transaction.atomic():
                        Order.objects.create(number=f"{topic[-14:]}-{writer}-{i}")
                        enqueue(topic, {"writer": writer, "i": i})
                    break
                except Exception as exc:  # noqa: BLE001
                    if "locked" not in str(exc) or attempt == 49:
                        raise
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
    finally:
        close_old_connections()
        connection.close()


def test_relay_and_consumer_killed_at_random_points_lose_nothing_and_run_idempotent_effects_once(
        rocketmq, tmp_path):
    seed = int(os.environ.get("FAULTS_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    topic = unique("dj_faults")
    create_topic(rocketmq, topic, queues=4)
    total = WRITERS * PER_WRITER
    env = child_env(ROCKETMQ_TEST_DB=connection.settings_dict["NAME"], ROCKETMQ_TEST_NAMESRV=rocketmq.namesrv_addr,
                    ROCKETMQ_TEST_FAULT_TOPIC=topic)
    relay = Child("relay", [PY, "-m", "django", "rocketmq_outbox_relay", "--interval", "0.05", "--batch-size", "10"],
                  env, tmp_path, "rocketmq_outbox_relay: running")
    consumer = Child("consume", [PY, "-m", "django", "rocketmq_consume", "--listener", "fault_idem", "--listener",
                                 "fault_plain", "--prune-interval", "5"], env, tmp_path, "listener(s) running")
    relay_kills = sorted(rng.sample(range(1, total), KILLS))
    consumer_kills = sorted(rng.sample(range(1, total), KILLS))
    kills: collections.Counter[str] = collections.Counter()
    bad_exits: list[str] = []
    errors: list[BaseException] = []
    writers = [threading.Thread(target=_write, args=(topic, w, random.Random(seed + w), errors))
               for w in range(WRITERS)]
    started = time.monotonic()
    relay.start()
    consumer.start()
    for t in writers:
        t.start()

    def sent() -> int:
        return OutboxMessage.objects.filter(topic=topic, sent_at__isnull=False).count()

    def handled(listener: str) -> int:
        return Handled.objects.filter(listener=listener).values("key").distinct().count()

    def kill(child: Child, thresholds: list[int], progress: int) -> None:
        """Kill at the next threshold of the child's progress (a threshold passed while the
        child was starting waits for it to run)."""
        if not thresholds or progress < thresholds[0] or not child.ready():
            return
        sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
        rc = child.stop(sig)
        kills[f"{child.name}_{sig.name}"] += 1
        if sig == signal.SIGTERM and rc != 0:
            bad_exits.append(f"{child.name} exited {rc} on SIGTERM: {child.log_tail()}")
        thresholds.pop(0)
        child.start()

    deadline = time.monotonic() + (600 if FULL else 240)
    try:
        while True:
            s, idem, plain = sent(), handled("fault-idem"), handled("fault-plain")
            if not any(t.is_alive() for t in writers) and s == total and idem == total and plain == total \
                    and not relay_kills and not consumer_kills and relay.ready() and consumer.ready():
                break
            assert time.monotonic() < deadline, (f"sent {s}, idempotent {idem}, plain {plain} of {total}; "
                                                 f"relay: {relay.log_tail()} consumer: {consumer.log_tail()}")
            kill(relay, relay_kills, s)
            kill(consumer, consumer_kills, idem)
            relay.check_alive()
            consumer.check_alive()
            time.sleep(0.05)  # the polling period of this supervisor, not a synchronisation
        for child in (relay, consumer):
            rc = child.stop(signal.SIGTERM)
            if rc != 0:
                bad_exits.append(f"{child.name} exited {rc} on the final SIGTERM: {child.log_tail()}")
    finally:
        for child in (relay, consumer):
            if child.proc is not None and child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait(10)
        for t in writers:
            t.join(60)
    assert not errors, errors
    committed = OutboxMessage.objects.filter(topic=topic).count()
    messages = read_topic(rocketmq, topic, total, timeout_s=60)
    per_event = collections.Counter(m.get_property("EVENT_ID") for m in messages)
    idem_rows = collections.Counter(Handled.objects.filter(listener="fault-idem").values_list("key", flat=True))
    plain_rows = collections.Counter(Handled.objects.filter(listener="fault-plain").values_list("key", flat=True))
    expected = {f"{w}-{i}" for w in range(WRITERS) for i in range(PER_WRITER)}
    figures = {
        "db": connection.vendor, "seed": seed, "seconds": round(time.monotonic() - started, 1),
        "events_committed": committed, "messages_sent": len(messages),
        "messages_resent": len(messages) - len(per_event),
        "idempotent_effects": sum(idem_rows.values()), "idempotent_double_effects": sum(
            n - 1 for n in idem_rows.values() if n > 1),
        "plain_effects": sum(plain_rows.values()), "plain_duplicates": sum(n - 1 for n in plain_rows.values() if n > 1),
        "lost_idempotent": len(expected - set(idem_rows)), "lost_plain": len(expected - set(plain_rows)),
        "kills": dict(kills), "crashes": len(relay.unexpected_exits) + len(consumer.unexpected_exits) + len(bad_exits),
    }
    record("django_relay_consumer_kills", **figures)
    assert committed == total
    assert len(per_event) == total  # every committed event reached the topic
    assert figures["lost_idempotent"] == 0 and figures["lost_plain"] == 0
    assert figures["idempotent_double_effects"] == 0
    assert not bad_exits and not relay.unexpected_exits and not consumer.unexpected_exits, (
        bad_exits, relay.unexpected_exits, consumer.unexpected_exits)
