"""Who is in the crawl, and which buckets each node owns: the registry, kept in Redis.

Keys, under ``twolevel:<crawl id>:``:

- ``table``: the :class:`~.buckets.BucketTable` as JSON (never pickle: anyone who can
  write to Redis must not be able to run code in a crawler), and ``epoch``, a counter
  bumped with every change of the table, in the same transaction;
- ``members``: the set of node ids the table gives buckets to;
- ``alive:<node>``: a key with a time to live, renewed by each heartbeat.

A change (join, leave, reaping the dead, a rebalance by load) reads the table under
``WATCH``, applies the pure table method, and writes it back in ``MULTI``/``EXEC``; a
concurrent change makes ``EXEC`` fail and the change is retried on the new table. So
every node sees the same sequence of tables, and every bucket has exactly one owner in
each.

A node whose ``alive`` key expired (it stopped, or could not reach Redis for ``ttl``
seconds) is reaped by any other node: its buckets go to the live ones. Its own next
:meth:`Registry.heartbeat` then reports that it is no longer a member, and it must stop
dispatching: its work now belongs to others. A node stops dispatching on its own once
its last successful heartbeat is ``ttl`` old (:meth:`Registry.may_dispatch`), before
anyone can reap it.

No Scrapy here; the clock is injectable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from .buckets import BucketTable, Move
from .keys import crawl_prefix

#: Default logical buckets (Redis Cluster has 16,384 slots; the reference 50,000).
DEFAULT_BUCKETS = 16384


class NotAMember(RuntimeError):
    """This node was reaped (or left): its buckets belong to others now."""


class IdTaken(RuntimeError):
    """Another process has joined the crawl under this node's id since (two processes
    with one ``TWOLEVEL_NODE_ID``, or this one paused while its id was restarted): the
    newer one keeps the id; this one must stop, not fight over it."""


#: Renews a node's alive key if it is still this process's (its token), or free.
HEARTBEAT_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""


class StateLost(RuntimeError):
    """The crawl's state is gone from Redis while this node was in it (Redis restarted
    without persistence, or someone reset the crawl): crawling on would start afresh and
    fetch everything again, so the node stops instead."""


class Registry:
    """One node's view of the crawl's membership and bucket table in Redis."""

    def __init__(
        self,
        redis: Any,
        crawl_id: str,
        node_id: str,
        *,
        buckets: int = DEFAULT_BUCKETS,
        ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be > 0 seconds, got {ttl}")
        self.redis = redis
        self.prefix = crawl_prefix(crawl_id)
        self.node_id = node_id
        self.buckets = buckets
        self.ttl = ttl
        self._clock = clock
        self._last_beat: float | None = None
        #: This process's token: the newest process to join under a node id holds it.
        self.token = os.urandom(8).hex()
        self._heartbeat = redis.register_script(HEARTBEAT_SCRIPT)
        self.table = BucketTable(buckets)
        self.epoch = 0

    def key(self, name: str) -> str:
        return self.prefix + name

    # -- membership -----------------------------------------------------------------------

    def join(self) -> list[Move]:
        """Enter the crawl: take a share of the buckets (all of them if first)."""
        # Already in the table: restarted before anyone reaped it; it keeps its buckets.
        moves = self._change(
            lambda table: [] if self.node_id in table.nodes else table.join(self.node_id),
            add=self.node_id,
        )
        # The newest process under this id takes it: a restart after a kill -9 goes on at
        # once, and a process still running under it is fenced at its next beat or commit.
        self.redis.set(self.key(f"alive:{self.node_id}"), self.token, px=int(self.ttl * 1000))
        self.heartbeat()
        return moves

    def leave(self) -> list[Move]:
        """Leave gracefully: the others take this node's buckets."""
        moves = self._change(lambda table: self._leave(table, self.node_id), remove=self.node_id)
        self.redis.delete(self.key(f"alive:{self.node_id}"))
        self._last_beat = None
        return moves

    def heartbeat(self) -> None:
        """Renew this node's ``alive`` key; :class:`NotAMember` if it was reaped."""
        if not self.redis.sismember(self.key("members"), self.node_id):
            self._last_beat = None
            raise NotAMember(f"node {self.node_id} is no longer in crawl {self.prefix[9:-1]}")
        started = self._clock()
        key = self.key(f"alive:{self.node_id}")
        if not self._heartbeat(keys=[key], args=[self.token, int(self.ttl * 1000)]):
            self.id_taken()
        self._last_beat = started

    def id_taken(self) -> None:
        """Raise :class:`IdTaken`: this node's id is another process's now."""
        self._last_beat = None
        raise IdTaken(
            f"another process has joined crawl {self.prefix[9:-1]!r} as node "
            f"{self.node_id!r}: this one stops. Give every process its own TWOLEVEL_NODE_ID "
            "(the default, <host name>-<process id>, is)."
        )

    @property
    def last_beat(self) -> float | None:
        """Clock time of the last successful heartbeat (``None``: none since joining)."""
        return self._last_beat

    def may_dispatch(self) -> bool:
        """Whether this node may still hand out requests: its last heartbeat is younger
        than ``ttl``, so nobody can have reaped it yet."""
        return self._last_beat is not None and self._clock() - self._last_beat < self.ttl

    def reap(self) -> dict[str, list[Move]]:
        """Reassign the buckets of every member whose ``alive`` key expired."""
        reaped: dict[str, list[Move]] = {}
        for member in sorted(self._members()):
            if member == self.node_id or self.redis.exists(self.key(f"alive:{member}")):
                continue

            def leave(table: BucketTable, gone: str = member) -> list[Move]:
                return self._leave(table, gone)

            moves = self._change(leave, remove=member, only_if=member)
            if moves:
                reaped[member] = moves
        return reaped

    def rebalance(
        self, load: Mapping[int, float], *, max_moves: int, tolerance: float
    ) -> list[Move]:
        """Move buckets by measured load (:meth:`BucketTable.rebalance`), in one transaction
        with the table as it is in Redis; the moves made."""
        return self._change(
            lambda table: table.rebalance(load, max_moves=max_moves, tolerance=tolerance)
        )

    # -- the table ------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read the table if it changed; whether it did."""
        epoch = int(self.redis.get(self.key("epoch")) or 0)
        if epoch == self.epoch:
            return False
        raw = self.redis.get(self.key("table"))
        self.table = BucketTable.from_json(raw) if raw else BucketTable(self.buckets)
        self.epoch = epoch
        return True

    def owned(self) -> frozenset[int]:
        return self.table.buckets_of(self.node_id)

    def owner_of_host(self, host_key: str) -> str | None:
        return self.table.owner_of_host(host_key)

    # -- internals ------------------------------------------------------------------------

    def _members(self) -> set[str]:
        return {
            m.decode() if isinstance(m, bytes) else m
            for m in self.redis.smembers(self.key("members"))
        }

    @staticmethod
    def _leave(table: BucketTable, node: str) -> list[Move]:
        if node not in table.nodes:
            return []
        if len(table.nodes) == 1:
            # The last node: nobody to hand over to; the table empties with it.
            return [Move(b, node, "") for b in sorted(table.buckets_of(node))]
        return table.leave(node)

    def _change(
        self,
        change: Callable[[BucketTable], list[Move]],
        *,
        add: str | None = None,
        remove: str | None = None,
        only_if: str | None = None,
    ) -> list[Move]:
        import redis as redis_lib

        table_key, epoch_key = self.key("table"), self.key("epoch")
        while True:
            with self.redis.pipeline() as pipe:
                try:
                    watched = [table_key, epoch_key, self.key("members")]
                    if only_if is not None:  # a reap: the victim's heartbeat aborts it
                        watched.append(self.key(f"alive:{only_if}"))
                    pipe.watch(*watched)
                    if only_if is not None and (
                        pipe.exists(self.key(f"alive:{only_if}"))
                        or not pipe.sismember(self.key("members"), only_if)
                    ):
                        return []  # it came back, or another node reaped it first
                    raw = pipe.get(table_key)
                    table = BucketTable.from_json(raw) if raw else BucketTable(self.buckets)
                    if table.size != self.buckets:
                        raise ValueError(
                            f"crawl {self.prefix[9:-1]} has {table.size} buckets, this node "
                            f"was configured with {self.buckets}: use the same bucket count"
                        )
                    moves = change(table)
                    if not moves and add is None and remove is None:
                        return []  # nothing changed: no new epoch for every node to read
                    emptied = remove is not None and len(table.nodes) == 1 and remove in table.nodes
                    pipe.multi()
                    if emptied:
                        pipe.delete(table_key)
                    else:
                        pipe.set(table_key, table.to_json())
                    pipe.incr(epoch_key)
                    if add is not None:
                        # Alive in the same transaction: a member without its key could be
                        # reaped by another node before its first heartbeat.
                        pipe.set(self.key(f"alive:{add}"), "1", px=int(self.ttl * 1000))
                        pipe.sadd(self.key("members"), add)
                    if remove is not None:
                        pipe.srem(self.key("members"), remove)
                    pipe.execute()
                except redis_lib.WatchError as exc:
                    if "Error occurred while watching" in str(exc):
                        # redis-py's word for a connection lost mid-transaction: retrying
                        # at once looped for ever while Redis was away; the caller's
                        # retries (with their pauses and warnings) take it from here.
                        raise redis_lib.ConnectionError(str(exc)) from exc
                    continue  # the watched keys changed: compute the change again
            self.refresh()
            return moves
