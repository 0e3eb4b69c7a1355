"""The live view's snapshot: a pure function of the frontier's state and a clock reading.

A frontier on a fake clock is driven into each state by hand (a session, a refusal with
Retry-After, a failed host backed off, one given up, ready and idle hosts); the snapshot
must name each state and why, with the wait worked out from the clock.
"""

from __future__ import annotations

import json

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import (
    BreadthFirst,
    CostParams,
    CrawlCapability,
    Measurement,
    QualityFirst,
    TwoLevelFrontier,
)
from scrapy_twolevel.frontier.failures import FailurePolicy
from scrapy_twolevel.live.prometheus import render
from scrapy_twolevel.live.snapshot import SCHEMA_VERSION, host_state, snapshot

pytestmark = pytest.mark.unit

PARAMS = CostParams()


def driven_frontier():
    """At t = 100.5: ``open`` fetching in its session; ``refuser`` refused with Retry-After
    30 s at t = 100; ``failing`` failed its session (one failure ends one here), backed
    off 10 s; ``capped`` has had its page budget (1); ``idle`` was served its one URL;
    ``late`` got URLs after the others opened (breadth-first serves one URL a session)."""
    clock = FakeClock(100.0)
    f = TwoLevelFrontier(
        BreadthFirst(),
        PARAMS,
        None,
        failures=FailurePolicy(session_failures=1, backoff=10.0, backoff_max=25.0),
        clock=clock,
        jitter=lambda: 0.0,
        budget=lambda host: 1 if host == "capped" else None,
    )
    for host, n in (("refuser", 2), ("failing", 2), ("open", 3), ("capped", 2), ("idle", 1)):
        for i in range(n):
            f.push(host, 0.5 + i / 10, f"{host}/{i}")
    served = set()
    while len(served) < 5:  # one request of each host: every one opens a session
        popped = f.pop()
        assert popped is not None
        served.add(popped[0])
    f.observe_refusal("refuser", retry_after=30.0)
    f.done("refuser")
    f.observe_failure("failing", elapsed=1.0, timeout=False)
    f.done("failing")
    for host in ("capped", "idle"):
        f.observe(
            host,
            Measurement(
                latency=0.01, new_connection=False, served_on_connection=1, closed_by_server=False
            ),
        )
        f.done(host)
    f.push("late", 0.9, "late/0")
    clock.now = 100.5
    return f, clock


def test_each_host_is_in_one_state_and_says_why():
    f, clock = driven_frontier()
    assert {h.key: host_state(h, clock.now) for h in f.hosts()} == {
        "open": ("in session", "fetching", None),
        "refuser": ("waiting", "refused", 130.0),
        "failing": ("waiting", "backoff", 110.0),
        "capped": ("given up", "budget", None),
        "idle": ("idle", "", None),
        "late": ("ready", "", None),
    }
    snap = snapshot(f, clock.now, top=10, crawl={"pages": 4})
    assert snap["schema"] == SCHEMA_VERSION
    assert snap["states"] == {"in session": 1, "waiting": 2, "ready": 1, "given up": 1, "idle": 1}
    # Queued: 2 of open, 1 of refuser, 1 of failing, 1 of late (capped's was dropped).
    assert snap["crawl"] == {
        "policy": "breadth-first",
        "policy_params": {
            "default_requests_per_connection": 50.0,
            "keepalive_speedup": 1.2,
            "alpha": 0.8,
            "default_connection_time": 0.01,
            "default_response_time": 0.01,
            "connections": 1,
            "cpu_price": 1.0,
        },
        "max_open_hosts": None,
        "pending": 5,
        "hosts": 6,
        "pages": 4,
    }
    assert snap["reasons"] == {
        "given up: budget": 1,
        "waiting: backoff": 1,
        "waiting: refused": 1,
    }
    rows = {row["host"]: row for row in snap["hosts"]}
    # In session, and the queued hosts by score; not the idle one nor the one given up.
    assert set(rows) == {"open", "refuser", "failing", "late"}
    assert rows["refuser"]["wait_s"] == 29.5  # until 130, read at 100.5
    assert rows["failing"]["wait_s"] == 9.5
    assert rows["refuser"]["refusals"] == 1 and rows["failing"]["failed_sessions"] == 1
    assert rows["open"]["queued"] == 2 and rows["open"]["best_quality"] is None
    json.dumps(snap)  # plain data


