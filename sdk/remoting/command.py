"""``RemotingCommand``: one RocketMQ remoting request or response, and its frame codec.

Wire format (docs/protocol.md §1.1)::

    int length                       = 4 + headerLen + bodyLen
    int serializeType << 24 | headerLen
    header                           JSON text (type 0) or ROCKETMQ binary header (type 1, docs/protocol.md §1.4)
    body                             raw bytes, may be empty

The JSON header is written like Java's fastjson does (compact, alphabetical field order, ``remark``
and ``extFields`` left out when absent). On reading, the lenient forms other clients send are
accepted: ``language`` as an enum name or a number, ``extFields`` values that are JSON numbers or
booleans (the C++ client sends ``"queueId":0``) become strings, ``remark`` may be null or missing.
"""

from __future__ import annotations

import itertools
import json
import struct
from typing import Any

from rocketmq_sdk import _speedups
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "RPC_ONEWAY",
    "RPC_RESPONSE",
    "RemotingCommand",
    "SerializeType",
]

FLAG_RESPONSE = 1 << 0
"""Flag bit 0: the command is a response."""
FLAG_ONEWAY = 1 << 1
"""Flag bit 1: the request expects no response."""
RPC_RESPONSE = FLAG_RESPONSE  # Java's RemotingCommand names
RPC_ONEWAY = FLAG_ONEWAY


_LANGUAGE_NAMES: dict[int, str] = {int(m): m.name for m in LanguageCode}
_LANGUAGE_BY_NAME: dict[str, int] = {m.name: int(m) for m in LanguageCode}
_LANGUAGE_OTHER = int(LanguageCode.OTHER)
_PYTHON = int(LanguageCode.PYTHON)

_FRAME_PREFIX = struct.Struct(">II")
_FRAME_WORD = struct.Struct(">I").unpack_from  # serialize type << 24 | header length
_JSON = int(SerializeType.JSON)
_ROCKETMQ = int(SerializeType.ROCKETMQ)
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")

_json_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_json_loads = json.loads


def _fast_json() -> tuple[Any, Any]:
    """``_json_dumps``/``_json_loads`` with the same output and errors, calling the C encoder and
    scanner directly (``JSONEncoder.encode`` builds a C encoder per call; ``json.loads`` adds two
    Python layers): ~0.9 µs less per header each way. Plain ``json`` when they are missing."""
    from json import decoder as _dec
    from json import encoder as _enc
    from json import scanner as _scan

    make_enc = getattr(_enc, "c_make_encoder", None)
    make_scan = getattr(_scan, "c_make_scanner", None)
    enc_str = getattr(_enc, "c_encode_basestring", None)
    if make_enc is None or make_scan is None or enc_str is None:  # pragma: no cover
        return _json_dumps, _json_loads
    default = json.JSONEncoder().default  # raises TypeError for what JSON cannot hold
    plain = _json_dumps
    try:  # markers=None: no circular check (headers are flat str maps); recursion still stops
        c_enc = make_enc(None, default, enc_str, None, ":", ",", False, False, True)
    except TypeError:  # pragma: no cover - another C signature
        return _json_dumps, _json_loads
    scan = make_scan(_dec.JSONDecoder())
    loads = _json_loads

    def dumps(obj: Any) -> str:
        if type(obj) is str:
            return plain(obj)
        return "".join(c_enc(obj, 0))

    def fast_loads(text: str) -> Any:
        try:
            obj, end = scan(text, 0)
        except (StopIteration, ValueError):
            return loads(text)  # leading whitespace, or the error json.loads raises
        if end != len(text):
            return loads(text)  # trailing whitespace or extra data
        return obj

    return dumps, fast_loads


_json_dumps, _json_loads = _fast_json()

# Java: a process-wide AtomicInteger. next() on itertools.count is atomic under the GIL.
_opaque_counter = itertools.count()


def next_opaque() -> int:
    """The next request id (``opaque``) of this process: 0 to 2**31 - 1, wrapping (Java's
    ``RemotingCommand.requestId``, one AtomicInteger per process)."""
    return next(_opaque_counter) & 0x7FFFFFFF


