"""gRPC status codes and the error of a unary call that did not end with OK (shared by the
SDK's HTTP/2 transport, :mod:`.h2_connection` and :mod:`.unary`)."""

from __future__ import annotations

from urllib.parse import quote, unquote

from . import http2 as h

#: gRPC status codes by number
STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
                "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE = 1, 2, 4, 8, 13, 14
#: gRPC's mapping of a RST_STREAM code to a status (the gRPC over HTTP/2 spec)
RST_STATUS = {h.REFUSED_STREAM: UNAVAILABLE, h.CANCEL: CANCELLED, h.ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED,
               h.INADEQUATE_SECURITY: 7}


def encode_message(details: str) -> str:
    """``details`` as a ``grpc-message`` value: UTF-8, percent-encoded outside printable ASCII
    and for ``%`` itself (gRPC over HTTP/2)."""
    return quote(details, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")


def decode_message(value: str) -> str:
    """The text of a ``grpc-message`` value (percent-decoded, bad escapes kept as they are)."""
    return unquote(value)


class GrpcStatusError(Exception):
    """A unary call that did not end with status OK: ``code`` (gRPC status number, e.g. 14 for
    UNAVAILABLE) and ``details`` (``grpc-message``, or what went wrong locally)."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(f"{self.name_of(code)}: {details}")
        self.code = code
        self.details = details

    @staticmethod
    def name_of(code: int) -> str:
        """gRPC's name of status ``code`` (``UNKNOWN(99)`` for one outside 0 ... 16)."""
        return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else f"UNKNOWN({code})"


class Unprocessed(Exception):
    """The server did not process the call (GOAWAY above its stream, REFUSED_STREAM, a connection
    closing): it may be sent again on a new connection."""
