"""RocketMQ 5's gRPC API (``apache.rocketmq.v2.MessagingService``): the message classes
(:mod:`.v2`), the RPC table (:mod:`.service`), the property codec shared with the reference
broker's proxy (:mod:`.convert`) and the SDK's gRPC transport (:mod:`.client`).

Needs the ``grpc`` extra (``pip install rocketmq-python-sdk[grpc]``: grpcio and protobuf).
"""
