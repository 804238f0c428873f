"""The reference broker's RocketMQ 5 gRPC endpoint (``apache.rocketmq.v2.MessagingService``), the
counterpart of Apache RocketMQ's proxy: 5.x clients (Java 5.x, Go, C++, Python
``rocketmq-python-client``, and this SDK with ``protocol="grpc"``) reach the reference broker
through it. Needs the ``grpc`` extra. See docs/grpc.md."""

from .server import GrpcProxy

__all__ = ["GrpcProxy"]
