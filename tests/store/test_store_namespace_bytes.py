"""One namespace length rule on both backends, checked before anything is stored.

A namespace of three parts of 256 four-byte characters passed validation,
was accepted by DuckDB and refused by every PostgreSQL write (the whole
namespace is part of its btree keys, at most ~2,704 bytes).  ``Namespace``
now refuses parts that take more than ``NAMESPACE_MAX_BYTES`` (1,024) bytes
of UTF-8 together, naming the parts and the limit; everything up to it is
stored on both backends, beside the longest values the other indexed
columns take (a 64-character term, a 256-character id or journal key).

What PostgreSQL indexes, and how long it may be (bytes of UTF-8):

====================================  ===========================================
index key                              longest value
====================================  ===========================================
memories (id), history (memory_id)     id: 256 characters = 1,024
memories / history / log / stats by    namespace: 1,024 (this limit)
  namespace, + content_hash / seq      sha256 hex: 64; seq: 8
posting_groups (term, ns, group)       term cut to 64 characters = 256; + 1,024
term_stats (term, ns)                  256 + 1,024
journal_state (ns, key)                1,024 + key 256 characters = 1,024
vector_indexes (scope)                 the namespace as text: 1,024 + names
sessions (session_id)                  128 characters of [A-Za-z0-9_.@+=-]
====================================  ===========================================

Tags, source ids, metadata (keyed facts' keys live there) and content are not
in any btree key.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from actormem.store import NAMESPACE_MAX_BYTES, Namespace, NamespaceError, NewMemory
from tests.store.conftest import StoreFactory


def _wide(rnd: random.Random, n: int) -> str:
    """``n`` random four-byte characters (nothing a compressor can shrink)."""
    return "".join(chr(0x20000 + rnd.randrange(40_000)) for _ in range(n))


def test_a_namespace_past_the_limit_is_refused_naming_parts_and_limit() -> None:
    rnd = random.Random(3)
    with pytest.raises(NamespaceError) as err:
        Namespace(user_id=_wide(rnd, 256), agent_id=_wide(rnd, 256), run_id=_wide(rnd, 256))
    message = str(err.value)
    assert "3,072 bytes" in message and "1,024 bytes" in message, message
    assert "user_id 1,024" in message and "run_id 1,024" in message, message
    # ASCII parts of 256 characters fit, all four of them (1,024 bytes)
    Namespace(user_id="u" * 256, agent_id="a" * 256, run_id="r" * 256, session_id="s" * 256)
    wide = {"user_id": "é" * 256, "agent_id": "a" * 256, "run_id": "r" * 256}  # 1,024 bytes
    Namespace(**wide)
    with pytest.raises(NamespaceError, match="1,025 bytes"):
        Namespace(**wide, session_id="s")


def test_everything_up_to_the_limit_is_stored_on_both_backends(
    make_store: StoreFactory,
) -> None:
    rnd = random.Random(5)
    ns = Namespace(user_id=_wide(rnd, 128), agent_id=_wide(rnd, 128))
    assert sum(len(v.encode()) for _, v in ns.items()) == NAMESPACE_MAX_BYTES
    store = make_store()
    term = _wide(rnd, 80)  # cut to 64 characters (256 bytes) as a BM25 term
    mid = _wide(rnd, 256)  # the longest id: 1,024 bytes
    res = store.add_many(
        ns,
        [
            NewMemory(content=f"a memory about {term} and tea", id=mid),
            NewMemory(content="a second memory about coffee"),
        ],
    )
    assert [r.op for r in res] == ["ADD", "ADD"]
    key = _wide(rnd, 256)  # the longest journal state key: 1,024 bytes
    store.set_journal_state(ns, {key: "value"})
    assert store.journal_state(ns)[key] == "value"
    store.log_append(ns, "SYSTEM", "an entry of the log")
    store.update(ns, mid, content=f"rewritten about {term} and green tea")
    hits = store.search(term, ns, limit=5)
    assert hits and hits[0].memory.id == mid
    assert store.count(ns) == 2
    assert store.forget(ns).memories == 2


def test_the_cli_says_it(tmp_path: Path) -> None:
    rnd = random.Random(9)
    user, agent = _wide(rnd, 200), _wide(rnd, 200)
    db = tmp_path / "m.duckdb"
    r = subprocess.run(
        [
            *(sys.executable, "-m", "actormem.cli", "memories", "stats", "--db", str(db)),
            *("--user", user, "--agent", agent),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.startswith("actormem: error: namespace parts take 1,600 bytes"), r.stderr
    assert "the limit is 1,024 bytes" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.duckdb_only("a DuckDB file written before the limit")
def test_rows_stored_before_the_limit_stay_readable(make_store: StoreFactory) -> None:
    from tests._postgres import namespace_past_the_limit

    old = namespace_past_the_limit(13)
    store = make_store("old")
    store.add(old, "written by a version without the limit")
    store.close()
    store = make_store("old")
    scope = Namespace(user_id=old.user_id)  # one part always fits
    [rec] = store.list(scope)
    assert rec.namespace == old and rec.content.startswith("written by")
    assert store.forget(scope).memories == 1
