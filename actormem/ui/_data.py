"""What the explorer shows, read from the store, the journal folder and the runtime.

Every read goes through the :class:`~actormem.store.MemoryStore` protocol, so
any backend works; two optional store methods (``namespaces`` and
``timeline_by_kind``) give the namespace list and the per-kind timeline when
the backend has them, and the explorer falls back to what the protocol has
when it does not.  Searches pass ``touch=False``: looking at memory never
changes its access counts.  Edits are store calls that leave history rows.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from actormem.journal import (
    DAYS_DIR,
    DREAMS_FILE,
    LOG_FILE,
    MEMORY_FILE,
    NOW_FILE,
    PINNED_TAG,
    JournalPathError,
    JournalStore,
    day_name,
    namespace_folder,
)
from actormem.journal._paths import check_inside
from actormem.recorder import FACTS_SUFFIX, KEYED_KIND, facts_namespace
from actormem.recorder._facts import forget_with_facts
from actormem.store import (
    ForgetReport,
    HistoryRecord,
    LogRecord,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NamespaceStats,
    SearchHit,
    SearchMode,
    WriteResult,
)

if TYPE_CHECKING:
    from actormem.runtime import MemoryRuntime

__all__ = ["EDIT_REASON", "Explorer", "JournalView", "NamespaceRow", "parse_namespace"]

#: The history reason of every edit made in the explorer.
EDIT_REASON: Final = "edited in the memory explorer"
_MAX_NAMESPACES: Final = 500
_JOURNAL_FILES: Final = {
    "now": NOW_FILE,
    "log": LOG_FILE,
    "memory": MEMORY_FILE,
    "dreams": DREAMS_FILE,
}
_MAX_FILE: Final = 2_000_000


@runtime_checkable
class _ListsNamespaces(Protocol):
    def namespaces(self, limit: int = 1000) -> builtins.list[Namespace]: ...


@runtime_checkable
class _TimelineByKind(Protocol):
    def timeline_by_kind(self, namespace: Namespace) -> builtins.list[tuple[str, str, int]]: ...


@dataclass
class NamespaceRow:
    """One concrete namespace with its figures."""

    stats: NamespaceStats
    facts: bool  # a keyed-facts namespace

    @property
    def query(self) -> str:
        return namespace_query(self.stats.namespace)


@dataclass
class JournalView:
    """An agent's journal folder: which files exist and the one asked for."""

    folder: Path | None
    files: list[tuple[str, str]] = field(default_factory=list)  # (key, label)
    days: list[str] = field(default_factory=list)
    selected: str = ""
    text: str | None = None
    entries: list[LogRecord] = field(default_factory=list)


def namespace_query(ns: Namespace) -> str:
    """``user=..&agent=..`` for links (values escaped by the template's urlencode)."""
    from urllib.parse import urlencode

    short = {"user_id": "user", "agent_id": "agent", "run_id": "run", "session_id": "session"}
    return urlencode([(short[k], v) for k, v in ns.items()])


def parse_namespace(params: dict[str, str]) -> Namespace | None:
    """The namespace named by ``user``/``agent``/``run``/``session`` query parameters.

    Raises:
        NamespaceError: a value is not a valid id.
    """
    values = {f"{k}_id": params.get(k) or None for k in ("user", "agent", "run", "session")}
    if not any(values.values()):
        return None
    return Namespace(**values)


