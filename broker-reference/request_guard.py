"""The name check at the request boundary of the broker and the name server.

Every topic and group a request names (header fields, and the heartbeat, lock and
subscription-group bodies) is checked with the shared rules of
:mod:`rocketmq_sdk.protocol.validators` before the request reaches its processor, so a hostile
name (``x/../../escape``, a NUL byte, 10 KB of text) is refused before anything is stored or
turns into a path. The refusal is Java's for a bad name: ``SYSTEM_ERROR`` with
``TopicValidator``'s / ``Validators``' remark. Each refusal is logged as one WARNING line (peer,
request code), rate-limited.

Which header fields and which body a request names topics and groups in is the broker's request
table (:class:`~rocketmq_broker.broker.requests.RequestSpec` ``topic_fields``, ``group_fields``,
``body``); a server without a table (the name server) has every request's usual fields checked
(:data:`~rocketmq_broker.broker.requests.TOPIC_FIELDS`, ``GROUP_FIELDS``).

Blank fields are left to the processors (which answer them as Java does, e.g. "topic is blank").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.protocol.validators import group_problem, topic_problem
from rocketmq_sdk.remoting import Channel, RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.channel import bad_input_log

from .broker.requests import GROUP_FIELDS, TOPIC_FIELDS, Body, RequestSpec

__all__ = ["GROUP_FIELDS", "TOPIC_FIELDS", "install", "name_refusal", "request_name_problem"]

_CACHE_MAX = 8192
_valid_topics: set[str] = set()
_valid_groups: set[str] = set()


def _checked(name: object, valid: set[str], problem_of) -> str | None:
    """``problem_of(name)``, remembering names that passed in ``valid`` (bounded); None for an
    absent or blank field (the processors answer those)."""
    if name in valid or name is None or name == "":
        return None
    problem = problem_of(name)
    if problem is None:
        if len(valid) >= _CACHE_MAX:
            valid.clear()
        valid.add(name)  # type: ignore[arg-type]
    return problem


def _topic(name: object) -> str | None:
    return _checked(name, _valid_topics, topic_problem)


def _group(name: object) -> str | None:
    return _checked(name, _valid_groups, group_problem)


def _first(checks: Iterable[str | None]) -> str | None:
    for problem in checks:
        if problem is not None:
            return problem
    return None


def _items(value: object) -> list:
    return value if isinstance(value, list) else []


def _body_problem(kind: Body, body: bytes) -> str | None:
    """The name problem of a heartbeat, lock or subscription-group body (unparsable bodies are
    left to the processor, which answers them)."""
    if not body:
        return None
    try:
        d = fastjson.loads(body)
    except Exception:  # noqa: BLE001 - the processor refuses it with its own answer
        return None
    if not isinstance(d, dict):
        return None
    if kind is Body.HEARTBEAT:
        producers = (_group(p.get("groupName")) for p in _items(d.get("producerDataSet")) if isinstance(p, dict))
        consumers = [c for c in _items(d.get("consumerDataSet")) if isinstance(c, dict)]
        return _first(producers) or _first(_group(c.get("groupName")) for c in consumers) or _first(
            _topic(s.get("topic")) for c in consumers for s in _items(c.get("subscriptionDataSet"))
            if isinstance(s, dict))
    if kind is Body.LOCK_BATCH:
        return _group(d.get("consumerGroup")) or _first(
            _topic(mq.get("topic")) for mq in _items(d.get("mqSet")) if isinstance(mq, dict))
    if kind is Body.SUBSCRIPTION_GROUP:
        return _group(d.get("groupName"))
    return None


#: the header values (topic fields, then group fields) of requests that passed, per field list
#: (bounded): a request whose values were all checked before costs one set lookup
_passed: dict[tuple[str, ...], set[tuple]] = {}


def request_name_problem(cmd: RemotingCommand, spec: RequestSpec | None = None) -> str | None:
    """Why ``cmd`` names an illegal topic or group (the Java remark), or None. ``spec`` (its
    request table entry) says which fields and body name them; None: the usual header fields."""
    ext = cmd.ext_fields or {}
    if spec is None:
        topic_fields, group_fields, body = TOPIC_FIELDS, GROUP_FIELDS, None
    else:
        topic_fields, group_fields, body = spec.topic_fields, spec.group_fields, spec.body
    fields = topic_fields + group_fields
    values = tuple(map(ext.get, fields))
    passed = _passed.get(fields)
    if passed is None or values not in passed:
        for f in topic_fields:  # plain loops
            problem = _checked(ext.get(f), _valid_topics, topic_problem)
            if problem is not None:
                return problem
        for f in group_fields:
            problem = _checked(ext.get(f), _valid_groups, group_problem)
            if problem is not None:
                return problem
        if passed is None:
            passed = _passed[fields] = set()
        elif len(passed) >= _CACHE_MAX:
            passed.clear()
        passed.add(values)
    if body is not None:
        return _body_problem(body, cmd.body)
    return None


def name_refusal(channel: Channel, cmd: RemotingCommand, spec: RequestSpec | None = None) -> RemotingCommand | None:
    """Request hook (``RemotingServer.add_request_hook``): SYSTEM_ERROR for a request naming an
    illegal topic or group, None otherwise (``spec``: as :func:`request_name_problem`)."""
    problem = request_name_problem(cmd, spec)
    if problem is None:
        return None
    bad_input_log.warning("refused request code %d from %s: %s", cmd.code, channel.remote_addr, problem[:300])
    return cmd.response(ResponseCode.SYSTEM_ERROR, problem)


def install(server: RemotingServer, table: Mapping[int, RequestSpec] | None = None) -> None:
    """Run :func:`name_refusal` before every request ``server`` has a processor for (requests
    with unknown codes keep their usual answer: REQUEST_CODE_NOT_SUPPORTED, or none), with the
    request's entry of ``table`` (the broker's request table; None: the name server)."""
    processors = server._processors
    specs = table if table is not None else {}
    # per code without a body to check: its name fields, for the passed-values lookup inline
    fields_of = {code: s.topic_fields + s.group_fields for code, s in specs.items() if s.body is None}
    default_fields = TOPIC_FIELDS + GROUP_FIELDS
    passed_of = _passed.get

    def hook(channel: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        code = cmd.code
        if code not in processors:
            return None
        spec = specs.get(code)
        fields = default_fields if spec is None else fields_of.get(code)
        if fields is not None:  # values seen pass before: nothing more to check
            passed = passed_of(fields)
            if passed is not None and tuple(map((cmd.ext_fields or {}).get, fields)) in passed:
                return None
        return name_refusal(channel, cmd, spec)

    server.add_request_hook(hook)
