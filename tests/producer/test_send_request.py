"""Send requests rendered from a header template (``rocketmq_sdk.producer.prepare``) are
byte-identical to the generic ``RemotingCommand`` encoding of the same fields."""

from __future__ import annotations

import itertools

import pytest
from rocketmq_sdk import Message
from rocketmq_sdk.config import ProducerConfig
from rocketmq_sdk.producer.namespace import wrap_namespace
from rocketmq_sdk.producer.prepare import (
    REPLY_MESSAGE_FLAG,
    MessagePreparer,
    SendHeaderTemplate,
    SendRequest,
    send_request,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.remoting.command import FLAG_ONEWAY, RemotingCommand

PROPS = ["", "WAIT\x01true\x02UNIQ_KEY\x01C0A8000100002A9F0000000000001234",
         'k\x01"quoted" \\ back\x02u\x01\u00e9\u2028\U0001F600\x02t\x01\t\n\x7f']


def _generic(cmd: RemotingCommand) -> bytes:
    return RemotingCommand(cmd.code, opaque=cmd.opaque, flag=cmd.flag, ext_fields=dict(cmd.ext_fields),
                           body=cmd.body).encode()


@pytest.mark.parametrize("code,batch", [(RequestCode.SEND_MESSAGE_V2, False),
                                        (RequestCode.SEND_REPLY_MESSAGE_V2, False),
                                        (RequestCode.SEND_BATCH_MESSAGE, True)])
def test_template_renders_the_generic_encoders_bytes(code, batch):
    tmpl = SendHeaderTemplate(code, "pg_%|x-1", "ns%Topic_\u00e9", "TBW102", "8", batch)
    assert tmpl.pieces is not None
    for props, broker, (qid, sys_flag, flag), oneway, body in itertools.product(
            PROPS, ["broker-a", 'b"r\\k\u00fc'], [("0", "0", "0"), ("15", "1", "-7"), ("3", "4", "2147483647")],
            [False, True], [b"", b"x" * 100]):
        vals = (qid, sys_flag, "1795518462168", flag, props, broker)
        cmd = send_request(tmpl, vals, body, oneway)
        expected = RemotingCommand(code, opaque=cmd.opaque, flag=FLAG_ONEWAY if oneway else 0,
                                   ext_fields=tmpl.ext(*vals), body=body).encode()
        assert cmd.encode() == expected
        assert cmd.values == vals  # encoding did not materialise the fields


def test_reading_the_fields_turns_it_into_a_plain_command():
    tmpl = SendHeaderTemplate(RequestCode.SEND_MESSAGE_V2, "pg", "T", "TBW102", "4", False)
    cmd = send_request(tmpl, ("1", "0", "1", "0", PROPS[1], "b"), b"body")
    before = cmd.encode()
    ext = cmd.ext_fields  # what an RPC hook does: read and add fields (ACL signing)
    assert list(ext) == list("abcdefghijkmn") and ext["e"] == "1" and ext["n"] == "b"
    ext["AccessKey"] = "ak"
    after = cmd.encode()
    assert after != before and b'"AccessKey":"ak"' in after and after == _generic(cmd)
    cmd.ext_fields = {"x": "y"}
    assert cmd.encode() == _generic(cmd)
    cmd2 = send_request(tmpl, ("1", "0", "1", "0", PROPS[1], "b"), b"body")
    cmd2.remark = "r"  # any change the template does not cover: generic encoding
    assert b'"remark":"r"' in cmd2.encode()
    assert isinstance(cmd2, SendRequest) and cmd2 == RemotingCommand.decode(cmd2.encode()[4:])


def test_no_template_when_a_constant_field_holds_a_marker():
    assert SendHeaderTemplate(RequestCode.SEND_MESSAGE_V2, "pg", "T@e@", "TBW102", "4",
                              False).pieces is None


def _requests(p: MessagePreparer, msg: Message | list[Message], mq: MessageQueue) -> tuple[bytes, bytes]:
    prepared = p.prepare_batch(msg) if isinstance(msg, list) else p.prepare(msg)
    cmd = prepared.request_for(mq, ())
    plain = prepared.request_for(mq, [object()])  # with RPC hooks: the dict path
    plain.opaque = cmd.opaque
    assert type(plain) is RemotingCommand
    return cmd.encode(), plain.encode()


@pytest.mark.parametrize("namespace", [None, "ns1"])
def test_producer_requests_are_those_of_the_field_dict(namespace):
    # what a Producer("pg_tmpl", namespace=namespace) prepares (nothing is sent)
    p = MessagePreparer(wrap_namespace(namespace, "pg_tmpl"),
                        ProducerConfig.from_kwargs(namesrv_addr="127.0.0.1:9", namespace=namespace))
    mq = MessageQueue("TopicT", "broker-a", 3)
    retry = Message("%RETRY%cg", b"r")
    retry.put_property(MC.RECONSUME_TIME, "2")
    retry.put_property(MC.MAX_RECONSUME_TIMES, "5")
    reply = Message("TopicT", b"reply")
    reply.put_property(MC.MESSAGE_TYPE, REPLY_MESSAGE_FLAG)
    cases = [Message("TopicT", b"x" * 100, tags="TagA", keys=["k1", "k2"]),
             Message("TopicT", b"y" * 5000, flag=42, properties={"u": 'v"\u00e9'}),  # compressed
             Message("TopicT", b"d", delay_time_level=3, wait_store_msg_ok=False),
             reply, retry,
             [Message("TopicT", b"b1"), Message("TopicT", b"b2")]]
    for msg in cases:
        templated, plain = _requests(p, msg, mq)
        assert templated == plain
    assert p.prepare(retry).head is None  # retry topics carry j/l: no template
    prepared = p.prepare(Message("TopicT", b"x"))
    assert prepared.head is not None and list(prepared.ext) == list("abcdefghijkm")


# -- the C renderer (_cprepare.render_send) against the Python template path ---------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from rocketmq_sdk.producer import prepare as prepare_mod  # noqa: E402

_names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)


@pytest.mark.skipif(prepare_mod.c_render is None, reason="C accelerator not built or disabled")
@settings(max_examples=200, deadline=None)
@given(group=_names, topic=_names, props=st.text(max_size=30), broker=_names,
       queue=st.integers(0, 999), flag=st.integers(0, 3), body=st.binary(max_size=40), batch=st.booleans())
def test_c_rendered_frames_equal_the_python_template_and_the_generic_encoder(group, topic, props, broker, queue,
                                                                            flag, body, batch):
    tmpl = SendHeaderTemplate(RequestCode.SEND_MESSAGE_V2, group, topic, "TBW102", "4", batch)
    if tmpl.pieces is None:
        return
    req = send_request(tmpl, (str(queue), "0", "1700000000000", "0", props, broker), body, oneway=bool(flag & 2))
    rendered = prepare_mod.c_render(tmpl.pieces, req.values, req.flag, req.opaque, req.body)
    saved = prepare_mod.c_render
    prepare_mod.c_render = None
    try:
        python = req.encode()
    except UnicodeEncodeError:
        python = None  # a lone surrogate in the properties: Python raises, C declines
    finally:
        prepare_mod.c_render = saved
    assert rendered == python
    if python is not None:
        generic = RemotingCommand(req.code, opaque=req.opaque, flag=req.flag, ext_fields=dict(req.ext_fields),
                                  body=body).encode()
        assert req.encode() == python == generic
