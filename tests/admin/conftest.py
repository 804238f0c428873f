"""Fixtures of the admin tests: a server replaying mqadmin 4.9.8's captured answers, and the
reference cluster."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread
from rocketmq_sdk.remoting.server import RemotingServer

from tests.conftest import load_capture

# added by the ACL hook or by enableStreamRequestType, not by the command itself
IGNORED_EXT = {"AccessKey", "Signature", "SecretKey", "SecurityToken", "ReqT"}
# the captured servers: name server, broker-a, broker-b
CAPTURED_ADDRS = ("127.0.0.1:9876", "127.0.0.1:10911", "127.0.0.1:10921")


def ext_of(header: dict | None) -> dict[str, str]:
    ext = (header or {}).get("extFields") or {}
    return {k: str(v) for k, v in ext.items() if k not in IGNORED_EXT}


@dataclass
class Exchange:
    code: int
    ext: dict[str, str]
    body: bytes
    response: dict
    client: str = "mqadmin"


def mqadmin_exchanges() -> list[Exchange]:
    """Every request mqadmin (and the DefaultMQAdminExt program) sent, with its response."""
    frames = load_capture("admin")
    responses = {f["reply_to"]: f for f in frames if f.get("reply_to")}
    out = []
    for f in frames:
        if f["from"] != "client" or f.get("client") not in ("mqadmin", "java") or f["seq"] not in responses:
            continue
        out.append(Exchange(f["code"], ext_of(f["header"]), base64.b64decode(f.get("body_b64") or ""),
                            responses[f["seq"]], f["client"]))
    out.sort(key=lambda e: e.client != "mqadmin")  # mqadmin's own exchanges first (stable)
    return out


def captured_request(code: int, **match: str) -> Exchange:
    """The first captured request with ``code`` whose ext fields include ``match``."""
    for ex in mqadmin_exchanges():
        if ex.code == code and all(ex.ext.get(k) == v for k, v in match.items()):
            return ex
    raise LookupError(f"no captured request {code} {match}")


@dataclass
class ReplayServer:
    """Answers each request with the captured answer to the same request (same code and ext
    fields), else to the first request of that code; records what it received."""

    addr: str = ""
    received: list[RemotingCommand] = field(default_factory=list)
    overrides: dict[int, dict] = field(default_factory=dict)

    def requests(self, code: int) -> list[RemotingCommand]:
        return [c for c in self.received if c.code == code]


@pytest.fixture(scope="module")
def _replay_loop() -> Iterator[EventLoopThread]:
    loop = EventLoopThread("admin-replay")
    yield loop
    loop.stop()


@pytest.fixture
def replay(_replay_loop: EventLoopThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    """A fake 4.9.8 name server + broker-a + broker-b in one server; the client's connections to
    the captured addresses are redirected to it."""
    exchanges = mqadmin_exchanges()
    state = ReplayServer()
    lock = threading.Lock()

    def answer(channel, cmd: RemotingCommand) -> RemotingCommand:
        with lock:
            state.received.append(cmd)
        ext = {k: v for k, v in cmd.ext_fields.items() if k not in IGNORED_EXT}
        resp = state.overrides.get(cmd.code)
        if resp is None:
            same = [e for e in exchanges if e.code == cmd.code]
            exact = [e for e in same if e.ext == ext]
            pick = (exact or same or [None])[0]
            if pick is None:
                return cmd.response(3, f" request type {cmd.code} not supported")
            resp = pick.response
        h = resp["header"]
        return cmd.response(resp["code"], h.get("remark"), dict(h.get("extFields") or {}),
                            base64.b64decode(resp.get("body_b64") or ""))

    server = RemotingServer(name="admin-replay")
    server.default_processor = answer
    port = _replay_loop.run(server.start("127.0.0.1", 0), 5)
    state.addr = f"127.0.0.1:{port}"

    original = RemotingClient.get_channel

    async def get_channel(self, addr: str):
        return await original(self, state.addr if addr in CAPTURED_ADDRS else addr)

    monkeypatch.setattr(RemotingClient, "get_channel", get_channel)
    yield state
    _replay_loop.run(server.stop(), 5)
