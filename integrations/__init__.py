"""Integrations of the RocketMQ SDK with other frameworks (import name ``rocketmq_sdk.integrations``).

- :mod:`rocketmq_sdk.integrations.spark` — write Spark DataFrames to RocketMQ (``foreachPartition``
  writer and the ``rocketmq`` Python data source); needs the ``spark`` extra.
- :mod:`rocketmq_sdk.integrations.django` — the Django app (rocketmq-spring-boot-starter's
  counterpart, docs/django.md); needs the ``django`` extra.

Each integration imports its framework lazily, so importing this package needs nothing extra.
"""
