"""``python -m rocketmq_sdk.admin``: the ``rocketmq-admin`` command."""

from .cli import main

main()
