"""Held-out tuning of the second stage of hybrid search on LoCoMo.

Every conversation of ``../shared/data/locomo_dev.json`` is loaded as in
``bench_locomo.py``; each setting of a small grid over ``soft_match_weight``,
``speaker_weight``, ``time_weight`` and ``soft_match_full`` is scored on every
conversation.
Then, leaving one conversation out at a time, the setting with the best mean
recall@10 (ties: recall@5, then recall@1) on the other four is picked and
measured on the one left out; the held-out figures are the question-weighted
mean over the five rotations.  The library's defaults are reported beside,
on all five conversations.

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
from benchmarks.bench_locomo import DEFAULT_DATA, KS, _turns

__all__ = ["main"]

GRID: dict[str, tuple[float, ...]] = {
    "soft_match_weight": (0.0, 0.25, 0.5, 0.75, 1.0),
    "speaker_weight": (0.0, 0.2, 0.4, 0.6),
    "time_weight": (0.0, 0.2, 0.4, 0.6),
    "soft_match_full": (0.5, 0.6, 0.7),
}

Sums = dict[int, float]


def _settings() -> list[dict[str, float]]:
    names = list(GRID)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*GRID.values())]


def _score(data: list[dict[str, Any]], configs: list[SearchConfig]) -> list[tuple[int, list[Sums]]]:
    """Per conversation: (questions, recall sums per config)."""
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
                sums: list[Sums] = [dict.fromkeys(KS, 0.0) for _ in configs]
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
            out.append((n, sums))
    return out


def _mean(per_conv: list[tuple[int, list[Sums]]], convs: list[int], i: int) -> dict[int, float]:
    n = sum(per_conv[c][0] for c in convs)
    return {k: sum(per_conv[c][1][i][k] for c in convs) / max(n, 1) for k in KS}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the held-out tuning and print the picks and figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        msg = f"LoCoMo data not found at {args.data}; skipping"
        print(msg)
        return {"skipped": msg}
    data = json.loads(args.data.read_text())
    settings = _settings()
    configs = [SearchConfig(**s) for s in settings] + [SearchConfig()]
    default = len(configs) - 1
    first_stage = settings.index(
        {**settings[0], "soft_match_weight": 0.0, "speaker_weight": 0.0, "time_weight": 0.0}
    )
    per_conv = _score(data, configs)
    everyone = list(range(len(data)))
    held: Sums = dict.fromkeys(KS, 0.0)
    picks = []
    for out in everyone:
        train = [c for c in everyone if c != out]

        def key(i: int, train: list[int] = train) -> tuple[float, float, float]:
            r = _mean(per_conv, train, i)
            return (round(r[10], 4), round(r[5], 4), round(r[1], 4))

        best = max(range(len(settings)), key=key)
        test = _mean(per_conv, [out], best)
        picks.append({"held_out": data[out]["sample_id"], **settings[best], "test": test})
        for k in KS:
            held[k] += test[k] * per_conv[out][0]
    n_all = sum(n for n, _ in per_conv)
    result = {
        "held_out": {f"recall@{k}": round(v / n_all, 4) for k, v in held.items()},
        "default_all": {
            f"recall@{k}": round(v, 4) for k, v in _mean(per_conv, everyone, default).items()
        },
        "first_stage_all": {
            f"recall@{k}": round(v, 4) for k, v in _mean(per_conv, everyone, first_stage).items()
        },
        "picks": picks,
    }
    for p in picks:
        cells = " ".join(f"R@{k}={p['test'][k]:.3f}" for k in KS)
        print(
            f"held out {p['held_out']}: soft_match_weight={p['soft_match_weight']} "
            f"speaker_weight={p['speaker_weight']} time_weight={p['time_weight']} "
            f"soft_match_full={p['soft_match_full']}  {cells}"
        )
    for name in ("held_out", "default_all", "first_stage_all"):
        print(f"{name:<16}", " ".join(f"{k}={v:.3f}" for k, v in result[name].items()))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
