"""Failures with real workers: a SIGKILLed ``acks_late`` worker's task runs again on the next
worker; the broker restarts under a running worker, which goes on without losing the acked-late
task it was running. Own name server and broker processes (the broker restarts on its port and
store)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from celery_worker_app import make_app
from celery_workers import (
    RemoteTask,
    close_app,
    isolated_options,
    running_worker,
    wait_ready,
    worker_env,
)
from rocketmq_broker.embedded import free_broker_port, free_fixed_port, read_announcements

from tests.conftest import wait_until


class Servers:
    """A name server and a broker in child processes; the broker can be restarted."""

    def __init__(self, root) -> None:
        self.root = root
        # both on fixed ports below the ephemeral range: each restarts on its port, which an
        # outgoing socket may hold meanwhile when the kernel chose it (EADDRINUSE)
        self.namesrv_addr = self._start_namesrv(str(free_fixed_port()))
        self.broker_port = free_broker_port()
        conf = root / "broker.conf"
        conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n"
                        f"listenPort={self.broker_port}\nnamesrvAddr={self.namesrv_addr}\n"
                        f"storePathRootDir={root / 'store'}\nautoCreateTopicEnable=true\n"
                        f"mappedFileSizeCommitLog=16777216\n")
        self.conf = conf
        self.broker: subprocess.Popen | None = None
        self.start_broker()

    def _start_namesrv(self, port: str) -> str:
        self.namesrv = subprocess.Popen([sys.executable, "-c",
                                         "from rocketmq_broker.cli import namesrv_main; namesrv_main()", "-p", port],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return read_announcements(self.namesrv, 30)["NAMESRV"]

    def restart_namesrv(self) -> None:
        """Stop the name server and start a new one on the same port (no state: the reference
        name server keeps routes and KV config in memory)."""
        self.namesrv.terminate()
        self.namesrv.wait(20)
        assert self._start_namesrv(self.namesrv_addr.rsplit(":", 1)[1]) == self.namesrv_addr

    def start_broker(self) -> None:
        self.broker = subprocess.Popen([sys.executable, "-c",
                                        "from rocketmq_broker.cli import broker_main; broker_main()",
                                        "-c", str(self.conf)],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        read_announcements(self.broker, 30)

    def stop_broker(self) -> None:
        self.broker.terminate()
        self.broker.wait(20)

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = Servers(tmp_path_factory.mktemp("servers"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def setup(servers, tmp_path_factory):
    marks = tmp_path_factory.mktemp("marks")
    broker = f"rocketmq://{servers.namesrv_addr}"
    options = isolated_options()
    env = worker_env(broker, "rpc://", marks, options, queue="late")
    app = make_app(broker, "rpc://", str(marks), options, queue="late", define_tasks=False)
    yield app, env, marks
    close_app(app)


def started(marks, key: str) -> list[str]:
    return sorted(p.name.rsplit(".", 1)[1] for p in marks.glob(f"{key}.started.*"))


def test_sigkill_of_acks_late_worker_runs_the_task_again(setup):
    app, env, marks = setup
    with running_worker(env, marks, "-P", "threads", "-c", "2") as first:
        wait_ready(app, first)
        result = RemoteTask(app, "hold").delay("killed")
        wait_until(lambda: started(marks, "killed"), 30, "the task to start on the first worker")
        first.kill()
    assert started(marks, "killed") == [str(first.proc.pid)]
    with running_worker(env, marks, "-P", "prefork", "-c", "2") as second:
        wait_ready(app, second)
        wait_until(lambda: len(started(marks, "killed")) == 2, 90, "the task to run again on the second worker")
        (marks / "killed.release").touch()
        pid = result.get(timeout=30)
    assert str(pid) in started(marks, "killed") and str(pid) != str(first.proc.pid)


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_restart_under_a_running_worker(setup, servers, server):
    """The broker restarts (same port and store), or the name server goes away and a new, empty
    one comes up on its port, while an acks_late task runs: the task finishes once, new tasks
    run, and the queue's group commits everything."""
    app, env, marks = setup
    key = f"restart-{server}"
    add, hold = RemoteTask(app, "add"), RemoteTask(app, "hold")
    with running_worker(env, marks, "-P", "threads", "-c", "2") as worker:
        wait_ready(app, worker)
        assert add.delay(1, 2).get(timeout=30) == 3
        running = hold.delay(key)
        wait_until(lambda: started(marks, key), 30, "the acks_late task to start")
        if server == "broker":
            servers.stop_broker()
            servers.start_broker()
        else:
            servers.restart_namesrv()
        (marks / f"{key}.release").touch()
        assert running.get(timeout=90) == worker.proc.pid
        assert add.delay(20, 22).get(timeout=90) == 42
        # the acked-late task was acknowledged after the restart: the queue's group has
        # committed everything (nothing left to redeliver) and the task ran once
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            wait_until(lambda: channel._size("late") == 0, 30, "the group to commit every offset of 'late'")
        assert started(marks, key) == [str(worker.proc.pid)]
