"""End to end on LoCoMo, as the model sees it: answers in the injected block.

Each conversation of ``../shared/data/locomo_dev.json`` is recorded through
the runtime itself -- a :class:`~actormem.MemoryRuntime` with its own DuckDB
file, the default offline recorder (episodes and rule-based facts) -- one
``record(Msg.user(text, name=speaker))`` per turn, in order, then
``flush()``.  For every question of categories 1-4 whose answer appears
verbatim (case-insensitive) in some turn of the conversation, the
``<long_term_memory>`` block is built with
``format_for_injection(question, max_tokens=800)`` and the question counts as
answered when the answer text is in the block.  Evidence recall
(``bench_locomo.py``) asks whether the search finds the right turns; this
asks whether the words the model needs reach its prompt.

The recorded turns carry no session dates (``record()`` stamps them now), as
a user of the runtime would record them live.

The library's default search weights were picked with all five dev
conversations in view, so the default figure is a dev figure.  With
``--held-out`` each conversation is also measured with the weights that
``tune_locomo.py`` picked on the *other four* (its leave-one-conversation-out
picks, read from ``results/tune_locomo.json``: run ``python -m
benchmarks.tune_locomo`` first), and that held-out figure is printed beside
the dev one.

Usage::

    python -m benchmarks.bench_locomo_e2e [--quick] [--held-out] [--data PATH] [--max-tokens N]

The data file is read in place and never copied; without it the benchmark
prints a note and returns ``{"skipped": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from actormem import MemoryRuntime, Msg
from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import DuckDBStore, Namespace, SearchConfig
from benchmarks.bench_locomo import CATEGORIES, DEFAULT_DATA

__all__ = ["answerable", "conversation_turns", "main"]

RESULTS = Path(__file__).resolve().parent / "results"
TUNE_RESULTS = RESULTS / "tune_locomo.json"


def conversation_turns(conv: dict[str, Any]) -> list[tuple[str, str]]:
    """``(speaker, text)`` of every turn, in order (a shared photo's caption appended)."""
    out: list[tuple[str, str]] = []
    n = 1
    while f"session_{n}" in conv:
        for turn in conv[f"session_{n}"]:
            text = str(turn["text"])
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append((str(turn["speaker"]), text))
        n += 1
    return out


def answerable(sample: dict[str, Any], turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Questions of categories 1-4 whose answer appears verbatim in a turn."""
    texts = [t.casefold() for _, t in turns]
    out = []
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES or "answer" not in qa:
            continue
        answer = str(qa["answer"]).strip().casefold()
        if answer and any(answer in t for t in texts):
            out.append(qa)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print a table, write ``results/bench_locomo_e2e.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two conversations only")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--max-tokens", type=int, default=800)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--show-misses", type=int, default=0, help="print N missed questions")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also measure each conversation with the weights tuned on the other four",
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
    started = time.perf_counter()
    result = _run(data, embedder, {}, args.max_tokens)
    result["seconds"] = round(time.perf_counter() - started, 2)
    _print(result, f"default search weights (dev: chosen with all {len(data)} in view)")
    for sid, q, a in result.pop("misses")[: args.show_misses]:
        print(f"  miss {sid}: {q!r} -> {a!r}")
    if args.held_out:
        picks = _held_out_picks(TUNE_RESULTS, data)
        held = _run(data, embedder, picks, args.max_tokens)
        held.pop("misses")
        held["weights"] = {sid: msgspec.structs.asdict(c) for sid, c in picks.items()}
        _print(held, "held out: each conversation with the weights tuned on the other four")
        result["held_out"] = held
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "bench_locomo_e2e_quick.json" if args.quick else "bench_locomo_e2e.json"
        (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    return result


def _held_out_picks(path: Path, data: list[dict[str, Any]]) -> dict[str, SearchConfig]:
    """The weights ``tune_locomo.py`` picked for each conversation on the other four."""
    if not path.is_file():
        raise SystemExit(f"{path} not found: run python -m benchmarks.tune_locomo first")
    tuned = json.loads(path.read_text())
    fields = set(SearchConfig.__struct_fields__)
    picks = {
        str(p["held_out"]): SearchConfig(**{k: v for k, v in p.items() if k in fields})
        for p in tuned["picks"]
    }
    missing = [str(s["sample_id"]) for s in data if str(s["sample_id"]) not in picks]
    if missing:
        raise SystemExit(f"{path} has no held-out pick for {missing}: run tune_locomo again")
    return picks


def _run(
    data: list[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    configs: dict[str, SearchConfig],
    max_tokens: int,
) -> dict[str, Any]:
    """Record every conversation through a runtime and count answers in the block.

    ``configs`` maps a conversation's sample id to the search weights of its
    store (the library's defaults when absent).
    """
    per_conv: dict[str, dict[str, int]] = {}
    per_cat: dict[str, list[int]] = {name: [0, 0] for name in CATEGORIES.values()}
    block_tokens: list[int] = []
    misses: list[tuple[str, str, str]] = []
    record_s = 0.0
    n_turns = 0
    with tempfile.TemporaryDirectory() as tmp:
        for sample in data:
            sid = str(sample["sample_id"])
            turns = conversation_turns(sample["conversation"])
            n_turns += len(turns)
            questions = answerable(sample, turns)
            hit = 0
            store = DuckDBStore(
                Path(tmp) / f"{sid}.duckdb", embedder=embedder, search_config=configs.get(sid)
            )
            with MemoryRuntime(
                session_dir=Path(tmp) / sid,
                store=store,
                namespace=Namespace(user_id=sid),
            ) as rt:
                t0 = time.perf_counter()
                for speaker, text in turns:
                    rt.record(Msg.user(text, name=speaker))
                rt.flush()
                record_s += time.perf_counter() - t0
                for qa in questions:
                    block = rt.format_for_injection(qa["question"], max_tokens=max_tokens)
                    block_tokens.append(len(block) // 4)
                    found = str(qa["answer"]).strip().casefold() in block.casefold()
                    hit += found
                    cat = per_cat[CATEGORIES[qa["category"]]]
                    cat[0] += found
                    cat[1] += 1
                    if not found:
                        misses.append((sid, qa["question"], str(qa["answer"])))
            store.close()
            per_conv[sid] = {"answered": hit, "questions": len(questions)}
    total = sum(v["questions"] for v in per_conv.values())
    answered = sum(v["answered"] for v in per_conv.values())
    return {
        "benchmark": "locomo_answer_in_block",
        "conversations": len(data),
        "turns": n_turns,
        "questions": total,
        "answered": answered,
        "answer_rate": round(answered / max(total, 1), 4),
        "per_category": {
            name: {"answered": a, "questions": n, "rate": round(a / max(n, 1), 4)}
            for name, (a, n) in per_cat.items()
        },
        "per_conversation": per_conv,
        "max_tokens": max_tokens,
        "block_tokens_mean": round(sum(block_tokens) / max(len(block_tokens), 1), 1),
        "record_turns_per_s": round(n_turns / max(record_s, 1e-9), 1),
        "misses": misses,
    }


def _print(result: dict[str, Any], title: str) -> None:
    print(
        f"LoCoMo end to end, {title}: {result['conversations']} conversations, "
        f"{result['turns']} turns recorded, {result['questions']} questions with a verbatim "
        f"answer; block <= {result['max_tokens']} tokens"
    )
    print(f"{'':<14}{'answered':>10}{'questions':>11}{'rate':>8}")
    for name, row in result["per_category"].items():
        print(f"{name:<14}{row['answered']:>10}{row['questions']:>11}{row['rate']:>8.3f}")
    for sid, row in result["per_conversation"].items():
        rate = row["answered"] / max(row["questions"], 1)
        print(f"{sid:<14}{row['answered']:>10}{row['questions']:>11}{rate:>8.3f}")
    print(
        f"{'all':<14}{result['answered']:>10}{result['questions']:>11}{result['answer_rate']:>8.3f}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
