"""Makes ``format("rocketmq")`` work without a registration call.

Spark looks for top-level modules named ``pyspark_*`` that define ``DefaultSource`` (a
``pyspark.sql.datasource.DataSource``) when a session first resolves a Python data source, and
registers them under their ``name()``. This module ships with ``rocketmq-python-sdk``; the data
source itself is :class:`rocketmq_sdk.integrations.spark.datasource.RocketMQDataSource`.
"""

from rocketmq_sdk.integrations.spark.datasource import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
