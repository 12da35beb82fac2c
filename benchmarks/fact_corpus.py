"""Precision and recall of the offline fact extractor on a hand-written corpus.

``benchmarks/data/facts_corpus.tsv`` holds over 300 statements written by
hand, in many phrasings, each labelled with the category of the fact it
states (``name``, ``home``, ``work``, ``family``, ``pet``, ``diet``,
``health``, ``like``, ``dislike``, ``plan``, ``assistant``, ...) and the
words that fact must contain (``!word``: must not contain; several expected
facts separated by ``;``), or ``none`` for questions, requests, small talk
and hypotheticals, which must give no fact.  Negations ("I don't eat meat
anymore") and corrections ("we moved from Paris to Lyon", "not in Bergen
anymore, we're in Oslo now") are among them.

A statement is *recalled* when every expected fact is matched by an
extracted fact of the labelled category (its first tag) that has the
expected words.  An extracted fact is *correct* when it matches one of its
statement's expectations (category and words).  Precision is correct facts
over all facts extracted, per category of the extracted fact; recall is
recalled statements over labelled statements, per labelled category.

Usage::

    python -m benchmarks.fact_corpus [--show-misses]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from actormem.recorder import RuleExtractor

__all__ = ["CORPUS", "Statement", "evaluate", "load", "main"]

CORPUS = Path(__file__).resolve().parent / "data" / "facts_corpus.tsv"

#: (category, [(required words, forbidden words)], text)
Statement = tuple[str, list[tuple[list[str], list[str]]], str]


def load(path: Path = CORPUS) -> list[Statement]:
    """The labelled statements of the corpus file."""
    out: list[Statement] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        category, expected, text = line.split("\t")
        facts: list[tuple[list[str], list[str]]] = []
        for part in expected.split(";"):
            words = [w.strip() for w in part.split(",") if w.strip()]
            if words:
                facts.append(
                    (
                        [w.casefold() for w in words if not w.startswith("!")],
                        [w[1:].casefold() for w in words if w.startswith("!")],
                    )
                )
        out.append((category, facts, text))
    return out


def _matches(content: str, want: tuple[list[str], list[str]]) -> bool:
    low = content.casefold()
    need, avoid = want
    return all(w in low for w in need) and not any(w in low for w in avoid)


def evaluate(statements: list[Statement], extractor: Any = None) -> dict[str, Any]:
    """Per-category precision and recall of ``extractor`` (the offline rules by default)."""
    ex = extractor or RuleExtractor()
    labelled: dict[str, int] = defaultdict(int)
    recalled: dict[str, int] = defaultdict(int)
    extracted: dict[str, int] = defaultdict(int)
    correct: dict[str, int] = defaultdict(int)
    misses: list[str] = []
    wrong: list[str] = []
    for category, expected, text in statements:
        facts = ex.from_text(text)
        if category != "none":
            labelled[category] += 1
            ok = all(
                any(f.tags[:1] == (category,) and _matches(f.content, want) for f in facts)
                for want in expected
            )
            recalled[category] += ok
            if not ok:
                misses.append(f"[{category}] {text!r} -> {[f.content for f in facts]}")
        for f in facts:
            cat = f.tags[0] if f.tags else "?"
            extracted[cat] += 1
            good = cat == category and any(_matches(f.content, w) for w in expected)
            correct[cat] += good
            if not good:
                wrong.append(f"[{category} -> {cat}] {text!r} -> {f.content!r}")
    cats = sorted(set(labelled) | set(extracted))
    per = {
        c: {
            "statements": labelled[c],
            "recall": round(recalled[c] / labelled[c], 4) if labelled[c] else None,
            "extracted": extracted[c],
            "precision": round(correct[c] / extracted[c], 4) if extracted[c] else None,
        }
        for c in cats
    }
    n_lab = sum(labelled.values())
    n_ext = sum(extracted.values())
    return {
        "statements": len(statements),
        "labelled": n_lab,
        "negatives": len(statements) - n_lab,
        "recall": round(sum(recalled.values()) / max(n_lab, 1), 4),
        "precision": round(sum(correct.values()) / max(n_ext, 1), 4),
        "per_category": per,
        "misses": misses,
        "wrong": wrong,
    }


def print_report(res: dict[str, Any]) -> None:
    """The per-category table."""
    print(
        f"fact corpus: {res['statements']} statements ({res['labelled']} with a fact, "
        f"{res['negatives']} without): recall {res['recall']:.3f}, "
        f"precision {res['precision']:.3f}"
    )
    print(f"{'category':<14}{'stmts':>7}{'recall':>9}{'facts':>7}{'precision':>11}")
    for cat, row in res["per_category"].items():
        rec = "-" if row["recall"] is None else f"{row['recall']:.3f}"
        pre = "-" if row["precision"] is None else f"{row['precision']:.3f}"
        print(f"{cat:<14}{row['statements']:>7}{rec:>9}{row['extracted']:>7}{pre:>11}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Print the table (and, with ``--show-misses``, every miss and wrong fact)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show-misses", action="store_true")
    args = ap.parse_args(argv)
    res = evaluate(load())
    print_report(res)
    if args.show_misses:
        for line in res["misses"]:
            print("  miss", line)
        for line in res["wrong"]:
            print("  wrong", line)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
