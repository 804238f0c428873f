"""Send requests whose JSON header is rendered from a per-topic template.

A producer's SEND_MESSAGE_V2 (and SEND_REPLY_MESSAGE_V2 / SEND_BATCH_MESSAGE) headers to one topic
differ only in the queue id, the system flag, the born timestamp, the user flag, the properties
string, the broker name, the command flag and the opaque. :class:`SendHeaderTemplate` renders
the rest once, through :meth:`RemotingCommand._encode_json_header` itself (the varying values
replaced by markers that are then cut out), so the bytes are those of the generic encoder by
construction; a topic whose constant fields contain a marker gets no template (generic path).

:class:`SendRequest` is a ``RemotingCommand`` that encodes from the template and builds its
``ext_fields`` dict only when something reads it (an RPC hook such as ACL signing, a log line,
a retry): from that moment it is an ordinary command and encodes through the generic path. The
producer creates one only when no RPC hook is installed (``benchmarks/PROFILE.md``, 2026-11-24
client send path, wave 3: 4.1 → ~1.5 µs per request header).
"""

from __future__ import annotations

import struct
from json.encoder import encode_basestring as _json_str  # the C function the header encoder uses

from .. import _speedups
from ..protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType
from ..remoting.command import FLAG_ONEWAY, RemotingCommand, _next_opaque

__all__ = ["SendHeaderTemplate", "SendRequest", "send_request"]

_PYTHON = int(LanguageCode.PYTHON)
_JSON = int(SerializeType.JSON)
_new = object.__new__
_EXT_SLOT = RemotingCommand.__dict__["ext_fields"]  # the base class's slot (SendRequest shadows it)
_FRAME_PREFIX = struct.Struct(">II")
# the C twin of SendRequest.encode's template rendering (_csend_request.c beside this file: render_send)
_csend_request = _speedups.load("rocketmq_sdk.producer._csend_request")
_c_render = _csend_request.render_send if _csend_request is not None else None

# markers, in the order they appear in the rendered header (ext fields e, f, g, h, i, n; then the
# command's flag and opaque); digits-only values are spliced between the quotes of their marker
_MARKS = ("@e@", "@f@", "@g@", "@h@", _json_str("@i@"), _json_str("@n@"), '"flag":1987654320,',
          '"opaque":1987654321,')
_FLAG_MARK, _OPAQUE_MARK = 1987654320, 1987654321


class SendHeaderTemplate:
    """The constant parts of one producer's send headers to one topic.

    Args:
        code: request code (SEND_MESSAGE_V2, SEND_REPLY_MESSAGE_V2 or SEND_BATCH_MESSAGE).
        group: producer group (field ``a``).
        topic: the (namespaced) topic (``b``).
        default_topic: ``create_topic_key`` (``c``).
        queue_nums: ``default_topic_queue_nums`` as a string (``d``).
        batch: the ``m`` field (``"true"`` for a batch).

    ``pieces`` is None when the constant fields contain a marker (no template: use the dict).
    """

    __slots__ = ("code", "a", "b", "c", "d", "m", "pieces")

    def __init__(self, code: int, group: str, topic: str, default_topic: str, queue_nums: str,
                 batch: bool) -> None:
        self.code = code
        self.a, self.b, self.c, self.d = group, topic, default_topic, queue_nums
        self.m = "true" if batch else "false"
        probe = RemotingCommand(code, opaque=_OPAQUE_MARK, flag=_FLAG_MARK,
                                ext_fields=self.ext("@e@", "@f@", "@g@", "@h@", "@i@", "@n@"))
        text = probe._encode_json_header().decode()
        pieces: list[str] | None = []
        pos = 0
        for mark in _MARKS:
            at = text.find(mark, pos)
            if at < 0 or text.count(mark) != 1:
                pieces = None
                break
            if mark[0] == '"' and mark[-1] == ",":  # "flag":N, / "opaque":N, keep the name and comma
                name = mark[:mark.index(":") + 1]
                pieces.append(text[pos:at] + name)
                pos = at + len(mark) - 1
            else:
                pieces.append(text[pos:at])
                pos = at + len(mark)
        if pieces is not None:
            pieces.append(text[pos:])
        self.pieces = pieces

    def ext(self, e: str, f: str, g: str, h: str, i: str, n: str | None = None) -> dict[str, str]:
        """The header as ``Producer._header`` builds it (``e`` the queue id; ``n``, the broker
        name, added last when given), in the same key order."""
        ext = {"a": self.a, "b": self.b, "c": self.c, "d": self.d, "e": e, "f": f, "g": g, "h": h, "i": i,
               "j": "0", "k": "false", "m": self.m}
        if n is not None:
            ext["n"] = n
        return ext


