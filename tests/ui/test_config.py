from __future__ import annotations

import pytest

from actormem.store import DuckDBStore
from actormem.ui import UIConfig, UIError, UIServer, is_loopback, resolve_token


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "my-laptop.local"])
def test_non_loopback_bind_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(UIError, match="without an access token"):
        resolve_token(host, None)
    with pytest.raises(UIError, match="without an access token"):
        UIServer(None, config=UIConfig(host=host, token=None))


def test_non_loopback_gets_a_random_token_by_default() -> None:
    a, b = resolve_token("0.0.0.0", "auto"), resolve_token("0.0.0.0", "auto")
    assert a and b and a != b and len(a) >= 24
    server = UIServer(None, config=UIConfig(host="0.0.0.0", port=0))
    assert server.token and f"?token={server.token}" in server.url
    assert resolve_token("127.0.0.1", "auto") is None


def test_short_or_odd_tokens_are_refused() -> None:
    # a ";" cut the cookie, a "+" became a space in the printed URL and a
    # non-ASCII token made every request a 500: only URL- and cookie-safe ones
    for bad in (
        "short",
        "x" * 15,
        "with space\n" * 3,
        "abcdefgh;ijklmnopq",
        "abcdefgh+ijklmnopq",
        "pässwörd-pässwörd-1",
        "abcdefgh%ijklmnopq",
    ):
        with pytest.raises(UIError, match="at least 16 characters among letters"):
            resolve_token("127.0.0.1", bad)
    assert resolve_token("10.0.0.1", "Ab0-_.~" * 3) == "Ab0-_.~" * 3


def test_bad_settings_name_the_problem() -> None:
    with pytest.raises(UIError, match="port"):
        UIConfig(port=70000)
    with pytest.raises(UIError, match="ring"):
        UIConfig(ring=1)


def test_a_taken_port_is_a_clear_error_or_falls_back(tmp_path: object) -> None:
    first = UIServer(None, config=UIConfig(port=0)).start()
    try:
        with pytest.raises(UIError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            UIServer(None, config=UIConfig(port=first.port)).start()
        other = UIServer(None, config=UIConfig(port=first.port, port_fallback=True)).start()
        try:
            assert other.port not in (0, first.port)
        finally:
            other.stop()
    finally:
        first.stop()


def test_stop_is_idempotent_and_frees_the_port(tmp_path: object) -> None:
    from pathlib import Path

    store = DuckDBStore(Path(str(tmp_path)) / "m.duckdb")
    try:
        server = UIServer(store, config=UIConfig(port=0)).start()
        port = server.port
        server.stop()
        server.stop()
        assert not server.running
        again = UIServer(store, config=UIConfig(port=port)).start()
        again.stop()
    finally:
        store.close()