def test_top_hosts_are_the_best_scored_and_named_hosts_are_added():
    clock = FakeClock(100.0)
    f = TwoLevelFrontier(CrawlCapability(), PARAMS, 1, clock=clock)
    for i in range(20):
        f.push(f"h{i:02d}", i / 20, "url")  # h19 holds the best URL
    snap = snapshot(f, clock.now, top=3, named=["h00"])
    shown = [row["host"] for row in snap["hosts"]]
    assert shown[:1] == ["h00"] and sorted(shown[1:]) == ["h17", "h18", "h19"]
    best = next(row for row in snap["hosts"] if row["host"] == "h19")
    # One URL of quality 0.95 on the prior: P = 1, sum_Q = 0.95 (+ epsilon in the score).
    assert best["terms"]["P"] == 1 and best["terms"]["sum_Q"] == best["best_quality"] == 0.95
    assert best["score"] > next(r for r in snap["hosts"] if r["host"] == "h17")["score"]
    assert snap["states"]["ready"] == 20


def test_prometheus_text_names_every_state_and_escapes_labels():
    f, clock = driven_frontier()
    snap = snapshot(f, clock.now, crawl={"pages": 4, "quality": 2.5, "errors": 3})
    snap["hosts"][0]["host"] = 'odd"host\\name'
    text = render(snap, max_hosts=50)  # promtool's check: tests/test_prometheus.py
    assert text.endswith("\n")
    lines = text.splitlines()
    assert "twolevel_pending_requests 5.0" in lines
    assert "twolevel_pages_total 4.0" in lines
    assert "twolevel_quality_gathered_total 2.5" in lines
    assert "twolevel_failed_requests_total 3.0" in lines
    assert 'twolevel_hosts{state="waiting"} 2.0' in lines
    assert 'twolevel_hosts{state="given up"} 1.0' in lines
    assert 'twolevel_hosts_held{state="waiting",reason="refused"} 1.0' in lines
    assert any(
        line.startswith('twolevel_host_queued_requests{host="odd\\"host\\\\name"}')
        for line in lines
    )
    # Every sample belongs to a family declared just before it (HELP and TYPE).
    declared = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    samples = [line for line in lines if not line.startswith("#")]
    assert samples and all(line.split("{")[0].split()[0] in declared for line in samples)
    assert "twolevel_requests_in_flight" not in text  # not given: left out, not 0


def test_topics_show_their_class_slice_and_who_serves():
    """With topics: one row per topic; after the urgent topic preempted bulk, urgent is
    serving (1 of its 16-request slice used) and bulk counts one preemption."""
    from scrapy_twolevel.frontier.topic_frontier import (
        TopicFrontier,
        TopicSelector,
        TopicSpec,
        topic_lane,
    )

    clock = FakeClock(100.0)
    selector = TopicSelector(
        [TopicSpec("bulk", priority=2), TopicSpec("urgent", priority=1)], clock
    )
    f = TopicFrontier.build(
        selector,
        lambda name, lock, sequence: TwoLevelFrontier(
            BreadthFirst(), PARAMS, None, host_lock=lock, lock_owner=name, sequence=sequence,
            clock=clock,
        ),
    )  # fmt: skip
    for i in range(3):
        f.push(topic_lane("bulk", f"h{i}.example"), 0.0, f"bulk{i}")
    f.pop()
    f.push(topic_lane("urgent", "u.example"), 0.0, "urgent")
    f.pop()
    snap = snapshot(f, clock.now)
    topics = {row["topic"]: row for row in snap["topics"]}
    assert topics["urgent"]["running"] and not topics["bulk"]["running"]
    assert (topics["urgent"]["priority"], topics["bulk"]["priority"]) == (1, 2)
    assert topics["urgent"]["remaining"] == topics["urgent"]["slice_len"] - 1
    assert topics["bulk"]["preemptions"] == 1 and topics["bulk"]["pending"] == 2
    assert snap["crawl"]["pending"] == 2 and snap["states"]["in session"] == 2
    assert "topics" not in snapshot(driven_frontier()[0], 100.5)  # only with topics


