"""The runtime's argument checks: what the constructor and the calls take.

Kept apart from :mod:`actormem.runtime` so that module reads as the wiring
of the actors; every check here raises on the caller's thread, before any
actor starts or any command is queued, with the argument named.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import structlog

from actormem.actors.short_term import ShortTermState
from actormem.journal import JournalConfig
from actormem.logs import _configure_default
from actormem.models.base import Embedder
from actormem.recorder import FACTS_SUFFIX, LongTermMemoryMode, RecorderConfig
from actormem.store import MemoryStore, Namespace
from actormem.store import open_store as open_store_at

__all__ = [
    "DEFAULT_NAMESPACE",
    "LONG_TERM_FILE",
    "MAX_RETRIEVE",
    "check_retrieve_args",
    "check_user_scoped",
    "delete_args",
    "journal_args",
    "long_term_args",
    "open_store",
    "unwrap_short_term",
]

log = structlog.get_logger("actormem.runtime")
_configure_default()  # quiet logging unless the application configured structlog

#: The namespace of long-term memories when none is given.
DEFAULT_NAMESPACE = Namespace(user_id="default", agent_id="agent")
#: The long-term store file (inside ``session_dir``) when ``long_term`` is set without ``store``.
LONG_TERM_FILE = "long_term.duckdb"
#: Most hits one ``retrieve()`` returns.
MAX_RETRIEVE = 1_000


def delete_args(index: object, ids: object) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Check ``delete()``'s arguments: integer indices (not bools) and string ids."""
    raw = (index,) if isinstance(index, int) else index
    if not isinstance(raw, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in raw
    ):
        raise TypeError(f"delete() takes an int index or a list of ints, got {index!r}")
    if isinstance(ids, str) or not isinstance(ids, list | tuple):
        raise TypeError(f"delete(ids=...) takes a list of message ids, got {ids!r}")
    if not all(isinstance(i, str) for i in ids):
        raise TypeError(f"delete(ids=...) takes strings, got {ids!r}")
    return tuple(raw), tuple(ids)


def check_retrieve_args(query: object, limit: object) -> None:
    """Check ``retrieve()``'s arguments: a string query and a limit from 1 to 1,000."""
    if not isinstance(query, str):
        raise ValueError(f"query must be a str, got {type(query).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RETRIEVE:
        raise ValueError(f"limit must be an int from 1 to {MAX_RETRIEVE}, got {limit!r}")


def unwrap_short_term(state: Any) -> ShortTermState | None:
    """The short-term actor's state handed over by its supervisor on a restart."""
    if state is None or isinstance(state, ShortTermState):
        return state
    raise TypeError(f"unexpected short-term state {type(state).__name__}")


def check_user_scoped(namespace: Namespace, where: str) -> None:
    """Refuse an agent's namespace without ``user_id``.

    A runtime reads every memory inside its namespace, and a field left unset
    is a wildcard for reads: ``Namespace(agent_id="helper")`` would read the
    memories of every user of that agent.  An agent that serves no user names
    one (a shared ``user_id`` such as ``"shared"`` or ``"system"``).

    Raises:
        ValueError: ``namespace`` has no ``user_id``.
    """
    if namespace.user_id is None:
        raise ValueError(
            f"{where} {namespace} sets no user_id: a runtime reads everything inside its "
            "namespace and an unset field matches every value, so it would read every "
            "user's memories; name the user (Namespace(user_id=..., agent_id=...)), or a "
            "shared one such as user_id='shared' for memories of no user"
        )


def long_term_args(
    store: object,
    long_term: object,
    namespace: object,
    recorder: object,
    embedder: object,
) -> tuple[LongTermMemoryMode | None, RecorderConfig, Namespace]:
    """Check the long-term arguments; return the mode (None: off), config and namespace."""
    if namespace is not None and not isinstance(namespace, Namespace):
        raise TypeError(f"namespace must be an actormem.store.Namespace, got {type(namespace)}")
    if namespace is not None:
        check_user_scoped(namespace, "namespace")
        for field, value in namespace.items():
            if "#" in value:
                raise ValueError(
                    f"namespace {field} {value!r}: '#' is reserved (keyed facts live in "
                    f"'<id>{FACTS_SUFFIX}' namespaces, which no runtime may read as its own)"
                )
    if recorder is not None and not isinstance(recorder, RecorderConfig):
        raise TypeError(f"recorder must be a RecorderConfig, got {type(recorder).__name__}")
    if embedder is not None and not isinstance(embedder, Embedder):
        raise TypeError(f"embedder must implement the Embedder protocol, got {type(embedder)}")
    mode: LongTermMemoryMode | None = None
    if long_term is not None:
        if not isinstance(long_term, LongTermMemoryMode | str):
            raise TypeError(
                f"long_term must be a LongTermMemoryMode, got {type(long_term).__name__}"
            )
        mode = LongTermMemoryMode.parse(long_term)
    elif store is not None:
        mode = LongTermMemoryMode.STATIC_CONTROL
    else:
        given = [
            name
            for name, value in (
                ("namespace", namespace),
                ("recorder", recorder),
                ("embedder", embedder),
            )
            if value is not None
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} only apply to long-term memory: also pass store= "
                "(a path or a MemoryStore) or long_term=LongTermMemoryMode..."
            )
    return mode, recorder or RecorderConfig(), namespace or DEFAULT_NAMESPACE


def journal_args(journal: object, mode: LongTermMemoryMode | None) -> JournalConfig | None:
    """The journal's config (None: no journal); it needs long-term memory."""
    if journal is None or journal is False:
        return None
    if journal is True:
        config = JournalConfig()
    elif isinstance(journal, JournalConfig):
        config = journal
    else:
        raise TypeError(f"journal must be True or a JournalConfig, got {type(journal).__name__}")
    if mode is None:
        raise ValueError(
            "journal= keeps its record in the long-term store: also pass store= "
            "(a path, a postgresql:// URL or a store) or long_term=LongTermMemoryMode..."
        )
    return config


def open_store(
    store: object, session_dir: str | os.PathLike[str], embedder: Embedder | None
) -> tuple[MemoryStore, bool]:
    """The store to use and whether the runtime opened it (and so must close it)."""
    if store is None:
        store = Path(session_dir) / LONG_TERM_FILE
    if isinstance(store, str | os.PathLike):
        return open_store_at(store, embedder=embedder), True
    if isinstance(store, MemoryStore):
        if embedder is not None and embedder is not getattr(store, "embedder", None):
            log.warning(
                "runtime.embedder_ignored",
                reason="embedder= applies only to a store the runtime opens from a path or URL",
            )
        return store, False
    raise TypeError(
        f"store must be a MemoryStore, a path or a postgresql:// URL, got {type(store).__name__}"
    )
