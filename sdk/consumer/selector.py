"""``MessageSelector``: which messages of a topic a consumer wants (Java ``MessageSelector``).

Either a tag expression (``*``, ``TagA || TagB``), filtered on the broker by tag hash and on
the client by exact tag, or an SQL92 expression over message properties, evaluated by the
broker (it needs ``enablePropertyFilter=true``)::

    consumer.subscribe("Orders", MessageSelector.by_sql("a > 5 AND region = 'eu'"))
    consumer.subscribe("Orders", MessageSelector.by_tag("TagA || TagB"))

In an SQL92 expression the message tag is the property ``TAGS`` and the keys ``KEYS``; a
property missing from a message makes a comparison UNKNOWN, so the message is not delivered
(use ``IS NULL`` / ``IS NOT NULL`` to test for presence).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import IllegalArgumentError

__all__ = ["EXPRESSION_TYPES", "MessageSelector", "resolve_selector"]

EXPRESSION_TYPES = ("TAG", "SQL92")
"""Expression types RocketMQ 4.x brokers understand (``ExpressionType``)."""


@dataclass(frozen=True)
class MessageSelector:
    """A subscription expression and its type (``TAG`` or ``SQL92``).

    Attributes:
        expression_type: ``"TAG"`` or ``"SQL92"``.
        expression: the tag expression or SQL92 text.
    """

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """An SQL92 selector over message properties (Java ``MessageSelector.bySql``).

        Raises:
            IllegalArgumentError: ``sql`` is empty (the broker checks the syntax).
        """
        if not sql or not sql.strip():
            raise IllegalArgumentError("SQL92 expression must not be empty")
        return cls("SQL92", sql)

    @classmethod
    def by_tag(cls, tag: str | None) -> MessageSelector:
        """A tag expression (Java ``MessageSelector.byTag``); None or empty means ``*``."""
        return cls("TAG", tag or "*")


def resolve_selector(expression: str | MessageSelector | None, expression_type: str = "TAG") -> tuple[str | None, str]:
    """(expression, expression type) from a str plus type or a :class:`MessageSelector`.

    Raises:
        IllegalArgumentError: an expression type other than TAG and SQL92.
    """
    if isinstance(expression, MessageSelector):
        expression_type = expression.expression_type
        expression = expression.expression
    if expression_type not in EXPRESSION_TYPES:
        raise IllegalArgumentError(f"expression_type must be TAG or SQL92, not {expression_type!r}")
    return expression, expression_type
