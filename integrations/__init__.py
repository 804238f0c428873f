"""Integrations of the RocketMQ SDK with other frameworks (import name ``rocketmq_sdk.integrations``).

- :mod:`rocketmq_sdk.integrations.spark` — write Spark DataFrames to RocketMQ (``foreachPartition``
  writer and the ``rocketmq`` Python data source); needs the ``spark`` extra.

Each integration imports its framework lazily, so importing this package needs nothing extra.
"""
