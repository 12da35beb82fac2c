"""Where does the RSS of a store that keeps its memories go?  Soak traffic, parts switchable.

``python -m benchmarks.rssparts --turns 6000 [--no-retrieve] ...`` prints, every
``--every`` turns: RSS (anon), glibc malloc (mallinfo2: in use / free), the
Python heap (tracemalloc, with ``--trace``), DuckDB's ``duckdb_memory()`` and
``pragma database_size`` (file, WAL), the index's numpy arrays and live memories;
at the end the growth per live memory, then RSS again after the runtime and
after DuckDB's connection are closed (what DuckDB held: its own allocator and
C++ objects, most of which ``duckdb_memory()`` does not report).  Python's
small objects live in pymalloc arenas (mmap), outside ``mallinfo2``: "anon -
glibc" is DuckDB's allocator plus those arenas.  ``--wal-by-op`` prints the WAL
bytes written per kind of commit, ``--duck-set`` applies DuckDB settings,
``--no-*`` switch parts of the traffic off.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import random
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from actormem import AutoContextConfig, MemoryRuntime, Msg, Namespace, RecorderConfig
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore

_WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "lagoon",
]


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _Mallinfo2


def _status() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0]) / 1024
    return out


def measure(store: DuckDBStore, trace: bool) -> dict[str, float]:
    gc.collect()
    m = _libc.mallinfo2()
    st = _status()
    cur = store._con.cursor()
    dmem = cur.execute(
        "select tag, memory_usage_bytes, temporary_storage_bytes from duckdb_memory()"
    ).fetchall()
    dsize = cur.execute("pragma database_size").fetchall()
    cols = [d[0] for d in cur.description]
    ds = dict(zip(cols, dsize[0], strict=True))
    cur.close()
    idx = store._index
    np_bytes = sum(v.nbytes for v in vars(idx).values() if isinstance(v, np.ndarray))
    return {
        "rss": st["VmRSS"],
        "anon": st["RssAnon"],
        "file": st["RssFile"],
        "glibc_used": m.uordblks / 2**20 + m.hblkhd / 2**20,
        "glibc_free": m.fordblks / 2**20,
        "glibc_mmap": m.hblkhd / 2**20,
        "py": tracemalloc.get_traced_memory()[0] / 2**20 if trace else float("nan"),
        "duck": sum(r[1] for r in dmem) / 2**20,
        "duck_tags": {r[0]: round(r[1] / 2**20, 1) for r in dmem if r[1]},
        "db_blocks_mb": ds["block_size"] * ds["used_blocks"] / 2**20,
        "wal": ds["wal_size"],
        "duck_mem_usage": ds["memory_usage"],
        "index_np": np_bytes / 2**20,
        "live": store.count(Namespace(user_id="soak")),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=6000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--no-retrieve", action="store_true")
    ap.add_argument("--no-compress", action="store_true")
    ap.add_argument("--no-facts", action="store_true")
    ap.add_argument("--no-saves", action="store_true")
    ap.add_argument("--checkpoint-mb", type=int, default=256)
    ap.add_argument("--checkpoint-every", type=int, default=0, help="CHECKPOINT every N turns")
    ap.add_argument("--session-turns", type=int, default=500)
    ap.add_argument("--duck-set", action="append", default=[])
    ap.add_argument("--wal-by-op", action="store_true")
    ap.add_argument("--sleep", type=float, default=0.0, help="per turn")
    a = ap.parse_args(argv)
    if a.trace:
        tracemalloc.start(1)
    folder = Path(tempfile.mkdtemp(prefix="actormem-rssparts-"))
    rng = random.Random(1)
    store = DuckDBStore(
        folder / "soak.duckdb", embedder=HashEmbedder(64), checkpoint_mb=a.checkpoint_mb
    )
    rt = MemoryRuntime(
        session_dir=folder / "sessions",
        store=store,
        namespace=Namespace(user_id="soak", agent_id="agent"),
        autocontext=False if a.no_compress else AutoContextConfig(msg_threshold=40, last_keep=6),
        recorder=RecorderConfig(batch_seconds=0.1, idle_seconds=5.0),
    )
    for setting in a.duck_set:
        store._wcur.execute(f"SET {setting}")
    rows: list[dict[str, Any]] = []
    snap0: Any = None
    wal: dict[str, list[int]] = {}
    if a.wal_by_op:
        import os
        import sys

        orig = store._commit_txn
        walpath = store.path + ".wal"

        def size() -> int:
            try:
                return os.path.getsize(walpath)
            except OSError:
                return 0

        def commit(cur: Any) -> None:
            f: FrameType | None = sys._getframe(1)
            names: list[str] = []
            while f is not None and len(names) < 4:
                names.append(f.f_code.co_name)
                f = f.f_back
            key = "<".join(names)
            before = size()
            orig(cur)
            e = wal.setdefault(key, [0, 0])
            e[0] += 1
            e[1] += max(0, size() - before)

        store._commit_txn = commit  # type: ignore[method-assign]

        class Proxy:
            def __init__(self, c: Any) -> None:
                self.c = c
                self.log: list[str] = []

            def execute(self, sql: str, *args: Any) -> Any:
                if sql.startswith("BEGIN"):
                    self.log = []
                self.log.append(" ".join(sql.split())[:90])
                if sql.startswith("COMMIT"):
                    before = size()
                    r = self.c.execute(sql, *args)
                    d = size() - before
                    if d > 50_000 and len(wal) < 400 and sum(v[0] for v in wal.values()) % 50 == 0:
                        print(f"  commit +{d / 1024:.0f} KB:", self.log, flush=True)
                    return r
                return self.c.execute(sql, *args)

            def __getattr__(self, k: str) -> Any:
                return getattr(self.c, k)

        store._wcur = Proxy(store._wcur)
    t0 = time.monotonic()
    for i in range(a.turns + 1):
        if i % a.every == 0:
            rt.flush(60)
            r = measure(store, a.trace)
            r["turn"] = i
            r["t"] = time.monotonic() - t0
            rows.append(r)
            if a.trace and len(rows) == max(2, a.turns // a.every // 3 + 1):
                snap0 = tracemalloc.take_snapshot()
            print(
                {k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}, flush=True
            )
        if i == a.turns:
            break
        w = " ".join(rng.sample(_WORDS, 3))
        user = Msg.user(f"turn {i}: I like {w}. What about {rng.choice(_WORDS)}?")
        rt.add(user)
        if i % 3 == 0 and not a.no_retrieve:
            rt.format_for_injection(w)
        reply = Msg.assistant(f"About {w}: noted ({i}).")
        rt.add(reply)
        if not a.no_record:
            rt.record([user, reply])
        rt.on_turn_end()
        if i % 20 == 0 and not a.no_facts:
            rt.save_fact(f"k{i % 50}", w)
        if i % 25 == 0:
            rt.flush(60)
            if not a.no_saves:
                rt.save_session("soak")
        if i % 40 == 0 and not a.no_compress:
            rt.compress_now()
        if i % a.session_turns == a.session_turns - 1:
            rt.on_session_end()
            rt.clear()
            if not a.no_saves:
                rt.save_session("soak")
        if a.checkpoint_every and i % a.checkpoint_every == a.checkpoint_every - 1:
            rt.flush(60)
            store._con.cursor().execute("CHECKPOINT")
        if a.sleep:
            time.sleep(a.sleep)
    rt.flush(60)
    c = store._con.cursor()
    for q in (
        "select kind, count(*), sum(length(content)), max(length(content)), sum(len(tags)), "
        "sum(len(source_ids)), max(len(source_ids)), sum(length(metadata::varchar)) "
        "from memories group by kind",
        "select op, count(*), sum(length(coalesce(old_content, ''))), "
        "sum(length(coalesce(new_content, ''))) from history group by op",
        "select count(*), sum(length(content)) from activity_log",
    ):
        print(q[:60], c.execute(q).fetchall(), flush=True)
    c.execute("CHECKPOINT")
    r = measure(store, a.trace)
    r["turn"] = -1
    print(
        "after CHECKPOINT",
        {k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()},
        flush=True,
    )
    first, last = rows[len(rows) // 3], rows[-1]
    dl = max(1, last["live"] - first["live"])
    print(f"per live memory over turns {first['turn']}..{last['turn']} (+{dl} live):")
    for k in ("rss", "anon", "glibc_used", "glibc_free", "py", "duck", "db_blocks_mb", "index_np"):
        print(f"  {k:13s} {1024 * (last[k] - first[k]) / dl:8.2f} KB")
    rest = (last["anon"] - first["anon"]) - (
        last["glibc_used"] + last["glibc_free"] - first["glibc_used"] - first["glibc_free"]
    )
    print(f"  anon - glibc (jemalloc/DuckDB etc) {1024 * rest / dl:8.2f} KB")
    for k, (n, b) in sorted(wal.items(), key=lambda kv: -kv[1][1]):
        print(
            f"  WAL {b / 2**20:8.1f} MB in {n:6d} commits "
            f"({b / max(n, 1) / 1024:7.1f} KB each)  {k}"
        )
    if snap0 is not None:
        snap1 = tracemalloc.take_snapshot()
        for key in ("filename", "lineno"):
            print(f"tracemalloc growth by {key}:")
            for st in snap1.compare_to(snap0, key)[:14]:
                print("   ", st)
    rt.close()
    print("after runtime close", measure_closed(), flush=True)
    store._wcur.close()
    store._con.close()
    time.sleep(1)
    print("after duckdb connection close", measure_closed(), flush=True)
    store.close()
    print("after store close", measure_closed(), flush=True)
    shutil.rmtree(folder, ignore_errors=True)


def measure_closed() -> dict[str, float]:
    gc.collect()
    m = _libc.mallinfo2()
    st = _status()
    return {
        "anon": st["RssAnon"],
        "glibc_used": (m.uordblks + m.hblkhd) / 2**20,
        "glibc_free": m.fordblks / 2**20,
    }


if __name__ == "__main__":
    main()
