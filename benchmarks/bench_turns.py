"""Next-turn latency with long-term recording on and off, on a one-request-at-a-time server.

A user talks to a ReActAgent whose recorder extracts facts with the same model.
Local servers (llama.cpp's) generate for one request at a time, so memory work
that runs when the user's next turn arrives can make that turn wait.  Three
configurations, same conversation, same server:

* ``off``: no long-term memory (the baseline);
* ``on``: recording with the model, ``RecorderConfig.yield_to_turns=True``
  (memory calls run between turns, streamed, and give way to a new turn);
* ``on, no gate``: recording with ``yield_to_turns=False`` (calls run as soon
  as a batch closes, as before).

Each turn's latency is the time of ``agent.reply``; the user pauses ``--think``
seconds between turns (long enough for the recorder's batch to close and its
extraction to start).  Default server: the strict test server (serial, a token
every ``--token-ms``; extraction answers are ~300 tokens, replies ~30).
``--base-url`` measures a real server instead (e.g. llama.cpp's).

Run: ``python -m benchmarks.bench_turns [--turns 12] [--base-url URL --model NAME]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, ReActAgent, RecorderConfig, configure_logging
from actormem.models.embedders import HashEmbedder
from actormem.models.openai import OpenAIChatModel
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import print_table, summary, write_results

LINES = [
    "Hi, I'm Ada and I work as a nurse in Porto.",
    "My daughter Lina is seven and loves drawing.",
    "We have a cat called Miso.",
    "I don't eat meat any more.",
    "Next month I start a course in Japanese.",
    "My favourite book is Middlemarch.",
    "I moved here from Lisbon two years ago.",
    "My brother Tomas lives in Berlin.",
]
FACTS = json.dumps({"facts": [{"content": "The user's name is Ada", "importance": 0.8}]})


@contextlib.contextmanager
def _simulated(token_ms: float) -> Iterator[str]:
    from tests._strict_openai import Answer, Request, strict_server

    def brain(req: Request) -> Answer:
        if "Conversation:" in req.last_user:  # the recorder's extraction prompt
            return Answer(text=FACTS + " " * 1100)
        return Answer(text="Thanks, I will remember that. " * 4)

    with strict_server(brain, serial=True, token_delay=token_ms / 1000) as srv:
        yield srv.url


def _run(
    url: str, model_name: str, mode: str, turns: int, think: float, max_tokens: int | None
) -> list[float]:
    extra = {"max_tokens": max_tokens} if max_tokens else {}
    model = OpenAIChatModel(url, model_name, max_retries=0, extra_body=extra)
    with tempfile.TemporaryDirectory() as tmp:
        kw: dict[str, Any] = {}
        store = None
        if mode != "off":
            store = DuckDBStore(Path(tmp) / "m.duckdb", embedder=HashEmbedder())
            kw = {
                "store": store,
                "namespace": Namespace(user_id="ada", agent_id="bench"),
                "recorder": RecorderConfig(
                    batch_seconds=0.05, idle_seconds=None, yield_to_turns=mode == "on"
                ),
                "long_term": "static_control",
            }
        latencies: list[float] = []
        with MemoryRuntime(session_dir=Path(tmp) / "s", model=model, **kw) as rt:
            agent = ReActAgent("bot", model, rt)
            for i in range(turns):
                t0 = time.perf_counter()
                agent.reply(LINES[i % len(LINES)])
                if i:  # the first turn has nothing before it to wait behind
                    latencies.append((time.perf_counter() - t0) * 1000)
                time.sleep(think)  # the user reads and types
            if store is not None:
                rt.flush(300)
        if store is not None:
            store.close()
    return latencies


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--think", type=float, default=0.3, help="seconds between turns")
    ap.add_argument("--token-ms", type=float, default=4.0, help="simulated ms per token")
    ap.add_argument("--base-url", help="a real OpenAI-compatible server instead")
    ap.add_argument("--model", default="local")
    ap.add_argument(
        "--max-tokens", type=int, default=None, help="max_tokens of every call (real servers)"
    )
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    configure_logging("ERROR")  # fallbacks and truncations are expected here
    turns = 5 if args.quick else args.turns
    modes = ["off", "on", "on_no_gate"]
    results: dict[str, Any] = {}
    server = contextlib.nullcontext(args.base_url) if args.base_url else _simulated(args.token_ms)
    with server as url:
        for mode in modes:
            results[mode] = summary(_run(url, args.model, mode, turns, args.think, args.max_tokens))
    base = results["off"]["p50"]
    rows = [
        [
            mode,
            results[mode]["p50"],
            results[mode]["p99"],
            results[mode]["p50"] / base if base else float("nan"),
        ]
        for mode in modes
    ]
    where = args.base_url or f"strict test server, serial, {args.token_ms:g} ms/token"
    print_table(
        f"next-turn latency (ms), {turns} turns, {args.think:g} s pause, {where}",
        ["recording", "p50 ms", "p99 ms", "p50 / off"],
        rows,
    )
    payload = {"turns": turns, "think_s": args.think, "server": where, "results": results}
    write_results("bench_turns", payload)
    return payload


if __name__ == "__main__":
    main()
