"""HA (master/slave replication) frames against real Apache RocketMQ 4.9.8 traffic.

``tests/data/ha_capture_frames.jsonl`` holds the HA frames of ``ha_sync_master.jsonl`` and
``ha_file_boundary.jsonl`` (two recorded sessions between two 4.9.8 brokers, ``decoded`` annotations
dropped, field ``capture`` added) and the first REGISTER_BROKER exchanges of the master and the slave.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path

import pytest
from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig
from rocketmq_broker.store.config import StoreConfig
from rocketmq_broker.store.ha_client import HAClient
from rocketmq_broker.store.ha_frames import (
    REPORT,
    TRANSFER_HEADER,
    ReportReader,
    TransferReader,
    encode_report,
    encode_transfer,
)
from rocketmq_broker.store.ha_service import HAService, HASettings
from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.message_store import MessageStore
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

DATA = Path(__file__).resolve().parent.parent / "data" / "ha_capture_frames.jsonl"
MIB = 1024 * 1024  # the captured brokers ran with mappedFileSizeCommitLog=1048576


def _frames(capture: str | None = None) -> list[dict]:
    with DATA.open(encoding="utf-8") as fh:
        frames = [json.loads(line) for line in fh if line.strip()]
    return [f for f in frames if capture is None or f["capture"] == capture]


def _ha(capture: str | None = None) -> list[dict]:
    return [f for f in _frames(capture) if f["proto"] == "ha"]


def test_every_captured_report_and_transfer_header_encodes_byte_for_byte():
    frames = _ha()
    reports = [f for f in frames if f["kind"] == "report"]
    transfers = [f for f in frames if f["kind"] == "transfer"]
    assert len(reports) >= 290 and len(transfers) >= 290
    for f in reports:
        assert encode_report(f["offset"]).hex() == f["bytes_hex"], f["seq"]
    for f in transfers:
        raw = bytes.fromhex(f["bytes_hex"])
        head = raw[12:]  # up to 52 captured body bytes
        frame = encode_transfer(f["offset"], head + bytes(f["size"] - len(head)))
        assert frame[:len(raw)] == raw, f["seq"]
        assert f["heartbeat"] == (f["size"] == 0)
        assert f["size"] <= 32768  # haTransferBatchSize


def test_transfer_reader_cuts_the_captured_stream_however_it_is_split():
    transfers = [f for f in _ha("ha_file_boundary") if f["kind"] == "transfer"]
    stream = b"".join(encode_transfer(f["offset"], bytes.fromhex(f["bytes_hex"])[12:].ljust(f["size"], b"x"))
                      for f in transfers)
    for step in (1, 7, 12, 4096, len(stream)):
        reader = TransferReader()
        got = []
        for i in range(0, len(stream), step):
            got += reader.feed(stream[i:i + step])
        assert [(o, len(b)) for o, b in got] == [(f["offset"], f["size"]) for f in transfers]
        assert reader.pending == 0


def test_report_reader_keeps_only_the_newest_value_of_a_segment():
    # [fb seq 20-23]: four reports arrived in one TCP segment; the master acts on the last one
    reports = [f["offset"] for f in _ha("ha_file_boundary") if f["kind"] == "report" and 20 <= f["seq"] <= 23]
    assert reports == [3143060, 3145728, 3178496, 3183904]
    reader = ReportReader()
    data = b"".join(encode_report(o) for o in reports)
    assert reader.feed(data[:5]) is None
    assert reader.feed(data[5:]) == 3183904


def test_our_slave_reports_what_the_4_9_8_slave_reported_across_the_file_boundary(tmp_path):
    """Feed our HA client the master's transfers of ``ha_file_boundary`` (bodies padded: only
    their first bytes were captured) from a slave whose log ends where the captured one did;
    its reports (idle repeats aside) are the captured reports, and the bytes land in files cut
    at the same 1 MiB boundary (the 2668-byte chunk ends file 3145728's predecessor)."""
    frames = _ha("ha_file_boundary")
    transfers = [f for f in frames if f["kind"] == "transfer"]
    expected = []
    for f in frames:
        if f["kind"] == "report" and (not expected or expected[-1] != f["offset"]):
            expected.append(f["offset"])
    start = transfers[0]["offset"]  # 3032767, the captured slave's max offset

    async def main() -> list[int]:
        store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=MIB))
        store.start()
        first_file = start - start % MIB
        pos = first_file
        while pos < start:  # a log ending where the captured slave's did
            n = min(start - pos, 65536)
            assert store.append_to_commit_log(pos, bytes(n))
            pos += n
        got: list[int] = []
        done = asyncio.Event()

        async def fake_master(reader, writer):
            sent = False
            while True:  # every report, even those that share a segment
                try:
                    value = REPORT.unpack(await reader.readexactly(8))[0]
                except asyncio.IncompleteReadError:
                    return
                got.append(value)
                if not sent:
                    sent = True
                    for f in transfers:
                        body = bytes.fromhex(f["bytes_hex"])[12:].ljust(f["size"], b"\0")
                        writer.write(encode_transfer(f["offset"], body))
                    await writer.drain()
                if value == expected[-1]:
                    done.set()

        server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
        client = HAClient(store, heartbeat_interval=60_000)
        client.update_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        client.start()
        try:
            await asyncio.wait_for(done.wait(), 10)
        finally:
            await client.stop()
            server.close()
            store.shutdown()
        return got

    got = asyncio.run(main())
    assert got == expected
    names = sorted(os.listdir(tmp_path / "commitlog"))
    assert names == ["00000000000002097152", "00000000000003145728"]


