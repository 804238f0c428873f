"""The send processor's templated response header (``SendResponse``) encodes to exactly the
bytes of the generic ``RemotingCommand`` JSON/ROCKETMQ encoders, for every field it fills."""

from __future__ import annotations

import pytest
from rocketmq_broker.broker.send_processor import SendResponse
from rocketmq_sdk.protocol.codes import ResponseCode, SerializeType
from rocketmq_sdk.remoting import RemotingCommand
from rocketmq_sdk.remoting.command import FLAG_RESPONSE


def _pair(code, ext, opaque, serialize_type=SerializeType.JSON, remark=None):
    generic = RemotingCommand(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=dict(ext),
                              serialize_type=serialize_type)
    fast = SendResponse(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=dict(ext),
                        serialize_type=serialize_type)
    return generic, fast


@pytest.mark.parametrize("code", [ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, 0, 12])
@pytest.mark.parametrize("opaque", [0, 1, 2**31 - 1])
@pytest.mark.parametrize("msg_id", ["7F00000100002A9F0000000000000000",
                                    "7F00000100002A9F0000000000000000,7F00000100002A9F00000000000000B4"])
@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_send_response_bytes_equal_generic_encoder(code, opaque, msg_id, serialize_type):
    ext = {"msgId": msg_id, "queueId": "3", "queueOffset": "123456789012", "MSG_REGION": "DefaultRegion",
           "TRACE_ON": "true"}
    generic, fast = _pair(code, ext, opaque, serialize_type)
    assert fast.encode() == generic.encode()
    assert RemotingCommand.decode(fast.encode()[4:]) == RemotingCommand.decode(generic.encode()[4:])


def test_send_response_falls_back_when_changed():
    ext = {"msgId": "A\"B", "queueId": "0", "queueOffset": "0", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
           "extra": "x"}
    generic, fast = _pair(0, ext, 5, remark="note")
    assert fast.encode() == generic.encode()