class Explorer:
    """Read (and, when allowed, edit) an agent's memory for the web page.

    Args:
        store: the long-term store (``None``: only the live view of a runtime).
        runtime: the running agent (live view, next context, its journal).
        memory_dir: root of the journal folders, when not the runtime's.
    """

    def __init__(
        self,
        store: MemoryStore | None,
        *,
        runtime: MemoryRuntime | None = None,
        memory_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.runtime = runtime
        journal = runtime.journal if runtime is not None else None
        self.memory_dir: Path | None = journal.root if journal is not None else memory_dir
        self.default_namespace: Namespace | None = (
            runtime.namespace if runtime is not None and store is not None else None
        )

    # -- namespaces -------------------------------------------------------------------

    def namespaces(self) -> list[NamespaceRow]:
        """Every concrete namespace with figures (the runtime's scope when the store
        cannot list them), keyed-facts namespaces last."""
        store = self.store
        if store is None:
            return []
        if isinstance(store, _ListsNamespaces):
            concrete = store.namespaces(limit=_MAX_NAMESPACES)
            scopes: list[Namespace] = []
            seen: set[tuple[str, str, str, str]] = set()
            for ns in concrete:
                name, value = ns.items()[0]
                scope = Namespace(**{name: value})
                if scope.key() not in seen:
                    seen.add(scope.key())
                    scopes.append(scope)
        else:
            scopes = [self.default_namespace] if self.default_namespace is not None else []
            scopes += [facts_namespace(s) for s in scopes]
        rows: dict[tuple[str, str, str, str], NamespaceStats] = {}
        for scope in scopes:
            for st in store.stats(scope):
                rows[st.namespace.key()] = st
        out = [
            NamespaceRow(stats=st, facts=any(FACTS_SUFFIX in v for _, v in st.namespace.items()))
            for st in rows.values()
        ]
        out.sort(key=lambda r: (r.facts, -r.stats.live, str(r.stats.namespace)))
        return out[:_MAX_NAMESPACES]

    def pick_namespace(self, params: dict[str, str]) -> Namespace | None:
        """The namespace in the query, else the runtime's, else the largest one."""
        ns = parse_namespace(params)
        if ns is not None:
            return ns
        if self.default_namespace is not None:
            return self.default_namespace
        rows = [r for r in self.namespaces() if not r.facts]
        return rows[0].stats.namespace if rows else None

    # -- memories ---------------------------------------------------------------------

    def _need(self) -> MemoryStore:
        if self.store is None:
            raise LookupError("this explorer has no long-term store")
        return self.store

    def timeline(self, ns: Namespace) -> list[tuple[str, str, int]]:
        """``(day, kind, count)`` of live memories (kind ``all`` when the store
        cannot split by kind)."""
        store = self._need()
        if isinstance(store, _TimelineByKind):
            return store.timeline_by_kind(ns)
        return [(day, "all", n) for day, n in store.timeline(ns)]

    def recent(self, ns: Namespace, limit: int = 50, offset: int = 0) -> list[MemoryRecord]:
        return self._need().list(ns, limit=limit, offset=offset)

    def count(self, ns: Namespace) -> int:
        return self._need().count(ns)

    def search(
        self, query: str, ns: Namespace, mode: SearchMode = "hybrid", limit: int = 10
    ) -> list[SearchHit]:
        """Hits with their score parts; never counts as an access."""
        return self._need().search(query, ns, limit, mode=mode, touch=False)

    def memory(self, ns: Namespace, memory_id: str) -> MemoryRecord | None:
        return self._need().get(ns, memory_id, include_deleted=True)

    def history(self, ns: Namespace, memory_id: str | None = None) -> list[HistoryRecord]:
        return self._need().history(ns, memory_id)

    def facts(self, ns: Namespace) -> list[MemoryRecord]:
        """The keyed facts (``save_fact``) of ``ns``, by key."""
        fns = ns if any(FACTS_SUFFIX in v for _, v in ns.items()) else facts_namespace(ns)
        recs = self._need().list(fns, kinds=[KEYED_KIND], limit=10_000)
        return sorted(recs, key=lambda r: str(r.metadata.get("key", r.content)))

    # -- journal ----------------------------------------------------------------------

    def journal(self, ns: Namespace, what: str = "") -> JournalView:
        """The journal folder of ``ns`` and the file ``what`` (now, log, memory,
        dreams or a day ``YYYY-MM-DD``; default: the first that exists).

        Raises:
            ValueError: ``what`` is none of those.
        """
        view = JournalView(folder=None)
        store = self.store
        if store is not None and isinstance(store, JournalStore):
            try:
                view.entries = store.log_entries(ns)[-200:]
            except Exception:  # a scope (not concrete) has no log of its own
                view.entries = []
        if self.memory_dir is None:
            return view
        try:
            folder = namespace_folder(self.memory_dir, ns)
        except JournalPathError:
            return view
        if not folder.is_dir():
            return view
        view.folder = folder
        view.files = [(k, name) for k, name in _JOURNAL_FILES.items() if (folder / name).is_file()]
        days_dir = folder / DAYS_DIR
        if days_dir.is_dir():
            days = []
            for p in days_dir.glob("*.md"):
                try:
                    days.append(day_name(p.stem))
                except ValueError:
                    continue
            view.days = sorted(days, reverse=True)
        what = what or (view.files[0][0] if view.files else (view.days[0] if view.days else ""))
        if not what:
            return view
        if what in _JOURNAL_FILES:
            path = folder / _JOURNAL_FILES[what]
        else:
            path = folder / DAYS_DIR / f"{day_name(what)}.md"
        path = check_inside(folder.resolve(), path)
        view.selected = what
        if path.is_file():
            with path.open(encoding="utf-8", errors="replace") as f:
                view.text = f.read(_MAX_FILE)
        return view

    # -- edits (only when the server allows them) ---------------------------------------

    def delete(self, ns: Namespace, memory_id: str) -> WriteResult:
        rec = self._live(ns, memory_id)
        return self._need().delete(rec.namespace, memory_id, reason=EDIT_REASON + ": delete")

    def pin(self, ns: Namespace, memory_id: str, pinned: bool = True) -> WriteResult:
        rec = self._live(ns, memory_id)
        tags = tuple(t for t in rec.tags if t != PINNED_TAG)
        if pinned:
            tags = (*tags, PINNED_TAG)
        why = "pin" if pinned else "unpin"
        return self._need().update(
            rec.namespace, memory_id, tags=tags, reason=f"{EDIT_REASON}: {why}"
        )

    def forget_user(self, user_id: str) -> list[ForgetReport]:
        """Remove every memory and history row of ``user_id`` for good (and its keyed facts)."""
        return forget_with_facts(self._need(), Namespace(user_id=user_id))

    def _live(self, ns: Namespace, memory_id: str) -> MemoryRecord:
        from actormem.store import MemoryNotFoundError

        rec = self._need().get(ns, memory_id)
        if rec is None:
            raise MemoryNotFoundError(f"no live memory {memory_id!r} in {ns}")
        return rec
