"""The encoding used on disk: exact round trips, compact requests, clear refusals, no pickle."""

from __future__ import annotations

import collections
import json

import pytest
from scrapy import FormRequest, Request, Spider
from scrapy.http import JsonRequest
from scrapy.utils.request import request_from_dict

from scrapy_twolevel import codec
from scrapy_twolevel.codec import decode_request, encode_request

pytestmark = pytest.mark.unit

VALUES = [
    None,
    True,
    0,
    -7,
    2**70,
    1.5,
    "",
    "héllo",
    b"",
    b"\x00\xffbytes",
    [],
    [1, [2, [b"x"]]],
    (),
    (1, (2, b"y"), [3]),
    {},
    {"a": 1, "b": [1.0, None]},
    {b"Content-Type": [b"text/html"], b"X": [b"1", b"2"]},  # request headers
    {"$b": "looks like a tag", "$d": 1},  # user keys that start with "$"
    {"$b": "alone"},
    {1: "int key", (2, 3): "tuple key", None: "none key"},
    {"nested": {"t": (1,), "d": {b"k": b"v"}}},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_round_trip_is_exact(value):
    decoded = codec.decode(codec.encode(value))
    assert decoded == value
    assert type(decoded) is type(value)  # tuples stay tuples, bytes stay bytes


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_prebuilt_encoder_writes_what_the_standard_one_writes(value):
    standard = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    assert codec.encode(value) == standard(codec._to_jsonable(value)).encode()


def test_nested_types_survive():
    value = {"t": (b"a", ("b",)), "l": [(1, 2)]}
    decoded = codec.decode(codec.encode(value))
    assert type(decoded["t"]) is tuple and type(decoded["t"][0]) is bytes
    assert type(decoded["t"][1]) is tuple and type(decoded["l"][0]) is tuple


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1, 2},
        lambda: 0,
        float("nan"),
        float("inf"),
        [b"ok", object()],
        # subclasses would come back as the plain type
        collections.OrderedDict(a=1),
        collections.defaultdict(list),
        collections.namedtuple("Pair", "a b")(1, 2),
    ],
)
def test_what_json_cannot_hold_is_refused(value):
    with pytest.raises(ValueError):
        codec.encode(value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"not json",
        b'{"$b": "!!!not base64"}',
        b'{"$b": 5}',
        b'{"$t": 5}',
        b'{"$d": [[1, 2, 3]]}',
        b'{"$d": [[[1], 2]]}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.",  # a pickle is just garbage here
    ],
)
def test_garbage_gives_value_error(data):
    with pytest.raises(ValueError, match="not an encoded record"):
        codec.decode(data)


def test_a_request_survives_the_trip():
    request = Request(
        "http://example.com/p?q=1",
        method="POST",
        body=b"a=1",
        headers={"X-One": "1", "Accept": ["a", "b"]},
        cookies={"c": "v"},
        meta={"twolevel_quality": 0.25, "depth": 3, "pair": (1, "x")},
        priority=7,
        dont_filter=True,
        cb_kwargs={"page": 2},
        flags=["f"],
    )
    again = request_from_dict(codec.decode(codec.encode(request.to_dict())))
    assert again.to_dict() == request.to_dict()
    assert again.meta["pair"] == (1, "x")
    assert again.headers.getlist("Accept") == [b"a", b"b"]


# -- requests ----------------------------------------------------------------------------


class CodecSpider(Spider):
    name = "codec"

    def parse_item(self, response):
        pass

    def on_error(self, failure):
        pass


def test_default_fields_are_left_out_and_come_back():
    request = Request("http://example.com/a", priority=3, meta={"twolevel_quality": 0.5})
    data = encode_request(request)
    assert codec.decode(data) == {
        "url": "http://example.com/a",
        "meta": {"twolevel_quality": 0.5},
        "priority": 3,
    }
    assert len(data) < len(codec.encode(request.to_dict())) / 2
    assert decode_request(data).to_dict() == request.to_dict()


