"""AutoContext compression core: time per pass, tokens after/before, planted-fact retention.

Two workloads, both with the offline extractive summarizer and the default
:class:`~actormem.compress.AutoContextConfig` (128k window, msg_threshold
100, last_keep 50):

* a synthetic 1,000-message agent conversation: tool calls with small and
  large outputs (build logs), chit-chat, and 50 planted facts (a name, a
  number and a date each) spread over the first 950 messages;
* ``compress_eval.varied``: 1,000 messages where 45 facts (a name and a
  number) are said in passing, each in its own phrasing, inside chatty user
  messages, among tool runs that print large logs;
* ``compress_eval.heldout``: the same with 40 other phrasings, written
  before the summarizer was tuned and never used to change it;
* ``compress_eval.chat``: a LoCoMo-like chat of two friends (640 turns in 20
  dated sessions) dense with everyday news; facts are the news said;
* when ``../shared/data/locomo_dev.json`` exists, each LoCoMo conversation
  as user/assistant turns created at their session's time; "facts" are the
  QA answers (categories 1-4) that appear verbatim in the conversation.

A fact is retained when all of its parts appear in the text of the working
context after compression.  Each workload is compressed two ways: in one
pass over the whole conversation, and "grown" as the runtime does it (the
messages added one by one, a pass each time a threshold is reached, so
later passes summarize the earlier summary again).  Time per pass is one :func:`compress` call
(all strategy steps until within budget), measured over repeats with a
warm token counter (the actor counts each message once as it arrives), plus
the first call with a cold counter.

Goals (issue 4): working context <= 30% of the original tokens with >= 90%
of planted facts retained; a pass over 1,000 messages < 200 ms.  Issue 15:
the same on the varied and held-out sets, one pass and grown, and >= 80% of
the LoCoMo answers kept in every conversation.  Every workload also runs
with the earlier summary size (``summary_ratio`` 0.2, 4,096 tokens) in the
same run, for the before/after (``--no-before`` skips it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import time
from pathlib import Path
from typing import Any

import msgspec

from actormem.compress import (
    AutoContextConfig,
    EstimateTokenCounter,
    ExtractiveSummarizer,
    compress,
)
from actormem.messages import Msg
from benchmarks._common import print_table, summary, write_results
from benchmarks.compress_eval import chat, heldout, varied

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"

FIRST = ["Maria", "Kenji", "Aisha", "Lars", "Priya", "Tomás", "Olga", "Chen", "Fatima", "Diego"]
LAST = ["Lopez", "Tanaka", "Okafor", "Berg", "Raman", "Silva", "Ivanova", "Wei", "Haddad", "Ruiz"]
THINGS = ["badge number", "invoice total", "room number", "flight number", "order id"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
CHAT = [
    "that sounds good to me, thanks",
    "haha fair enough, let us keep going",
    "sure, whatever works best for you",
    "ok, I will keep that in mind while we continue",
    "nice, the weather is lovely today by the way",
]


def synthetic(
    n: int = 1000, facts: int = 50, seed: int = 4
) -> tuple[list[Msg], list[tuple[str, ...]]]:
    """A 1,000-message agent conversation and the parts of each planted fact."""
    rng = random.Random(seed)
    msgs: list[Msg] = [Msg.system("You are a build and operations assistant.")]
    planted: list[tuple[str, ...]] = []
    slots = sorted(rng.sample(range(5, int(n * 0.95)), facts))
    call = 0
    while len(msgs) < n:
        if slots and len(msgs) >= slots[0]:
            slots.pop(0)
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            number = str(rng.randint(1000, 99999))
            date = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.randint(2019, 2025)}"
            thing = rng.choice(THINGS)
            planted.append((name, number, date))
            msgs.append(
                Msg.user(f"Please note that {name}'s {thing} is {number}, recorded on {date}.")
            )
            msgs.append(Msg.assistant(f"Noted: the {thing} of {name} is {number} ({date})."))
            continue
        kind = rng.random()
        if kind < 0.45:
            msgs.append(Msg.user(f"Can you check the build of service-{rng.randint(1, 9)}?"))
            for _ in range(rng.randint(3, 5)):
                call += 1
                cid = f"call_{call}"
                msgs.append(
                    Msg.tool_call(
                        "run_shell", {"cmd": f"make test -j{rng.randint(1, 8)}"}, call_id=cid
                    )
                )
                lines = rng.choice([3, 3, 3, 250])
                out = "\n".join(
                    f"[{i:04d}] test_case_{rng.randint(1, 500)} passed in {rng.random():.3f}s"
                    for i in range(lines)
                )
                msgs.append(Msg.tool_result(cid, out, name="run_shell"))
            msgs.append(Msg.assistant("All tests passed; the build looks healthy."))
        else:
            msgs.append(Msg.user(rng.choice(CHAT)))
            msgs.append(Msg.assistant(rng.choice(CHAT)))
    return msgs[:n], planted


def _session_time(date: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as a Unix time (UTC); 0.0 when it does not parse."""
    try:
        when = datetime.datetime.strptime(date, "%I:%M %p on %d %B, %Y")
    except ValueError:
        return 0.0
    return when.replace(tzinfo=datetime.UTC).timestamp()


