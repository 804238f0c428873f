"""Fixtures: an in-process name server + broker, and a remoting client bound to a private loop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand


class SyncClient:
    """Blocking wrapper over ``RemotingClient`` on its own loop thread (test helper)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: RemotingClient = self.run(self._make())

    async def _make(self) -> RemotingClient:
        return RemotingClient()

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def invoke(self, addr: str, code: int, ext: dict | None = None, body: bytes = b"",
               timeout_ms: int = 5000, cmd: RemotingCommand | None = None) -> RemotingCommand:
        cmd = cmd or RemotingCommand.request(code, ext or {}, body)
        return self.run(self.client.invoke(addr, cmd, timeout_ms))

    def oneway(self, addr: str, code: int, ext: dict | None = None, body: bytes = b"") -> None:
        self.run(self.client.invoke_oneway(addr, RemotingCommand.request(code, ext or {}, body)))

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True)
    yield c
    c.stop()


@pytest.fixture
def client():
    c = SyncClient()
    yield c
    c.close()