class SendRequest(RemotingCommand):
    """A send request encoded from a :class:`SendHeaderTemplate` (see the module docstring).

    ``_vals`` holds the ``e, f, g, h, i, n`` field values (strings; ``e``, ``f``, ``g``, ``h``
    decimal digits). Reading ``ext_fields`` materialises the dict and drops the template.
    """

    __slots__ = ("_tmpl", "_vals")

    @property  # type: ignore[override]
    def ext_fields(self) -> dict[str, str]:
        tmpl = self._tmpl
        if tmpl is not None:  # first read: the dict from now on (a hook may change it)
            _EXT_SLOT.__set__(self, tmpl.ext(*self._vals))
            self._tmpl = None
        return _EXT_SLOT.__get__(self)

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str]) -> None:
        self._tmpl = None
        _EXT_SLOT.__set__(self, value)

    def _encode_json_header(self) -> bytes:
        tmpl = self._tmpl
        if tmpl is None or self.remark is not None or self.language != _PYTHON or self.version != CURRENT_VERSION:
            return RemotingCommand._encode_json_header(self)
        p = tmpl.pieces
        e, f, g, h, i, n = self._vals
        return (f"{p[0]}{e}{p[1]}{f}{p[2]}{g}{p[3]}{h}{p[4]}{_json_str(i)}{p[5]}{_json_str(n)}{p[6]}"
                f"{int(self.flag)}{p[7]}{int(self.opaque)}{p[8]}").encode()

    def encode(self) -> bytes:
        """The frame, as :meth:`RemotingCommand.encode` (which it uses unless templated JSON)."""
        tmpl = self._tmpl
        if tmpl is None or self.serialize_type != _JSON:
            return RemotingCommand.encode(self)
        if _c_render is not None and self.remark is None and self.language == _PYTHON \
                and self.version == CURRENT_VERSION:
            frame = _c_render(tmpl.pieces, self._vals, self.flag, self.opaque, self.body)
            if frame is not None:
                return frame
        header = self._encode_json_header()
        hlen = len(header)
        if hlen > 0xFFFFFF:
            return RemotingCommand.encode(self)  # raises ValueError
        body = self.body
        return b"".join((_FRAME_PREFIX.pack(4 + hlen + len(body), hlen), header, body))


def send_request(tmpl: SendHeaderTemplate, vals: tuple[str, str, str, str, str, str], body: bytes,
                 oneway: bool = False) -> SendRequest:
    """A new send request (fresh opaque) for ``tmpl`` (whose ``pieces`` must not be None).

    Args:
        tmpl: the topic's template.
        vals: ``(queue_id, sys_flag, born_ms, flag, properties, broker_name)`` as the header's
            strings (the first four decimal digits, ``"0"`` for none).
        body: the (possibly compressed / batch-encoded) body.
        oneway: set the ONEWAY flag.
    """
    cmd = _new(SendRequest)
    cmd.code = tmpl.code
    cmd.language = _PYTHON
    cmd.version = CURRENT_VERSION
    cmd.opaque = _next_opaque()
    cmd.flag = FLAG_ONEWAY if oneway else 0
    cmd.remark = None
    cmd.body = body
    cmd.serialize_type = _JSON
    cmd._tmpl = tmpl
    cmd._vals = vals
    return cmd
