"""``actormem ui``: the memory explorer, a local web page over a store."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from rich.console import Console

from actormem._cli_chat import UsageError as _UsageError
from actormem._cli_memories import open_db as _open_db

__all__ = ["cmd_ui"]


def _open_ui_store(db: str) -> Any:
    """The store behind ``actormem ui --db``: a DuckDB file or a ``postgresql://``
    URL (which running agents may be writing to at the same time)."""
    from actormem.store import StoreLockedError, is_dsn

    if "://" in db and not is_dsn(db):
        raise _UsageError(
            f"{db.split('://')[0]}:// stores are not supported: pass a DuckDB file "
            "or a postgresql:// URL"
        )
    try:
        return _open_db(db)
    except StoreLockedError as exc:
        raise _UsageError(
            f"{db} is held by a running agent (DuckDB lets one process open a file): "
            "explore it from inside that agent with MemoryRuntime(..., ui=True) or "
            f"rt.serve_ui(). ({exc})"
        ) from None


def cmd_ui(args: argparse.Namespace, console: Console) -> int:
    """Serve the memory explorer for a store until Ctrl-C."""
    from actormem.store._open import store_label
    from actormem.ui import UIConfig, UIServer

    config = UIConfig(
        host=args.host,
        port=args.port,
        token=args.token or "auto",
        allow_edits=args.allow_edits,
        memory_dir=args.memory_dir,
    )
    store = _open_ui_store(args.db)
    # Ctrl-C and SIGTERM (a service manager, `kill`) only set an event, so a
    # signal landing anywhere (even inside a print) ends in the same orderly
    # stop: the server first, then the store (which releases a DuckDB lock).
    # A signal the caller ignores (nohup, a background job) stays ignored.
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        server = UIServer(store, config=config).start()
        try:
            mode = "edits allowed" if args.allow_edits else "read-only"
            # Plain print: the URL must never be wrapped or styled (people copy it).
            url = server.url
            print(f"memory explorer for {store_label(args.db)} ({mode}): {url}", flush=True)
            print("press Ctrl-C to stop", flush=True)
            while not stop.is_set() and not server.wait(0.5):
                pass
        finally:
            server.stop()
    finally:
        store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
