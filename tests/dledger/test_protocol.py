"""DLedger RPC bodies: every captured 4.9.8 frame decodes and re-encodes to the same bytes, with
the one remoting codec the SDK and the broker share."""

from __future__ import annotations

import base64
import json

import pytest
from rocketmq_broker.dledger.protocol import (
    DLedgerProtocolError,
    DLedgerRequestCode,
    HeartBeatRequest,
    HeartBeatResponse,
    PushRequest,
    PushResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketmq_sdk.protocol.codes import LanguageCode
from rocketmq_sdk.remoting.command import RemotingCommand

from .golden import frames

_REQUESTS = {"VOTE": VoteRequest, "HEART_BEAT": HeartBeatRequest, "PUSH": PushRequest}
_RESPONSES = {"VOTE": VoteResponse, "HEART_BEAT": HeartBeatResponse}


def _codec(frame) -> type:
    if frame.name != "RESPONSE":
        return _REQUESTS[frame.name]
    kind = frame.request_name.split("/")[0]
    return _RESPONSES.get(kind, PushResponse)


def test_every_captured_body_round_trips_byte_for_byte():
    counts: dict[str, int] = {}
    for f in frames():
        codec = _codec(f)
        assert codec.decode(f.body).encode() == f.body, (f.src, f.seq)
        key = f.request_name or f.name
        counts[key] = counts.get(key, 0) + 1
    print("round-tripped frames:", counts)
    assert counts["PUSH"] > 200 and counts["VOTE"] > 10 and counts["PUSH/TRUNCATE"] >= 2


def test_frames_use_the_shared_remoting_codec_and_answer_with_code_200():
    for f in frames():
        cmd = RemotingCommand.decode(f.raw[4:])
        assert cmd.encode() == f.raw
        if f.name == "RESPONSE":
            assert cmd.code == 200 and cmd.is_response  # the outcome is in the body
        else:
            assert cmd.code == DLedgerRequestCode[f.name]


def test_built_requests_equal_captured_ones():
    """Our own requests (not decoded ones) are byte-identical to Java's for the same values."""
    vote = VoteRequest(group="broker-a", remote_id="n1", local_id="n0", leader_id="n0", term=0)
    hb = HeartBeatRequest(group="broker-a", remote_id="n1", local_id="n0", leader_id="n0", term=1)
    commit = PushRequest(group="broker-a", remote_id="n1", local_id="n0", leader_id="n0", term=1,
                         type=PushType.COMMIT, commit_index=199)
    by_seq = {(f.src, f.seq): f for f in frames()}
    assert vote.encode() == by_seq["dledger_election.jsonl", 9].body
    assert hb.encode() == by_seq["dledger_election.jsonl", 48].body
    assert commit.encode() == by_seq["dledger_replication.jsonl", 818].body
    assert HeartBeatResponse(code=416).encode() == b'{"code":416,"term":-1}'
    cmd = RemotingCommand(51002, language=LanguageCode.JAVA, opaque=31, body=hb.encode())
    assert cmd.encode() == by_seq["dledger_election.jsonl", 48].raw


def test_vote_response_and_push_response_fields():
    by_seq = {(f.src, f.seq): f for f in frames()}
    resp = VoteResponse.decode(by_seq["dledger_election.jsonl", 10].body)
    assert resp.vote_result is VoteResult.REJECT_ALREADY_VOTED and resp.term == 0
    push = PushResponse.decode(by_seq["dledger_replication.jsonl", 4].body)
    assert (push.code, push.begin_index, push.end_index, push.index) == (406, -1, -1, 0)
    req = PushRequest.decode(by_seq["dledger_replication.jsonl", 10].body)
    assert req.type is PushType.APPEND and req.entry.index == 1 and req.entry.pos == 272


def _push_body(**over) -> bytes:
    entry = {"body": base64.b64encode(b"x").decode(), "bodyCrc": 0, "chainCrc": 0, "channel": 0, "index": 1,
             "magic": 1, "pos": 0, "size": 49, "term": 1}
    obj = {"code": 200, "commitIndex": 0, "entry": entry, "group": "g", "leaderId": "n0", "localId": "n0",
           "remoteId": "n1", "term": 1, "type": "APPEND"}
    for k, v in over.items():
        if k.startswith("entry_"):
            entry[k[6:]] = v
        elif v is None:
            obj.pop(k)
        else:
            obj[k] = v
    return json.dumps(obj).encode()


@pytest.mark.parametrize("body", [
    b"", b"\xff\xfe", b"[]", b"{", b'"x"',
    _push_body(type="DELETE"), _push_body(type=None), _push_body(term="1"), _push_body(term=1 << 63),
    _push_body(entry_index=-5), _push_body(entry_size=48), _push_body(entry_body="!!notbase64"),
    _push_body(entry_magic=7), _push_body(entry=None), _push_body(group=None), _push_body(remoteId=""),
    _push_body(group="g" * 300), _push_body(commitIndex=1.5), _push_body(batchEntry={"a": 1}),
])
def test_hostile_push_bodies_are_refused(body):
    with pytest.raises(DLedgerProtocolError):
        PushRequest.decode(body)


def test_unknown_fields_are_ignored():
    body = json.loads(_push_body())
    body["futureField"] = {"x": [1, 2]}
    assert PushRequest.decode(json.dumps(body).encode()).entry.body == b"x"


def test_leadership_transfer_and_metadata_bodies_are_written_as_fastjson_writes_the_beans():
    """No LEADERSHIP_TRANSFER or METADATA frame is in the captures (4.9.8 brokers never send
    them): the bodies follow DLedger 0.3.1.2's beans (``LeadershipTransferRequest``: the base
    fields plus transferId, transfereeId, takeLeadershipLedgerIndex; ``MetadataResponse``: plus
    peers), keys in fastjson's alphabetical order, nulls left out."""
    from rocketmq_broker.dledger.protocol import (
        LeadershipTransferRequest,
        LeadershipTransferResponse,
        MetadataRequest,
        MetadataResponse,
    )
    take = LeadershipTransferRequest(group="broker-a", leader_id="n0", local_id="n0", remote_id="n1", term=3,
                                     transfer_id="n0", transferee_id="n1", take_leadership_ledger_index=41)
    assert take.encode() == (b'{"code":200,"group":"broker-a","leaderId":"n0","localId":"n0","remoteId":"n1",'
                             b'"takeLeadershipLedgerIndex":41,"term":3,"transferId":"n0","transfereeId":"n1"}')
    assert LeadershipTransferRequest.decode(take.encode()) == take
    # DLedgerClient.leadershipTransfer: no localId, no leaderId, takeLeadershipLedgerIndex 0
    admin = LeadershipTransferRequest.decode(b'{"code":200,"group":"g","remoteId":"n0","takeLeadershipLedgerIndex":0,'
                                             b'"term":2,"transferId":"n0","transfereeId":"n2"}')
    assert (admin.local_id, admin.transfer_id, admin.transferee_id, admin.term) == (None, "n0", "n2", 2)
    with pytest.raises(DLedgerProtocolError):
        LeadershipTransferRequest.decode(b'{"group":"g","remoteId":"n0","term":2,"transferId":"n0"}')
    assert LeadershipTransferResponse(code=417, term=2).encode() == b'{"code":417,"term":2}'
    meta = MetadataResponse(group="g", leader_id="n1", peers={"n0": "127.0.0.1:1", "n1": "127.0.0.1:2"})
    assert meta.encode() == (b'{"code":200,"group":"g","leaderId":"n1","peers":{"n0":"127.0.0.1:1",'
                             b'"n1":"127.0.0.1:2"},"term":-1}')
    assert MetadataResponse.decode(meta.encode()) == meta
    assert MetadataRequest.decode(b'{"group":"g","remoteId":"n1"}').remote_id == "n1"