def locomo() -> list[tuple[str, list[Msg], list[tuple[str, ...]]]]:
    """LoCoMo conversations as messages, with the QA answers found verbatim in them."""
    if not LOCOMO.exists():
        return []
    out: list[tuple[str, list[Msg], list[tuple[str, ...]]]] = []
    for conv in json.loads(LOCOMO.read_text()):
        c = conv["conversation"]
        a, b = c["speaker_a"], c["speaker_b"]
        msgs: list[Msg] = []
        k = 1
        while f"session_{k}" in c:
            date = c.get(f"session_{k}_date_time", "")
            start = _session_time(date)
            for i, turn in enumerate(c[f"session_{k}"]):
                text = (f"({date}) " if i == 0 and date else "") + turn["text"]
                if turn["speaker"] == a:
                    msg = Msg.user(text, name=a.replace(" ", "_"))
                else:
                    msg = Msg.assistant(text, name=b.replace(" ", "_"))
                # Each turn is created when its session took place (a minute apart).
                msgs.append(msgspec.structs.replace(msg, created_at=start + 60 * i))
            k += 1
        full = "\n".join(m.text for m in msgs).lower()
        answers = {
            str(q["answer"]).strip().lower()
            for q in conv["qa"]
            if q.get("category") in (1, 2, 3, 4) and "answer" in q
        }
        facts: list[tuple[str, ...]] = [(ans,) for ans in sorted(answers) if ans and ans in full]
        out.append((str(conv["sample_id"]), msgs, facts))
    return out


def _context_text(msgs: list[Msg]) -> str:
    return "\n".join(m.text for m in msgs)


def grown(
    msgs: list[Msg], config: AutoContextConfig, summarizer: ExtractiveSummarizer
) -> tuple[list[Msg], int, list[float]]:
    """The working context as the runtime builds it: one pass whenever a threshold is reached.

    Returns:
        The final context, the number of passes and each pass's time in ms.
    """
    counter = config.token_counter
    work: list[Msg] = []
    tokens = 0
    times: list[float] = []
    for m in msgs:
        work.append(m)
        tokens += counter.count_msgs([m])
        if len(work) >= config.msg_threshold or tokens >= config.token_budget:
            t0 = time.perf_counter()
            out = compress(work, config, summarizer, counter)
            times.append((time.perf_counter() - t0) * 1000)
            work = out.apply(work)
            tokens = counter.count_msgs(work)
    return work, len(times), times


def _kept(msgs: list[Msg], facts: list[tuple[str, ...]]) -> int:
    low = _context_text(msgs).lower()
    return sum(1 for parts in facts if all(p.lower() in low for p in parts))


#: The summary size before issue 15's LoCoMo goal was met, run beside the defaults for comparison.
BEFORE: dict[str, Any] = {"summary_ratio": 0.2, "summary_max_tokens": 4096}


