"""`actormem chat` against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append(body)  # type: ignore[attr-defined]
        text = "\n".join(str(m.get("content") or "") for m in body["messages"])
        if "markup" in text:
            answer = "close bold with [/b], [link=https://evil.example]click[/link] :x:"
        elif "Where do I live" in text:
            answer = "You live in Porto." if "Porto" in text else "I don't know."
        else:
            answer = "Nice to meet you, Ada."
        reply = {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": answer},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen = []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()


def chat(
    url: str, tmp_path: Path, lines: list[str], *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "actormem.cli",
            "chat",
            "--base-url",
            url,
            "--model",
            "m",
            "--dir",
            str(tmp_path / "sessions"),
            "--db",
            str(tmp_path / "mem.duckdb"),
            *extra,
        ],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "", "OPENAI_API_KEY": "sk-test-key-123456"},
    )


def test_chat_remembers_across_processes(server: ThreadingHTTPServer, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    first = chat(
        url, tmp_path, ["My name is Ada and I live in Porto.", "/save", "/quit"], "--session", "ada"
    )
    assert first.returncode == 0, first.stderr
    assert "Nice to meet you, Ada." in first.stdout
    assert (tmp_path / "sessions" / "ada.json").exists()
    # A new process, no --session: the fact must come back from long-term memory (DuckDB).
    second = chat(url, tmp_path, ["Where do I live?"])
    assert second.returncode == 0, second.stderr
    assert "You live in Porto." in second.stdout
    asked = [
        body["messages"]
        for body in server.seen  # type: ignore[attr-defined]
        if str(body["messages"][-1].get("content")) == "Where do I live?"
    ]
    assert asked and any("<long_term_memory>" in str(m.get("content")) for m in asked[0])
    assert "sk-test-key" not in first.stderr + second.stderr


def test_a_reply_that_looks_like_rich_markup_is_printed_as_it_is(
    server: ThreadingHTTPServer, tmp_path: Path
) -> None:
    """A model's "[/b]" ended the chat with a Rich MarkupError; "[link=...]"
    hid its target and ":x:" became an emoji."""
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    r = chat(url, tmp_path, ["show me some markup", "/quit"])
    assert r.returncode == 0, r.stderr
    assert "close bold with [/b], [link=https://evil.example]click[/link] :x:" in r.stdout


def test_chat_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    r = chat("http://127.0.0.1:9/v1", tmp_path, ["hello"], "--timeout", "1")
    assert r.returncode == 0  # the agent explains the failure and the loop goes on
    assert "continue" in r.stdout and "Traceback" not in r.stderr
    bad = chat("ftp://nowhere", tmp_path, ["hello"])
    assert bad.returncode == 2 and bad.stderr.startswith("actormem: error:")


def test_chat_resumes_a_session_kept_in_postgres(
    server: ThreadingHTTPServer, tmp_path: Path, pg_dsn: str
) -> None:
    from tests._postgres import pg_url

    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    db = ("--db", pg_url(pg_dsn))  # long-term memory in the same database
    where = ("--session", "ada", "--sessions", pg_url(pg_dsn), *db)
    first = chat(url, tmp_path, ["My name is Ada and I live in Porto.", "/save", "/quit"], *where)
    assert first.returncode == 0, first.stderr
    assert "#actormem_sessions/ada" in first.stdout  # /save names the row, not a file
    assert not (tmp_path / "sessions" / "ada.json").exists()
    second = chat(url, tmp_path, ["/quit"], *where)  # another process resumes it
    assert second.returncode == 0, second.stderr
    assert "resumed session 'ada'" in second.stdout
    # a third process, no session: the fact comes back from long-term memory in PostgreSQL
    third = chat(url, tmp_path, ["Where do I live?"], *db)
    assert third.returncode == 0, third.stderr
    assert "You live in Porto." in third.stdout
    assert not (tmp_path / "mem.duckdb").exists()


# -- a local model: request fields, one deadline per call, log lines off the prompt ---------


def test_chat_sends_max_tokens_temperature_and_extra_body(tmp_path: Path) -> None:
    from tests._strict_openai import Answer, strict_server

    long = "word " * 200
    with strict_server(lambda req: Answer(text=long)) as srv:
        r = chat(
            srv.url,
            tmp_path,
            ["hello"],
            "--max-tokens",
            "16",
            "--temperature",
            "0.2",
            "--extra-body",
            '{"seed": 7, "top_p": 0.5}',
            "--mode",
            "agent",
        )
        assert r.returncode == 0, r.stderr
        assert srv.refused == []
        agent_calls = [b for b in srv.requests if b.get("tools")]
        assert agent_calls
        body = agent_calls[0]
        assert (body["max_tokens"], body["temperature"], body["seed"], body["top_p"]) == (
            16,
            0.2,
            7,
            0.5,
        )
        assert body["tool_choice"] == "auto"
        assert "cut at --max-tokens 16" in r.stdout


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--extra-body", "{nope"), "--extra-body is not valid JSON"),
        (("--extra-body", "[1]"), "--extra-body must be a JSON object, got list"),
        (("--temperature", "7"), "--temperature must be from 0 to 2"),
        (("--max-tokens", "-1"), "--max-tokens must be >= 0"),
        (("--timeout", "0"), "--timeout must be positive"),
        (("--timeout", "nan"), "--timeout must be positive"),
        (("--timeout", "inf"), "--timeout must be positive"),
        (("--temperature", "nan"), "--temperature must be from 0 to 2"),
    ],
)
def test_chat_bad_request_flags_are_one_clear_line(
    tmp_path: Path, flags: tuple[str, ...], needle: str
) -> None:
    r = chat("http://127.0.0.1:9/v1", tmp_path, ["hello"], *flags)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_chat_timeout_is_one_deadline_for_all_attempts(tmp_path: Path) -> None:
    import threading

    from tests._strict_openai import Answer, strict_server

    release = threading.Event()
    with strict_server(lambda req: Answer(text="late", hold=release)) as srv:
        try:
            r = chat(srv.url, tmp_path, ["hello"], "--timeout", "1", "--mode", "agent")
        finally:
            release.set()
    assert r.returncode == 0, r.stderr
    assert "could not finish" in r.stdout and "no time left to retry" in r.stdout
    # Without a total deadline each of 4 attempts had the full timeout.
    assert len([b for b in srv.requests if b.get("tools")]) < 4


def test_log_lines_wait_while_the_prompt_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    from actormem._cli_chat import _HeldStream

    stream = _HeldStream()
    with stream.held():
        stream.write("warning while the user types\n")
        stream.flush()
        assert capsys.readouterr().err == ""
    assert capsys.readouterr().err == "warning while the user types\n"
    stream.write("later\n")
    assert capsys.readouterr().err == "later\n"
