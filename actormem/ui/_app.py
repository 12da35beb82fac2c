"""The explorer's web application: routes, access checks and the live stream.

Starlette (a small, well-kept ASGI framework) routes the requests; pages are
Jinja2 templates with autoescaping on, so every memory's content reaches the
browser as text, and a strict Content-Security-Policy (scripts only from the
package's own ``/static``) is a second fence.  Plain ``def`` handlers run in
Starlette's thread pool, so a slow store read never stalls the live stream.

Access: without a token the server only answers requests whose ``Host`` is a
loopback name (a web page elsewhere cannot reach it through DNS rebinding);
with a token, a request needs the token (``?token=`` once, then a cookie, or
``Authorization: Bearer``).  Edits need ``allow_edits``, a POST, the page's
CSRF value and, when the browser sends one, a same-origin ``Origin``.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import anyio.to_thread
import jinja2
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from actormem.store import MemoryNotFoundError, Namespace, StoreError
from actormem.ui._chart import build_chart, kind_color
from actormem.ui._config import is_loopback
from actormem.ui._data import Explorer, namespace_query
from actormem.ui._live import LiveFeed

__all__ = ["AppState", "build_app"]

log = structlog.get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HERE: Final = Path(__file__).parent
#: Largest edit form read (a form is a few fields; the body is read no further).
_MAX_FORM: Final = 64_000


def _same(given: str, secret: str) -> bool:
    """Constant-time comparison of a presented token with the secret.

    ``hmac.compare_digest`` raises TypeError on a str with non-ASCII
    characters, and what a client presents is anything: compared as UTF-8
    bytes (lone surrogates kept), a wrong value is just wrong, never a 500.
    """
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), secret.encode("utf-8", "surrogatepass")
    )


async def _bounded_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it passes ``limit`` bytes (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


_CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'"
)
_KEEPALIVE: Final = 15.0
_BACKLOG_ON_CONNECT: Final = 100
_MODES: Final = ("hybrid", "keyword", "vector")


@dataclass
class AppState:
    """What the handlers share."""

    explorer: Explorer
    feed: LiveFeed | None
    token: str | None
    allow_edits: bool
    port: int = 0
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    stopping: bool = False
    started: float = field(default_factory=time.time)

    @property
    def cookie(self) -> str:
        # Cookies ignore ports: one name per server so two explorers do not clash.
        return f"actormem_ui_{self.port}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
        autoescape=True,  # every {{ value }} is HTML-escaped: memory content stays text
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ts"] = _fmt_ts
    env.filters["ago"] = _ago
    env.filters["color"] = kind_color
    env.filters["nsq"] = namespace_query
    env.filters["pct"] = lambda v: f"{100 * max(0.0, min(1.0, float(v))):.1f}"
    return env


def _fmt_ts(ts: float | None) -> str:
    if ts is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _ago(ts: float | None) -> str:
    if ts is None:
        return "—"
    d = max(0.0, time.time() - ts)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if d >= size:
            return f"{int(d // size)} {unit} ago"
    return "just now"


# -- access -----------------------------------------------------------------------------


class _Guard:
    """ASGI middleware: Host check, token, security headers."""

    def __init__(self, app: ASGIApp, state: AppState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        token = self.state.token
        if token is None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
            if not is_loopback(name):  # an IP literal or "localhost", never a DNS name
                await _plain(send, 421, "this explorer answers only to 127.0.0.1 / localhost")
                return
        else:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token")
            if given is not None and _same(given, token):
                rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
                location = scope["path"] + (f"?{rest}" if rest else "")
                cookie = (
                    f"{self.state.cookie}={token}; Path=/; HttpOnly; SameSite=Strict; "
                    "Max-Age=2592000"
                )
                await _redirect(send, location, cookie)
                return
            jar = SimpleCookie(headers.get("cookie", ""))
            morsel = jar.get(self.state.cookie)
            bearer = headers.get("authorization", "")
            ok = (morsel is not None and _same(morsel.value, token)) or (
                bearer.startswith("Bearer ") and _same(bearer[7:], token)
            )
            if not ok:
                await _plain(
                    send,
                    401,
                    "this memory explorer needs its access token: open the URL "
                    "that `actormem ui` printed (it ends in ?token=...)",
                )
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str, cookie: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode("latin-1")),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


# -- application -------------------------------------------------------------------------


def build_app(state: AppState) -> ASGIApp:
    """The ASGI application of one explorer."""
    env = _env()
    ex = state.explorer

    def page(request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        params = dict(request.query_params)
        ns: Namespace | None = ctx.pop("ns", None)
        html = env.get_template(name).render(
            request_path=request.url.path,
            ns=ns,
            nsq=namespace_query(ns) if ns is not None else "",
            has_store=ex.store is not None,
            has_live=state.feed is not None,
            allow_edits=state.allow_edits,
            csrf=state.csrf,
            params=params,
            **ctx,
        )
        return HTMLResponse(html, status_code=status)

    def error(request: Request, status: int, message: str) -> HTMLResponse:
        return page(request, "error.html", status=status, message=message, title="Error")

    def guarded(
        fn: Callable[[Request], Response], *, store: bool = True
    ) -> Callable[[Request], Response]:
        def handler(request: Request) -> Response:
            if store and ex.store is None:
                return error(
                    request,
                    404,
                    "This explorer runs inside an agent without a long-term store: "
                    "only the live view is available.",
                )
            try:
                return fn(request)
            except (MemoryNotFoundError, LookupError) as exc:
                return error(request, 404, str(exc))
            except (ValueError, StoreError) as exc:
                return error(request, 400, str(exc))

        return handler

    def need_ns(request: Request) -> Namespace:
        ns = ex.pick_namespace(dict(request.query_params))
        if ns is None:
            raise LookupError("the store holds no memories yet: there is no namespace to show")
        return ns

    def home(request: Request) -> Response:
        if ex.store is None:
            return RedirectResponse("/live", status_code=303)
        rows = ex.namespaces()
        return page(request, "namespaces.html", title="Namespaces", rows=rows)

    def timeline(request: Request) -> Response:
        ns = need_ns(request)
        offset = _int(request.query_params.get("offset"), 0)
        chart = build_chart(ex.timeline(ns))
        memories = ex.recent(ns, limit=50, offset=offset)
        return page(
            request,
            "timeline.html",
            title="Timeline",
            ns=ns,
            chart=chart,
            memories=memories,
            offset=offset,
            total=ex.count(ns),
        )

    def search(request: Request) -> Response:
        ns = need_ns(request)
        q = request.query_params.get("q", "").strip()
        mode = request.query_params.get("mode", "hybrid")
        if mode not in _MODES:
            raise ValueError(f"unknown search mode {mode!r} (hybrid, keyword or vector)")
        limit = min(max(_int(request.query_params.get("limit"), 10), 1), 100)
        hits = ex.search(q, ns, mode=mode, limit=limit) if q else []  # type: ignore[arg-type]
        best_bm25 = max((h.bm25 for h in hits), default=0.0)
        return page(
            request,
            "search.html",
            title=f"Search: {q}" if q else "Search",
            ns=ns,
            q=q,
            mode=mode,
            modes=_MODES,
            hits=hits,
            best_bm25=best_bm25 or 1.0,
        )

    def memory(request: Request) -> Response:
        ns = need_ns(request)
        mid = request.path_params["memory_id"]
        rec = ex.memory(ns, mid)
        if rec is None:
            raise LookupError(f"no memory {mid!r} in {ns}")
        rows = ex.history(ns, mid)
        return page(
            request,
            "memory.html",
            title="Memory",
            ns=ns,
            rec=rec,
            rows=rows,
            pinned="pinned" in rec.tags,
        )

    def facts(request: Request) -> Response:
        ns = need_ns(request)
        return page(request, "facts.html", title="Keyed facts", ns=ns, facts=ex.facts(ns))

    def journal(request: Request) -> Response:
        ns = need_ns(request)
        view = ex.journal(ns, request.query_params.get("file", ""))
        return page(
            request,
            "journal.html",
            title="Journal",
            ns=ns,
            view=view,
            memory_dir=str(ex.memory_dir) if ex.memory_dir else "",
        )

    def live(request: Request) -> Response:
        if state.feed is None:
            return error(
                request,
                404,
                "The live view needs the running agent: start the explorer from inside it "
                "with MemoryRuntime(..., ui=True) or rt.serve_ui().",
            )
        ns = ex.default_namespace
        return page(request, "live.html", title="Live", ns=ns)

    async def events(request: Request) -> Response:
        feed = state.feed
        if feed is None:
            return PlainTextResponse("no live view: the explorer is not inside an agent", 404)
        last = request.headers.get("last-event-id") or request.query_params.get("since")
        start = _int(last, -1)
        if start < 0:
            start = max(0, feed.seq - _BACKLOG_ON_CONNECT)
        return StreamingResponse(
            _stream(state, feed, start),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def context(request: Request) -> Response:
        feed = state.feed
        if feed is None:
            return PlainTextResponse("no live view", 404)
        body = await anyio.to_thread.run_sync(feed.context)
        return Response(body, media_type="application/json")

    def health(request: Request) -> Response:
        return JSONResponse(
            {"ok": True, "edits": state.allow_edits, "live": state.feed is not None}
        )

    async def edit(request: Request) -> Response:
        if not state.allow_edits:
            return error(
                request, 403, "This explorer is read-only: start it with --allow-edits to edit."
            )
        origin = request.headers.get("origin")
        if origin is not None and origin not in (
            f"http://{request.headers.get('host', '')}",
            f"https://{request.headers.get('host', '')}",
        ):
            return error(request, 403, "cross-origin edit refused")
        # Forms are urlencoded (no file uploads): parsed here, without python-multipart.
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith("application/x-www-form-urlencoded"):
            return error(request, 415, "edits are posted as urlencoded forms")
        body = await _bounded_body(request, _MAX_FORM)
        if body is None:
            return error(request, 413, "form too large")
        fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if not _same(fields.get("csrf", ""), state.csrf):
            return error(request, 403, "stale or missing form token: reload the page")
        action = request.path_params["action"]
        return await anyio.to_thread.run_sync(_do_edit, request, action, fields)

    def _do_edit(request: Request, action: str, fields: dict[str, str]) -> Response:
        try:
            if action == "forget":
                user = fields.get("user", "")
                if not user or fields.get("confirm", "") != user:
                    raise ValueError("type the user id again to confirm forgetting it")
                reports = ex.forget_user(user)
                n = sum(r.memories for r in reports)
                log.info("ui.forget", user=user, memories=n)
                return RedirectResponse(f"/?{urlencode({'forgot': user, 'n': n})}", 303)
            ns = ex.pick_namespace(fields)
            mid = fields.get("id", "")
            if ns is None or not mid:
                raise ValueError("an edit needs a namespace and a memory id")
            if action == "delete":
                ex.delete(ns, mid)
            elif action in ("pin", "unpin"):
                ex.pin(ns, mid, pinned=action == "pin")
            else:
                return error(request, 404, f"unknown edit {action!r}")
            log.info("ui.edit", action=action, memory_id=mid, namespace=str(ns))
            return RedirectResponse(f"/memory/{mid}?{namespace_query(ns)}", 303)
        except (MemoryNotFoundError, LookupError) as exc:
            return error(request, 404, str(exc))
        except (ValueError, StoreError) as exc:
            return error(request, 400, str(exc))

    routes = [
        Route("/", guarded(home, store=False)),
        Route("/timeline", guarded(timeline)),
        Route("/search", guarded(search)),
        Route("/memory/{memory_id:path}", guarded(memory)),
        Route("/facts", guarded(facts)),
        Route("/journal", guarded(journal)),
        Route("/live", guarded(live, store=False)),
        Route("/events", events),
        Route("/api/context", context),
        Route("/healthz", health),
        Route("/edit/{action}", edit, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    return _Guard(app, state)


def _int(value: str | None, default: int) -> int:
    try:
        n = int(value) if value is not None else default
    except ValueError:
        return default
    return n if n >= 0 or default < 0 else default


async def _stream(state: AppState, feed: LiveFeed, seq: int) -> AsyncIterator[str]:
    """Server-sent events: the feed from ``seq`` on, then the next context after changes."""
    yield "retry: 2000\n\n"
    sent_version = -2
    while True:
        items, missed = feed.since(seq)
        if missed:
            yield f"event: gap\ndata: {missed}\n\n"
        for s, payload in items:
            yield f"id: {s}\ndata: {payload}\n\n"
            seq = s
        version = feed.stm_version
        if version != sent_version:
            sent_version = version
            try:
                ctx = await anyio.to_thread.run_sync(feed.context)
            except Exception as exc:  # the runtime is closing: say so, keep streaming
                ctx = json.dumps({"error": repr(exc)})
            yield f"event: context\ndata: {ctx}\n\n"
        if feed.closed or state.stopping:
            yield "event: closed\ndata: {}\n\n"
            return
        before = feed.seq
        await feed.wait(seq, _KEEPALIVE)
        if feed.seq == before and not feed.closed:
            yield ": keepalive\n\n"
