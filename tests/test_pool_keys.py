"""How the middleware finds the idle connections Scrapy's HTTP/1.1 handler keeps to a
server (``_engine.idle_connections``): one lookup by the exact key, no scan of every server
ever connected (Twisted never deletes a key: a scan cost a millisecond per response at
10,000 servers, and ran on every response with ``DOWNLOAD_BIND_ADDRESS``)."""

from __future__ import annotations

import pytest

from scrapy_twolevel._engine import idle_connections

pytestmark = pytest.mark.glue

SERVER = (b"http", b"a.example", 8080)


class Pool:
    """Stands for Twisted's HTTPConnectionPool (only its identity is used)."""


class NoScan(dict):
    """A connections dict that fails the test if anything iterates over it."""

    def items(self):
        raise AssertionError("scanned every server")


def test_scrapy_219_keys_carry_the_bind_address():
    pool = Pool()
    assert idle_connections(pool, NoScan({(*SERVER, None): ["c1", "c2"]}), SERVER, None) == 2
    bound = NoScan({(*SERVER, ("10.0.0.1", 0)): ["c1"]})
    assert idle_connections(pool, bound, SERVER, "10.0.0.1") == 1  # a string, as Scrapy's setting
    assert idle_connections(pool, bound, SERVER, ("10.0.0.1", 0)) == 1


def test_older_scrapy_keys_have_none():
    assert idle_connections(Pool(), NoScan({SERVER: ["c1"]}), SERVER, None) == 1


def test_a_server_that_closed_its_connection_is_one_lookup_not_a_scan():
    pool = Pool()
    # Its key stays with an empty list once its connection was taken and not given back.
    assert idle_connections(pool, NoScan({(*SERVER, None): []}), SERVER, None) == 0
    # Once the pool's keys are known to have the exact shape, a server never pooled at all
    # is 0 with no scan either.
    other = (b"http", b"b.example", 80)
    assert idle_connections(pool, NoScan({(*SERVER, None): ["c1"]}), other, None) == 0


def test_a_pool_of_another_shape_is_scanned_until_its_keys_match():
    pool = Pool()
    odd = {(b"http", b"A.EXAMPLE", 8080, "extra", "fields"): ["c1"]}
    assert idle_connections(pool, odd, SERVER, None) == 1  # found by server, case-insensitively
    assert idle_connections(pool, odd, (b"http", b"b.example", 80), None) == 0
