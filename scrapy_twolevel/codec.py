"""A safe, inspectable encoding for requests kept on disk or in shared stores.

JSON, with ``bytes`` tagged as ``{"$b": base64}``, tuples as ``{"$t": [...]}`` and dicts with
non-string keys or keys starting with ``$`` (request headers, for one) as
``{"$d": [[key, value], ...]}``. Anything else (functions, arbitrary objects in ``meta``)
raises ``ValueError``, so the caller can keep that request in memory instead. Never
pickle: decoding data must not run code.

Both directions are on the scheduler's hot path with ``JOBDIR``, so values that JSON takes
as they are (the usual ``meta`` of numbers and strings) are not walked, and decoding
untags in the C parser's ``object_hook``.
"""

from __future__ import annotations

import json
from binascii import a2b_base64, b2a_base64
from typing import Any

_PLAIN = frozenset({str, int, float, bool, type(None)})
_encode_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


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
    if isinstance(obj, dict):  # e.g. Scrapy's Headers, a dict subclass
        return _to_jsonable(dict(obj))
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
