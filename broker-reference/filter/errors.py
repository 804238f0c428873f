"""The error raised for an SQL92 filter expression the broker cannot compile."""

from __future__ import annotations

__all__ = ["FilterSyntaxError"]


class FilterSyntaxError(ValueError):
    """An SQL92 filter expression is malformed or ill-typed.

    RocketMQ answers such a subscription with ``SUBSCRIPTION_PARSE_FAILED`` (23); the broker
    puts ``str(error)`` into the response remark.

    Attributes:
        expression: the expression text as given.
        position: 0-based character offset of the offending token in ``expression``
            (``len(expression)`` when the text ended too early).
        reason: the message without the position suffix.
    """

    def __init__(self, reason: str, expression: str, position: int) -> None:
        self.reason = reason
        self.expression = expression
        self.position = position
        super().__init__(f"{reason} at position {position} of SQL92 expression {expression!r}")
