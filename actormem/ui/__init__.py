"""The memory explorer: a local web page to look into an agent's memory.

Namespaces with counts, a timeline chart per day and kind, search with the
parts of every score, a memory's history, keyed facts, the journal files and,
inside a running agent, the live event stream with the context the model
will see next.  Read-only unless started with ``allow_edits``.

Needs the ``ui`` extra (``pip install 'actormem[ui]'``)::

    from actormem import MemoryRuntime

    with MemoryRuntime(store="memory.duckdb", ui=True) as rt:   # or rt.serve_ui()
        print(rt.ui.url)                                         # http://127.0.0.1:8765/

    # or, for a store no agent holds:  actormem ui --db memory.duckdb
"""

from __future__ import annotations

from actormem.logs import _configure_default
from actormem.ui._config import AUTO, DEFAULT_PORT, UIConfig, UIError, is_loopback, resolve_token
from actormem.ui._data import EDIT_REASON, Explorer
from actormem.ui._live import LiveFeed, describe
from actormem.ui._server import UIServer

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "AUTO",
    "DEFAULT_PORT",
    "EDIT_REASON",
    "Explorer",
    "LiveFeed",
    "UIConfig",
    "UIError",
    "UIServer",
    "describe",
    "is_loopback",
    "resolve_token",
]
