"""RocketMQ 5's gRPC API (``apache.rocketmq.v2.MessagingService``): the message classes
(:mod:`.v2`), the RPC table (:mod:`.service`), the property codec shared with the reference
broker's proxy (:mod:`.convert`) and the SDK's connection to a 5.x proxy (:mod:`.connection`).

Needs the ``grpc`` extra (``pip install 'rocketmq-python-sdk[grpc]'``: grpcio, protobuf and hpack);
importing it without them raises ModuleNotFoundError saying so.
"""

try:
    import google.protobuf  # noqa: F401
    import grpc  # noqa: F401
    import hpack  # noqa: F401
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(f"RocketMQ 5 gRPC needs grpcio and protobuf: pip install "
                              f"'rocketmq-python-sdk[grpc]' ({exc})", name=exc.name) from None
