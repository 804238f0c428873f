"""Two reference brokers (broker-a, broker-b) and a name server on one background loop thread;
either broker can be stopped by a test (``rocketmq_broker.embedded.start_cluster``)."""

from __future__ import annotations

from rocketmq_broker.embedded import EmbeddedCluster, start_cluster


def TwoBrokers(timeout_s: float = 20.0) -> EmbeddedCluster:  # noqa: N802 - kept for the existing tests
    """Started cluster: ``namesrv_addr``, ``brokers`` ({name: BrokerController}), ``addr(name)``,
    ``stop_broker(name)``, ``stop()``; usable as a context manager."""
    return start_cluster(("broker-a", "broker-b"), start_timeout_s=timeout_s)
