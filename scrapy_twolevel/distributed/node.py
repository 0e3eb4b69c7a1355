"""One crawler node's side of the shared crawl state in Redis: one :meth:`Node.sync` per tick.

The scheduler's side of the distributed mode (:mod:`.store`, :mod:`.sync`) collects what
changed in a :class:`Batch` on the reactor; a background thread hands it to
:meth:`Node.sync`, which does every round trip of the tick and returns a
:class:`SyncResult` to apply. So a slow or dead Redis delays the crawl's bookkeeping,
never the reactor (joining and the first sync block once at start-up).

Keys, under ``twolevel:<crawl id>:`` (the registry's own keys in :mod:`.registry`):

- ``q:<bucket>``: a hash, entry id -> encoded request (JSON, never pickle), holding every
  request of the bucket that is queued *or handed out and not yet finished*: the entry of
  a handed-out request is its lease, removed only when the page is done and its children
  are stored. A node that dies leaves its leases here, and the bucket's next holder
  fetches them again (at least once, never lost).
- ``seen:<bucket>``: the bucket's seen keys, packed (:mod:`.seen_log`).
- ``pages:<bucket>``: a hash, host key -> pages it has given (plain integers), for the
  hosts of the bucket that have a page budget: a host's budget moves with its bucket.
- ``holders``: a hash, bucket -> the node allowed to dispatch and commit its requests.
  The table says who *should* own a bucket; ``holders`` says who *does*. A node takes a
  bucket only once its previous holder released it (a graceful move: the holder first
  finishes its requests in flight) or is no longer a member (it was reaped). So two nodes
  never dispatch one bucket's hosts at once.
- ``inbox:<node>``: cross URLs (:mod:`.inbox`).

Every write of a tick is one Lua script (:data:`COMMIT_SCRIPT`), atomic: the new requests
of held buckets with their seen keys, the cross URLs routed to their owners' inboxes, the
acknowledgements of inbox entries now stored, the leases of finished requests, and the
page counts of budgeted hosts. A request's lease is removed in the same script that
stores the children it produced (or in a later one), never before. It refuses the writes
of a bucket this node does not hold, and all of them from a node no longer a member (no
zombies). A node that finds the crawl gone from Redis (:class:`StateLost`) stops and
writes nothing more.

No Scrapy here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .batch import AfterCommit, Batch, SyncResult
from .buckets import LOAD_CAP
from .connect import retrying
from .history import HistoryWrites, delete_matching, stored_plans
from .inbox import Inbox, prune_inboxes
from .keys import crawl_prefix
from .registry import IdTaken, NotAMember, Registry, StateLost
from .seen_log import KEY_SIZE, SeenLog, unpack_keys, worth_compacting

#: KEYS: none (one Redis instance, not Cluster: the keys are built from the prefix).
#: ARGV: prefix, node, the process's token, then counts of stores, routes, acks, dones,
#: plans, pages, then their fields. Returns ``{status, stored, refused, bad_route_1, ...}``;
#: status -1: not a member; -2: another process has joined under this node id since.
COMMIT_SCRIPT = """
local p, me = ARGV[1], ARGV[2]
if redis.call('SISMEMBER', p .. 'members', me) == 0 then return {-1, 0, 0} end
local alive = redis.call('GET', p .. 'alive:' .. me)
if alive and alive ~= ARGV[3] then return {-2, 0, 0} end
local ns, nr, na = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local nd, np, ng = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local i = 10
local held = {}
local function holds(b)
  local v = held[b]
  if v == nil then
    v = redis.call('HGET', p .. 'holders', b) == me
    held[b] = v
  end
  return v
end
local stored, refused, added = 0, 0, 0
for _ = 1, ns do
  local b = ARGV[i]
  if holds(b) then
    if #ARGV[i + 1] > 0 then
      added = added + redis.call('HSET', p .. 'q:' .. b, ARGV[i + 1], ARGV[i + 2])
      stored = stored + 1
    end
    if #ARGV[i + 3] > 0 then redis.call('APPEND', p .. 'seen:' .. b, ARGV[i + 3]) end
  else
    refused = refused + 1
  end
  i = i + 4
