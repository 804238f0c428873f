"""SQL92 message filter of the reference broker (``enablePropertyFilter=true``).

A consumer that subscribes with expression type ``SQL92`` sends an expression over message
properties (``TAGS``, ``KEYS``, user properties); the broker compiles it once and evaluates it for
every message it would deliver::

    from rocketmq_broker.filter import compile_expression

    expr = compile_expression("TAGS IN ('TagA', 'TagB') AND price BETWEEN 10 AND 100")
    expr.evaluate({"TAGS": "TagA", "price": "42"})   # True

The language is RocketMQ's SQL92 subset (see :mod:`rocketmq_broker.filter.parser` for the grammar
and :mod:`rocketmq_broker.filter.values` for how strings meet numbers); malformed expressions
raise :class:`FilterSyntaxError` (a ``ValueError``) with the offending position.

:mod:`rocketmq_broker.filter.consumer_filter` wires it into the broker: the groups' compiled
subscriptions (``ConsumerFilterManager``, fed by heartbeats), the per-record filter pulls apply
while reading the commit log, and the CHECK_CLIENT_CONFIG answer.
"""

from rocketmq_broker.filter.errors import FilterSyntaxError
from rocketmq_broker.filter.expression import CACHE_SIZE, Expression, clear_cache, compile_expression

__all__ = ["CACHE_SIZE", "Expression", "FilterSyntaxError", "clear_cache", "compile_expression"]
