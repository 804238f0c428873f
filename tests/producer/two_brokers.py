"""Two reference brokers (broker-a, broker-b) and a name server on one background loop thread;
either broker can be stopped by a test."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from typing import Any

from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig


class TwoBrokers:
    """``namesrv_addr``, ``brokers`` ({name: BrokerController}), ``addr(name)``, ``stop_broker(name)``."""

    def __init__(self, timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self.store = tempfile.mkdtemp(prefix="rocketmq-2b-")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="two-brokers", daemon=True)
        self.brokers: dict[str, BrokerController] = {}
        self.stopped: set[str] = set()
        self.namesrv: NameServer | None = None
        self.namesrv_addr = ""

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout_s)

    def start(self) -> TwoBrokers:
        self.thread.start()

        async def start() -> None:
            self.namesrv = NameServer(NamesrvConfig(listen_port=0))
            await self.namesrv.start()
            self.namesrv_addr = self.namesrv.addr
            for name in ("broker-a", "broker-b"):
                cfg = BrokerConfig(listen_port=0, namesrv_addr=self.namesrv_addr, broker_name=name,
                                   store_path_root_dir=f"{self.store}/{name}",
                                   mapped_file_size_commit_log=16 * 1024 * 1024)
                broker = BrokerController(cfg)
                await broker.start()
                self.brokers[name] = broker

        self._run(start())
        return self

    def addr(self, name: str) -> str:
        return self.brokers[name].config.broker_addr

    def stop_broker(self, name: str) -> None:
        if name not in self.stopped:
            self.stopped.add(name)
            self._run(self.brokers[name].stop())

    def stop(self) -> None:
        for name in list(self.brokers):
            self.stop_broker(name)
        if self.namesrv is not None:
            self._run(self.namesrv.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(self.timeout_s)
        shutil.rmtree(self.store, ignore_errors=True)

    def __enter__(self) -> TwoBrokers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