end
local result = {1, 0, 0}
local members = {}
for r = 1, nr do
  local node = ARGV[i]
  local ok = members[node]
  if ok == nil then
    ok = redis.call('SISMEMBER', p .. 'members', node) == 1
    members[node] = ok
  end
  if ok then
    redis.call('XADD', p .. 'inbox:' .. node, '*', 'host', ARGV[i + 1], 'data', ARGV[i + 2])
  else
    table.insert(result, r)
  end
  i = i + 3
end
local inbox = p .. 'inbox:' .. me
for _ = 1, na do
  redis.call('XACK', inbox, 'owner', ARGV[i])
  redis.call('XDEL', inbox, ARGV[i])
  i = i + 1
end
for _ = 1, nd do
  if holds(ARGV[i]) then
    added = added - redis.call('HDEL', p .. 'q:' .. ARGV[i], ARGV[i + 1])
  else
    refused = refused + 1
  end
  i = i + 2
end
for _ = 1, np do
  local b = ARGV[i]
  if holds(b) then
    redis.call('HSET', p .. 'plans:' .. b, ARGV[i + 1], ARGV[i + 2])
    redis.call('SADD', p .. 'planned', b)
  else
    refused = refused + 1
  end
  i = i + 3
end
for _ = 1, ng do
  local b = ARGV[i]
  if holds(b) then
    redis.call('HSET', p .. 'pages:' .. b, ARGV[i + 1], ARGV[i + 2])
  else
    refused = refused + 1
  end
  i = i + 3