@pytest.mark.parametrize(
    "request_",
    [
        Request("http://example.com/"),
        Request("http://example.com/", method="HEAD", dont_filter=True, encoding="latin-1"),
        Request("http://example.com/", priority=-5, flags=["x"], cb_kwargs={"n": (1, 2)}),
        Request("http://example.com/", headers={"A": "b"}, cookies={"c": "d"}, body=b"\x00"),
        FormRequest("http://example.com/form", formdata={"q": "x"}),  # a subclass: kept whole
        JsonRequest("http://example.com/api", data={"k": [1, 2]}),
    ],
    ids=["bare", "options", "extras", "payload", "form", "json"],
)
def test_requests_round_trip_exactly(request_):
    again = decode_request(encode_request(request_))
    assert type(again) is type(request_)
    assert again.to_dict() == request_.to_dict()


def test_a_plain_request_is_encoded_as_its_filtered_to_dict():
    """A plain ``Request``'s record is built without its defaults (encode_request's fast
    path): the bytes must be those of Scrapy's ``to_dict`` with the defaults filtered out,
    key order included."""
    spider = CodecSpider()
    defaults = Request("data:,").to_dict()
    requests = [
        Request("http://example.com/"),
        Request("http://example.com/", callback=spider.parse_item, errback=spider.on_error),
        Request("http://example.com/", method="POST", body=b"x", headers={"A": "b"}),
        Request("http://example.com/", priority=0, dont_filter=False, meta={}, flags=[]),
        Request("http://example.com/", encoding="latin-1", cookies={"c": "d"}, priority=2),
        Request("http://example.com/", cb_kwargs={"n": 1}, flags=["f"], dont_filter=True),
    ]
    for request in requests:
        full = request.to_dict(spider=spider)
        expected = {
            key: value
            for key, value in full.items()
            if key == "url" or key not in defaults or value != defaults[key]
        }
        assert encode_request(request, spider) == codec.encode(expected)


def test_callbacks_travel_as_spider_method_names():
    spider = CodecSpider()
    request = Request("http://example.com/", callback=spider.parse_item, errback=spider.on_error)
    data = encode_request(request, spider)
    assert codec.decode(data)["callback"] == "parse_item"
    again = decode_request(data, spider)
    assert again.callback == spider.parse_item and again.errback == spider.on_error


@pytest.mark.parametrize(
    "data",
    [
        b"garbage",
        codec.encode([1, 2]),
        codec.encode({"no": "url"}),
        codec.encode({"url": "http://example.com/", "callback": "gone"}),  # not on the spider
    ],
)
def test_what_cannot_be_rebuilt_gives_value_error(data):
    with pytest.raises(ValueError):
        decode_request(data, CodecSpider())


def test_the_record_is_scrapys_own_to_dict():
    """request_record names spider methods itself (Scrapy's lookup lists the spider's
    members per request): it must give what ``to_dict`` gives, or defer to it."""
    from scrapy import FormRequest, Spider
    from scrapy.http import JsonRequest

    class RecordSpider(Spider):
        name = "records"

        def parse(self, response):
            return None

        def failed(self, failure):
            return None

    class AliasSpider(RecordSpider):
        alias = RecordSpider.parse  # two names, one function: either decodes to it

    spider = RecordSpider()
    other = RecordSpider()
    requests = [
        Request("http://a.example/", callback=spider.parse, errback=spider.failed),
        Request("http://a.example/", meta={"k": [1, 2]}, cookies={"c": "v"}, priority=-3),
        Request("http://a.example/", callback=other.parse),  # another instance's method
        FormRequest("http://a.example/", formdata={"q": "x"}, callback=spider.parse),
        JsonRequest("http://a.example/", data={"q": 1}, callback=spider.parse),
    ]
    for request in requests:
        assert codec.request_record(request, spider) == request.to_dict(spider=spider)
    aliasing = AliasSpider()
    aliased = Request("http://a.example/", callback=aliasing.parse)
    record, scrapys = codec.request_record(aliased, aliasing), aliased.to_dict(spider=aliasing)
    assert record.pop("callback") == "parse" and scrapys.pop("callback") == "alias"
    assert record == scrapys
    with pytest.raises(ValueError):
        codec.request_record(Request("http://a.example/", callback=lambda r: None), spider)