def _ext_value_to_str(value: Any) -> str:
    """Convert a non-string ``extFields`` value the way fastjson fills a Map<String,String>."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (dict, list)):
        return _json_dumps(value)
    return str(value)


def _clean_ext(ext: dict) -> dict[str, str]:
    """Return ``ext`` with every value a str; None values dropped (Java skips null fields)."""
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext
    return {str(k): (v if type(v) is str else _ext_value_to_str(v)) for k, v in ext.items() if v is not None}


_new_command = object.__new__

# the C twin of decode/encode (_ccommand.c beside this file): handles the common JSON case and returns
# None for anything else, which the Python code below then decodes, encodes or refuses
_ccommand = _speedups.load("rocketmq_sdk.remoting._ccommand")


class RemotingCommand:
    """A remoting request or response.

    Attributes:
        code: request code (``RequestCode``) of a request, response code (``ResponseCode``) of a
            response.
        language: ``LanguageCode`` value of the sender (int); this SDK sends PYTHON (3).
        version: sender's ``MQVersion`` ordinal; 409 (4.9.8) by default.
        opaque: request id; a response carries the request's opaque.
        flag: bit 0 RESPONSE, bit 1 ONEWAY.
        remark: error text of a response, or None.
        ext_fields: the custom header, ``dict[str, str]`` (empty when none).
        body: the body bytes (``b""`` when none).
        serialize_type: ``SerializeType.JSON`` (0) or ``SerializeType.ROCKETMQ`` (1).
    """

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
                 "serialize_type")

    def __init__(
        self,
        code: int,
        *,
        language: int = _PYTHON,
        version: int = CURRENT_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.serialize_type = serialize_type

    # ------------------------------------------------------------------ factories

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        oneway: bool = False,
        *,
        serialize_type: int = SerializeType.JSON,
    ) -> RemotingCommand:
        """Create a request with a fresh process-wide opaque (thread-safe counter, like Java's).

        Args:
            code: the request code.
            ext_fields: custom header fields (str → str); non-str values are converted on encode.
            body: request body bytes.
            oneway: set the ONEWAY flag (the peer will not answer).
            serialize_type: header serialisation, JSON by default (as Java's default).
        """
        return cls(code, opaque=next_opaque(), flag=FLAG_ONEWAY if oneway else 0,
                   ext_fields=ext_fields, body=body, serialize_type=serialize_type)

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """Create the response to this request: same opaque and serialize type, RESPONSE flag."""
        return RemotingCommand(code, opaque=self.opaque, flag=FLAG_RESPONSE, remark=remark,
                               ext_fields=ext_fields, body=body, serialize_type=self.serialize_type)

    # ------------------------------------------------------------------ properties

    @property
    def is_response(self) -> bool:
        """True when the RESPONSE flag bit is set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when the ONEWAY flag bit is set."""
        return bool(self.flag & FLAG_ONEWAY)

    def mark_oneway(self) -> None:
        """Set the ONEWAY flag bit."""
        self.flag |= FLAG_ONEWAY

    # ------------------------------------------------------------------ encoding

    def encode_header(self) -> bytes:
        """Return the header bytes in this command's serialize type."""
        if self.serialize_type == SerializeType.JSON:
            return self._encode_json_header()
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._encode_binary_header()
        raise ValueError(f"unknown serialize type {self.serialize_type!r}")

    def encode(self) -> bytes:
        """Return the whole frame: length prefix, serialize type/header length, header, body.

        Raises:
            ValueError: unknown serialize type, or a header longer than 16 MiB - 1 bytes.
        """
        if _c_encode is not None and self._c_encodable:
            frame = _c_encode(self)
            if frame is not None:
                return frame
        header = self.encode_header()
        hlen = len(header)
        if hlen > 0xFFFFFF:
            raise ValueError(f"remoting header too long: {hlen} bytes")
        body = self.body
        prefix = _FRAME_PREFIX.pack(4 + hlen + len(body), (self.serialize_type << 24) | hlen)
        if body:
            return b"".join((prefix, header, body))
        return prefix + header

    def _encode_json_header(self) -> bytes:
        ext = self.ext_fields
        ext_part = f',"extFields":{_json_dumps(_clean_ext(ext))}' if ext else ""
        remark = self.remark
        remark_part = f',"remark":{_json_dumps(remark)}' if remark is not None else ""
        language = _LANGUAGE_NAMES.get(self.language, "OTHER")
        return (
            f'{{"code":{int(self.code)}{ext_part},"flag":{int(self.flag)},"language":"{language}",'
            f'"opaque":{int(self.opaque)}{remark_part},"serializeTypeCurrentRPC":"JSON",'
            f'"version":{int(self.version)}}}'
        ).encode()

    def _encode_binary_header(self) -> bytes:
        parts = [_BIN_FIXED.pack(self.code, self.language, self.version, self.opaque, self.flag)]
        if self.remark:
            remark = self.remark.encode()
            parts.append(_INT.pack(len(remark)))
            parts.append(remark)
        else:
            parts.append(b"\0\0\0\0")
        entries = []
        for key, value in self.ext_fields.items():
            if key is None or value is None:
                continue
            kb = str(key).encode()
            vb = (value if type(value) is str else _ext_value_to_str(value)).encode()
            entries.append(_SHORT.pack(len(kb)))
            entries.append(kb)
            entries.append(_INT.pack(len(vb)))
            entries.append(vb)
        ext = b"".join(entries)
        parts.append(_INT.pack(len(ext)))
        parts.append(ext)
        return b"".join(parts)

    # ------------------------------------------------------------------ decoding

    @classmethod
    def decode(cls, frame: bytes) -> RemotingCommand:
        """Decode one frame given WITHOUT its 4-byte length prefix.

        Raises:
            FrameError: frame shorter than 4 bytes, header length beyond the frame, unknown
                serialize type, or an unparsable header.
        """
        if _c_decode is not None and cls is RemotingCommand:
            cmd = _c_decode(frame)
            if cmd is not None:
                return cmd
        n = len(frame)
        if n < 4:
            raise FrameError(f"frame too short: {n} bytes")
        (word,) = _FRAME_WORD(frame)
        serialize_type = word >> 24
        hlen = word & 0xFFFFFF
        if hlen > n - 4:
            raise FrameError(f"header length {hlen} exceeds frame length {n}")
        header = frame[4:4 + hlen]
        if serialize_type == _JSON:
            cmd = cls._decode_json_header(header)
        elif serialize_type == _ROCKETMQ:
            cmd = cls._decode_binary_header(header)
        else:
            raise FrameError(f"unknown serialize type {serialize_type}")
        cmd.serialize_type = serialize_type
        body = frame[4 + hlen:]
        cmd.body = body if type(body) is bytes else bytes(body)
        return cmd

    @classmethod
    def _decode_json_header(cls, header: bytes) -> RemotingCommand:
        try:
            obj = _json_loads(header.decode())
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: "[[[[..."
            raise FrameError(f"malformed JSON remoting header: {exc}") from None
        if type(obj) is not dict:
            raise FrameError("malformed JSON remoting header: not an object")
        get = obj.get
        try:
            language = get("language", _LANGUAGE_OTHER)
            if type(language) is str:
                language = _LANGUAGE_BY_NAME.get(language, _LANGUAGE_OTHER)
            ext = get("extFields")
            if ext:
                if type(ext) is not dict:
                    raise FrameError("malformed JSON remoting header: extFields is not an object")
                ext = _clean_ext(ext)
            else:
                ext = {}
            cmd = _new_command(cls)
            cmd.code = int(obj["code"])
            cmd.language = int(language)
            cmd.version = int(get("version", 0))
            cmd.opaque = int(get("opaque", 0))
            cmd.flag = int(get("flag", 0))
            cmd.remark = get("remark")
            cmd.ext_fields = ext
            return cmd
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:  # 1e400, Infinity
            raise FrameError(f"malformed JSON remoting header: {exc!r}") from None

    @classmethod
    def _decode_binary_header(cls, header: bytes) -> RemotingCommand:
        hlen = len(header)
        try:
            code, language, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
            pos = _BIN_FIXED.size
            (rlen,) = _INT.unpack_from(header, pos)
            pos += 4
            if rlen < 0 or rlen > hlen - pos:
                raise FrameError(f"ROCKETMQ header: remark length {rlen} exceeds header")
            remark = header[pos:pos + rlen].decode() if rlen else None
            pos += rlen
            (elen,) = _INT.unpack_from(header, pos)
            pos += 4
            if elen < 0 or elen > hlen - pos:
                raise FrameError(f"ROCKETMQ header: extFields length {elen} exceeds header")
            end = pos + elen
            ext: dict[str, str] = {}
            while pos < end:
                (klen,) = _SHORT.unpack_from(header, pos)
                pos += 2
                key = header[pos:pos + klen].decode()
                pos += klen
                (vlen,) = _INT.unpack_from(header, pos)
                pos += 4
                if klen < 0 or vlen < 0 or pos + vlen > end:
                    raise FrameError("ROCKETMQ header: extFields entry exceeds header")
                ext[key] = header[pos:pos + vlen].decode()
                pos += vlen
        except (struct.error, UnicodeDecodeError) as exc:
            raise FrameError(f"malformed ROCKETMQ remoting header: {exc}") from None
        return cls(code, language=language, version=version, opaque=opaque, flag=flag, remark=remark,
                   ext_fields=ext)

    # ------------------------------------------------------------------ misc

    def __repr__(self) -> str:
        kind = "response" if self.flag & FLAG_RESPONSE else ("oneway" if self.flag & FLAG_ONEWAY else "request")
        return (f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
                f"language={_LANGUAGE_NAMES.get(self.language, self.language)} version={self.version} "
                f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={len(self.body)} bytes "
                f"serialize={SerializeType(self.serialize_type).name if self.serialize_type in (0, 1) else self.serialize_type})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        # the base class's fields (a subclass's __slots__ would hide them)
        return all(getattr(self, s) == getattr(other, s) for s in RemotingCommand.__slots__)

    __hash__ = None  # type: ignore[assignment]

    # True when this class encodes its JSON header as the base class does, so the C encoder
    # may render it (a subclass with its own ``_encode_json_header`` keeps it)
    _c_encodable = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._c_encodable = (cls._encode_json_header is RemotingCommand._encode_json_header
                            and cls.encode_header is RemotingCommand.encode_header)


if _ccommand is not None:
    _ccommand.configure(RemotingCommand, _LANGUAGE_BY_NAME, _LANGUAGE_NAMES, _LANGUAGE_OTHER)
    _c_decode = _ccommand.decode
    _c_encode = _ccommand.encode
else:
    _c_decode = _c_encode = None
