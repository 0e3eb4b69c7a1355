"""The live view's HTTP side: the dashboard, ``/status.json``, ``/host.json`` and ``/metrics``,
behind a token.

A Twisted Web resource served by the crawl's own reactor, so a snapshot is read between
two engine callbacks, never while the frontier changes. Every request must carry the
crawl's random token, as ``?token=`` (the dashboard's links do) or as
``Authorization: Bearer <token>`` (a Prometheus scrape config): a crawl's hosts and queues
are not for anyone who can reach the port. Read-only: nothing here changes the crawl.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from twisted.web.resource import Resource

from .prometheus import CONTENT_TYPE, render

#: ``named hosts -> snapshot``: what the extension hands the resource.
StatusFunc = Callable[[list[str]], dict[str, Any]]
#: ``host -> its page's data`` (``None``: not a host of the crawl).
HostFunc = Callable[[str], "dict[str, Any] | None"]


def dashboard_page() -> bytes:
    """The dashboard: one HTML file shipped in the package (no CDN, works offline)."""
    return resources.files(__package__).joinpath("dashboard.html").read_bytes()


class LiveResource(Resource):
    """``/`` (the dashboard), ``/status.json`` (``?host=`` adds hosts to the table),
    ``/host.json?host=`` (one host's page) and ``/metrics``; 403 without the token, 404
    for anything else (a host the crawl does not know too)."""

    isLeaf = True

    def __init__(
        self, token: str, status: StatusFunc, host_detail: HostFunc, *, max_hosts: int
    ) -> None:
        super().__init__()
        self.token = token.encode()
        self.status = status
        self.host_detail = host_detail
        self.max_hosts = max_hosts  # hosts with series in /metrics (see .prometheus)
        self.page = dashboard_page()

    def _authorized(self, request: Any) -> bool:
        given = request.args.get(b"token", [b""])[0]
        header = request.getHeader(b"authorization") or b""
        if header.lower().startswith(b"bearer "):
            given = header[7:].strip()
        return hmac.compare_digest(given, self.token)

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"cache-control", b"no-store")
        if not self._authorized(request):
            request.setResponseCode(403)
            request.setHeader(b"content-type", b"text/plain; charset=utf-8")
            return b"403: this crawl's live view needs its token (see the crawl's log)\n"
        if request.path == b"/":
            request.setHeader(b"content-type", b"text/html; charset=utf-8")
            return self.page
        if request.path == b"/status.json":
            named = [h.decode("utf-8", "replace") for h in request.args.get(b"host", [])]
            request.setHeader(b"content-type", b"application/json")
            return json.dumps(self.status(named)).encode()
        if request.path == b"/host.json":
            name = request.args.get(b"host", [b""])[0].decode("utf-8", "replace")
            detail = self.host_detail(name) if name else None
            if detail is not None:
                request.setHeader(b"content-type", b"application/json")
                return json.dumps(detail).encode()
        elif request.path == b"/metrics":
            request.setHeader(b"content-type", CONTENT_TYPE.encode())
            return render(self.status([]), max_hosts=self.max_hosts).encode()
        request.setResponseCode(404)
        return b"404\n"
