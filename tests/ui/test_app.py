"""The explorer over HTTP (a real server on 127.0.0.1): access, edits, escaping."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actormem import MemoryRuntime
from actormem.store import DuckDBStore
from actormem.ui import UIConfig, UIServer
from tests.ui._seed import ADA, make_runtime, seed_runtime, seed_store

PAGES = ("/", "/timeline", "/search?q=pasted+note", "/facts", "/journal", "/live")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[DuckDBStore, dict[str, str]]]:
    s = DuckDBStore(tmp_path / "m.duckdb")
    ids = seed_store(s)
    yield s, ids
    s.close()


def _serve(store: DuckDBStore, **cfg: object) -> UIServer:
    return UIServer(store, config=UIConfig(port=0, **cfg)).start()  # type: ignore[arg-type]


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m is not None
    return m.group(1)


def test_every_page_escapes_memory_content(agent: tuple[MemoryRuntime, dict[str, str]]) -> None:
    rt, ids = agent
    assert rt.ui is not None
    base = rt.ui.url.rstrip("/")
    for path in (*PAGES, f"/memory/{ids['xss']}?user=ada&agent=travel", "/journal?file=memory"):
        r = httpx.get(base + path)
        assert r.status_code == 200, path
        assert "<script>window.__pwned" not in r.text and "<img src=x" not in r.text, path
        assert "script-src 'self'" in r.headers["content-security-policy"]
    page = httpx.get(f"{base}/memory/{ids['xss']}?user=ada&agent=travel").text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page


def test_read_only_by_default_refuses_every_edit(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, ids = store
    with _serve(s) as server:
        page = httpx.get(f"{server.url}memory/{ids['home']}?user=ada&agent=travel").text
        assert "edit-delete" not in page and 'action="/edit/' not in page
        before = s.history(ADA, ids["home"])
        for action in ("delete", "pin", "forget"):
            r = httpx.post(
                f"{server.url}edit/{action}",
                data={"id": ids["home"], "user": "ada", "agent": "travel", "confirm": "ada"},
            )
            assert r.status_code == 403 and "read-only" in r.text
        assert s.get(ADA, ids["home"]) is not None
        assert s.history(ADA, ids["home"]) == before


def test_edits_need_the_form_token_and_same_origin_and_leave_history(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, ids = store
    mid = ids["Ada wants to visit Sintra on a day trip"]
    with _serve(s, allow_edits=True) as server:
        url = f"{server.url}memory/{mid}?user=ada&agent=travel"
        csrf = _csrf(httpx.get(url).text)
        form = {"id": mid, "user": "ada", "agent": "travel"}
        assert httpx.post(f"{server.url}edit/pin", data=form).status_code == 403
        assert (
            httpx.post(f"{server.url}edit/pin", data={**form, "csrf": "x" * 32}).status_code == 403
        )
        evil = httpx.post(
            f"{server.url}edit/pin",
            data={**form, "csrf": csrf},
            headers={"Origin": "http://evil.example"},
        )
        assert evil.status_code == 403
        assert [h.op for h in s.history(ADA, mid)] == ["ADD"]
        r = httpx.post(f"{server.url}edit/pin", data={**form, "csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith(f"/memory/{mid}")
        assert "pinned" in s.get(ADA, mid).tags  # type: ignore[union-attr]
        r = httpx.post(f"{server.url}edit/delete", data={**form, "csrf": csrf})
        assert r.status_code == 303 and s.get(ADA, mid) is None
        ops = [(h.op, h.reason) for h in s.history(ADA, mid)]
        assert ops == [
            ("ADD", ""),
            ("UPDATE", "edited in the memory explorer: pin"),
            ("DELETE", "edited in the memory explorer: delete"),
        ]
        # Deleting again names the problem and changes nothing.
        again = httpx.post(f"{server.url}edit/delete", data={**form, "csrf": csrf})
        assert again.status_code == 404 and "no live memory" in again.text
        assert len(s.history(ADA, mid)) == 3


def test_forget_a_user_needs_the_id_twice(store: tuple[DuckDBStore, dict[str, str]]) -> None:
    s, _ = store
    with _serve(s, allow_edits=True) as server:
        csrf = _csrf(httpx.get(server.url).text)
        bad = httpx.post(
            f"{server.url}edit/forget", data={"csrf": csrf, "user": "bob", "confirm": "bo"}
        )
        assert bad.status_code == 400 and s.count(ADA.__class__(user_id="bob")) == 2
        ok = httpx.post(
            f"{server.url}edit/forget", data={"csrf": csrf, "user": "bob", "confirm": "bob"}
        )
        assert ok.status_code == 303
        assert s.count(ADA.__class__(user_id="bob"), include_deleted=True) == 0
        assert s.count(ADA) > 0  # another user is untouched
        assert "Forgot user" in httpx.get(server.url + ok.headers["location"][1:]).text


def test_without_a_token_only_loopback_host_names_are_answered(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, _ = store
    with _serve(s) as server:
        assert httpx.get(server.url).status_code == 200
        port = server.port
        for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
            assert httpx.get(server.url, headers={"Host": host}).status_code == 200
        # A page elsewhere reaching us through DNS rebinding sends its own host name.
        r = httpx.get(server.url, headers={"Host": f"attacker.example:{port}"})
        assert r.status_code == 421 and "ada" not in r.text
        # every loopback address is loopback (`--host 127.0.0.2` answered nothing)
        for host in (f"127.0.0.2:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert httpx.get(server.url, headers={"Host": host}).status_code == 200, host
        for host in (f"127.0.0.1.attacker.example:{port}", f"10.0.0.1:{port}", ""):
            assert httpx.get(server.url, headers={"Host": host}).status_code == 421, host


def test_a_wrong_token_of_any_characters_is_a_401_not_a_500(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, _ = store
    with _serve(s, token="t" * 20) as server:
        base = server.url.split("?")[0]
        for given in ("%C3%A4" * 10, "%F0%9F%98%80", "%ED%A0%80"):
            assert httpx.get(f"{base}?token={given}").status_code == 401, given
        bad_cookie = {"Cookie": "actormem_ui=\u00e4\u00e4; other=1".encode("latin-1")}
        assert httpx.get(base, headers=bad_cookie).status_code == 401
        bearer = {"Authorization": ("Bearer " + "\u00e4" * 20).encode("latin-1")}
        assert httpx.get(base, headers=bearer).status_code == 401


def _connect(server: UIServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port))
    # A guard against a server that never answers (the old code): the test fails
    # instead of hanging.  Nothing here asserts on time.
    sock.settimeout(120)
    return sock


def _read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_an_oversized_edit_form_is_refused_without_reading_it_whole(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    """The 413 comes before the body: a client announces 10 MB, sends a few
    bytes and waits.  The old code read the body whole first, so it waited
    for the rest (and answered nothing)."""
    s, ids = store
    mid = ids["Ada wants to visit Sintra on a day trip"]
    with _serve(s, allow_edits=True) as server:
        csrf = _csrf(httpx.get(f"{server.url}memory/{mid}?user=ada&agent=travel").text)
        with _connect(server) as sock:
            sock.sendall(
                b"POST /edit/pin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: 10000000\r\n\r\n" + f"csrf={csrf}&id={mid}&pad=".encode()
            )
            head = b""
            while b"\r\n" not in head:
                chunk = sock.recv(4096)
                assert chunk, f"closed without an answer after {head!r}"
                head += chunk
            assert head.startswith(b"HTTP/1.1 413 ")

        def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
            yield f"csrf={csrf}&id={mid}&user=ada&agent=travel&pad=".encode()
            for _ in range(100):
                yield b"x" * 10_000

        r = httpx.post(
            f"{server.url}edit/pin",
            content=chunks(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 413
        assert "pinned" not in s.get(ADA, mid).tags  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "partial",
    [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow",  # headers cut short
        b"",  # connects and sends nothing
        b"POST /edit/pin HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a body announced, half sent
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf=",
    ],
    ids=["half-headers", "nothing", "half-body"],
)
def test_a_client_that_stalls_mid_request_is_disconnected_and_others_are_served(
    store: tuple[DuckDBStore, dict[str, str]], partial: bytes
) -> None:
    """Slowloris: a connection that sends part of a request and stalls is
    closed once its read deadline passes (the old server kept it for good),
    while other clients are served throughout."""
    s, ids = store
    with _serve(s, allow_edits=True, read_timeout=1.0) as server:
        with _connect(server) as slow:
            slow.sendall(partial)
            assert httpx.get(f"{server.url}healthz").status_code == 200
            answer = _read_to_close(slow)  # returns when the server closes it
            assert b"pinned" not in answer
        page = httpx.get(f"{server.url}memory/{ids['home']}?user=ada&agent=travel")
        assert page.status_code == 200
        assert "pinned" not in s.get(ADA, ids["home"]).tags  # type: ignore[union-attr]


def test_a_token_is_required_then_kept_in_a_cookie(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, _ = store
    token = "t" * 20 + "0123"
    with _serve(s, token=token) as server:
        assert server.url.endswith(f"?token={token}")
        base = server.url.split("?")[0]
        for path in ("", "timeline", "events", "static/app.css", "healthz"):
            r = httpx.get(base + path)
            assert r.status_code == 401 and "access token" in r.text, path
        assert httpx.get(base + "?token=" + "x" * 24).status_code == 401
        with httpx.Client() as client:
            r = client.get(f"{base}timeline?user=ada&token={token}")
            assert r.status_code == 303 and r.headers["location"] == "/timeline?user=ada"
            assert (
                "HttpOnly" in r.headers["set-cookie"]
                and "SameSite=Strict" in r.headers["set-cookie"]
            )
            assert client.get(base + "timeline?user=ada").status_code == 200
        bearer = httpx.get(base, headers={"Authorization": f"Bearer {token}"})
        assert bearer.status_code == 200


def test_journal_files_cannot_leave_the_folder(agent: tuple[MemoryRuntime, dict[str, str]]) -> None:
    rt, _ = agent
    assert rt.ui is not None
    base = rt.ui.url
    for bad in ("../../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "2026-13-45", "NOW.md/.."):
        r = httpx.get(f"{base}journal?file={bad}")
        assert r.status_code == 400, bad
        assert "root:" not in r.text
    assert "Plan Ada" in httpx.get(f"{base}journal?file=now").text


def test_looking_never_counts_as_an_access(store: tuple[DuckDBStore, dict[str, str]]) -> None:
    s, ids = store
    with _serve(s) as server:
        r = httpx.get(f"{server.url}search?user=ada&agent=travel&q=Berlin")
        assert r.status_code == 200 and "Ada lives in Berlin" in r.text
        s.flush()
        assert s.get(ADA, ids["home"]).access_count == 0  # type: ignore[union-attr]


def test_bad_input_gets_a_clear_page(store: tuple[DuckDBStore, dict[str, str]]) -> None:
    s, _ = store
    with _serve(s) as server:
        r = httpx.get(f"{server.url}timeline?user=%01bad")
        assert r.status_code == 400 and "control characters" in r.text
        r = httpx.get(f"{server.url}search?user=ada&q=x&mode=telepathy")
        assert r.status_code == 400 and "unknown search mode" in r.text
        r = httpx.get(f"{server.url}memory/nope?user=ada")
        assert r.status_code == 404 and "no memory &#39;nope&#39;" in r.text


def test_a_store_explorer_has_no_live_view_and_says_where_to_find_it(
    store: tuple[DuckDBStore, dict[str, str]],
) -> None:
    s, _ = store
    with _serve(s) as server:
        r = httpx.get(server.url + "live")
        assert r.status_code == 404 and "ui=True" in r.text
        assert httpx.get(server.url + "events").status_code == 404
        home = httpx.get(server.url).text
        assert 'id="nav-live"' not in home and "ada" in home and "bob" in home


def test_an_agent_without_a_store_serves_the_live_view(tmp_path: Path) -> None:
    from actormem import Msg

    with MemoryRuntime(session_dir=tmp_path, ui=UIConfig(port=0)) as rt:
        assert rt.ui is not None and rt.ui.running
        r = httpx.get(rt.ui.url, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/live"
        assert httpx.get(rt.ui.url + "timeline").status_code == 404
        rt.add(Msg.user("hello"))
        assert rt.messages()
        ctx = httpx.get(rt.ui.url + "api/context").json()
        assert [m["text"] for m in ctx["messages"]] == ["hello"] and ctx["tokens"] > 0
    assert not rt.ui.running  # close() stopped it


def test_serving_twice_is_refused(tmp_path: Path) -> None:
    from actormem.ui import UIError

    with make_runtime(tmp_path) as rt:
        seed_runtime(rt)
        server = rt.serve_ui(port=0)
        with pytest.raises(UIError, match="already serves"):
            rt.serve_ui(port=0)
        assert rt.ui is server
