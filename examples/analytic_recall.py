"""Analytic recall: ask SQL-style questions of long-term memory.

DuckDB is the store of record, so memory can be counted, grouped and
exported, not only searched.

Run: python examples/analytic_recall.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from actormem.store import DuckDBStore, Namespace, NewMemory

folder = Path(tempfile.mkdtemp(prefix="actormem-analytics-"))
with DuckDBStore(folder / "memory.duckdb") as store:
    for agent in ("planner", "booker"):
        for run in ("run-1", "run-2"):
            ns = Namespace(user_id="ada", agent_id=agent, run_id=run)
            store.add_many(
                ns,
                [
                    NewMemory(
                        content=f"{agent} {run}: Ada prefers aisle seats", tags=("preference",)
                    ),
                    NewMemory(
                        content=f"{agent} {run}: flight LIS-OSL booked for 14 March",
                        kind="episode",
                        tags=("booking", "flight"),
                    ),
                ],
            )
    ada = Namespace(user_id="ada")
    print("memories by agent:", store.counts_by(ada, "agent_id"))
    print("memories by run:  ", store.counts_by(ada, "run_id"))
    print("by kind:          ", store.counts_by(ada, "kind"))
    print("top tags:         ", store.top_tags(ada, limit=3))
    print("per-day timeline: ", store.timeline(ada))
    hits = store.search("which seat does Ada like", ada, limit=3)
    print("search:           ", [(round(h.score, 3), h.memory.content) for h in hits])
    print(
        "most accessed:    ",
        [(m.access_count, m.content[:40]) for m in store.most_accessed(ada, limit=2)],
    )
    report = store.export(ada, folder / "ada.parquet")
    print(f"exported {report.memories} memories to {report.path}")
