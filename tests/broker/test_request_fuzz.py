"""Issue 14: a structured fuzzer of every request handler of the broker and the name server.

Unlike ``test_fuzz.py`` (random and malformed frames), Hypothesis builds *valid-looking*
requests here: a registered request code, the field names of one of the protocol's real request
headers (``rocketmq_sdk.protocol.headers``), and for each field a plausible value or a hostile
one (names with ``/``, ``..``, NUL, 10 KB strings, negative and huge numbers), plus JSON bodies
of the right shape with hostile names for the heartbeat, lock and subscription-group requests.

Every request must be answered (same opaque, within the deadline); afterwards nothing exists
outside the store directory, every consume-queue directory is a legal topic name, the broker
still stores and serves a message, and the store loads again after a restart.

``FAULTS_EXAMPLES`` sets the number of requests (``make faults`` runs many more).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rocketmq_broker.broker.request_table import BROKER_REQUESTS
from rocketmq_broker.broker.requests import Body
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.exceptions import RemotingTimeoutError
from rocketmq_sdk.protocol import fastjson, headers
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.validators import is_valid_name

from tests.broker.conftest import SyncClient
from tests.broker.test_hostile_names import _commit_log_offset, _send
from tests.faults.faults_helpers import record

EXAMPLES = int(os.environ.get("FAULTS_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

HEADER_FIELDS = sorted({key for cls in headers.Header.__subclasses__() if dataclasses.is_dataclass(cls)
                        for _attr, key, _parser in cls._get_spec()})
HEADER_SPECS = [[key for _attr, key, _parser in cls._get_spec()] for cls in headers.Header.__subclasses__()
                if dataclasses.is_dataclass(cls) and cls._get_spec()]

HOSTILE = st.one_of(
    st.sampled_from(["x/../../../../escape", "..", ".", "/etc/passwd", "g\x00x", "T\n", "a" * 10_000, "",
                     "-1", "-2147483649", "2147483648", "9223372036854775808", "-9223372036854775809",
                     "99999999999999999999999", "1e9", "NaN", "true", "null", "\x01\x02", "%RETRY%", "%DLQ%x/y"]),
    st.integers(-(2**64), 2**64).map(str),
    st.text(max_size=30),
)
PLAUSIBLE = st.sampled_from(["T", "cg", "pg", "0", "1", "4", "TBW102", "%RETRY%cg", "*", "false", "DefaultCluster",
                             "broker-a", "127.0.0.1:10911"])
VALUE = st.one_of(PLAUSIBLE, HOSTILE)
NAME = st.one_of(st.sampled_from(["T", "cg"]), HOSTILE)


def _bodies():
    heartbeat = st.builds(lambda g, t, p: {"clientID": "c1", "producerDataSet": [{"groupName": p}],
                                           "consumerDataSet": [{"groupName": g, "consumeType": "CONSUME_PASSIVELY",
                                                                "messageModel": "CLUSTERING",
                                                                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                                                "unitMode": False, "subscriptionDataSet": [
                                                                    {"topic": t, "subString": "*", "tagsSet": [],
                                                                     "codeSet": [], "subVersion": 1,
                                                                     "expressionType": "TAG"}]}]},
                          NAME, NAME, NAME)
    lock = st.builds(lambda g, t, q: {"consumerGroup": g, "clientId": "c1",
                                      "mqSet": [{"topic": t, "brokerName": "broker-a", "queueId": q}]},
                     NAME, NAME, st.integers(-(2**40), 2**40))
    group = st.builds(lambda g, n: {"groupName": g, "retryQueueNums": n, "retryMaxTimes": n}, NAME,
                      st.integers(-(2**40), 2**40))
    return {Body.HEARTBEAT: heartbeat, Body.LOCK_BATCH: lock, Body.SUBSCRIPTION_GROUP: group}


#: the JSON body of each kind the broker's request table declares (``RequestSpec.body``)
BODIES = _bodies()
#: a topic and a group no fuzzed request names (its names come from PLAUSIBLE, HOSTILE and short
#: random text): the checks after the fuzz read these, since the fuzz may legally delete topic T,
#: group cg, or take TBW102's inherit permission (then a send no longer creates its topic)
CANARY_TOPIC, CANARY_GROUP = "FuzzCanaryTopic", "FuzzCanaryGroup"


def _own_header_keys(code: int) -> list[str]:
    """The fields of the header class the broker's request table declares for ``code`` (none
    for a code without one)."""
    spec = BROKER_REQUESTS.get(code)
    if spec is None or spec.header is None:
        return []
    return [key for _attr, key, _parser in spec.header._get_spec()]
# requests that would stop the servers being useful for the next examples (their hostile fields
# are still covered through the other codes sharing their header fields)
SKIP = {int(RequestCode.UPDATE_BROKER_CONFIG), int(RequestCode.UPDATE_NAMESRV_CONFIG),
        int(RequestCode.WIPE_WRITE_PERM_OF_BROKER)}
#: requests Java answers with nothing (END_TRANSACTION is sent oneway; 4.9.8 with ACL off does not
#: answer GET_BROKER_CLUSTER_ACL_INFO): sent oneway here
ONEWAY = {int(RequestCode.END_TRANSACTION), int(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)}


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("request-fuzz")
    cluster = start_dev_cluster(str(root / "store"), in_process=True)
    client = SyncClient()
    _send(client, cluster, "T")
    _send(client, cluster, CANARY_TOPIC)
    yield root, cluster, client
    client.close()
    cluster.stop()


def _codes(server) -> list[int]:
    return sorted(c for c in server.server._processors if c not in SKIP)


@st.composite
def requests(draw, broker_codes, namesrv_codes):
    to_broker = draw(st.booleans())
    code = draw(st.sampled_from(broker_codes if to_broker else namesrv_codes))
    own = _own_header_keys(code) if to_broker else []
    # half the time the handler's own header (from the request table), else any header's fields
    keys = own if own and draw(st.booleans()) else draw(st.sampled_from(HEADER_SPECS))
    ext = {k: draw(VALUE) for k in keys if draw(st.booleans())}
    if code == int(RequestCode.PULL_MESSAGE):  # no long-poll hold: an answer at once is the rule here
        ext["sysFlag"] = "0"
    body = b""
    spec = BROKER_REQUESTS.get(code) if to_broker else None
    if spec is not None and spec.body is not None:
        body = fastjson.dumps(draw(BODIES[spec.body])).encode()
    return to_broker, code, ext, body


def test_every_request_handler_answers_hostile_valid_looking_requests(fuzz_cluster):
    root, cluster, client = fuzz_cluster
    broker, namesrv = cluster._servers[-1], cluster._servers[0]
    seen: dict[int, set[int]] = {}

    @FUZZ
    @given(req=requests(_codes(broker), _codes(namesrv)))
    # legal requests the fuzz draws now and then (CI flakes): after them topic T is gone and
    # TBW102 (perm 6) no longer lets a send create a topic, so the checks use neither
    @example(req=(True, int(RequestCode.DELETE_TOPIC_IN_BROKER), {"topic": "T"}, b""))
    @example(req=(True, int(RequestCode.UPDATE_AND_CREATE_TOPIC), {"topic": "TBW102"}, b""))
    @example(req=(True, int(RequestCode.DELETE_SUBSCRIPTIONGROUP), {"groupName": "cg"}, b""))
    def one(req):
        to_broker, code, ext, body = req
        addr = cluster.broker_addr if to_broker else cluster.namesrv_addr
        if code in ONEWAY:
            client.oneway(addr, code, ext, body)
            return
        try:
            r = client.invoke(addr, code, ext, body, timeout_ms=5000)
        except RemotingTimeoutError:
            pytest.fail(f"no answer to code {code} {ext!r:.300}")
        seen.setdefault(code, set()).add(int(r.code))

    one()
    # nothing outside the store, every consume-queue directory a legal topic name
    assert sorted(os.listdir(root)) == ["store"]
    cq_dir = os.path.join(cluster.store_dir, "consumequeue")
    assert all(is_valid_name(t) for t in os.listdir(cq_dir)), os.listdir(cq_dir)
    assert all(is_valid_name(t) for t in broker.topics.table)
    # the broker still works: it creates a topic and stores and serves a message
    r = client.invoke(cluster.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                      {"topic": "AfterFuzz", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    _send(client, cluster, "AfterFuzz")
    assert _commit_log_offset(client, cluster, "AfterFuzz", CANARY_GROUP) >= 0
    record("request handler fuzz", requests=EXAMPLES, request_codes=len(seen),
           answers={str(c): sorted(v) for c, v in sorted(seen.items())})
    assert ResponseCode.SYSTEM_ERROR in set().union(*seen.values())


def test_the_store_loads_after_the_fuzz(fuzz_cluster, tmp_path):
    root, cluster, client = fuzz_cluster
    offset = _commit_log_offset(client, cluster, CANARY_TOPIC, CANARY_GROUP)
    topics = {name: str(tc) for name, tc in cluster._servers[-1].topics.table.items()}
    cluster.stop()
    again = start_dev_cluster(cluster.store_dir, in_process=True)
    try:
        assert _commit_log_offset(client, again, CANARY_TOPIC, CANARY_GROUP) == offset
        after = {name: str(tc) for name, tc in again._servers[-1].topics.table.items()}
        assert {name: tc for name, tc in after.items() if name in topics} == topics
        # a start creates the system topics again (Java's TopicConfigManager), which the fuzz may
        # have deleted: brokerName, the cluster name, TBW102; nothing else appears
        cfg = again._servers[-1].config
        assert set(after) - set(topics) <= {cfg.broker_name, cfg.broker_cluster_name, "TBW102"}
        _send(client, again, CANARY_TOPIC)
    finally:
        again.stop()


# -- DLedger frames (issue 27): hostile VOTE / HEART_BEAT / PUSH / METADATA / LEADERSHIP_TRANSFER
# bodies at a running group ---------------------------------------------------------------------
def _dledger_bodies():
    import base64

    from rocketmq_broker.dledger.protocol import DLedgerRequestCode
    def mostly(common, rare, n: int = 5):  # ``common`` n times as often as ``rare``
        return st.integers(0, n).flatmap(lambda k: rare if k == 0 else common)

    ids = mostly(st.sampled_from(["n0", "n1", "n2"]), st.one_of(st.sampled_from(["n9", "", "x" * 300]), HOSTILE))
    groups = st.one_of(st.just("broker-a"), st.just("broker-b"), HOSTILE)
    num = st.one_of(st.integers(-2, 300), st.integers(-(2**64), 2**64),
                    st.sampled_from([2**62, 2**63 - 1, -(2**63)]))
    absurd = st.one_of(num, num, num, st.floats(allow_nan=True), st.text(max_size=5), st.none())
    small = st.integers(0, 300)
    entry = st.fixed_dictionaries(
        {"index": st.one_of(small, small, num), "term": st.one_of(small, small, num), "pos": st.one_of(small, num),
         "body": st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode())},
        optional={"size": absurd, "magic": st.one_of(st.just(1), absurd), "channel": absurd})
    base = {"group": groups, "remoteId": ids, "localId": ids, "leaderId": ids, "term": num}
    vote = st.fixed_dictionaries(base, optional={"ledgerEndIndex": num, "ledgerEndTerm": num, "code": absurd})
    heartbeat = st.fixed_dictionaries(base, optional={"code": absurd})
    push = st.fixed_dictionaries(
        {**base, "type": mostly(st.sampled_from(["APPEND", "COMMIT", "COMPARE", "TRUNCATE"]), HOSTILE)},
        optional={"commitIndex": num, "entry": mostly(entry, st.one_of(st.none(), st.just([]))),
                  "batchEntry": mostly(st.just([]), st.one_of(st.lists(entry, max_size=3), HOSTILE))})

    metadata = st.fixed_dictionaries(base, optional={"code": absurd})
    transfer = st.fixed_dictionaries({**base, "transferId": ids, "transfereeId": ids},
                                     optional={"takeLeadershipLedgerIndex": absurd, "code": absurd})
    return [(int(DLedgerRequestCode.VOTE), vote), (int(DLedgerRequestCode.HEART_BEAT), heartbeat),
            (int(DLedgerRequestCode.PUSH), push), (int(DLedgerRequestCode.PUSH), push),
            (int(DLedgerRequestCode.METADATA), metadata),
            (int(DLedgerRequestCode.LEADERSHIP_TRANSFER), transfer),
            (int(DLedgerRequestCode.PULL), st.just({})), (int(DLedgerRequestCode.APPEND), st.just({}))]


def _dledger_frame_body(data, obj: dict, target_id: str) -> bytes:
    """Mostly addressed right (so the frame reaches the vote/heartbeat/push logic), sometimes
    not; then encoded whole, truncated, or replaced by garbage."""
    if data.draw(st.integers(0, 9)) < 8:
        obj = {**obj, "remoteId": target_id, "group": "broker-a"}
    raw = fastjson.dumps(obj).encode()
    shape = data.draw(st.integers(0, 9))
    if shape == 8:
        return raw[:data.draw(st.integers(0, len(raw)))]
    if shape == 9:
        return data.draw(st.binary(max_size=40))
    return raw


def test_hostile_dledger_frames_are_refused_and_never_corrupt_the_log(tmp_path):
    """Wrong group or member, absurd indexes and terms, truncated or garbage bodies, bad entries:
    each frame is answered (remoting 200 with a DLedger error code in the body, or SYSTEM_ERROR
    for an unreadable body), no member crashes, the group still elects a master that stores
    sends, and every member's log stays byte-identical."""
    from rocketmq_sdk import Message, Producer

    from tests.dledger.brokers import DLedgerBrokers
    group = DLedgerBrokers(str(tmp_path))
    group.start()
    client = SyncClient()
    try:
        group.wait_master()
        with Producer("fuzz_dl_producer", namesrv_addr=group.namesrv_addr) as producer:
            for i in range(5):
                producer.send(Message("DLFuzz", f"before-{i}".encode()))
        members = {b.dledger.node.config.self_id: b.dledger.node.config.self_addr for b in group.brokers.values()}
        seen: dict[int, set[int]] = {}
        kinds = _dledger_bodies()

        @FUZZ
        @given(data=st.data())
        def one(data):
            code, bodies = data.draw(st.sampled_from(kinds))
            target = data.draw(st.sampled_from(sorted(members)))
            body = _dledger_frame_body(data, data.draw(bodies), target)
            addr = members[target]
            try:
                r = client.invoke(addr, code, {}, body, timeout_ms=5000)
            except RemotingTimeoutError:
                pytest.fail(f"no answer to DLedger code {code} {body[:200]!r}")
            inner = None
            if r.code == 200 and r.body:
                inner = fastjson.loads(r.body.decode()).get("code")
            seen.setdefault(code, set()).add(inner if inner is not None else -int(r.code))

        one()
        master = group.wait_master(60)
        with Producer("fuzz_dl_producer2", namesrv_addr=group.namesrv_addr) as producer:
            result = producer.send(Message("DLFuzz", b"after"))
        assert result.send_status.name == "SEND_OK"
        group.wait_for(lambda: len({b.dledger.node.ledger.end_index for b in group.brokers.values()}) == 1
                       and len({b.dledger.node.ledger.committed_index for b in group.brokers.values()}) == 1,
                       20, "members in line")
        logs = {b"".join(mf.read_raw(0, mf.wrote_position) for mf in b.dledger.node.ledger.data.files)
                for b in group.brokers.values()}
        assert len(logs) == 1
        record("dledger frame fuzz", requests=EXAMPLES, master=master.dledger.node.config.self_id,
               answers={str(c): sorted(v) for c, v in sorted(seen.items())})
    finally:
        client.close()
        group.stop()
