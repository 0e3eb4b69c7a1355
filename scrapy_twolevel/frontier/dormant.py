"""Hosts with nothing queued, kept as a few bytes until they get URLs again.

A broad crawl meets hundreds of thousands of hosts, most of which it drains and never
serves again; as :class:`~.hosts.Host` objects (a queue, an estimate, ~30 fields) they
cost ~1 KB each and five objects the garbage collector walks on every full collection.
A *dormant* host is what must survive of it, packed into one ``bytes``: its estimate (if
measured; hosts never measured share the prior), its page count (budgets), its failure
streaks and back-off count, its ``Crawl-delay``, its pace and when it last answered, and
whether it was given up. The fields of its last session are not kept: a host is made
dormant only once it is drained and idle (no request in flight, not open, not waiting),
so no outcome of that session can still arrive.

Only fields that differ from their defaults are packed, behind a bit mask, and integers
(counts) take 4 bytes unless one of them does not fit (a bit of the mask says so): a host
of one session with a measured estimate packs into ~110 bytes. Pure module: no Scrapy, no
I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import astuple, fields
from functools import cache
from typing import Any

from .estimates import CostParams, HostEstimate
from .hosts import GIVEN_UP_BUDGET, GIVEN_UP_FAILING, Host
from .queues import HostQueue

__all__ = ["pack", "unpack"]

#: Defaults of the host fields a dormant host keeps, in :func:`_host_values`' order (as
#: :class:`Host` sets them); ``None`` (``last_end``, ``min_gap``) packs as absent.
_HOST_DEFAULTS: tuple[Any, ...] = (False, 0, 0.0, 0, 0, 0, None, None, 0.0, 0, 0)
_GIVEN_UP = ("", GIVEN_UP_FAILING, GIVEN_UP_BUDGET)
#: The mask's bit past every field: the host has an estimate of its own.
_MEASURED = 1 << (len(_HOST_DEFAULTS) + len(fields(HostEstimate)))
#: The mask's bit after that: the integers are packed in 8 bytes (one is outside 0..2**32-1).
_WIDE = _MEASURED << 1
_MASK = struct.Struct("<Q")
_NARROW_MAX = (1 << 32) - 1


def _host_values(host: Host) -> tuple[Any, ...]:
    return (
        host.answered,
        host.failed_sessions,
        host.failing_since,
        host.failures,
        host.fetched,
        _GIVEN_UP.index(host.given_up_for),
        host.last_end,
        host.min_gap,
        host.ready_at,
        host.refused_in_a_row,
        host.sessions,
    )


def _set_host_values(host: Host, values: tuple[Any, ...]) -> None:
    (
        host.answered,
        host.failed_sessions,
        host.failing_since,
        host.failures,
        host.fetched,
        given_up,
        host.last_end,
        host.min_gap,
        host.ready_at,
        host.refused_in_a_row,
        host.sessions,
    ) = values
    host.given_up_for = _GIVEN_UP[given_up]
    host.given_up = bool(given_up)


def _code(value: Any) -> str:
    return "?" if type(value) is bool else "q" if type(value) is int else "d"


#: Struct code of each field, host fields first (``None`` defaults are floats).
_CODES = tuple("d" if default is None else _code(default) for default in _HOST_DEFAULTS) + tuple(
    _code(value) for value in astuple(HostEstimate.new(CostParams()))
)


@cache
def _values_struct(mask: int) -> struct.Struct:
    """The layout of the fields ``mask`` names (few distinct masks occur: cached)."""
    codes = "".join(c for i, c in enumerate(_CODES) if mask >> i & 1)
    return struct.Struct("<" + (codes if mask & _WIDE else codes.replace("q", "I")))


def _layout(mask: int) -> struct.Struct:
    return _values_struct(mask & (_MEASURED - 1 | _WIDE))


def _narrow(values: list[Any]) -> bool:
    """Whether every integer (not bool) among ``values`` fits in 4 unsigned bytes."""
    return all(0 <= v <= _NARROW_MAX for v in values if type(v) is int)


def _present(
    values: tuple[Any, ...], defaults: tuple[Any, ...], first_bit: int
) -> tuple[int, list[Any]]:
    """The mask bits (from ``first_bit``) of the values that differ from their defaults,
    and those values."""
    mask, kept, bit = 0, [], first_bit
    for value, default in zip(values, defaults, strict=True):
        if value != default or type(value) is not type(default):
            mask |= bit
            kept.append(value)
        bit <<= 1
    return mask, kept


def pack(host: Host, prior: HostEstimate) -> bytes:
    """What must survive of ``host`` (drained and idle), as bytes."""
    mask, values = _present(_host_values(host), _HOST_DEFAULTS, 1)
    if host.estimate is not prior:
        bits, kept = _present(astuple(host.estimate), astuple(prior), 1 << len(_HOST_DEFAULTS))
        mask |= _MEASURED | bits
        values += kept
    if not _narrow(values):
        mask |= _WIDE
    return _MASK.pack(mask) + _layout(mask).pack(*values)


def _merge(
    mask: int, first_bit: int, defaults: tuple[Any, ...], values: Iterator[Any]
) -> tuple[Any, ...]:
    """``defaults``, with the values ``mask`` names (from ``first_bit``) taken from ``values``."""
    return tuple(
        next(values) if mask & (first_bit << i) else default for i, default in enumerate(defaults)
    )


def unpack(key: str, data: bytes, queue: HostQueue, prior: HostEstimate) -> Host:
    """A :class:`Host` with ``queue`` and the state :func:`pack` kept."""
    (mask,) = _MASK.unpack_from(data)
    values = iter(_layout(mask).unpack_from(data, _MASK.size))
    host = Host(key, queue, prior)
    _set_host_values(host, _merge(mask, 1, _HOST_DEFAULTS, values))
    if mask & _MEASURED:
        host.estimate = HostEstimate(
            *_merge(mask, 1 << len(_HOST_DEFAULTS), astuple(prior), values)
        )
    return host