def _fill(store: MessageStore, count: int, size: int) -> None:
    for i in range(count):
        msg = InnerMessage(topic="HaCapPreTopic", queue_id=i % 4, body=bytes([65 + i % 26]) * size,
                           properties_string="", born_host="127.0.0.1:5000", store_host="127.0.0.1:20911")
        assert store.put_message(msg).is_ok()


def test_our_master_starts_an_empty_slave_at_its_last_file_and_never_crosses_a_file(tmp_path):
    """[seq 29-31]: master files 0, 1048576, 2097152 with its end at 2525144 (600 × 4000 B);
    an empty slave reports 0 and gets data from 2097152 only. Our master does the same with the
    same preload, in chunks of at most 32768 bytes that stop at the file end."""
    captured = [f for f in _ha("ha_sync_master") if f["seq"] in (29, 31)]
    assert captured[0]["offset"] == 0 and captured[1]["offset"] == 2097152

    async def main():
        store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=MIB))
        store.start()
        _fill(store, 600, 4000)
        end = store.get_max_phy_offset()
        ha = HAService(store, HASettings())
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode_report(0))
        await writer.drain()
        frames = TransferReader()
        got = []
        while sum(len(b) for _, b in got) < end - 2097152:
            got += frames.feed(await asyncio.wait_for(reader.read(65536), 5))
        writer.close()
        await ha.stop()
        master_bytes = store.commit_log.get_message(2097152, end - 2097152)
        store.shutdown()
        return end, got, master_bytes

    end, got, master_bytes = asyncio.run(main())
    assert 2097152 < end < 3 * MIB
    assert got[0][0] == 2097152
    assert all(0 < len(b) <= 32768 for _, b in got)
    assert all(o // MIB == (o + len(b) - 1) // MIB for o, b in got)
    assert b"".join(b for _, b in got) == master_bytes


def test_a_slave_registration_is_answered_with_its_masters_ha_address_as_4_9_8():
    """[seq 2/3, 16/17]: the master's REGISTER_BROKER is answered without extFields, the slave's
    with the master's address and the HA address the master registered."""
    frames = {f["seq"]: f for f in _frames("ha_sync_master") if f["proto"] == "remoting"}

    async def main():
        ns = NameServer(NamesrvConfig(listen_port=0))
        await ns.start()
        client = RemotingClient()
        try:
            answers = []
            for seq in (2, 16):
                f = frames[seq]
                cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(f["header"]["extFields"]),
                                              base64.b64decode(f["body_b64"]))
                answers.append(await client.invoke(ns.addr, cmd, 3000))
            return answers
        finally:
            await client.close()
            await ns.stop()

    master, slave = asyncio.run(main())
    assert master.code == 0 and (master.ext_fields or {}) == frames[3]["header"]["extFields"] == {}
    assert slave.code == 0 and slave.ext_fields == frames[17]["header"]["extFields"]
    assert slave.ext_fields == {"haServerAddr": "127.0.0.1:20912", "masterAddr": "127.0.0.1:20911"}


@pytest.mark.parametrize("half", [False, True])
def test_master_sends_nothing_before_the_first_report_then_starts_where_it_says(tmp_path, half):
    async def main():
        store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=MIB))
        store.start()
        _fill(store, 10, 1000)
        report = store.get_max_phy_offset() // 2 if half else 0
        ha = HAService(store, HASettings())
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(12), 0.3)
        assert ha.connection_count == 1  # counted at accept, as Java's connectionCount
        writer.write(encode_report(report))
        await writer.drain()
        header = await asyncio.wait_for(reader.readexactly(12), 5)
        writer.close()
        await ha.stop()
        store.shutdown()
        return report, TRANSFER_HEADER.unpack(header)

    report, (offset, size) = asyncio.run(main())
    assert offset == report and size > 0  # a non-zero report is taken as is (no record alignment)


def test_a_cancel_that_comes_as_a_read_completes_ends_the_ha_client(tmp_path, monkeypatch):
    """The slave's replication task is cancelled (``stop()``) in the very step its read of the
    master's stream completes: it must end. ``asyncio.wait_for`` on Python 3.11 returned the data
    and swallowed the cancel (gh-86296): the session went on and ``broker.stop()`` hung (seen as
    a 30 s TimeoutError in ``stop_slave`` under load)."""
    real_open = asyncio.open_connection

    async def main():
        store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=MIB))
        store.start()
        client = HAClient(store, heartbeat_interval=60_000)

        async def open_connection(*args, **kwargs):
            reader, writer = await real_open(*args, **kwargs)
            read = reader.read

            async def read_then_cancel(n: int = -1) -> bytes:
                data = await read(n)
                if data and client._task is not None:
                    client._task.cancel()  # as stop() would, just as the read completes
                return data

            reader.read = read_then_cancel
            return reader, writer

        monkeypatch.setattr(asyncio, "open_connection", open_connection)

        async def fake_master(reader, writer):
            writer.write(encode_transfer(0))  # a heartbeat frame
            await writer.drain()
            await reader.read()  # until the slave closes

        server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
        client.update_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        client.start()
        task = client._task
        try:
            done, _ = await asyncio.wait({task}, timeout=10)
            return bool(done) and task.cancelled()
        finally:
            await client.stop()
            server.close()
            store.shutdown()

    assert asyncio.run(main()), "the HA client's task went on after its cancel"
