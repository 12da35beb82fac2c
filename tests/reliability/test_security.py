"""Security review, as tests: secrets never leak, memory files are private, no escapes.

* An API key given to ``OpenAIChatModel`` never reaches a log line, a repr, a
  session file or the long-term store -- even when the server is hostile and
  echoes the ``Authorization`` header back in its error bodies.
* Session ids cannot leave the sessions folder (also fuzzed in
  ``test_fuzz_store.py``).
* Files that hold memory are readable by their owner only: session files
  (0600), and so are the DuckDB file, its WAL and exports.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import structlog

from actormem import MemoryRuntime, Msg, ReActAgent
from actormem.models.base import ModelError
from actormem.models.embedders import HashEmbedder
from actormem.models.openai import OpenAIChatModel
from actormem.session import JsonSession, SessionError
from actormem.store import DuckDBStore, Namespace

KEY = "sk-test-SUPERSECRET0123456789abcdef"
SECRET_PARTS = ("SUPERSECRET0123456789", KEY)


class EchoingServer:
    """Chat-completions server that answers, fails with 500, or echoes the auth header."""

    def __init__(self) -> None:
        self.seen_auth: list[str] = []
        self.mode = "ok"
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                auth = self.headers.get("Authorization", "")
                outer.seen_auth.append(auth)
                auth = f"{auth} {self.headers.get('api-key', '')}".strip()
                if outer.mode == "ok":
                    body = {
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "Noted, Ada."},
                                "finish_reason": "stop",
                            }
                        ]
                    }
                    self._send(200, body)
                else:  # a hostile server quotes the credentials back
                    self._send(
                        401 if outer.mode == "401" else 500,
                        {"error": {"message": f"invalid credentials {auth} (api_key={KEY})"}},
                    )

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[EchoingServer]:
    s = EchoingServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _leaks(text: str) -> list[str]:
    return [p for p in SECRET_PARTS if p in text]


@pytest.mark.parametrize("mode", ["ok", "500", "401"])
def test_api_key_never_reaches_logs_sessions_or_the_store(
    tmp_path: Path, server: EchoingServer, mode: str
) -> None:
    server.mode = mode
    model = OpenAIChatModel(server.url, "m", api_key=KEY, timeout=60, max_retries=1, backoff=0.01)
    assert not _leaks(repr(model)) and not _leaks(str(vars(model)))
    store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64))
    with structlog.testing.capture_logs() as logs:
        with MemoryRuntime(
            session_dir=tmp_path / "sessions", store=store, autocontext=True, model=model
        ) as rt:
            agent = ReActAgent("a", model, rt, session_id="sec")
            reply = agent.reply("Hi, I'm Ada and my password is hunter2.")
            assert reply.text
            rt.flush(60)
            rt.save_session("sec2")
        dump = "\n".join(repr(e) for e in logs)
        store_text = "\n".join(
            f"{r.content} {r.metadata}" for r in store.list(Namespace(user_id="default"))
        )
        history = "\n".join(
            f"{h.old_content} {h.new_content} {h.reason}"
            for h in store.history(Namespace(user_id="default"))
        )
        store.close()
    assert server.seen_auth and server.seen_auth[0] == f"Bearer {KEY}"  # the key was used
    assert not _leaks(dump), "API key in a log line"
    for f in (tmp_path / "sessions").iterdir():
        assert not _leaks(f.read_text(errors="replace")), f"API key in session file {f.name}"
    assert not _leaks(store_text + history), "API key in the long-term store"


def test_a_key_passed_as_an_extra_header_is_redacted_too(server: EchoingServer) -> None:
    """Regression: only api_key was scrubbed from echoed errors, not an Azure-style header."""
    azure = "az-0123456789abcdef-secret"
    server.mode = "500"
    model = OpenAIChatModel(
        server.url, "m", headers={"api-key": azure}, timeout=60, max_retries=1, backoff=0.01
    )
    with structlog.testing.capture_logs() as logs, pytest.raises(ModelError) as info:
        model.chat([Msg.user("hi")])
    assert azure not in str(info.value) and azure not in repr(logs)
    assert azure not in repr(model)


def test_session_ids_cannot_escape(tmp_path: Path) -> None:
    session = JsonSession(tmp_path / "s")
    for bad in ["../x", "/etc/passwd", "a/b", "a\\b", "..", ".hidden", "a\x00", "", "x" * 200]:
        with pytest.raises(SessionError):
            session.path(bad)
    with MemoryRuntime(session_dir=tmp_path / "s") as rt, pytest.raises(SessionError):
        rt.save_session("../outside")
    assert not (tmp_path / "outside.json").exists()


def test_session_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with MemoryRuntime(session_dir=tmp_path) as rt:
            rt.add(Msg.user("private"))
            path = rt.save_session("p")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir() if p.is_file()}


def test_the_duckdb_file_and_wal_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64))
        store.add(Namespace(user_id="u"), "a private memory")
        modes = _modes(tmp_path)
        store.close()
    finally:
        os.umask(old)
    assert modes and all(m == 0o600 for m in modes.values()), {k: oct(v) for k, v in modes.items()}


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_exports_are_private(tmp_path: Path, suffix: str) -> None:
    old = os.umask(0o022)
    try:
        with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64)) as store:
            store.add(Namespace(user_id="u"), "a private memory")
            out = tmp_path / "out"
            out.mkdir()
            store.export(Namespace(user_id="u"), out / f"e{suffix}")
    finally:
        os.umask(old)
    assert _modes(out) == {f"e{suffix}": 0o600}
