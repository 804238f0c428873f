"""The C++-client harness itself: it fails cleanly, never hangs, and keeps the client's files in a
temporary HOME. No broker needed (these run wherever ``rocketmq==0.4.4`` is installed)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from .cpp_client import CppClientError, CppConsumer, CppWorkerTimeout, cpp_produce, cpp_pull

pytest.importorskip("rocketmq.client", reason="the official C++ client (rocketmq==0.4.4) is not installed")
pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


@pytest.fixture
def refused_addr() -> str:
    """An address where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture
def silent_addr():
    """A name server address that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join(2)
    for conn in accepted:
        conn.close()
    server.close()


def _real_home_cpp_logs() -> set[str]:
    logs = Path(os.path.expanduser("~")) / "logs" / "rocketmq-cpp"
    return {p.name for p in logs.glob("*")} if logs.is_dir() else set()


MESSAGE = {"body": "hello", "tags": "TagA", "keys": ["k1", "k2"], "properties": {"p": "v"}}


def test_send_without_name_server_fails_fast_with_the_client_error(refused_addr):
    started = time.monotonic()
    outcomes = cpp_produce(refused_addr, "HarnessTopic", [MESSAGE, MESSAGE], timeout_s=30)
    assert time.monotonic() - started < 10
    assert [o.index for o in outcomes] == [0, 1]
    for outcome in outcomes:
        assert not outcome.ok
        assert outcome.error_type == "ProducerSendSyncFailed"
        assert "No route info of this topic: HarnessTopic" in outcome.error


@pytest.mark.parametrize("mode", ["oneway", "orderly", "batch"])
def test_other_send_modes_report_errors_without_name_server(refused_addr, mode):
    outcomes = cpp_produce(refused_addr, "HarnessTopic", [MESSAGE], mode=mode, timeout_s=30)
    assert len(outcomes) == 1 and not outcomes[0].ok
    assert outcomes[0].error_type.startswith("Producer")


def test_silent_name_server_is_cut_off_at_the_harness_deadline(silent_addr):
    addr, accepted = silent_addr
    started = time.monotonic()
    with pytest.raises(CppWorkerTimeout) as info:
        cpp_produce(addr, "HarnessTopic", [MESSAGE], timeout_s=3)
    elapsed = time.monotonic() - started
    assert 3 <= elapsed < 10
    assert accepted, "the C++ client should have connected to the silent name server"
    assert "native log" in str(info.value)


def test_worker_writes_only_under_its_temporary_home(refused_addr, tmp_path):
    before = _real_home_cpp_logs()
    cpp_produce(refused_addr, "HarnessTopic", [MESSAGE], home=tmp_path, timeout_s=30)
    logs = list((tmp_path / "logs" / "rocketmq-cpp").glob("*_rocketmq-cpp.log.0"))
    assert len(logs) == 1
    assert "DefaultMQProducer:cpp_interop_producer start" in logs[0].read_text(errors="replace")
    assert _real_home_cpp_logs() == before


def test_default_home_is_removed_afterwards(refused_addr, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    cpp_produce(refused_addr, "HarnessTopic", [MESSAGE], timeout_s=30)
    assert list(tmp_path.iterdir()) == []


def test_consumer_starts_reports_ready_and_stops_cleanly(refused_addr):
    started = time.monotonic()
    with CppConsumer(refused_addr, "HarnessTopic", group="harness_group", expression="TagA || TagB") as consumer:
        assert consumer.worker.of("ready")[0]["pid"] == consumer.worker.proc.pid
        with pytest.raises(CppWorkerTimeout, match="got 0 of 1 messages"):
            consumer.wait_for(1, timeout_s=0.5)
        assert consumer.messages == []
        home = consumer.home
    assert consumer.returncode == 0
    assert consumer.worker.of("stopped")
    assert not home.exists()
    assert time.monotonic() - started < 15


def test_consumer_that_ignores_stop_is_killed(refused_addr):
    consumer = CppConsumer(refused_addr, "HarnessTopic", group="harness_group").start()
    os.kill(consumer.worker.proc.pid, signal.SIGSTOP)  # frozen: neither stdin EOF nor SIGTERM is handled
    started = time.monotonic()
    assert consumer.stop(timeout_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 10
    assert consumer.stop() == -signal.SIGKILL  # idempotent


def test_consumer_start_failure_is_reported(refused_addr):
    consumer = CppConsumer(refused_addr, "HarnessTopic", model="NO_SUCH_MODEL")
    with pytest.raises(CppClientError, match="NO_SUCH_MODEL"):
        consumer.start()


def test_pull_without_name_server_finds_no_queues(refused_addr):
    outcome = cpp_pull(refused_addr, "HarnessTopic", timeout_s=30)
    assert outcome.queues == [] and outcome.messages == []
