"""``actormem memories``: search and analyse a long-term store (DuckDB or PostgreSQL).

Also the helpers the other store commands share: opening the store ``--db``
names (:func:`open_db`) and a progress bar for long operations.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from actormem._cli_chat import UsageError as _UsageError
from actormem._cli_embedder import embedder_named

__all__ = ["DB_HELP", "cmd_memories", "open_db"]


def _namespace(args: argparse.Namespace) -> Any:
    from actormem.store import Namespace

    if not (args.user or args.agent or args.run):
        raise _UsageError("name a namespace with --user, --agent and/or --run")
    return Namespace(user_id=args.user, agent_id=args.agent, run_id=args.run)


def _progress_bar(console: Console, label: str) -> tuple[Any, Any]:
    from rich.progress import Progress

    progress = Progress(console=console, transient=True)
    task = progress.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return progress, update


DB_HELP = "the long-term store: a DuckDB file or a postgresql:// URL (default: actormem.duckdb)"


def open_db(
    db: str,
    *,
    create: bool = False,
    embedder: str | None = None,
    recorded: bool = True,
    **kwargs: Any,
) -> Any:
    """The store ``--db`` names: a ``postgresql://`` URL or a DuckDB file (which
    must exist unless ``create``), opened with the embedder ``--embedder`` names,
    else the bundled one, else (``recorded``) the one the store recorded
    (:mod:`actormem._cli_embedder`)."""
    from actormem.store import EmbedderMismatchError, is_dsn, open_store

    if not is_dsn(db) and not create and not Path(db).exists():
        raise _UsageError(f"no memory store at {db} (pass --db PATH or --db postgresql://...)")
    if embedder is not None:
        kwargs["embedder"] = embedder_named(embedder)
        return open_store(db, **kwargs)
    try:
        return open_store(db, **kwargs)
    except EmbedderMismatchError as exc:
        if not recorded or exc.stored_name is None:
            raise
        try:
            kwargs["embedder"] = embedder_named(exc.stored_name, exc.stored_dim)
        except _UsageError as why:
            raise _UsageError(
                f"{exc}; the CLI cannot build {exc.stored_name!r} by itself ({why}): pass "
                "--embedder"
            ) from None
        return open_store(db, **kwargs)


def cmd_memories(args: argparse.Namespace, console: Console) -> int:
    if args.action == "reembed":
        return _reembed(args, console)
    ns = _namespace(args)
    embedder = getattr(args, "embedder", None)
    with open_db(args.db, create=args.action == "import", embedder=embedder) as store:
        if args.action == "search":
            if not args.query:
                raise _UsageError("memories search needs a query")
            hits = store.search(args.query, ns, limit=args.limit)
            if args.json:
                print(json.dumps([msgspec.to_builtins(h) for h in hits]))
                return 0
            table = Table(title=f"{len(hits)} hit(s) for {args.query!r}")
            for col in ("score", "kind", "created", "content"):
                table.add_column(col)
            for h in hits:
                when = dt.datetime.fromtimestamp(h.memory.created_at).strftime("%Y-%m-%d")
                table.add_row(f"{h.score:.3f}", h.memory.kind, when, h.memory.content[:120])
            console.print(table)
        elif args.action == "stats":
            stats = store.stats(ns)
            if args.json:
                print(json.dumps([msgspec.to_builtins(st) for st in stats]))
                return 0
            table = Table(title="long-term memory by namespace")
            for col in ("namespace", "live", "deleted", "superseded", "kinds", "accesses"):
                table.add_column(col)
            for st in stats:
                name = "/".join(v for v in msgspec.structs.astuple(st.namespace) if v)
                kinds = ", ".join(f"{k}={v}" for k, v in sorted(st.kinds.items()))
                table.add_row(
                    name,
                    str(st.live),
                    str(st.deleted),
                    str(st.superseded),
                    kinds,
                    str(st.total_access),
                )
            console.print(table)
        elif args.action == "timeline":
            rows = store.timeline(ns)
            if args.json:
                print(json.dumps(rows))
                return 0
            table = Table(title="memories per day")
            table.add_column("day")
            table.add_column("count", justify="right")
            for day, count in rows:
                table.add_row(str(day), str(count))
            console.print(table)
        elif args.action == "export":
            if not args.path:
                raise _UsageError("memories export needs a PATH (.parquet or .jsonl)")
            progress, update = _progress_bar(console, "exporting")
            with progress:
                rep = store.export(ns, args.path, overwrite=args.force, progress=update)
            if args.json:
                print(json.dumps(msgspec.to_builtins(rep)))
            else:
                console.print(f"exported {rep.memories} memories to {rep.path} ({rep.format})")
        elif args.action == "import":
            if not args.path:
                raise _UsageError("memories import needs a PATH (.parquet or .jsonl)")
            progress, update = _progress_bar(console, "importing")
            with progress:
                irep = store.import_(args.path, namespace=ns, progress=update)
            console.print(
                f"imported {irep.added} memories ({irep.merged} merged, {irep.copied} copied "
                f"with new ids, {irep.skipped} skipped: in the store already) from {irep.path}"
            )
        elif args.action == "forget":
            if not args.yes:
                raise _UsageError("memories forget deletes for good: add --yes to confirm")
            from actormem.recorder._facts import forget_with_facts, keyed_rows_in

            # the scope and its keyed facts (a sibling namespace): what the explorer's
            # "forget this user" removes too; the keyed facts of the scope's agents,
            # runs and sessions are inside it, counted before they go
            keyed = keyed_rows_in(store, ns)
            reports = forget_with_facts(store, ns)
            keyed += reports[1].memories
            memories = sum(r.memories for r in reports)
            history = sum(r.history for r in reports)
            if args.json:
                print(
                    json.dumps(
                        {
                            "namespace": msgspec.to_builtins(ns),
                            "memories": memories,
                            "history": history,
                            "keyed_facts": keyed,
                        }
                    )
                )
            else:
                console.print(
                    f"forgot {memories} memories ({keyed} of them keyed facts) "
                    f"and {history} history rows"
                )
    return 0


def _reembed(args: argparse.Namespace, console: Console) -> int:
    """Rebuild every vector with the bundled embedder (after a model change)."""
    from actormem.store import EmbedderMismatchError

    progress, update = _progress_bar(console, "re-embedding")
    with progress:
        try:
            store = open_db(args.db, recorded=False)
        except EmbedderMismatchError as exc:
            if not args.json:
                console.print(Text(f"{exc}: switching the store to the bundled embedder", "dim"))
            with open_db(args.db, on_embedder_mismatch="reembed", progress=update) as store:
                rep = store.last_reembed
        else:
            with store:
                rep = store.reembed(progress=update)
    assert rep is not None
    result = msgspec.to_builtins(rep)
    if args.json:
        print(json.dumps(result))
    else:
        console.print(
            f"re-embedded {result['memories']} memories with {result['embedder']} "
            f"({result['dim']} dimensions)"
        )
    return 0
