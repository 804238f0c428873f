"""The message classes of RocketMQ 5's gRPC API (``apache.rocketmq.v2``), from messaging.proto.

The definitions are loaded into a descriptor pool of this module's own, so another copy of
``apache.rocketmq.v2`` (e.g. the official 5.x client's generated modules) may be imported in the
same process. Every message and enum of messaging.proto is an attribute of this module
(``v2.SendMessageRequest``, ``v2.Code.OK``), and so are the enum values (``v2.OK``), as in
protoc's generated modules; ``v2.pyi`` types them.
"""

from __future__ import annotations

from google.protobuf import descriptor_pool, duration_pb2, message_factory, timestamp_pb2

from ._descriptor import SERIALIZED

POOL = descriptor_pool.DescriptorPool()
POOL.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)
POOL.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
DESCRIPTOR = POOL.AddSerializedFile(SERIALIZED)


def _export() -> None:
    from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

    g = globals()
    for name, enum in DESCRIPTOR.enum_types_by_name.items():
        g[name] = EnumTypeWrapper(enum)
        for value in enum.values:
            g[value.name] = value.number
    for name, desc in DESCRIPTOR.message_types_by_name.items():
        g[name] = message_factory.GetMessageClass(desc)


_export()