#: The schema of /status.json (docs/watching.rst), as types: every field, no other.
NUMBER = (int, float)
ROW_SCHEMA = {
    "host": str, "state": str, "why": str, "wait_s": (float, type(None)), "queued": int,
    "best_quality": (float, type(None)), "score": NUMBER,
    "terms": {"P": int, "T": NUMBER, "sum_Q": NUMBER, "S": NUMBER},
    "connection_s": NUMBER, "response_s": NUMBER, "service_s": NUMBER,
    "requests_per_connection": NUMBER, "fetched": int, "sessions": int,
    "failures_in_a_row": int, "failed_sessions": int, "refusals": int,
}  # fmt: skip
SNAPSHOT_SCHEMA = {
    "schema": int,
    "crawl": {
        "policy": str,
        "policy_params": dict,
        "max_open_hosts": (int, type(None)),
        "pending": int,
        "hosts": int,
    },
    "states": {state: int for state in ("in session", "waiting", "ready", "given up", "idle")},
    "reasons": dict,
    "hosts": [ROW_SCHEMA],
    "held_up": [
        {"host": str, "why": str, "wait_s": (int, float), "queued": int, "quality_held": float}
    ],
}


def check(value, schema, where="snapshot"):
    if isinstance(schema, dict):
        assert isinstance(value, dict), where
        assert set(value) == set(schema), (where, set(value) ^ set(schema))
        for key, sub in schema.items():
            check(value[key], sub, f"{where}.{key}")
    elif isinstance(schema, list):
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    else:
        assert isinstance(value, schema) and not isinstance(value, bool), (where, value)


def test_the_snapshot_follows_its_documented_schema_after_a_json_round_trip():
    f, clock = driven_frontier()
    snap = json.loads(json.dumps(snapshot(f, clock.now, top=10)))
    check(snap, SNAPSHOT_SCHEMA)
    assert snap["hosts"]  # rows were checked
    assert all(isinstance(n, int) for n in snap["reasons"].values())


def test_held_up_lists_the_waiting_hosts_by_the_quality_their_wait_holds_back():
    """Quality-first: ``a`` (0.8 served, then refused for 30 s) holds 0.6 + 0.4 back;
    ``b`` (0.9 served, then a failed session: backed off 10 s) holds 0.5 times its success
    rate after one failure; ``c`` is ready, not waiting: it holds nothing up."""
    clock = FakeClock(100.0)
    f = TwoLevelFrontier(
        QualityFirst(),
        PARAMS,
        None,
        failures=FailurePolicy(session_failures=1, backoff=10.0, backoff_max=25.0),
        clock=clock,
        jitter=lambda: 0.0,
    )
    for host, qualities in (("a", (0.4, 0.6, 0.8)), ("b", (0.5, 0.9)), ("c", (0.2,))):
        for q in qualities:
            f.push(host, q, f"{host}/{q}")
    served = {}
    while len(served) < 2:
        host, item = f.pop()[:2]
        served[host] = item
    assert served == {"b": "b/0.9", "a": "a/0.8"}  # best first: b (0.9), then a (0.8)
    f.observe_refusal("a", retry_after=30.0)
    f.done("a")
    f.observe_failure("b", elapsed=1.0, timeout=False)
    f.done("b")
    clock.now = 100.5
    snap = snapshot(f, clock.now, top=10)
    held = snap["held_up"]
    assert len(held) == 2  # c is ready, not waiting
    by_host = {h["host"]: h for h in held}
    assert by_host["a"] == {
        "host": "a",
        "why": "refused",
        "wait_s": 29.5,
        "queued": 2,
        "quality_held": 1.0,
    }
    assert by_host["b"]["why"] == "backoff" and by_host["b"]["wait_s"] == 9.5
    assert by_host["b"]["queued"] == 1
    b_host = next(h for h in f.hosts() if h.key == "b")
    assert 0 < b_host.estimate.success_rate < 1  # the failure counted
    assert by_host["b"]["quality_held"] == round(0.5 * b_host.estimate.success_rate, 6)
    assert [h["host"] for h in held] == ["a", "b"]  # 1.0 held back before 0.5 * S < 0.5
