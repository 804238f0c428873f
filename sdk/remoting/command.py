"""``RemotingCommand``: one request or response, and its frame encoding (§1.1-§1.4).

A frame is ``int length | int (serializeType << 24 | headerLength) | header | body``. The header
is JSON (type 0, what Java clients and the C++ client send by default) or the ROCKETMQ binary
form (type 1). Responses are written in the request's serialize type.
"""

from __future__ import annotations

import itertools
import json
import struct
from typing import Any

from ..exceptions import FrameError
from ..protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType

RPC_RESPONSE = 0x1
RPC_ONEWAY = 0x2

_LANG_NAMES = {m.value: m.name for m in LanguageCode}
_LANG_VALUES = {m.name: m.value for m in LanguageCode}
_PREFIX = struct.Struct(">ii")
_BIN_HEAD = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_opaque_counter = itertools.count(1)


def _ext_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


class RemotingCommand:
    """A remoting request or response.

    Attributes:
        code: request code (requests) or response code (responses).
        language: ``LanguageCode`` value of the sender (this SDK sends PYTHON).
        version: sender's ``MQVersion`` ordinal (409 = V4_9_8).
        opaque: request id; a response carries its request's.
        flag: bit 0 RESPONSE, bit 1 ONEWAY.
        remark: error text of responses, or None.
        ext_fields: the custom header, str → str.
        body: payload bytes.
        serialize_type: ``SerializeType.JSON`` or ``SerializeType.ROCKETMQ``.
    """

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body", "serialize_type")

    def __init__(self, code: int, *, language: int = LanguageCode.PYTHON, version: int = CURRENT_VERSION,
                 opaque: int = 0, flag: int = 0, remark: str | None = None,
                 ext_fields: dict[str, str] | None = None, body: bytes = b"",
                 serialize_type: int = SerializeType.JSON) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.serialize_type = serialize_type

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def request(cls, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"",
                oneway: bool = False, serialize_type: int = SerializeType.JSON) -> RemotingCommand:
        """A new request with a fresh opaque (process-wide counter, wraps within int32)."""
        opaque = next(_opaque_counter) & 0x7FFFFFFF
        return cls(int(code), opaque=opaque, flag=RPC_ONEWAY if oneway else 0, ext_fields=ext_fields,
                   body=body, serialize_type=serialize_type)

    def response(self, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None,
                 body: bytes = b"") -> RemotingCommand:
        """The response to this request: same opaque and serialize type, RESPONSE flag set."""
        return RemotingCommand(int(code), opaque=self.opaque, flag=RPC_RESPONSE, remark=remark,
                               ext_fields=ext_fields, body=body, serialize_type=self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    # -- encoding ------------------------------------------------------------------------------
    def _json_header(self) -> bytes:
        h: dict[str, Any] = {"code": self.code}
        if self.ext_fields:
            h["extFields"] = self.ext_fields
        h["flag"] = self.flag
        h["language"] = _LANG_NAMES.get(self.language, "OTHER")
        h["opaque"] = self.opaque
        if self.remark is not None:
            h["remark"] = self.remark
        h["serializeTypeCurrentRPC"] = "JSON"
        h["version"] = self.version
        return json.dumps(h, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def _binary_header(self) -> bytes:
        parts = [_BIN_HEAD.pack(self.code, self.language, self.version, self.opaque, self.flag)]
        remark = self.remark.encode("utf-8") if self.remark else b""
        parts.append(_I.pack(len(remark)))
        parts.append(remark)
        ext = []
        for k, v in self.ext_fields.items():
            if k is None or v is None:
                continue
            kb, vb = k.encode("utf-8"), v.encode("utf-8")
            ext.append(_H.pack(len(kb)) + kb + _I.pack(len(vb)) + vb)
        ext_bytes = b"".join(ext)
        parts.append(_I.pack(len(ext_bytes)))
        parts.append(ext_bytes)
        return b"".join(parts)

    def encode(self) -> bytes:
        """The whole frame, including the 4-byte length prefix."""
        header = self._binary_header() if self.serialize_type == SerializeType.ROCKETMQ else self._json_header()
        body = self.body or b""
        return b"".join((_PREFIX.pack(4 + len(header) + len(body), (self.serialize_type << 24) | len(header)),
                         header, body))

    # -- decoding ------------------------------------------------------------------------------
    @classmethod
    def decode(cls, frame: bytes | memoryview) -> RemotingCommand:
        """Decode a frame without its length prefix.

        Raises:
            FrameError: the header is malformed.
        """
        if len(frame) < 4:
            raise FrameError("frame shorter than its header-length field")
        word = _I.unpack_from(frame, 0)[0]
        stype = (word >> 24) & 0xFF
        hlen = word & 0xFFFFFF
        if hlen > len(frame) - 4:
            raise FrameError(f"header length {hlen} exceeds frame length {len(frame) - 4}")
        header = frame[4:4 + hlen]
        body = bytes(frame[4 + hlen:])
        if stype == SerializeType.JSON:
            return cls._decode_json(bytes(header), body)
        if stype == SerializeType.ROCKETMQ:
            return cls._decode_binary(header, body)
        raise FrameError(f"unknown serialize type {stype}")

    @classmethod
    def _decode_json(cls, header: bytes, body: bytes) -> RemotingCommand:
        try:
            h = json.loads(header)
            lang = h.get("language", "OTHER")
            language = lang if isinstance(lang, int) else _LANG_VALUES.get(lang, LanguageCode.OTHER)
            ext = h.get("extFields") or {}
            if ext:
                ext = {str(k): _ext_str(v) for k, v in ext.items()}
            return cls(int(h["code"]), language=language, version=int(h.get("version", 0) or 0),
                       opaque=int(h.get("opaque", 0)), flag=int(h.get("flag", 0)), remark=h.get("remark"),
                       ext_fields=ext, body=body, serialize_type=SerializeType.JSON)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FrameError(f"malformed JSON header: {exc}") from exc

    @classmethod
    def _decode_binary(cls, header, body: bytes) -> RemotingCommand:
        try:
            code, lang, version, opaque, flag = _BIN_HEAD.unpack_from(header, 0)
            pos = _BIN_HEAD.size
            rlen = _I.unpack_from(header, pos)[0]
            pos += 4
            if rlen < 0 or rlen > len(header) - pos:
                raise FrameError(f"remark length {rlen} exceeds header")
            remark = bytes(header[pos:pos + rlen]).decode("utf-8") if rlen else None
            pos += rlen
            elen = _I.unpack_from(header, pos)[0]
            pos += 4
            if elen < 0 or elen > len(header) - pos:
                raise FrameError(f"extFields length {elen} exceeds header")
            end = pos + elen
            ext: dict[str, str] = {}
            while pos < end:
                klen = _H.unpack_from(header, pos)[0]
                pos += 2
                k = bytes(header[pos:pos + klen]).decode("utf-8")
                pos += klen
                vlen = _I.unpack_from(header, pos)[0]
                pos += 4
                ext[k] = bytes(header[pos:pos + vlen]).decode("utf-8")
                pos += vlen
            return cls(code, language=lang, version=version, opaque=opaque, flag=flag, remark=remark,
                       ext_fields=ext, body=body, serialize_type=SerializeType.ROCKETMQ)
        except (struct.error, UnicodeDecodeError) as exc:
            raise FrameError(f"malformed ROCKETMQ header: {exc}") from exc

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (f"RemotingCommand({kind} code={self.code} opaque={self.opaque} remark={self.remark!r} "
                f"ext={self.ext_fields} body={len(self.body)}B)")
