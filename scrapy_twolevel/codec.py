"""Requests to bytes and back, for the JOBDIR file and for Redis: JSON, never pickle.

A request is stored as Scrapy's own ``Request.to_dict`` (callbacks become the names of
spider methods, subclasses keep their class). For plain ``Request`` objects the fields
that hold ``Request``'s defaults are left out: ``request_from_dict`` passes the
constructor only the fields it finds, so the defaults come back by themselves. A link
request of a URL, a priority and a little meta shrinks to a third of its size, and
encoding and decoding cost about half as much CPU.

The record is JSON, with ``bytes`` tagged as ``{"$b": base64}``, tuples as
``{"$t": [...]}`` and dicts with non-string keys or keys starting with ``$`` (request
headers, for one) as ``{"$d": [[key, value], ...]}``. Anything else (functions, arbitrary
objects in ``meta``, subclasses of ``dict``, ``list`` or ``tuple``, which would come back
as the plain type) raises ``ValueError``, so the caller can keep that request in memory
instead. Decoding data must not run code: data read from Redis or a file is never
unpickled.

Both directions are on the scheduler's hot path with ``JOBDIR``, so values that JSON takes
as they are (the usual ``meta`` of numbers and strings) are not walked, and decoding
untags in the C parser's ``object_hook``.
"""

from __future__ import annotations

import json
import logging
from binascii import a2b_base64, b2a_base64
from collections.abc import Callable
from functools import cache
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http.headers import Headers
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

__all__ = ["SpiderCodec", "decode", "decode_request", "encode", "encode_request", "url_of"]

logger = logging.getLogger(__name__)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _refuse(obj: Any) -> Any:
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _json_encoder() -> Callable[[Any], str]:
    """``JSONEncoder(separators=(",", ":"), allow_nan=False).encode``, with the C encoder
    built once: ``JSONEncoder.encode`` builds it on every call, a third of a link
    request's JSON time. No circular-reference check: :func:`_to_jsonable` has walked the
    value already, and a cycle stops it."""
    fallback = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    if c_make_encoder is None:  # a Python without the C accelerator
        return fallback
    encoder = c_make_encoder(
        None, _refuse, encode_basestring_ascii, None, ":", ",", False, False, False
    )

    def encode(obj: Any) -> str:
        if type(obj) is str:  # the C encoder takes only containers
            return fallback(obj)
        return "".join(encoder(obj, 0))

    return encode


_encode_json = _json_encoder()


def _b64(data: bytes) -> dict[str, str]:
    return {"$b": b2a_base64(data, newline=False).decode("ascii")}


def _to_jsonable(obj: Any) -> Any:
    kind = type(obj)
    if kind in _PLAIN:
        return obj
    if kind is bytes:
        return _b64(obj)
    if kind is dict:
        if not obj:
            return obj  # most of a request's containers (cookies, meta, cb_kwargs) are empty
        for key in obj:
            if type(key) is not str or key[:1] == "$":
                return {"$d": [[_to_jsonable(k), _to_jsonable(v)] for k, v in obj.items()]}
        return {k: v if type(v) in _PLAIN else _to_jsonable(v) for k, v in obj.items()}
    if kind is list:
        if not obj:
            return obj
        return [v if type(v) in _PLAIN else _to_jsonable(v) for v in obj]
    if kind is tuple:
        return {"$t": [_to_jsonable(v) for v in obj]}
    if kind is Headers:  # a dict subclass the request rebuilds itself
        return _to_jsonable(dict(obj))
    # Other subclasses (defaultdict, OrderedDict, a namedtuple) would come back as the plain
    # type: refused, so the request is kept as itself.
    raise ValueError(f"cannot encode {kind.__name__} value {obj!r}")


def _untag(obj: dict[str, Any]) -> Any:
    """``object_hook``: called for every JSON object, innermost first."""
    if len(obj) == 1:
        if "$b" in obj:
            return a2b_base64(obj["$b"], strict_mode=True)
        if "$t" in obj:
            return tuple(obj["$t"])
        if "$d" in obj:
            return {k: v for k, v in obj["$d"]}
    return obj


_decode_json = json.JSONDecoder(object_hook=_untag).decode


def encode(obj: Any) -> bytes:
    """Encode ``obj``; raises ``ValueError`` if it holds anything but plain data."""
    return _encode_json(_to_jsonable(obj)).encode()


def decode(data: bytes) -> Any:
    """Decode what :func:`encode` produced; raises ``ValueError`` on anything else."""
    try:
        return _decode_json(data.decode())
    # Bad UTF-8, JSON or base64 are ValueErrors; a tag holding the wrong kind of value gives
    # a TypeError or AttributeError; absurd nesting a RecursionError.
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"not an encoded record: {exc}") from exc


@cache
def _defaults() -> dict[str, Any]:
    """What ``to_dict`` gives for a default ``Request``, read from Scrapy, not restated."""
    defaults = Request("data:,").to_dict()
    del defaults["url"]
    return defaults


_UNNAMED = object()


