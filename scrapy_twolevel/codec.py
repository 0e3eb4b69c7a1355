"""A safe, inspectable encoding for requests kept on disk or in shared stores.

JSON, with ``bytes`` tagged as ``{"$b": base64}``, tuples as ``{"$t": [...]}`` and dicts with
non-string keys (request headers) as ``{"$d": [[key, value], ...]}``. Anything
else (functions, arbitrary objects in ``meta``) raises ``ValueError``, so the caller can
keep that request in memory instead. Never pickle: decoding data must not run code.
"""

from __future__ import annotations

import base64
import json
from typing import Any

_PLAIN = (str, int, float, bool, type(None))


def _to_jsonable(obj: Any) -> Any:
    kind = type(obj)
    if kind in _PLAIN:
        return obj
    if kind is bytes:
        return {"$b": base64.b64encode(obj).decode("ascii")}
    if kind is dict:
        for key in obj:
            if type(key) is not str or key[:1] == "$":
                return {"$d": [[_to_jsonable(k), _to_jsonable(v)] for k, v in obj.items()]}
        return {k: v if type(v) in _PLAIN else _to_jsonable(v) for k, v in obj.items()}
    if kind is list:
        return [v if type(v) in _PLAIN else _to_jsonable(v) for v in obj]
    if kind is tuple:
        return {"$t": [_to_jsonable(v) for v in obj]}
    if isinstance(obj, dict):  # e.g. Scrapy's Headers, a dict subclass
        return _to_jsonable(dict(obj))
    raise ValueError(f"cannot encode {kind.__name__} value {obj!r}")


def _from_jsonable(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_from_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            if "$b" in obj:
                return base64.b64decode(obj["$b"], validate=True)
            if "$t" in obj:
                return tuple(_from_jsonable(v) for v in obj["$t"])
            if "$d" in obj:
                return {_from_jsonable(k): _from_jsonable(v) for k, v in obj["$d"]}
        return {k: _from_jsonable(v) for k, v in obj.items()}
    return obj


def encode(obj: Any) -> bytes:
    """Encode ``obj``; raises ``ValueError`` if it holds anything but plain data."""
    return json.dumps(_to_jsonable(obj), separators=(",", ":"), allow_nan=False).encode()


def decode(data: bytes) -> Any:
    """Decode what :func:`encode` produced; raises ``ValueError`` on anything else."""
    try:
        return _from_jsonable(json.loads(data))
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"not an encoded record: {exc}") from exc
