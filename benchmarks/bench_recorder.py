"""Long-term recorder benchmark: recording throughput, add() latency while recording, injection.

Side by side in one run:

* recording throughput with the offline rule extractor and the bundled
  WordLlama embedder: turns submitted with ``record()`` until ``flush()``
  returns, batched (the default ``RecorderConfig``) vs one turn per batch
  (``batch_count=1``: one extraction and one transaction per turn);
* ``runtime.add()`` latency (the call itself, and add-to-visible: ``add`` then
  ``size()``) with the recorder idle vs while another thread records turns
  into the same runtime;
* ``format_for_injection`` of 20 hits (the formatting alone), and the whole
  ``runtime.format_for_injection`` (search + format) over the recorded store;
* precision and recall per category of the offline fact extractor on the
  hand-written labelled statements (``fact_corpus.py``: the corpus the rules
  were written against, two sets written after them that then prompted fixes,
  and a third never used to change the rules).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, Msg
from actormem.recorder import RecorderConfig, format_for_injection
from actormem.store import MemoryRecord, Namespace, SearchHit
from benchmarks._common import print_table, summary, write_results
from benchmarks.fact_corpus import CORPUS, evaluate, load, print_report

_FACTS = (
    "My name is {name}.",
    "I live in {city} and I work at {org}.",
    "I really love {food}, but I don't like {other}.",
    "I have a dentist appointment on May {day}th.",
    "Can you help me plan a trip to {city} next month?",
    "What is a good recipe with {food}?",
    "Please remember that my locker number is {day}.",
    "Thanks, that was helpful!",
)
_NAMES = ("Ada", "Bob", "Chen", "Dana", "Eli", "Farah", "Gus", "Hana")
_CITIES = ("Paris", "Berlin", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quebec")
_ORGS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli")
_FOODS = ("green tea", "sushi", "dark chocolate", "lentil soup", "ramen", "olives")


def _turns(n: int) -> list[list[Msg]]:
    out = []
    for i in range(n):
        # One user: identity facts change rarely (a move every 2,500 turns), the
        # topics of conversation vary.
        text = _FACTS[i % len(_FACTS)].format(
            name=_NAMES[0],
            city=_CITIES[(i // 2_500) % len(_CITIES)],
            org=_ORGS[(i // 5_000) % len(_ORGS)],
            food=_FOODS[i % len(_FOODS)],
            other=_FOODS[(i + 2) % len(_FOODS)],
            day=i % 28 + 1,
        )
        out.append(
            [
                Msg.user(f"{text} (turn {i})"),
                Msg.assistant(f"Understood. Reply {i} with a few words of context."),
            ]
        )
    return out


def bench_throughput(n: int, repeats: int, batch_count: int) -> dict[str, Any]:
    rates: list[float] = []
    for _ in range(repeats):
        turns = _turns(n)
        with tempfile.TemporaryDirectory() as d:
            config = RecorderConfig(batch_count=batch_count, idle_seconds=None)
            with MemoryRuntime(session_dir=d, store=Path(d) / "m.duckdb", recorder=config) as rt:
                rt.retrieve("warm up the embedder")
                t0 = time.perf_counter()
                for t in turns:
                    rt.record(t)
                rt.flush(timeout=600)
                rates.append(n / (time.perf_counter() - t0))
    return summary(rates)


def _add_latency(rt: MemoryRuntime, n: int) -> tuple[list[float], list[float]]:
    call_us: list[float] = []
    visible_us: list[float] = []
    for i in range(n):
        m = Msg.user(f"latency probe {i}")
        t0 = time.perf_counter()
        rt.add(m)
        t1 = time.perf_counter()
        if i % 4 == 0:  # every 4th add also reads its write back
            rt.size()
            visible_us.append((time.perf_counter() - t0) * 1e6)
        call_us.append((t1 - t0) * 1e6)
    return call_us, visible_us


def bench_add_latency(n: int, record_turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        config = RecorderConfig(idle_seconds=None)
        with MemoryRuntime(session_dir=d, store=Path(d) / "m.duckdb", recorder=config) as rt:
            rt.retrieve("warm up")
            _add_latency(rt, 2_000)  # warm-up
            rt.clear()
            idle_call, idle_visible = _add_latency(rt, n)
            rt.clear()
            turns = _turns(record_turns)
            done = threading.Event()

            def recorder_load() -> None:
                for i, t in enumerate(turns):
                    rt.record(t)
                    if i % 200 == 199:
                        time.sleep(0.002)
                done.set()

            th = threading.Thread(target=recorder_load)
            th.start()
            time.sleep(0.05)
            busy_call, busy_visible = _add_latency(rt, n)
            th.join()
            overlapped = rt.recording_stats()["pending"] > 0 or not done.is_set()
            rt.flush(timeout=600)
    return {
        "idle_add_call_us": summary(idle_call),
        "recording_add_call_us": summary(busy_call),
        "idle_add_visible_us": summary(idle_visible),
        "recording_add_visible_us": summary(busy_visible),
        "recording_still_running_at_end": overlapped,
    }


def _hits(n: int) -> list[SearchHit]:
    ns = Namespace(user_id="u")
    out = []
    for i in range(n):
        rec = MemoryRecord(
            id=f"m{i}",
            namespace=ns,
            kind="fact" if i % 3 else "episode",
            content=f"User memory {i}: " + "details about plans, places and people " * (i % 4 + 1),
            content_hash="h",
            importance=0.5,
            created_at=1_735_689_600.0 + i * 3_600,
        )
        out.append(
            SearchHit(memory=rec, score=1 - i / 100, bm25=0.0, cosine=0.0, fused=0.0, relevance=0.0)
        )
    return out


def bench_injection(runs: int, store_turns: int) -> dict[str, Any]:
    pure: list[float] = []
    for r in range(runs):
        hits = _hits(20)
        if r % 2:  # half the runs with texts the token counter has not cached
            hits = [
                msgspec_replace(h, f"fresh text {r}-{i} " + h.memory.content)
                for i, h in enumerate(hits)
            ]
        t0 = time.perf_counter()
        format_for_injection(hits, max_tokens=800)
        pure.append((time.perf_counter() - t0) * 1e3)
    full: list[float] = []
    with (
        tempfile.TemporaryDirectory() as d,
        MemoryRuntime(session_dir=d, store=Path(d) / "m.duckdb") as rt,
    ):
        for t in _turns(store_turns):
            rt.record(t)
        rt.flush(timeout=600)
        queries = [f"where does {name} live and what food?" for name in _NAMES]
        for i in range(max(50, runs // 10)):
            t0 = time.perf_counter()
            rt.format_for_injection(queries[i % len(queries)])
            full.append((time.perf_counter() - t0) * 1e3)
    return {"format_20_hits_ms": summary(pure), "retrieve_and_format_ms": summary(full)}


def msgspec_replace(hit: SearchHit, content: str) -> SearchHit:
    import msgspec

    return msgspec.structs.replace(hit, memory=msgspec.structs.replace(hit.memory, content=content))


def bench_extraction() -> dict[str, Any]:
    """Precision and recall per category of the offline extractor on the labelled sets."""
    out: dict[str, Any] = {}
    sets = ("facts_corpus", "facts_heldout", "facts_heldout2", "facts_heldout3")
    for name in sets:
        path = CORPUS.parent / f"{name}.tsv"
        res = evaluate(load(path))
        print(f"\n{name} ({path.name})")
        print_report(res)
        out[name] = {k: v for k, v in res.items() if k not in ("misses", "wrong")}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = ap.parse_args(argv)
    n = 2_000 if args.quick else 10_000
    repeats = 1 if args.quick else 3
    batched = bench_throughput(n, repeats, RecorderConfig().batch_count)
    single = bench_throughput(min(n, 1_000), 1, 1)
    lat = bench_add_latency(2_000 if args.quick else 10_000, n)
    inj = bench_injection(200 if args.quick else 1_000, 1_000 if args.quick else 5_000)
    extraction = bench_extraction()
    res = {
        "turns": n,
        "extraction": extraction,
        "throughput_batched_turns_per_s": batched,
        "throughput_one_per_batch_turns_per_s": single,
        "add_latency": lat,
        "injection": inj,
    }
    rows = [
        [
            "record+flush turns/s, offline (p50)",
            batched["p50"],
            single["p50"],
            "one turn per batch",
            ">= 2,000",
        ],
        [
            "add() call p50 (us)",
            lat["recording_add_call_us"]["p50"],
            lat["idle_add_call_us"]["p50"],
            "recorder idle",
            "unchanged",
        ],
        [
            "add() call p99 (us)",
            lat["recording_add_call_us"]["p99"],
            lat["idle_add_call_us"]["p99"],
            "recorder idle",
            "unchanged",
        ],
        [
            "add-to-visible p50 (us)",
            lat["recording_add_visible_us"]["p50"],
            lat["idle_add_visible_us"]["p50"],
            "recorder idle",
            "unchanged",
        ],
        [
            "add-to-visible p99 (us)",
            lat["recording_add_visible_us"]["p99"],
            lat["idle_add_visible_us"]["p99"],
            "recorder idle",
            "unchanged",
        ],
        [
            "format_for_injection, 20 hits p50 (ms)",
            inj["format_20_hits_ms"]["p50"],
            inj["format_20_hits_ms"]["p99"],
            "(p99)",
            "< 5",
        ],
        [
            "retrieve + format p50 (ms)",
            inj["retrieve_and_format_ms"]["p50"],
            inj["retrieve_and_format_ms"]["p99"],
            "(p99)",
            "-",
        ],
    ]
    print_table(
        f"recorder ({n:,} turns, WordLlama embedder)",
        ["metric", "actormem", "baseline", "baseline is", "goal"],
        rows,
    )
    path = write_results("recorder", res)
    print(f"results: {path}")
    return res


if __name__ == "__main__":
    main()