end
if added ~= 0 then redis.call('INCRBY', p .. 'pending', added) end
result[2], result[3] = stored, refused
return result
"""

#: ARGV: prefix, node, buckets. Takes each bucket that is free, already this node's, or
#: held by a node that is no longer a member. Returns ``{taken, loaded}``: the buckets
#: taken, and for those with content (seen keys or page counts) ``bucket, packed seen
#: keys, {seed, plan, ...}, {host, pages, ...}`` (most buckets are empty: only their
#: number crosses the wire). Their queued requests are read afterwards with HSCAN, a slice
#: per command (:data:`LOAD_SLICE`): one script reading a bucket of 500k requests kept
#: Redis busy for seconds (``BUSY`` for every other node).
ACQUIRE_SCRIPT = """
local p, me = ARGV[1], ARGV[2]
local members = {}
for _, m in ipairs(redis.call('SMEMBERS', p .. 'members')) do members[m] = true end
local taken, loaded = {}, {}
local CHUNK = 1000
for first = 3, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local buckets, keys = {}, {}
  for i = first, last do
    buckets[#buckets + 1] = ARGV[i]
    keys[#keys + 1] = p .. 'seen:' .. ARGV[i]
  end
  local holders = redis.call('HMGET', p .. 'holders', unpack(buckets))
  local seen = redis.call('MGET', unpack(keys))
  local set = {}
  for k, b in ipairs(buckets) do
    local h = holders[k]
    if (not h) or h == me or not members[h] then
      set[#set + 1] = b
      set[#set + 1] = me
      taken[#taken + 1] = b
      if seen[k] or redis.call('EXISTS', p .. 'pages:' .. b) == 1 then
        loaded[#loaded + 1] = b
        loaded[#loaded + 1] = seen[k] or ''
        loaded[#loaded + 1] = redis.call('HGETALL', p .. 'plans:' .. b)
        loaded[#loaded + 1] = redis.call('HGETALL', p .. 'pages:' .. b)
      end
    end
  end
  if #set > 0 then redis.call('HSET', p .. 'holders', unpack(set)) end
end
return {taken, loaded}
"""

#: Queued requests read per HSCAN command when a bucket is taken over.
LOAD_SLICE = 5000

#: ARGV: prefix, node, buckets. Releases those this node holds; returns how many.
RELEASE_SCRIPT = """
local p, me = ARGV[1], ARGV[2]
local n = 0
for i = 3, #ARGV do
  if redis.call('HGET', p .. 'holders', ARGV[i]) == me then
    redis.call('HDEL', p .. 'holders', ARGV[i])
    n = n + 1
  end
end
return n
"""

#: ARGV: prefix, node. Releases every bucket held by this node (at a join: a node that
#: was reaped, or restarted, holds nothing in memory); returns how many.
RELEASE_ALL_SCRIPT = """
local p, me = ARGV[1], ARGV[2]
local all = redis.call('HGETALL', p .. 'holders')
local n = 0
for i = 1, #all, 2 do
  if all[i + 1] == me then
    redis.call('HDEL', p .. 'holders', all[i])
    n = n + 1
  end
end
return n
"""


class Node:
    """A crawler node in a crawl's Redis state; call from one thread at a time."""

    def __init__(
        self,
        redis: Any,
        crawl_id: str,
        node_id: str,
        *,
        buckets: int,
        ttl: float,
        rebalance_every: float = 0.0,
        rebalance_tolerance: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``rebalance_every``: seconds between two rebalances of the table by pending
        requests per bucket, made by the crawl's leader (0: never; see :meth:`rebalance`);
        ``rebalance_tolerance``: the imbalance left alone, as a share of the mean node load
        (the crawl passes ``TWOLEVEL_REBALANCE_TOLERANCE``)."""
        self.redis = redis
        self.crawl_id = crawl_id
        self.node_id = node_id
        self.prefix = crawl_prefix(crawl_id)
        self.ttl = ttl
        self._clock = clock
        self.registry = Registry(redis, crawl_id, node_id, buckets=buckets, ttl=ttl, clock=clock)
        self.inbox: Inbox | None = None
        self.seen_log = SeenLog(redis, crawl_id)
        self._commit = redis.register_script(COMMIT_SCRIPT)
        self._acquire = redis.register_script(ACQUIRE_SCRIPT)
        self._release = redis.register_script(RELEASE_SCRIPT)
        self._release_all = redis.register_script(RELEASE_ALL_SCRIPT)
        self._beat_at = float("-inf")
        self._reap_at = float("-inf")
        self.rebalance_every = rebalance_every
        self.rebalance_tolerance = rebalance_tolerance
        self._rebalance_at = clock()  # the first one after a full interval
        self.held: set[int] = set()
        #: Buckets a failed tick may have taken in Redis: held there, unknown here. The
        #: next tick releases those the table no longer gives this node, or their new
        #: owner would wait for them for ever.
        self.unconfirmed: set[int] = set()
        #: Times this node was found reaped and joined again, and how many of those the
        #: scheduler has applied (dropped what it held): no dispatching in between.
        self.rejoins = 0
        self.rejoins_applied = 0
        self.lost = False  # the crawl's state is gone from Redis: write nothing more

    # -- membership --------------------------------------------------------------------

    def join(self) -> None:
        """Enter the crawl, or re-enter it after being reaped or restarted under the same
        id. Holding nothing yet, it first frees every bucket still held in its name, so
        their owners can take them (its own included: it loads them again, with the
        requests it had in flight before, which are fetched again)."""
        self._release_all(args=[self.prefix, self.node_id])
        self.registry.join()
        self.inbox = Inbox(self.redis, self.crawl_id, self.node_id)
        self.redis.sadd(f"{self.prefix}inboxes", self.node_id)
        self._beat_at = self._clock()
        self.held, self.unconfirmed = set(), set()  # it released everything above

    def first_sync(self, attempts: int = 20, pause: float = 0.2) -> SyncResult:
        """Join and do the first tick, at start-up: a dropped connection there is retried
        (``attempts`` times, the pause doubling up to 2 s: about 35 s in all) instead of
        stopping the crawl, and a tick that fails after its commit leaves the rest to the
        next tick. (Five tries, 3 s in all, were not enough on a loaded machine whose
        connections were killed twice a second: a join is several round trips.)"""

        def join_and_tick() -> SyncResult:
            self.join()
            try:
                return self.sync(Batch())
            except AfterCommit:
                return SyncResult()

        return retrying(join_and_tick, attempts, pause, longest=2.0)

    def take_rejoin(self) -> bool:
        """Whether this node joined again since the last call (found reaped): the
        scheduler then drops what it held. Dispatching waits until it has."""
        if self.rejoins == self.rejoins_applied:
            return False
        self.rejoins_applied = self.rejoins
        return True

    def may_dispatch(self) -> bool:
        """Whether requests may still be handed out: stops half a ttl before anyone may
        reap this node, so its last downloads end before another node takes its hosts."""
        if self.rejoins != self.rejoins_applied:
            return False  # its old buckets' requests may still be queued there
        last = self.registry.last_beat
        return last is not None and self._clock() - last < self.ttl / 2

    def leave(self) -> None:
        """Leave gracefully: release what this node holds, hand its buckets and its inbox
        over. Requests it had handed out and not finished stay leased in their buckets,
        so their new holders fetch them again.

        The last node to leave keeps the crawl in Redis, finished or not: its seen keys
        make a node started later fetch nothing twice, and an unfinished crawl resumes.
        ``scrapy twolevel reset`` (:func:`clear_crawl`) starts a crawl id afresh.
        """
        if self.lost:
            return  # writing would start a new crawl under the old id
        self._call(self._release, sorted(self.held | self.unconfirmed))
        self.held, self.unconfirmed = set(), set()
        self.registry.leave()
        if self.registry.table.nodes and self.inbox is not None:
            self.inbox.reroute(self.node_id, self._live_owner)
        prune_inboxes(self.redis, self.prefix, [self.node_id])  # if empty: the last node's

    # -- the tick ----------------------------------------------------------------------

    def sync(self, batch: Batch, *, receive: int = 500) -> SyncResult:
        """Do one tick's round trips: heartbeat, reap, table, commit, hand-overs, inbox.

        On any error the caller retries the batch later; the inbox is then read again from
        its first unacknowledged entry, so entries read by the failed tick are not lost.
        """
        started = time.thread_time()
        try:
            result = self._sync(batch, receive)
            result.cpu = time.thread_time() - started
            return result
        except Exception as exc:
            # Its id or its crawl is gone: leaving would write over someone else's state.
            self.lost = self.lost or isinstance(exc, IdTaken | StateLost)
            if self.inbox is not None:
                self.inbox.redeliver()
            raise

    def _sync(self, batch: Batch, receive: int) -> SyncResult:
        result = SyncResult()
        now = self._clock()
        if now - self._beat_at >= self.ttl / 5:
            result.round_trips += 3
            try:
                self.registry.heartbeat()
            except NotAMember:
                batch = self._rejoin(batch, result)
            self._beat_at = now
            assert self.inbox is not None
            result.inbox_depth = self.inbox.pending()  # for the live view
        if now - self._reap_at >= self.ttl / 2:
            self._reap_at = now
            result.round_trips += 1
            for dead, _moves in self.registry.reap().items():
                result.reaped.append(dead)
                result.rerouted += Inbox(self.redis, self.crawl_id, dead).reroute(
                    dead, self._live_owner
                )
                result.round_trips += 3
        result.round_trips += 1
        self.registry.refresh()
        if self.rebalance_every and now - self._rebalance_at >= self.rebalance_every:
            self._rebalance_at = now
            if self.leads():
                result.round_trips += 3  # the loads, and the table's transaction
                result.rebalanced = len(self.rebalance())
        try:
            self._commit_batch(batch, result)
        except NotAMember:
            self._commit_batch(self._rejoin(batch, result), result)
        remaining = Batch(release=list(batch.release))
        wanted: list[int] = []
        try:
            if batch.release:
                result.round_trips += 1
                self._call(self._release, batch.release)
                self.held.difference_update(batch.release)
                result.released = list(batch.release)
                remaining.release = []
            owned = self.registry.owned()
            result.owned = owned
            if stale := self.unconfirmed - owned - self.held:
                result.round_trips += 1
                self._call(self._release, sorted(stale))
                self.unconfirmed -= stale
            wanted = sorted(owned - self.held)
            if wanted:
                self._take(wanted, result)
            assert self.inbox is not None
            result.round_trips += 1
            result.received = self.inbox.receive(receive)
            result.damaged_entries = self.inbox.take_damaged()
            if batch.check_idle and not result.received:
                result.round_trips += 1
                result.idle = self.crawl_idle()
                if result.idle:
                    result.round_trips += 1
                    result.planned = bool(self.redis.exists(f"{self.prefix}planned"))
        except Exception as exc:
            self.unconfirmed.update(wanted)
            raise AfterCommit(remaining, result, exc) from exc
        # Held only now that the tick is known to succeed: a failed one takes (and loads)
        # its buckets again next time, instead of holding them unloaded.
        self.held.update(result.acquired)
        self.unconfirmed.clear()
        return result

    def _rejoin(self, batch: Batch, result: SyncResult) -> Batch:
        """Reaped while paused or cut off: what this node held belongs to others now, and
        its writes for it were refused. Join again with nothing held; of the batch only
        the cross URLs are still worth sending (the rest is redone by the new holders)."""
        if not self.redis.exists(f"{self.prefix}epoch"):
            # Every change of the table counts in the epoch, which nothing deletes but a
            # reset or a Redis that lost its data (the table goes when the last node leaves).
            self.lost = True
            raise StateLost(
                f"crawl {self.crawl_id!r} is gone from Redis (restarted without persistence, "
                "or reset) while this node was in it; it stops rather than crawl again from "
                "nothing. Restore Redis, or run `scrapy twolevel reset` and start afresh."
            )
        self.rejoins += 1
        self.join()
        result.rejoined = True
        result.dropped_leases += len(batch.dones)
        result.dropped_stores += len(batch.stores)
        result.round_trips += 7
        # The history records are observations, whoever made them: kept. Plans are not.
        history = HistoryWrites(
            batch.history.fetches, batch.history.articles, batch.history.published
        )
        return Batch(routes=batch.routes, history=history)

    def flush(self, batch: Batch) -> SyncResult:
        """Commit ``batch`` only (the last one, before leaving)."""
        result = SyncResult(round_trips=1)
        if not self.lost:
            self.registry.refresh()
            self._commit_batch(batch, result)
        return result

    def _commit_batch(self, batch: Batch, result: SyncResult) -> None:
        # The history first: sent again if the commit fails, it changes nothing twice.
        result.round_trips += batch.history.send(self.redis, self.crawl_id)
        routes = batch.routes
        plans = batch.history.plans
        for _attempt in range(3):
            pages = batch.pages
            if not (batch.stores or routes or batch.acks or batch.dones or plans or pages):
                return
            table = self.registry.table
            args: list[Any] = [self.prefix, self.node_id, self.registry.token]
            args += [len(batch.stores), len(routes), len(batch.acks), len(batch.dones)]
            args += [len(plans), len(pages)]
            for bucket, entry_id, data, key in batch.stores:
                args += [bucket, entry_id, data, key]
            for bucket, host, data in routes:
                args += [table.owner(bucket) or "", host, data]
            args += batch.acks
            for bucket, entry_id in batch.dones:
                args += [bucket, entry_id]
            for bucket, seed, plan in plans:
                args += [bucket, seed, plan]
            for (bucket, host), fetched in pages.items():
                args += [bucket, host, fetched]
            result.round_trips += 1
            reply = self._commit(args=args)
            if reply[0] == -2:
                self.registry.id_taken()
            if reply[0] == -1:
                raise NotAMember(f"node {self.node_id} is no longer in crawl {self.crawl_id}")
            result.stored += int(reply[1])
            result.refused += int(reply[2])
            bad = {int(i) - 1 for i in reply[3:]}
            result.routed += len(routes) - len(bad)
            # Routed with a stale table (the owner left): read the table and send again.
            routes = [r for i, r in enumerate(routes) if i in bad]
            batch, plans = Batch(routes=routes), []
            if routes:
                result.round_trips += 1
                self.registry.refresh()
        if routes:
            raise RuntimeError(f"{len(routes)} cross URLs found no live owner")

    def _take(self, buckets: list[int], result: SyncResult) -> None:
        """Take the buckets that are free, with the seen keys, plans and page counts of
        those with content (a bucket has queued requests only once a seen key was recorded
        for it), then read their queued requests a slice per command."""
        result.round_trips += 1
        taken, loaded = self._call(self._acquire, buckets) or ([], [])
        content: dict[int, tuple[list[tuple[str, bytes]], list[bytes]]] = {}
        for i in range(0, len(loaded), 4):
            bucket, packed = int(loaded[i]), loaded[i + 1]
            entries = [
                (entry_id.decode(), data)
                for entry_id, data in self.redis.hscan_iter(
                    f"{self.prefix}q:{bucket}", count=LOAD_SLICE
                )
            ]
            result.round_trips += 1 + len(entries) // LOAD_SLICE
            try:
                keys = unpack_keys(packed, self.seen_log.key(bucket))
            except ValueError:
                keys = []  # damaged: its requests still load; what it saw may come again
                result.damaged_seen.append(bucket)
            distinct = set(keys)
            if worth_compacting(len(keys), len(distinct)):
                result.round_trips += 1
                if self.seen_log.compact(bucket, self.node_id, len(packed), distinct):
                    result.seen_compacted += len(keys) - len(distinct)
                keys = list(distinct)
            content[bucket] = (entries, keys)
            plans = loaded[i + 2]
            if plans:
                result.plans[bucket] = {plans[j]: plans[j + 1] for j in range(0, len(plans), 2)}
            pages = loaded[i + 3]
            if pages:
                result.pages[bucket] = {
                    pages[j].decode(): int(pages[j + 1]) for j in range(0, len(pages), 2)
                }
        for raw in taken:
            bucket = int(raw)
            result.acquired[bucket] = content.get(bucket, ([], []))

    def _call(self, script: Any, buckets: list[int]) -> Any:
        if not buckets:
            return []
        return script(args=[self.prefix, self.node_id, *buckets])

    # -- balance by load ------------------------------------------------------------------

    def leads(self) -> bool:
        """Whether this node rebalances the table: the first member by id, of two or more
        (every node sees the same table, so exactly one leads)."""
        nodes = self.registry.table.nodes
        return len(nodes) >= 2 and nodes[0] == self.node_id

    def bucket_load(self) -> dict[int, int]:
        """Pending requests per bucket (queued or leased), read from Redis: what is left to
        crawl in each, counted up to :data:`.buckets.LOAD_CAP`. Buckets with none are left
        out."""
        pending = pending_per_bucket(self.redis, self.prefix)
        return {bucket: min(size, LOAD_CAP) for bucket, size in pending.items()}

    def rebalance(self) -> list[Any]:
        """Move buckets from the node with the most pending requests to the one with the
        fewest (:meth:`.BucketTable.rebalance`), at most ``M / (4 n)`` at a time; the moves.

        A move is an ordinary hand-over: the old holder drains and releases the bucket,
        then the new owner loads it, so no host is ever served by two nodes."""
        table = self.registry.table
        max_moves = max(1, table.size // (4 * len(table.nodes)))
        return self.registry.rebalance(
            self.bucket_load(), max_moves=max_moves, tolerance=self.rebalance_tolerance
        )

    def _live_owner(self, host: str) -> str | None:
        return self.registry.table.owner_of_host(host)

    # -- the whole crawl -----------------------------------------------------------------

    def crawl_idle(self) -> bool:
        """No pending or leased request in any bucket and no entry in any inbox: two
        round trips, whatever the crawl's size.

        Also reroutes the inbox of a node that is no longer a member (its reaper died
        before doing it), so nothing waits where nobody reads, and forgets such inboxes
        once empty (:func:`.inbox.prune_inboxes`), so the registry does not grow by one
        per process ever started.
        """
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(f"{self.prefix}pending")
        pipe.smembers(f"{self.prefix}inboxes")
        pipe.smembers(f"{self.prefix}members")
        raw_pending, raw_inboxes, raw_members = pipe.execute()
        if int(raw_pending or 0) > 0:
            return False
        inboxes = sorted(m.decode() for m in raw_inboxes)
        members = {m.decode() for m in raw_members}
        pipe = self.redis.pipeline(transaction=False)
        for node in inboxes:
            pipe.xlen(f"{self.prefix}inbox:{node}")
        idle, gone = True, []
        for node, length in zip(inboxes, pipe.execute(), strict=True):
            if not length:
                if node not in members:
                    gone.append(node)
                continue
            idle = False
            if node not in members and self.registry.table.nodes:
                Inbox(self.redis, self.crawl_id, node).reroute(node, self._live_owner)
        prune_inboxes(self.redis, self.prefix, gone)
        return idle


def pending_per_bucket(redis: Any, prefix: str) -> dict[int, int]:
    """Pending requests (queued or leased) per bucket with any, read in one pipeline: the
    leader's measured load and ``scrapy twolevel status``'s pending column."""
    keys = list(redis.scan_iter(f"{prefix}q:*", count=1000))
    if not keys:
        return {}
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.hlen(key)
    return {
        int(key.rsplit(b":", 1)[1]): int(size)
        for key, size in zip(keys, pipe.execute(), strict=True)
        if size
    }


def clear_crawl(redis: Any, crawl_id: str) -> int:
    """Delete every key of crawl ``crawl_id`` (not its recrawl history); the number deleted."""
    return delete_matching(redis, f"{crawl_prefix(crawl_id)}*")


def status(redis: Any, crawl_id: str) -> dict[str, Any]:
    """Nodes, bucket ownership, pending requests per node and inbox lag, for ``scrapy
    twolevel status`` (read-only)."""
    prefix = crawl_prefix(crawl_id)
    from .buckets import BucketTable

    raw = redis.get(f"{prefix}table")
    table = BucketTable.from_json(raw) if raw else None
    members = sorted(m.decode() for m in redis.smembers(f"{prefix}members"))
    holders: dict[int, str] = {
        int(b): h.decode() for b, h in redis.hgetall(f"{prefix}holders").items()
    }
    nodes: dict[str, dict[str, Any]] = {}
    for node in members:
        ttl = redis.pttl(f"{prefix}alive:{node}")
        nodes[node] = {
            "alive": ttl > 0,
            "heartbeat_ttl_ms": max(ttl, 0),
            "buckets_owned": len(table.buckets_of(node)) if table else 0,
            "buckets_held": sum(1 for h in holders.values() if h == node),
            "pending": 0,
            "inbox": int(redis.xlen(f"{prefix}inbox:{node}")),
        }
    pending_total = 0
    unheld = 0
    for bucket, size in pending_per_bucket(redis, prefix).items():
        pending_total += size
        holder = holders.get(bucket)
        if holder in nodes:
            nodes[holder]["pending"] += size
        else:
            unheld += size
    seen = sum(
        int(redis.strlen(k)) // KEY_SIZE for k in redis.scan_iter(f"{prefix}seen:*", count=1000)
    )
    seed_plans = stored_plans(redis, prefix)
    return {
        "crawl_id": crawl_id,
        "seen_keys": seen,
        "seed_plans": seed_plans,
        "epoch": int(redis.get(f"{prefix}epoch") or 0),
        "buckets": table.size if table else None,
        "nodes": nodes,
        "pending": pending_total,
        "pending_unheld": unheld,
    }
