"""Message preparation: everything a send does to a message before choosing its queue.

In the caller's thread, once per send (not per retry): Java ``Validators.checkMessage`` and the
batch checks, the ``UNIQ_KEY`` id, the publish span (its context goes into the properties),
compression over ``compress_msg_body_over_howmuch``, the system flag and the V2 send header.
The result is a :class:`Prepared`; :meth:`MessagePreparer.request_for` turns it into the
request for one queue. The send pipeline (docs/architecture.md, "The send pipeline"):
``prepare.py`` (this) → ``dispatch.py`` (queue, fault tolerance, retries) → a transport
(``producer.py`` blocking/asyncio, ``async_send.py`` callbacks).

Send requests' JSON headers are rendered from a per-topic template. A producer's
SEND_MESSAGE_V2 (and SEND_REPLY_MESSAGE_V2 / SEND_BATCH_MESSAGE) headers to one topic
differ only in the queue id, the system flag, the born timestamp, the user flag, the properties
string, the broker name, the command flag and the opaque. :class:`SendHeaderTemplate` renders
the rest once, through :meth:`RemotingCommand._encode_json_header` itself (the varying values
replaced by markers that are then cut out), so the bytes are those of the generic encoder by
construction; a topic whose constant fields contain a marker gets no template (generic path).

:class:`SendRequest` is a ``RemotingCommand`` that encodes from the template and builds its
``ext_fields`` dict only when something reads it (an RPC hook such as ACL signing, a log line,
a retry): from that moment it is an ordinary command and encodes through the generic path. The
producer creates one only when no RPC hook is installed (a hook may read and change the
header). Why and by how much: ``benchmarks/profiling/LOG.md``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring as _json_str  # the C function the header encoder uses
from typing import Any

from .. import _speedups
from ..config import ProducerConfig
from ..exceptions import IllegalArgumentError
from ..protocol import deflate
from ..protocol.codes import (
    CURRENT_VERSION,
    RETRY_GROUP_TOPIC_PREFIX,
    LanguageCode,
    RequestCode,
    SerializeType,
    check_name,
    is_not_allowed_send_topic,
    is_retry_topic,
)
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import MessageSysFlag as SF
from ..protocol.headers import V2Field as V2
from ..protocol.message import Message, MessageQueue
from ..protocol.message_codec import encode_batch, encode_properties
from ..protocol.msgid import create_uniq_id
from ..remoting.command import FLAG_ONEWAY, RemotingCommand, next_opaque
from ..trace.hooks import PubTraceSpan
from .batch import EncodedBatch
from .namespace import wrap_namespace

__all__ = ["MessagePreparer", "Prepared", "REPLY_MESSAGE_FLAG", "SendHeaderTemplate", "SendRequest",
           "SpanStarter", "send_request"]

#: ``MSG_TYPE`` value of reply messages (Java ``MixAll.REPLY_MESSAGE_FLAG``): such a message goes
#: out as SEND_REPLY_MESSAGE_V2.
REPLY_MESSAGE_FLAG = "reply"

_PYTHON = int(LanguageCode.PYTHON)
_JSON = int(SerializeType.JSON)
_new = object.__new__
_EXT_SLOT = RemotingCommand.__dict__["ext_fields"]  # the base class's slot (SendRequest shadows it)
_FRAME_PREFIX = struct.Struct(">II")
# the C twin of SendRequest.encode's template rendering (_cprepare.c beside this file: render_send)
_cprepare = _speedups.load("rocketmq_sdk.producer._cprepare")
#: the C renderer of templated frames, None when the accelerator is not built or disabled (tests
#: set it to None to compare the Python path).
c_render = _cprepare.render_send if _cprepare is not None else None

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
        pieces: list[str] = []
        pos = 0
        for mark in _MARKS:
            at = text.find(mark, pos)
            if at < 0 or text.count(mark) != 1:
                self.pieces: list[str] | None = None
                return
            if mark[0] == '"' and mark[-1] == ",":  # "flag":N, / "opaque":N, keep the name and comma
                name = mark[:mark.index(":") + 1]
                pieces.append(text[pos:at] + name)
                pos = at + len(mark) - 1
            else:
                pieces.append(text[pos:at])
                pos = at + len(mark)
        pieces.append(text[pos:])
        self.pieces = pieces

    def ext(self, e: str, f: str, g: str, h: str, i: str, n: str | None = None) -> dict[str, str]:
        """The header as :meth:`MessagePreparer.header` builds it (``e`` the queue id; ``n``, the broker
        name, added last when given), in the same key order."""
        return self.fields(self.a, self.b, self.c, self.d, self.m == "true", e, f, g, h, i, n)

    @staticmethod
    def fields(group: str, topic: str, default_topic: str, queue_nums: str, batch: bool, queue_id: str,
               sys_flag: str, born_timestamp: str, flag: str, properties: str, bname: str | None = None
               ) -> dict[str, str]:
        """A producer's ``SendMessageRequestHeaderV2`` fields (all strings, Java's order;
        ``reconsumeTimes`` 0, ``unitMode`` false, ``bname`` last and only when given)."""
        ext = {V2.PRODUCER_GROUP: group, V2.TOPIC: topic, V2.DEFAULT_TOPIC: default_topic,
               V2.DEFAULT_TOPIC_QUEUE_NUMS: queue_nums, V2.QUEUE_ID: queue_id, V2.SYS_FLAG: sys_flag,
               V2.BORN_TIMESTAMP: born_timestamp, V2.FLAG: flag, V2.PROPERTIES: properties,
               V2.RECONSUME_TIMES: "0", V2.UNIT_MODE: "false", V2.BATCH: "true" if batch else "false"}
        if bname is not None:
            ext[V2.BNAME] = bname
        return ext


class SendRequest(RemotingCommand):
    """A send request encoded from a :class:`SendHeaderTemplate` (see the module docstring).

    ``_vals`` holds the ``e, f, g, h, i, n`` field values (strings; ``e``, ``f``, ``g``, ``h``
    decimal digits). Reading ``ext_fields`` materialises the dict and drops the template.
    """

    __slots__ = ("_tmpl", "_vals")

    _tmpl: SendHeaderTemplate | None
    _vals: tuple[str, str, str, str, str, str]

    @property
    def values(self) -> tuple[str, str, str, str, str, str] | None:
        """The ``e, f, g, h, i, n`` field values while the request renders from its template,
        else None."""
        return self._vals if self._tmpl is not None else None

    @property
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
        p: list[str] = tmpl.pieces  # type: ignore[assignment]  # a template in use has pieces
        e, f, g, h, i, n = self._vals
        return (f"{p[0]}{e}{p[1]}{f}{p[2]}{g}{p[3]}{h}{p[4]}{_json_str(i)}{p[5]}{_json_str(n)}{p[6]}"
                f"{int(self.flag)}{p[7]}{int(self.opaque)}{p[8]}").encode()

    def encode(self) -> bytes:
        """The frame, as :meth:`RemotingCommand.encode` (which it uses unless templated JSON)."""
        tmpl = self._tmpl
        if tmpl is None or self.serialize_type != _JSON:
            return RemotingCommand.encode(self)
        render = c_render
        if render is not None and self.remark is None and self.language == _PYTHON \
                and self.version == CURRENT_VERSION:
            frame = render(tmpl.pieces, self._vals, self.flag, self.opaque, self.body)
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
    cmd.opaque = next_opaque()
    cmd.flag = FLAG_ONEWAY if oneway else 0
    cmd.remark = None
    cmd.body = body
    cmd.serialize_type = _JSON
    cmd._tmpl = tmpl
    cmd._vals = vals
    return cmd


#: ``start_span(msgs, topic, fifo, oneway)``: a send's publish span (its ``end(result, error)``
#: is called once with the outcome), or None when nothing traces.
SpanStarter = Callable[[Message | Sequence[Message], str, bool, bool], Any]


def _no_span(msgs: Message | Sequence[Message], topic: str, fifo: bool, oneway: bool) -> None:
    return None


class Prepared:
    """A message ready for the wire: V2 header (without queue/broker), body and id.

    With a header template (``head``; ``vals`` = the ``f, g, h, i`` fields) the ``ext`` dict is
    only built when read (the retry and fallback paths, RPC hooks); requests are rendered from
    the template (:func:`send_request`).

    Attributes:
        topic: the topic as sent (namespace included).
        body: the body as sent (compressed, or the encoded batch).
        uniq_id: the ``UNIQ_KEY`` (a batch: the messages' ids joined with commas).
        code: SEND_MESSAGE_V2, SEND_REPLY_MESSAGE_V2 or SEND_BATCH_MESSAGE.
        span: the publish span (its ``end(result, error)`` is called once), or None.
    """

    __slots__ = ("topic", "_ext", "body", "uniq_id", "code", "span", "head", "vals")

    def __init__(self, topic: str, ext: dict[str, str] | None, body: bytes, uniq_id: str,
                 code: int = RequestCode.SEND_MESSAGE_V2, span: Any = None,
                 head: SendHeaderTemplate | None = None, vals: tuple[str, str, str, str] | None = None) -> None:
        self.topic = topic
        self._ext = ext
        self.body = body
        self.uniq_id = uniq_id
        self.code = code
        self.span = span
        self.head = head
        self.vals = vals

    @property
    def ext(self) -> dict[str, str]:
        """The V2 header fields without ``n``, ``e`` = ``"0"`` (do not modify: copy)."""
        ext = self._ext
        if ext is None:
            assert self.head is not None and self.vals is not None
            ext = self._ext = self.head.ext("0", *self.vals)
        return ext

    def ext_for(self, mq: MessageQueue) -> dict[str, str]:
        """A copy of :attr:`ext` for ``mq`` (``e`` the queue id, ``n`` the broker name)."""
        ext = dict(self.ext)
        ext[V2.QUEUE_ID] = str(mq.queue_id)
        ext[V2.BNAME] = mq.broker_name
        return ext

    def request_for(self, mq: MessageQueue, hooks: Sequence[Any], oneway: bool = False) -> RemotingCommand:
        """The send request to ``mq`` (fresh opaque): rendered from the topic's header template
        when there are no RPC hooks (they need the fields), else a plain command of
        :meth:`ext_for`."""
        head = self.head
        if head is not None and not hooks and type(mq.queue_id) is int:
            f, g, h, i = self.vals  # type: ignore[misc]
            return send_request(head, (str(mq.queue_id), f, g, h, i, mq.broker_name), self.body, oneway)
        return RemotingCommand.request(self.code, self.ext_for(mq), self.body, oneway)

    def end_span(self, result: Any = None, error: BaseException | None = None) -> None:
        """End the publish span (if any) with the send's outcome."""
        if self.span is not None:
            self.span.end(result, error)


class MessagePreparer:
    """One producer's message preparation (caller's thread; thread-safe).

    Args:
        group: the producer group as sent (namespace included).
        config: the producer's settings (``max_message_size``, ``compress_msg_body_over_howmuch``,
            ``compress_level``, ``namespace``, ``create_topic_key``, ``default_topic_queue_nums``).

    Attributes:
        start_span: the :data:`SpanStarter` (the producer sets its own; default: no spans).
    """

    __slots__ = ("group", "config", "start_span", "_topics_ok", "_templates")

    def __init__(self, group: str, config: ProducerConfig) -> None:
        self.group = group
        self.config = config
        self.start_span: SpanStarter = _no_span
        self._topics_ok: set[str] = set()  # topic names already validated
        self._templates: dict[tuple, SendHeaderTemplate] = {}  # send header templates (template())

    def check_message(self, msg: Message) -> str:
        """Java ``Validators.checkMessage``; sets ``UNIQ_KEY`` if missing and returns it.

        Raises:
            IllegalArgumentError: not a Message, an illegal or forbidden topic, an empty body or
                one over ``max_message_size`` bytes.
        """
        if not isinstance(msg, Message):
            raise IllegalArgumentError(f"expected a Message, got {type(msg).__name__}")
        topic = msg.topic
        if topic not in self._topics_ok:
            check_name(topic, "topic")
            if is_not_allowed_send_topic(topic):
                raise IllegalArgumentError(f"sending a message to topic {topic} is forbidden")
            if len(self._topics_ok) < 10_000:
                self._topics_ok.add(topic)
        body = msg.body
        if not body:
            raise IllegalArgumentError("the message body is empty")
        if len(body) > self.config.max_message_size:
            raise IllegalArgumentError(
                f"the message body size {len(body)} exceeds max_message_size {self.config.max_message_size}")
        props = msg.properties
        uniq_id = props.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq_id:
            uniq_id = props[MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        return uniq_id

    def header(self, topic: str, sys_flag: int, flag: int, properties: str, batch: bool) -> dict[str, str]:
        """The V2 send header fields (``e`` = ``"0"``, no ``n``) without a template."""
        cfg = self.config
        return SendHeaderTemplate.fields(self.group, topic, cfg.create_topic_key, str(cfg.default_topic_queue_nums),
                                         batch, "0", str(sys_flag) if sys_flag else "0",
                                         str(int(time.time() * 1000)), str(flag) if flag else "0", properties)

    def prepare(self, msg: Message, fifo: bool = False, oneway: bool = False) -> Prepared:
        """Validate, start the publish span (its context goes into the properties), and build
        the V2 header and the (possibly compressed) body.

        Raises:
            IllegalArgumentError: as :meth:`check_message`.
        """
        cfg = self.config
        uniq_id = self.check_message(msg)
        topic, body, props = msg.topic, msg.body, msg.properties
        if cfg.namespace:
            topic = wrap_namespace(cfg.namespace, topic)
        span = self.start_span(msg, topic, fifo, oneway)
        sys_flag = 0
        if len(body) >= cfg.compress_msg_body_over_howmuch:
            body = deflate.compress(body, cfg.compress_level)
            sys_flag |= SF.COMPRESSED
        if span is not None and type(span) is PubTraceSpan:
            span.body_length = len(body)
        if props.get(MC.TRANSACTION_PREPARED) == "true":
            sys_flag |= SF.TRANSACTION_PREPARED_TYPE
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if props.get(MC.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG \
            else RequestCode.SEND_MESSAGE_V2  # a reply (request-reply), as Java
        flag = msg.flag
        if type(flag) is int and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            head = self.template(topic, code, False)
            if head is not None:  # the header's f, g, h, i fields; the rest is in the template
                return Prepared(topic, None, body, uniq_id, code, span, head, (
                    str(sys_flag) if sys_flag else "0", str(int(time.time() * 1000)),
                    str(flag) if flag else "0", encode_properties(props)))
        ext = self.header(topic, sys_flag, flag, encode_properties(props), False)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # is_retry_topic
            ext[V2.RECONSUME_TIMES] = props.get(MC.RECONSUME_TIME, "0")
            max_times = props.get(MC.MAX_RECONSUME_TIMES)
            if max_times:
                ext[V2.MAX_RECONSUME_TIMES] = max_times
        return Prepared(topic, ext, body, uniq_id, code, span)

    def prepare_batch(self, msgs: Sequence[Message]) -> Prepared:
        """Java ``MessageBatch.generateFromList`` + checks: one topic, no delay, no retry topic,
        one ``WAIT`` value; each message gets its ``UNIQ_KEY``; the batch is never compressed.

        Raises:
            IllegalArgumentError: an empty batch, mixed topics or ``WAIT`` values, a delayed
                message, a retry topic, an encoded batch over ``max_message_size`` bytes, or a
                message :meth:`check_message` refuses.
        """
        msgs = list(msgs)
        if not msgs:
            raise IllegalArgumentError("the batch is empty")
        first = msgs[0]
        ids = []
        check = self.check_message
        check(first)  # a non-Message is refused before its attributes are read
        topic0, wait0 = first.topic, first.wait_store_msg_ok
        retry = is_retry_topic(topic0)  # the same for every message of the batch
        for m in msgs:  # checks in Java's order, per message (the first offending one is reported)
            ids.append(check(m))
            if m.topic != topic0:
                raise IllegalArgumentError("the topic of the messages in one batch should be the same")
            props = m.properties
            delay = props.get(MC.DELAY_TIME_LEVEL)
            if delay and int(delay) > 0:
                raise IllegalArgumentError("delayed messages are not supported in batches")
            if retry:
                raise IllegalArgumentError("retry group topics are not supported in batches")
            if (props.get(MC.WAIT_STORE_MSG_OK, "true") != "false") != wait0:
                raise IllegalArgumentError("the waitStoreMsgOK of the messages in one batch should be the same")
        cfg = self.config
        topic = wrap_namespace(cfg.namespace, first.topic)
        span = self.start_span(msgs, topic, False, False)
        body = encode_batch(msgs)
        if span is not None and type(span) is PubTraceSpan:
            span.body_length = len(body)
        if len(body) > cfg.max_message_size:
            if span is not None:
                span.end(None, IllegalArgumentError("batch too large"))
            raise IllegalArgumentError(
                f"the batch body size {len(body)} exceeds max_message_size {cfg.max_message_size}")
        return self._batch_request(topic, body, ",".join(ids), first.wait_store_msg_ok, span)

    def prepare_encoded_batch(self, batch: EncodedBatch) -> Prepared:
        """:meth:`prepare_batch` of a body encoded beforehand (no publish span: the producer
        decodes the batch and calls :meth:`prepare_batch` when it traces sends).

        Raises:
            IllegalArgumentError: no entries, an illegal or forbidden topic, a retry topic, or a
                body over ``max_message_size`` bytes.
        """
        if not batch.ids or not batch.body:
            raise IllegalArgumentError("the batch is empty")
        topic0 = batch.topic
        if topic0 not in self._topics_ok:
            check_name(topic0, "topic")
            if is_not_allowed_send_topic(topic0):
                raise IllegalArgumentError(f"sending a message to topic {topic0} is forbidden")
        if is_retry_topic(topic0):
            raise IllegalArgumentError("retry group topics are not supported in batches")
        cfg = self.config
        body = batch.body
        if len(body) > cfg.max_message_size:
            raise IllegalArgumentError(
                f"the batch body size {len(body)} exceeds max_message_size {cfg.max_message_size}")
        return self._batch_request(wrap_namespace(cfg.namespace, topic0), body, ",".join(batch.ids),
                                   batch.wait_store_msg_ok, None)

    def _batch_request(self, topic: str, body: bytes, ids: str, wait_store_msg_ok: bool,
                       span: Any) -> Prepared:
        """The SEND_BATCH_MESSAGE request of an encoded batch body (``topic`` namespaced)."""
        wait = encode_properties({MC.WAIT_STORE_MSG_OK: "true" if wait_store_msg_ok else "false"})
        code = RequestCode.SEND_BATCH_MESSAGE
        head = self.template(topic, code, True)
        if head is not None:
            return Prepared(topic, None, body, ids, code, span, head, ("0", str(int(time.time() * 1000)), "0", wait))
        return Prepared(topic, self.header(topic, 0, 0, wait, True), body, ids, code, span)

    def template(self, topic: str, code: int, batch: bool) -> SendHeaderTemplate | None:
        """The header template of ``topic`` (None if it cannot have one, see the module doc)."""
        cfg = self.config
        key = (topic, code, batch, cfg.create_topic_key, cfg.default_topic_queue_nums)
        head = self._templates.get(key)
        if head is None:
            if len(self._templates) >= 1024:
                self._templates.clear()
            head = self._templates[key] = SendHeaderTemplate(code, self.group, topic, cfg.create_topic_key,
                                                             str(cfg.default_topic_queue_nums), batch)
        return head if head.pieces is not None else None
