"""``celery rocketmq``: a ``celery.commands`` plugin. Loading it (the ``celery`` command loads
every plugin at start) imports this package, which registers the ``rocketmq://`` transport alias
for the worker, beat, inspect, control and purge commands."""

from __future__ import annotations

import click

from .naming import Naming


@click.group(name="rocketmq", help="RocketMQ transport helpers (rocketmq_sdk.integrations.celery).")
def rocketmq() -> None:
    pass


@rocketmq.command(name="names", help="Print the RocketMQ topic and consumer group of kombu queues.")
@click.argument("queues", nargs=-1, required=True)
@click.option("--topic-prefix", default="", help="the topic_prefix transport option")
@click.option("--group-prefix", default="kombu_", help="the group_prefix transport option")
@click.option("--namespace", default=None, help="the namespace transport option")
def names(queues: tuple[str, ...], topic_prefix: str, group_prefix: str, namespace: str | None) -> None:
    naming = Naming(topic_prefix, group_prefix, namespace)
    for queue in queues:
        click.echo(f"{queue}\ttopic={naming.queue_topic(queue)}\tgroup={naming.group(queue)}")
