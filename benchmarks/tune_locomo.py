"""Held-out tuning of the second stage of hybrid search on LoCoMo.

Every conversation of ``../shared/data/locomo_dev.json`` is loaded as in
``bench_locomo.py``; each setting of a small grid over ``soft_match_weight``,
``speaker_weight``, ``time_weight``, ``context_prev_weight`` and
``context_next_weight`` is scored on every conversation.
Then, leaving one conversation out at a time, the setting with the best mean
recall@10 (ties: recall@5, then recall@1) on the other four is picked and
measured on the one left out; the held-out figures are the question-weighted
mean over the five rotations (also per question category, at recall@10).
The library's defaults, the defaults without neighbouring episodes as
context, and the first stage alone are reported beside, on all five
conversations.

Usage::

    python -m benchmarks.tune_locomo [--data PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import DuckDBStore, Namespace, SearchConfig
from benchmarks.bench_locomo import CATEGORIES, DEFAULT_DATA, KS, _turns

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results"

GRID: dict[str, tuple[float, ...]] = {
    "soft_match_weight": (0.25, 0.5, 0.75),
    "speaker_weight": (0.2, 0.4),
    "time_weight": (0.4,),
    "context_prev_weight": (0.75, 1.0, 1.25),
    "context_next_weight": (0.0, 0.1, 0.25),
    "context_prev2_weight": (0.0, 0.2, 0.4),
}

#: Recall sums at each k, plus recall@10 sums per category under ``-category``.
Sums = dict[int, float]


def _settings() -> list[dict[str, Any]]:  # SearchConfig keywords
    names = list(GRID)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*GRID.values())]


def _score(data: list[dict[str, Any]], configs: list[SearchConfig]) -> list[tuple[int, list[Sums]]]:
    """Per conversation: (questions, recall sums per config).

    Keys ``-1`` .. ``-4`` hold the recall@10 sums of categories 1-4, ``-11``
    .. ``-14`` their question counts.
    """
    embedder = WordLlamaEmbedder()
    out: list[tuple[int, list[Sums]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for sample in data:
            ns = Namespace(user_id=str(sample["sample_id"]))
            with DuckDBStore(
                Path(tmp) / f"{sample['sample_id']}.duckdb",
                embedder=embedder,
                touch_flush_interval=None,
            ) as store:
                store.add_many(ns, _turns(sample["conversation"]), dedup=False)
                sums: list[Sums] = [
                    dict.fromkeys((*KS, -1, -2, -3, -4, -11, -12, -13, -14), 0.0) for _ in configs
                ]
                n = 0
                for qa in sample["qa"]:
                    if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                        continue
                    evidence = {e.strip() for e in qa["evidence"]}
                    n += 1
                    for i, cfg in enumerate(configs):
                        hits = store.search(
                            qa["question"], ns, limit=max(KS), config=cfg, touch=False
                        )
                        ids = [h.memory.id for h in hits]
                        for k in KS:
                            sums[i][k] += len(evidence & set(ids[:k])) / len(evidence)
                        cat = int(qa["category"])
                        sums[i][-cat] += len(evidence & set(ids[:10])) / len(evidence)
                        sums[i][-10 - cat] += 1
            out.append((n, sums))
    return out


def _mean(per_conv: list[tuple[int, list[Sums]]], convs: list[int], i: int) -> dict[int, float]:
    n = sum(per_conv[c][0] for c in convs)
    return {k: sum(per_conv[c][1][i][k] for c in convs) / max(n, 1) for k in KS}


def _by_category(
    per_conv: list[tuple[int, list[Sums]]], picked: list[tuple[int, int]]
) -> dict[str, float]:
    """Recall@10 per category over ``(conversation, config)`` pairs."""
    out: dict[str, float] = {}
    for cat, name in CATEGORIES.items():
        hit = sum(per_conv[c][1][i][-cat] for c, i in picked)
        n = sum(per_conv[c][1][i][-10 - cat] for c, i in picked)
        out[name] = round(hit / max(n, 1), 4)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the held-out tuning and print the picks and figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        msg = f"LoCoMo data not found at {args.data}; skipping"
        print(msg)
        return {"skipped": msg}
    data = json.loads(args.data.read_text())
    settings = _settings()
    configs = [SearchConfig(**s) for s in settings] + [
        SearchConfig(),
        SearchConfig(context_prev_weight=0.0, context_next_weight=0.0, context_prev2_weight=0.0),
        SearchConfig(
            rerank_depth=0,
            context_prev_weight=0.0,
            context_next_weight=0.0,
            context_prev2_weight=0.0,
        ),
    ]
    default, no_context, first_stage = len(settings), len(settings) + 1, len(settings) + 2
    per_conv = _score(data, configs)
    everyone = list(range(len(data)))
    held: Sums = dict.fromkeys(KS, 0.0)
    picks = []
    held_pairs: list[tuple[int, int]] = []
    for out in everyone:
        train = [c for c in everyone if c != out]

        def key(i: int, train: list[int] = train) -> tuple[float, float, float]:
            r = _mean(per_conv, train, i)
            return (round(r[10], 4), round(r[5], 4), round(r[1], 4))

        best = max(range(len(settings)), key=key)
        held_pairs.append((out, best))
        test = _mean(per_conv, [out], best)
        picks.append({"held_out": data[out]["sample_id"], **settings[best], "test": test})
        for k in KS:
            held[k] += test[k] * per_conv[out][0]
    n_all = sum(n for n, _ in per_conv)
    result: dict[str, Any] = {
        "held_out": {f"recall@{k}": round(v / n_all, 4) for k, v in held.items()},
        "held_out_recall_at_10_by_category": _by_category(per_conv, held_pairs),
        **{
            name: {f"recall@{k}": round(v, 4) for k, v in _mean(per_conv, everyone, i).items()}
            for name, i in (
                ("default_all", default),
                ("default_no_context_all", no_context),
                ("first_stage_all", first_stage),
            )
        },
        "default_recall_at_10_by_category": _by_category(
            per_conv, [(c, default) for c in everyone]
        ),
        "picks": picks,
    }
    for p in picks:
        cells = " ".join(f"R@{k}={p['test'][k]:.3f}" for k in KS)
        knobs = " ".join(f"{name}={p[name]}" for name in GRID)
        print(f"held out {p['held_out']}: {knobs}  {cells}")
    for name in ("held_out", "default_all", "default_no_context_all", "first_stage_all"):
        print(f"{name:<24}", " ".join(f"{k}={v:.3f}" for k, v in result[name].items()))
    for name in ("held_out_recall_at_10_by_category", "default_recall_at_10_by_category"):
        print(f"{name}:", " ".join(f"{k}={v:.3f}" for k, v in result[name].items()))
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "tune_locomo.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
