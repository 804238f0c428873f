"""Codes, flags, constants and the Java string hash of ``rocketmq_sdk.protocol``."""

from __future__ import annotations

import re

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import codes
from rocketmq_sdk.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    MessageConst,
    MessageSysFlag,
    PermName,
    PullSysFlag,
    RequestCode,
    ResponseCode,
    TopicSysFlag,
)
from rocketmq_sdk.protocol.javahash import (
    java_abs_mod,
    java_mod,
    java_string_hash,
    select_queue_index_by_hash,
)

from tests.conftest import CAPTURE_NAMES, REPO_ROOT, load_capture


def test_current_version_is_4_9_8_and_ordinals_follow_the_formula():
    assert CURRENT_VERSION == 409 == codes.version_ordinal(9, 8)
    assert codes.version_ordinal(9, 4) == codes.V4_9_4 == 401
    assert codes.version_ordinal(9, 0) == codes.V4_9_0 == 393
    assert codes.version_ordinal(6, 0) == codes.V4_6_0 == 333
    assert codes.version_ordinal(1, 0, snapshot=True) == codes.V4_1_0_SNAPSHOT == 232
    assert codes.version_desc(409) == "V4_9_8"
    assert codes.version_desc(408) == "V4_9_8_SNAPSHOT"
    assert codes.version_desc(63).startswith("ordinal")


def test_language_codes_match_the_protocol_table():
    assert [(lc.name, lc.value) for lc in LanguageCode][:4] == [("JAVA", 0), ("CPP", 1), ("DOTNET", 2), ("PYTHON", 3)]
    assert LanguageCode.RUST == 12 and LanguageCode.GO == 9


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_every_captured_code_and_name_is_known(name):
    for rec in load_capture(name):
        if rec["flag"] & 1:
            assert ResponseCode(rec["code"]).name == rec["name"]
        else:
            assert RequestCode(rec["code"]).name == rec["name"]
        assert LanguageCode[rec["header"]["language"]] is not None


def _doc_codes(start: str, end: str) -> dict[int, str]:
    text = (REPO_ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = text[text.index(start):text.index(end)]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"\| (\d+) \| ([A-Z0-9_]+)", section)}


def test_request_codes_equal_the_protocol_doc_table():
    assert {c.value: c.name for c in RequestCode} == _doc_codes("### 2.1", "### 2.2")


def test_response_codes_equal_the_protocol_doc_table():
    assert {c.value: c.name for c in ResponseCode} == _doc_codes("### 2.2", "## 3.")


def test_some_codes_by_value():
    assert RequestCode.SEND_MESSAGE_V2 == 310 and RequestCode.SEND_BATCH_MESSAGE == 320
    assert RequestCode.DELETE_EXPIRED_COMMITLOG == 329
    assert ResponseCode.FLOW_CONTROL == 215 and ResponseCode.TRANSACTION_STATE_UNKNOW == 202


def test_perm_name_bits_and_rendering():
    assert (PermName.READ, PermName.WRITE, PermName.INHERIT, PermName.PRIORITY) == (4, 2, 1, 8)
    assert PermName.is_readable(6) and PermName.is_writeable(6) and not PermName.is_inherited(6)
    assert not PermName.is_writeable(4) and not PermName.is_readable(2)
    assert PermName.perm2string(6) == "RW-" and PermName.to_string(7) == "RWX" and PermName.to_string(0) == "---"


def test_message_sys_flag_bits():
    assert MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_ZLIB == 0x301
    assert MessageSysFlag.transaction_value(0x301 | MessageSysFlag.TRANSACTION_PREPARED_TYPE) == 4
    assert MessageSysFlag.reset_transaction_value(0x4 | 0x1, MessageSysFlag.TRANSACTION_COMMIT_TYPE) == 0x9
    assert (MessageSysFlag.BORNHOST_V6, MessageSysFlag.STOREHOST_V6) == (0x10, 0x20)
    assert MessageSysFlag.is_compressed(0x301) and not MessageSysFlag.is_compressed(0x300)


def test_pull_sys_flag_build_and_has():
    f = PullSysFlag.build(commit_offset=True, suspend=True, subscription=False)
    assert f == 3
    assert PullSysFlag.has_commit_offset(f) and PullSysFlag.has_suspend(f) and not PullSysFlag.has_subscription(f)
    assert PullSysFlag.clear_commit_offset(f) == 2
    lite = PullSysFlag.build(False, True, True, lite_pull=True)
    assert lite == 0x16 and PullSysFlag.has_lite_pull(lite) and not PullSysFlag.has_class_filter(lite)