def _method_name(spider: Spider | None, func: Any) -> Any:
    """What ``Request.to_dict`` stores for a callback or errback, if it is a method bound
    to ``spider`` (or not callable); ``_UNNAMED`` otherwise."""
    if not callable(func):
        return func
    function = getattr(func, "__func__", None)
    if spider is not None and function is not None and getattr(func, "__self__", None) is spider:
        name = function.__name__
        if getattr(getattr(spider, name, None), "__func__", None) is function:
            return name
    return _UNNAMED


def request_record(request: Request, spider: Spider | None = None) -> dict[str, Any]:
    """``request.to_dict(spider=spider)``. Scrapy's own names a callback by listing every
    member of the spider, for every request (16 µs of a 22-µs encoding); a method bound to
    the spider is named here at once, and any other callback is left to ``to_dict``, which
    names it or raises."""
    callback = _method_name(spider, request.callback)
    errback = _method_name(spider, request.errback)
    if callback is _UNNAMED or errback is _UNNAMED:
        return request.to_dict(spider=spider)
    record = {
        "url": request.url,
        "callback": callback,
        "errback": errback,
        "headers": dict(request.headers),
    }
    for attr in request.attributes:
        record.setdefault(attr, getattr(request, attr))
    if type(request) is not Request:
        record["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return record


@cache
def _plain_fields() -> tuple[tuple[str, Any], ...]:
    """``(attribute, default)`` of a plain ``Request``'s fields after url, callback, errback
    and headers, in ``Request.attributes`` order (the order ``to_dict`` gives)."""
    defaults = _defaults()
    missing = object()  # a field to_dict does not give: always kept
    return tuple(
        (attr, defaults.get(attr, missing))
        for attr in Request.attributes
        if attr not in ("url", "callback", "errback", "headers")
    )


def _plain_record(request: Request, callback: Any, errback: Any) -> dict[str, Any]:
    """:func:`request_record` of a plain ``Request`` with its defaults left out, built at
    once: half the cost of building the whole record and filtering it."""
    record: dict[str, Any] = {"url": request.url}
    if callback is not None:
        record["callback"] = callback
    if errback is not None:
        record["errback"] = errback
    headers = request.headers
    if headers:
        record["headers"] = dict(headers)
    for attr, default in _plain_fields():
        value = getattr(request, attr)
        if type(value) is not type(default) or value != default:
            record[attr] = value
    return record


def encode_request(request: Request, spider: Spider | None = None) -> bytes:
    """Encode ``request``; raises ``ValueError`` if it holds what JSON cannot (see codec).
    A plain ``Request``'s defaults are left out; a subclass may have other defaults, so
    its record is kept whole."""
    if type(request) is Request:
        callback = _method_name(spider, request.callback)
        errback = _method_name(spider, request.errback)
        if callback is not _UNNAMED and errback is not _UNNAMED:
            return encode(_plain_record(request, callback, errback))
    record = request_record(request, spider)
    if "_class" not in record:
        defaults = _defaults()
        record = {
            key: value
            for key, value in record.items()
            if not (
                key in defaults and type(value) is type(defaults[key]) and value == defaults[key]
            )
        }
    return encode(record)


def decode_request(data: bytes, spider: Spider | None = None) -> Request:
    """Rebuild a request from :func:`encode_request`'s bytes; ``ValueError`` on garbage."""
    record = decode(data)
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        raise ValueError(f"not an encoded request: {record!r:.200}")
    return request_from_dict(record, spider=spider)


class SpiderCodec:
    """Encodes and decodes one spider's requests; counts what cannot be encoded.

    ``logunser`` (Scrapy's ``SCHEDULER_DEBUG``) logs the first such request, as Scrapy's
    scheduler does; every one is counted in ``scheduler/unserializable``.
    """

    def __init__(self, spider: Spider | None, stats: StatsCollector, logunser: bool) -> None:
        self.spider = spider
        self._inc = stats.inc_value
        self._logunser = logunser

    def encode(self, request: Request) -> bytes | None:
        """``request`` as bytes, ``None`` if it holds what cannot be encoded."""
        try:
            return encode_request(request, self.spider)
        except Exception as exc:  # to_dict runs user code (callbacks, Request subclasses)
            if self._logunser:
                logger.warning(
                    "Unable to serialize request: %(request)s - reason: %(reason)s - no more "
                    "unserializable requests will be logged (stats being collected)",
                    {"request": request, "reason": exc},
                    extra={"spider": self.spider},
                )
                self._logunser = False
            self._inc("scheduler/unserializable")
            return None

    def decode(self, data: bytes) -> Request:
        """Rebuild a request; raises anything a damaged record or renamed code raises."""
        return decode_request(data, self.spider)


def url_of(item: Any) -> str | None:
    """The URL of a queued item: a request, or its encoding (:func:`encode`); ``None`` if
    it has none that can be read (for people: the live view's host page)."""
    if isinstance(item, bytes | bytearray | memoryview):
        try:
            url = decode(bytes(item)).get("url")
        except Exception:
            return None
        return url if isinstance(url, str) else None
    return item.url if isinstance(item, Request) else None
