"""RemotingServer processors that return an ``asyncio.Future`` (the broker's SYNC_FLUSH puts):
answered when the future completes, in completion order, SYSTEM_ERROR when it fails, nothing when
it is cancelled or the request is oneway; the ACL-style request hook still runs first."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand, RemotingServer

from tests.conftest import run_async as run
from tests.conftest import wait_until_async as wait_for

pytestmark = pytest.mark.timeout(30)

DEFERRED = 1100


def test_future_results_are_answered_when_completed():
    async def main():
        pending: dict[str, asyncio.Future] = {}
        server = RemotingServer()

        def deferred(ch, cmd):
            fut = asyncio.get_running_loop().create_future()
            pending[cmd.ext_fields["k"]] = fut
            return fut

        server.register_processor(DEFERRED, deferred)
        refused = []
        server.add_request_hook(lambda ch, cmd: (refused.append(cmd.opaque), cmd.response(16, "denied"))[1]
                                if cmd.ext_fields.get("k") == "deny" else None)
        port = await server.start("127.0.0.1", 0)
        addr = f"127.0.0.1:{port}"
        client = RemotingClient()
        try:
            calls = {k: asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(DEFERRED, {"k": k}), 3000))
                     for k in ("a", "b", "c", "d")}
            oneway = RemotingCommand.request(DEFERRED, {"k": "ow"}, oneway=True)
            await client.invoke_oneway(addr, oneway)
            await wait_for(lambda: len(pending) == 5)
            denied = await client.invoke(addr, RemotingCommand.request(DEFERRED, {"k": "deny"}), 3000)
            assert denied.code == 16 and denied.remark == "denied" and len(refused) == 1
            b_req = pending["b"]
            b_req.set_result(RemotingCommand(ResponseCode.SUCCESS, remark="second"))
            resp_b = await calls["b"]
            assert resp_b.remark == "second" and resp_b.is_response
            assert not calls["a"].done()  # answered in completion order, not request order
            pending["a"].set_result(RemotingCommand(ResponseCode.SUCCESS, remark="first"))
            pending["c"].set_exception(ValueError("store on fire"))
            pending["d"].cancel()
            pending["ow"].set_result(RemotingCommand(ResponseCode.SUCCESS))
            assert (await calls["a"]).remark == "first"
            resp_c = await calls["c"]
            assert resp_c.code == ResponseCode.SYSTEM_ERROR and "store on fire" in resp_c.remark
            # a cancelled future is never answered: a later answer on the connection overtakes it
            later = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(DEFERRED, {"k": "e"}), 3000))
            await wait_for(lambda: "e" in pending)
            pending["e"].set_result(RemotingCommand(ResponseCode.SUCCESS, remark="later"))
            assert (await later).remark == "later"
            assert not calls["d"].done()
            calls["d"].cancel()
        finally:
            await client.close()
            await server.stop()

    run(main())
