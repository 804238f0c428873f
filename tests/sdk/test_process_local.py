"""The per-process client cache shared by the Django, Spark and Celery integrations
(``rocketmq_sdk.client.process_local``): one client per key and process, never the parent's in a
forked child (Python fork hooks and a pid check for C-level forks), thread-safe creation,
closed at exit in the process that made it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest
from rocketmq_sdk.client.process_local import ProcessLocalCache, ProcessLocalClient

from tests.forking import in_child, needs_fork


class Fake:
    def __init__(self, key: object = None) -> None:
        self.key = key
        self.pid = os.getpid()
        self.closed = 0

    def shutdown(self) -> None:
        self.closed += 1


def test_one_client_per_key_made_once_and_closed_once():
    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(Fake, name="fake")
    a, again, b = cache.get("a"), cache.get("a"), cache.get("b")
    assert a is again and a is not b and len(cache) == 2 and cache.peek("a") is a
    cache.close("a")
    assert a.closed == 1 and cache.peek("a") is None and cache.get("a") is not a
    cache.close_all()
    assert (a.closed, b.closed, len(cache)) == (1, 1, 0)


def test_a_failing_factory_caches_nothing_and_a_call_without_factory_is_refused():
    attempts = []

    def failing(key):
        attempts.append(key)
        raise ConnectionError("no name server")

    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(failing)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            cache.get("k")
    assert attempts == ["k", "k"] and len(cache) == 0
    assert cache.get("k", lambda: Fake("own")).key == "own"  # a call's own factory wins
    with pytest.raises(TypeError, match="no factory for the client of 'k'"):
        ProcessLocalCache().get("k")


def test_threads_asking_at_once_get_one_client():
    made = []
    gate = threading.Barrier(8)

    def factory(key):
        made.append(key)
        return Fake(key)

    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(factory)
    got: list[Fake] = []

    def ask():
        gate.wait(timeout=10)
        got.append(cache.get("k"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert made == ["k"] and len(got) == 8 and all(c is got[0] for c in got)


def test_shared_client_closed_by_its_last_user_only():
    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(Fake)
    c = cache.acquire("q", "conn1")
    assert cache.acquire("q", "conn2") is c
    assert cache.release("q", "conn1", c) is False and c.closed == 0
    assert cache.release("q", "conn2", c) is True and c.closed == 1 and cache.peek("q") is None
    assert cache.release("q", "conn2", c) is False and c.closed == 1  # no longer held: left alone


def test_an_unusable_client_is_replaced_without_closing_it():
    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(Fake, usable=lambda c: not c.closed)
    first = cache.acquire("q", "u")
    first.closed = 1  # closed by its owner
    second = cache.acquire("q", "u")
    assert second is not first and first.closed == 1
    assert cache.release("q", "u", first) is False and second.closed == 0


def test_a_failing_close_is_logged_and_the_others_still_close(caplog):
    class Bad(Fake):
        def shutdown(self):
            raise OSError("socket gone")

    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(lambda k: Bad(k) if k == "bad" else Fake(k), name="fake")
    cache.get("bad")
    good = cache.get("good")
    cache.close_all()
    assert good.closed == 1 and "closing the fake failed" in caplog.text and len(cache) == 0


@needs_fork
def test_forked_child_makes_its_own_client_and_never_closes_the_parents():
    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(Fake)
    single = ProcessLocalClient(Fake)
    parent, parent_single = cache.get("k"), single.get()

    def child():
        mine, mine_single = cache.get("k"), single.get()
        cache.close_all()
        single.close()
        return [mine is not parent, mine.pid == os.getpid(), mine.closed, mine_single is not parent_single,
                parent.closed, parent_single.closed]

    assert in_child(child) == [True, True, 1, True, 0, 0]
    assert cache.get("k") is parent and single.get() is parent_single and single.created


@needs_fork
def test_a_lock_held_by_another_thread_at_fork_does_not_block_the_child():
    started, release = threading.Event(), threading.Event()

    def slow(key):
        started.set()
        release.wait(timeout=10)
        return Fake(key)

    cache: ProcessLocalCache[str, Fake] = ProcessLocalCache(slow)
    holder = threading.Thread(target=cache.get, args=("slow",))
    holder.start()
    assert started.wait(timeout=10)
    try:
        # the child asks while the parent's lock is held: a deadlock without the fork reset
        assert in_child(lambda: cache.get("other", lambda: Fake("x")).key) == "x"
    finally:
        release.set()
        holder.join(timeout=10)


SCRIPT = """
import ctypes, json, os, sys
from rocketmq_sdk.client.process_local import ProcessLocalCache, ProcessLocalClient

from tests.forking import in_child, needs_fork

class Fake:
    def __init__(self, key=None):
        self.pid = os.getpid()
    def shutdown(self):
        with open(sys.argv[1], "a") as fh:
            fh.write(f"closed {self.pid} by {os.getpid()}\\n")

cache = ProcessLocalCache(Fake)
single = ProcessLocalClient(Fake)
parent, parent_single = cache.get("k"), single.get()
if sys.argv[2] == "c-fork":
    # fork() from C, as uWSGI does: no Python fork hook runs, only the pid check can notice
    pid = ctypes.PyDLL(None).fork()
    if pid == 0:
        mine = cache.get("k")
        ok = mine is not parent and mine.pid == os.getpid() and single.get() is not parent_single
        with open(sys.argv[1], "a") as fh:
            fh.write(f"child fresh {ok}\\n")
        sys.exit(0)  # runs atexit: the child's own clients are closed, never the parent's
    os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("mode", ["exit", "c-fork"])
def test_clients_are_closed_at_exit_by_the_process_that_made_them(tmp_path, mode):
    if mode == "c-fork" and not hasattr(os, "fork"):
        pytest.skip("needs fork()")
    log = tmp_path / "log"
    subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(log), mode], check=True, timeout=60)
    lines = log.read_text().splitlines()
    closes = [line.split() for line in lines if line.startswith("closed")]
    assert all(made == by for _, made, _, by in closes), lines  # nobody closes another's client
    if mode == "exit":
        assert len(closes) == 2
    else:
        assert "child fresh True" in lines and len(closes) == 4 and len({made for _, made, _, _ in closes}) == 2
