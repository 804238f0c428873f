"""rocketmq_broker: the reference RocketMQ 4.x name server and broker in Python."""

import logging as _logging

# Library etiquette: nothing reaches stderr through Python's last-resort handler unless the
# application (or this package's own CLI, ``runner.setup_logging``) configures logging.
_logging.getLogger("rocketmq_broker").addHandler(_logging.NullHandler())
