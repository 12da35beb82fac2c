"""``open_store``: which backend a path or a URL opens, and the errors on the way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actormem import MemoryRuntime
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, is_dsn, open_store
from actormem.store._open import store_label


def test_is_dsn_knows_both_spellings_and_nothing_else(tmp_path: Path) -> None:
    assert is_dsn("postgresql://u@h/db") and is_dsn("postgres://h/db")
    # libpq's key/value words (psycopg's make_conninfo returns them)
    assert is_dsn("host=/tmp/pg dbname=mem user=app") and is_dsn("dbname=mem")
    assert is_dsn(" user = app host=db.example")
    assert not is_dsn("memory.duckdb") and not is_dsn(tmp_path / "x.duckdb")
    assert not is_dsn("mysql://h/db") and not is_dsn(None)
    assert not is_dsn("notes=draft.duckdb") and not is_dsn(str(tmp_path / "host=x.duckdb"))


def test_a_path_opens_a_duckdb_file(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.duckdb", embedder=HashEmbedder(32)) as store:
        assert isinstance(store, DuckDBStore)
        store.add(Namespace(user_id="ada"), "Ada likes tea")
    with open_store(str(tmp_path / "m.duckdb"), embedder=HashEmbedder(32)) as store:
        assert store.count(Namespace(user_id="ada")) == 1
    with pytest.raises(TypeError, match="postgresql:// URL"):
        open_store(42)  # type: ignore[arg-type]


def test_the_label_of_a_url_drops_its_password() -> None:
    assert store_label("postgresql://ada:s3cret@db.example:5433/mem?sslmode=require") == (
        "postgresql://ada@db.example:5433/mem?sslmode=require"
    )
    assert store_label("postgresql://ada@db/mem") == "postgresql://ada@db/mem"
    assert store_label("/tmp/m.duckdb") == "/tmp/m.duckdb"
    assert store_label("host=db user=ada password='s3 cret' dbname=mem") == (
        "host=db user=ada password=*** dbname=mem"
    )
    # libpq also reads secrets from a URL's query; an IPv6 host keeps its brackets
    label = store_label("postgresql://u:pw@db/x?host=/tmp/s&sslpassword=S2&Password=S3")
    assert "pw" not in label and "S2" not in label and "S3" not in label
    assert label == "postgresql://u@db/x?host=/tmp/s&sslpassword=***&Password=***"
    assert store_label("postgresql://u:pw@[::1]:5432/x") == "postgresql://u@[::1]:5432/x"
    assert store_label("host=db sslpassword=k3y dbname=mem") == "host=db sslpassword=*** dbname=mem"


def test_the_url_the_postgres_store_and_sessions_quote_hides_every_secret() -> None:
    """``PostgresStore.url`` / ``PostgresSession.url`` (in their messages,
    reprs and session locations) are the DSN as a URL, its secrets hidden by
    the same function as the store label: key/value words included, the
    non-secret parameters kept (they used to be dropped)."""
    pytest.importorskip("psycopg")
    from actormem._dsn import redact_dsn
    from actormem.store._pg_conn import redacted

    assert redacted("host=/tmp/pg port=5433 dbname=mem user=app password='s3 cret'") == (
        "postgresql://app@/mem?host=/tmp/pg&port=5433"
    )
    label = redacted("host=db.example user=ada sslpassword=k3y dbname=mem sslmode=require")
    base, query = label.split("?")
    assert base == "postgresql://ada@db.example/mem"
    assert sorted(query.split("&")) == ["sslmode=require", "sslpassword=***"]
    url = "postgresql://ada:s3cret@[::1]:5433/mem?sslmode=require&password=again"
    assert redacted(url) == "postgresql://ada@[::1]:5433/mem?sslmode=require"
    assert redact_dsn(url) == "postgresql://ada@[::1]:5433/mem?sslmode=require&password=***"
    assert redacted("dbname=mem") == "postgresql:///mem"
    assert redacted("nonsense=1") == "postgresql://(unparsable DSN)"
    # An empty host stays a URL libpq reads (urlunsplit made it "postgresql:/mem").
    assert redact_dsn("postgresql:///mem?host=/tmp&password=x") == (
        "postgresql:///mem?host=/tmp&password=***"
    )


@pytest.mark.parametrize("missing", ["psycopg", "pgvector"])
def test_a_url_without_the_postgres_extra_says_what_to_install(
    tmp_path: Path, missing: str
) -> None:
    # A real process where a package of the extra cannot be imported.
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{missing!r}] = None  # import {missing} -> ImportError
        from actormem import MemoryRuntime
        try:
            MemoryRuntime(store="postgresql://ada@127.0.0.1:1/mem")
        except ImportError as exc:
            print("IMPORT:", exc)
            sys.exit(3)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'actormem[postgres]'" in proc.stdout
    assert f"{missing} is missing" in proc.stdout


def test_the_runtime_opens_and_closes_a_store_from_a_path(tmp_path: Path) -> None:
    db = tmp_path / "lt.duckdb"
    with MemoryRuntime(session_dir=tmp_path, store=str(db), embedder=HashEmbedder(32)) as rt:
        assert isinstance(rt.store, DuckDBStore)
    with DuckDBStore(db, embedder=HashEmbedder(32)):  # closed by the runtime: not locked
        pass


def test_the_runtime_opens_a_postgres_store_from_a_url(pg_dsn: str, tmp_path: Path) -> None:
    from actormem import Msg
    from actormem.store._postgres import PostgresStore
    from tests._postgres import pg_url

    url = pg_url(pg_dsn)
    ns = Namespace(user_id="ada", agent_id="agent")
    emb = HashEmbedder(32)
    with MemoryRuntime(session_dir=tmp_path, store=url, embedder=emb, namespace=ns) as rt:
        assert isinstance(rt.store, PostgresStore)
        rt.record([Msg.user("My bicycle is in the garden shed"), Msg.assistant("Noted.")])
        rt.flush()
        store = rt.store
    with pytest.raises(Exception, match="closed"):  # the runtime closed what it opened
        store.count(ns)
    with open_store(url, embedder=emb) as again:  # what it acknowledged is in the database
        hits = again.search("bicycle shed", ns, 5)
        assert hits and "garden shed" in hits[0].memory.content
    assert not (tmp_path / "long_term.duckdb").exists()


def test_key_value_words_open_postgres_not_a_file_named_after_them(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: ``store="host=... dbname=..."`` (libpq's other spelling, what
    ``make_conninfo`` returns) was taken for a path and created a DuckDB file
    named after the words in the working directory."""
    from actormem import Msg
    from actormem.store._postgres import PostgresStore

    monkeypatch.chdir(tmp_path)
    assert not pg_dsn.startswith("postgres")  # the fixture gives key/value words
    ns = Namespace(user_id="ada", agent_id="agent")
    emb = HashEmbedder(32)
    with MemoryRuntime(session_dir=tmp_path, store=pg_dsn, embedder=emb, namespace=ns) as rt:
        assert isinstance(rt.store, PostgresStore)
        rt.record([Msg.user("My kayak is in the boathouse"), Msg.assistant("Noted.")])
        rt.flush()
    with open_store(pg_dsn, embedder=emb) as again:
        assert isinstance(again, PostgresStore)
        assert "boathouse" in again.search("kayak", ns, 5)[0].memory.content
    assert sorted(p.name for p in tmp_path.iterdir() if "=" in p.name) == []