def run(
    name: str,
    msgs: list[Msg],
    facts: list[tuple[str, ...]],
    repeats: int,
    config: AutoContextConfig | None = None,
    label: str = "default",
) -> dict[str, Any]:
    """Compress ``msgs`` repeatedly and report time, tokens and retention."""
    config = config or AutoContextConfig()
    cold_counter = EstimateTokenCounter()
    t0 = time.perf_counter()
    compress(msgs, config, ExtractiveSummarizer(cold_counter), cold_counter)
    cold_ms = (time.perf_counter() - t0) * 1000
    counter = EstimateTokenCounter()
    summarizer = ExtractiveSummarizer(counter)
    counter.count_msgs(msgs)  # the actor counts each message once as it arrives
    times = []
    outcome = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        outcome = compress(msgs, config, summarizer, counter)
        times.append((time.perf_counter() - t0) * 1000)
    assert outcome is not None
    final = outcome.apply(msgs)
    kept = _kept(final, facts)
    stats = summary(times)
    grown_ctx, passes, grown_times = grown(msgs, config.replace(token_counter=counter), summarizer)
    grown_kept = _kept(grown_ctx, facts)
    grown_stats = summary(grown_times) if grown_times else {"p50": 0.0, "p99": 0.0}
    return {
        "workload": name,
        "config": label,
        "messages_before": len(msgs),
        "messages_after": len(final),
        "tokens_before": outcome.tokens_before,
        "tokens_after": outcome.tokens_after,
        "ratio": outcome.tokens_after / max(1, outcome.tokens_before),
        "facts": len(facts),
        "facts_retained": kept,
        "retention": kept / max(1, len(facts)),
        "pass_ms_p50": stats["p50"],
        "pass_ms_p99": stats["p99"],
        "pass_ms_cold": cold_ms,
        "grown_passes": passes,
        "grown_ratio": counter.count_msgs(grown_ctx) / max(1, outcome.tokens_before),
        "grown_facts_retained": grown_kept,
        "grown_retention": grown_kept / max(1, len(facts)),
        "grown_pass_ms_p50": grown_stats["p50"],
        "grown_pass_ms_p99": grown_stats["p99"],
        "strategies": [a.strategy for a in outcome.applied],
        "within_budget": outcome.within_budget,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print a table and write ``benchmarks/results/compress.json``.

    Args:
        argv: command-line arguments (``--quick`` for fewer repeats).

    Returns:
        The results.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument(
        "--no-before",
        action="store_true",
        help="skip the run with the earlier summary size (summary_ratio 0.2, 4,096 tokens)",
    )
    args, _ = parser.parse_known_args(argv)
    repeats = 5 if args.quick else 30
    synth_msgs, synth_facts = synthetic()
    workloads = [("synthetic-1000", synth_msgs, [tuple(f) for f in synth_facts], repeats)]
    workloads.append(("varied-1000", *varied(), repeats))
    workloads.append(("heldout-1000", *heldout(), repeats))
    workloads.append(("chat-640", *chat(), max(3, repeats // 3)))
    for sample_id, conv, answers in locomo():
        workloads.append((f"locomo-{sample_id}", conv, answers, max(3, repeats // 3)))
    configs = [("default", AutoContextConfig())]
    if not args.no_before:
        configs.append(("0.2/4096", AutoContextConfig(**BEFORE)))
    rows = [
        run(name, msgs, facts, reps, config, label)
        for name, msgs, facts, reps in workloads
        for label, config in configs
    ]
    print_table(
        "AutoContext compression (offline extractive summarizer, default config)",
        [
            "workload",
            "summary",
            "msgs",
            "tokens before",
            "tokens after",
            "after/before",
            "facts kept",
            "pass p50 ms",
            "pass p99 ms",
            "cold ms",
            "grown: passes",
            "after/before",
            "facts kept",
            "pass p50/p99 ms",
        ],
        [
            (
                r["workload"],
                r["config"],
                f"{r['messages_before']}->{r['messages_after']}",
                r["tokens_before"],
                r["tokens_after"],
                f"{r['ratio']:.1%}",
                f"{r['facts_retained']}/{r['facts']} ({r['retention']:.0%})",
                r["pass_ms_p50"],
                r["pass_ms_p99"],
                r["pass_ms_cold"],
                r["grown_passes"],
                f"{r['grown_ratio']:.1%}",
                f"{r['grown_facts_retained']}/{r['facts']} ({r['grown_retention']:.0%})",
                f"{r['grown_pass_ms_p50']:.1f}/{r['grown_pass_ms_p99']:.1f}",
            )
            for r in rows
        ],
    )
    default = [r for r in rows if r["config"] == "default"]
    synth = default[0]
    planted = [r for r in default if r["workload"] in ("varied-1000", "heldout-1000")]
    conversations = [r for r in default if r["workload"].startswith("locomo-")]
    goals = {
        "ratio_le_30pct": synth["ratio"] <= 0.30,
        "retention_ge_90pct": synth["retention"] >= 0.90,
        "pass_lt_200ms": synth["pass_ms_p50"] < 200,
        # issue 15: >= 90% of planted facts at <= 30% of the tokens, one pass and grown
        "planted_ge_90pct_at_le_30pct": all(
            r[f"{p}retention"] >= 0.90 and r[f"{p}ratio"] <= 0.30
            for r in planted
            for p in ("", "grown_")
        ),
        # issue 15: LoCoMo dev answers kept >= 80% in every conversation, one pass and grown
        "locomo_ge_80pct_each": bool(conversations)
        and all(r[f"{p}retention"] >= 0.80 for r in conversations for p in ("", "grown_")),
    }
    print("goals (default config):", goals)
    result = {"rows": rows, "goals": goals, "repeats": repeats}
    write_results("compress", result)
    return result


if __name__ == "__main__":
    main()
