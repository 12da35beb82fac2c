"""Child process of ``test_store_keyed_facts.py``: one ``save_fact``, SIGKILLed right
after its first store write committed (before ``save`` returns).

Usage: ``python _keyed_kill_worker.py BACKEND TARGET KEY VALUE``

Before that write it prints ``READY`` and waits for a line on stdin, so the test
can commit a save of the same key from another process in between: the write
(one transaction that looks the key up, under the namespace's lock) then finds
the other process's row.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from actormem.models.embedders import HashEmbedder
from actormem.recorder import KeyedFacts
from actormem.store import DuckDBStore, Namespace

NS = Namespace(user_id="ada", agent_id="helper")


def main() -> None:
    backend, target, key, value = sys.argv[1:5]
    store: Any
    if backend == "duckdb":
        store = DuckDBStore(target, embedder=HashEmbedder(64), touch_flush_interval=None)
    else:
        from actormem.store._postgres import PostgresStore

        store = PostgresStore(target, embedder=HashEmbedder(64), touch_flush_interval=None)
    real = store._write

    def write(*args: Any, **kwargs: Any) -> Any:
        print("READY", flush=True)
        sys.stdin.readline()  # the other process's save has committed
        out = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)  # committed; the save never returns
        return out  # pragma: no cover

    store._write = write
    KeyedFacts(store, NS).save(key, value)
    raise AssertionError("the save returned without writing")  # pragma: no cover


if __name__ == "__main__":
    main()
