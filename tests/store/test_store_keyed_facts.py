"""One live memory per keyed fact, whatever the interleaving or crash (both backends).

A save is one store transaction (add or update, and the retirement of every
other live row of the key); a delete retires every live row of the key; rows
left by older versions (two live rows of one key) are repaired by the next
read.  The crash tests kill a real child process (SIGKILL) right after its
save's write committed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actormem.recorder import KEYED_KIND, KeyedFacts
from actormem.store import NewMemory

from .conftest import StoreFactory

_WORKER = Path(__file__).with_name("_keyed_kill_worker.py")


def _live(store: Any, kf: KeyedFacts, key: str) -> list[str]:
    """The values of ``key``'s live rows, read straight from the store."""
    return sorted(
        r.metadata["value"]
        for r in store.list(kf.namespace, kinds=[KEYED_KIND], limit=1000)
        if r.metadata.get("key") == key
    )


def _target(store: Any) -> str:
    return str(store.path) if hasattr(store, "path") else str(store.dsn)


def _kill_mid_save(target: str, backend: str, key: str, value: str, between: Any) -> None:
    """Run the child's save of ``key``; ``between()`` runs once it is about to write."""
    child = subprocess.Popen(
        [sys.executable, str(_WORKER), backend, target, key, value],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "READY"
        between()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=120) == -signal.SIGKILL
    finally:
        if child.poll() is None:  # pragma: no cover - a failed assertion above
            child.kill()
            child.wait()


def test_a_process_killed_mid_save_leaves_one_live_row_per_key(
    make_store: StoreFactory, request: pytest.FixtureRequest
) -> None:
    from ._keyed_kill_worker import NS

    backend = request.node.callspec.params["make_store"]
    store = make_store("kill")
    kf = KeyedFacts(store, NS)
    target = _target(store)
    if backend == "duckdb":  # one process owns the file: the child saves alone
        kf.save("plan", "gold")
        store.close()
        _kill_mid_save(target, backend, "plan", "silver", lambda: None)
        store = make_store("kill")
        kf = KeyedFacts(store, NS)
    else:
        # Just before the child's save begins its one write transaction, this
        # process saves the same key.  The child has not looked the key up yet
        # (the lookup runs inside that transaction, under the namespace's lock),
        # so it finds this row and updates it: one live row, the child's value.
        _kill_mid_save(target, backend, "plan", "silver", lambda: kf.save("plan", "gold"))
    assert _live(store, kf, "plan") == ["silver"]  # its save committed, alone
    assert kf.get("plan") == "silver"
    assert kf.save("plan", "bronze").op == "UPDATE"
    assert _live(store, kf, "plan") == ["bronze"] and kf.get("plan") == "bronze"
    hits = store.search("plan", kf.namespace, limit=10, mode="keyword", touch=False)
    assert [h.memory.metadata["value"] for h in hits] == ["bronze"]
    assert [h.op for h in kf.history("plan")][-1] == "UPDATE"
    assert kf.delete("plan") and kf.get("plan") is None and _live(store, kf, "plan") == []
    assert not kf.delete("plan") and kf.save("plan", "new").op == "ADD"


def _legacy_row(store: Any, kf: KeyedFacts, key: str, value: str) -> str:
    """A second live row of ``key``, as an older version could leave one."""
    meta = {"key": key, "value": value, "category": "general"}
    item = NewMemory(
        content=f"{key}: {value}",
        kind=KEYED_KIND,
        importance=1.0,
        tags=("keyed", f"key:{key}", "category:general"),
        metadata=meta,
    )
    return str(store.add_many(kf.namespace, [item], dedup=False)[0].id)


def test_rows_left_by_an_older_version_are_read_as_one_and_deleted_together(
    make_store: StoreFactory, clock: Any
) -> None:
    from ._keyed_kill_worker import NS

    store = make_store()
    kf = KeyedFacts(store, NS)
    first = kf.save("city", "Lisbon").id
    clock.advance(seconds=1)
    _legacy_row(store, kf, "city", "Porto")  # the last written value
    assert _live(store, kf, "city") == ["Lisbon", "Porto"]
    assert kf.get("city") == "Porto"  # the last value, and the key repaired:
    live = [r for r in store.list(kf.namespace, kinds=[KEYED_KIND]) if r.metadata["key"] == "city"]
    assert [(r.id, r.metadata["value"]) for r in live] == [(first, "Porto")]  # the oldest id
    assert KeyedFacts(store, NS).items() == {"city": "Porto"}
    # a delete retires every live row of the key, not only one of them
    clock.advance(seconds=1)
    _legacy_row(store, kf, "town", "Faro")
    _legacy_row(store, kf, "town", "Braga")
    assert kf.delete("town") and _live(store, kf, "town") == [] and kf.get("town") is None
    # a save over two rows keeps one, holding the saved value
    _legacy_row(store, kf, "pet", "cat")
    _legacy_row(store, kf, "pet", "dog")
    assert kf.save("pet", "fish").op == "UPDATE" and _live(store, kf, "pet") == ["fish"]
    ops = [h.op for h in store.history(kf.namespace)]
    assert ops.count("DELETE") == 4  # town x2, city's and pet's second rows