@pytest.mark.parametrize("name", ["java-push-consumer", "java-lite-pull", "cpp-client-push-consumer"])
def test_pull_sys_flags_seen_on_the_wire_decode(name):
    flags = {int(r["header"]["extFields"]["sysFlag"]) for r in load_capture(name)
             if r["code"] == RequestCode.PULL_MESSAGE and not r["flag"] & 1}
    assert flags
    for f in flags:
        assert PullSysFlag.build(PullSysFlag.has_commit_offset(f), PullSysFlag.has_suspend(f),
                                 PullSysFlag.has_subscription(f), PullSysFlag.has_class_filter(f),
                                 PullSysFlag.has_lite_pull(f)) == f


def test_topic_sys_flag():
    assert TopicSysFlag.build(True, True) == 3 and TopicSysFlag.has_unit(1) and TopicSysFlag.has_unit_sub(2)


def test_message_const_reserved_names():
    assert MessageConst.STRING_HASH_SET is MessageConst.RESERVED
    for key in ("KEYS", "TAGS", "WAIT", "DELAY", "UNIQ_KEY", "TRAN_MSG", "PGROUP", "CLUSTER", "MSG_TYPE",
                "REAL_TOPIC", "REAL_QID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "TTL", "ARRIVE_TIME",
                "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET", "CORRELATION_ID", "REPLY_TO_CLIENT"):
        assert key in MessageConst.RESERVED
    assert "__transactionId__" not in MessageConst.RESERVED and "userProp" not in MessageConst.RESERVED


def test_mixall_topics_and_groups():
    assert codes.DEFAULT_TOPIC == "TBW102" and codes.MASTER_ID == 0
    assert codes.get_retry_topic("g") == "%RETRY%g" and codes.get_dlq_topic("g") == "%DLQ%g"
    assert codes.is_retry_topic("%RETRY%g") and codes.is_dlq_topic("%DLQ%g") and not codes.is_retry_topic("g")
    assert codes.is_sys_topic("SCHEDULE_TOPIC_XXXX") and codes.is_sys_topic("TBW102")
    assert codes.is_sys_topic("rmq_sys_anything") and not codes.is_sys_topic("CapProducerTopic")
    assert codes.is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX")
    assert codes.is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not codes.is_not_allowed_send_topic("TBW102")


@pytest.mark.parametrize("name,ok", [
    ("CapProducerTopic", True), ("%RETRY%cap_push_group", True), ("a|b-c_d", True), ("x" * 127, True),
    ("x" * 128, False), ("", False), ("has space", False), ("dot.ted", False), ("ünï", False),
])
def test_topic_and_group_name_validation(name, ok):
    assert codes.is_valid_name(name) is ok
    if ok:
        assert codes.check_name(name) == name
    else:
        with pytest.raises(IllegalArgumentError):
            codes.check_name(name)


# --- Java String.hashCode ---------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("", 0), ("a", 97), ("TagA", 2598919), ("TagB", 2598920), ("TagReq", -1797386556),
    ("hello world", 1794106052), ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
    ("é", 233), ("日本", 835047), ("😀", 1772899),  # surrogate pair: 31 * 0xD83D + 0xDE00
])
def test_java_string_hash_known_values(text, expected):
    assert java_string_hash(text) == expected


def _captured_tag_codes() -> dict[str, int]:
    out: dict[str, int] = {}
    for name in CAPTURE_NAMES:
        if not name.startswith("java"):
            continue
        for rec in load_capture(name):
            if rec["code"] != RequestCode.HEART_BEAT or rec["flag"] & 1:
                continue
            for cd in rec["body_json"].get("consumerDataSet", []):
                for sd in cd.get("subscriptionDataSet", []):
                    out.update(zip(sd.get("tagsSet", []), sd.get("codeSet", []), strict=True))
    return out


def test_java_string_hash_matches_every_tag_code_in_java_heartbeats():
    pairs = _captured_tag_codes()
    assert pairs, "the captures hold Java heartbeats with tag codes"
    assert {"TagA", "TagB", "TagReq"} <= set(pairs)
    for tag, code in pairs.items():
        assert java_string_hash(tag) == code, tag


def test_java_mod_and_abs_mod_follow_java_semantics():
    assert java_mod(-7, 3) == -1 and java_mod(7, 3) == 1 and java_mod(-6, 3) == 0
    assert java_abs_mod(-7, 3) == 1
    assert java_abs_mod(-2147483648, 5) == 3  # Java: Math.abs(Integer.MIN_VALUE % 5) = abs(-3)
    assert select_queue_index_by_hash("order-1", 4) == 2  # hashCode -1207111310: Java abs(-2) = 2
    assert all(0 <= select_queue_index_by_hash(f"k{i}", 7) < 7 for i in range(200))


def test_group_names_may_be_longer_than_topics():
    assert codes.check_name("g" * 255, "group", codes.GROUP_MAX_LENGTH)
    with pytest.raises(IllegalArgumentError):
        codes.check_name("g" * 256, "group", codes.GROUP_MAX_LENGTH)
