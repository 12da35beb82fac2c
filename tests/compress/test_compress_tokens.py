"""Token counting: the estimate against the LLaMA-2 tokenizer bundled in wordllama."""

from __future__ import annotations

import glob
import importlib.resources
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.compress import EstimateTokenCounter, TokenCounter, TokenizerCounter
from actormem.messages import ImageBlock, Msg, OffloadRefBlock, TextBlock

LOCOMO = Path("/work/shared/data/locomo_dev.json")
SEEDS = Path("/work/shared/seeds")


def _llama() -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    path = (
        importlib.resources.files("wordllama") / "tokenizers" / "l2_supercat_tokenizer_config.json"
    )
    if not path.is_file():
        pytest.skip("wordllama's tokenizer file is not installed")
    return tokenizers.Tokenizer.from_file(str(path))


def _chunks(text: str, size: int = 2000) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def _corpora() -> dict[str, list[str]]:
    rng = random.Random(7)
    out: dict[str, list[str]] = {}
    if LOCOMO.exists():
        data = json.loads(LOCOMO.read_text())
        turns = [
            t["text"]
            for conv in data
            for key, session in conv["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for t in session
        ]
        out["prose"] = [" ".join(turns[i : i + 8]) for i in range(0, len(turns), 8)]
        out["json"] = [json.dumps(conv["qa"][i : i + 5]) for conv in data for i in range(0, 60, 5)]
    else:  # a fresh clone: the docs' own prose and the benchmarks' JSON stand in
        root = Path(__file__).resolve().parents[2]
        text = re.sub(r"```.*?```", "", (root / "README.md").read_text(), flags=re.S)
        paragraphs = [p for p in text.split("\n\n") if len(p) > 200 and not p.startswith("|")]
        out["prose"] = [" ".join(paragraphs[i : i + 4]) for i in range(0, len(paragraphs), 4)]
        out["json"] = [  # question/answer records like LoCoMo's, from the same prose
            json.dumps(
                [
                    {
                        "question": p[:80],
                        "answer": p[80:160],
                        "evidence": [f"D{i}:{j}"],
                        "category": j % 5 + 1,
                    }
                    for j, p in enumerate(paragraphs[i : i + 5])
                ]
            )
            for i in range(0, len(paragraphs), 5)
        ]
    if SEEDS.exists():
        out["markdown"] = [c for f in sorted(SEEDS.glob("*.txt")) for c in _chunks(f.read_text())]
    import msgspec

    src = sorted(glob.glob(str(Path(msgspec.__file__).parent / "*.py")))
    out["code"] = [c for f in src for c in _chunks(Path(f).read_text())]
    out["numbers"] = [
        " ".join(
            f"{rng.randint(0, 10 ** rng.randint(1, 8))}{rng.choice([',', ' ms', '%', '.5', ''])}"
            for _ in range(80)
        )
        for _ in range(30)
    ]
    out["logs"] = [
        "\n".join(
            f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T12:{rng.randint(10, 59)}:00Z INFO "
            f"worker-{rng.randint(1, 9)} processed batch {rng.randint(1, 99999)} in "
            f"{rng.random() * 100:.2f} ms status=ok"
            for _ in range(20)
        )
        for _ in range(20)
    ]
    return out


def test_estimate_tracks_llama2_tokenizer_on_real_text() -> None:
    exact = TokenizerCounter(_llama(), name="llama2")
    est = EstimateTokenCounter()
    corpora = _corpora()
    assert {"prose", "code", "json", "numbers", "logs"} <= set(corpora)
    report = {}
    for name, texts in corpora.items():
        true = sum(exact.count(t) for t in texts)
        guess = sum(est.count(t) for t in texts)
        report[name] = (guess - true) / true
    print("aggregate relative error per corpus:", {k: round(v, 3) for k, v in report.items()})
    # The docstring of EstimateTokenCounter states the measured figures; keep them honest.
    # the README promises 5% on prose, code and logs, 6% on JSON; markdown and numbers 8%
    bounds = {"prose": 0.05, "code": 0.05, "logs": 0.05, "json": 0.06}
    for name, err in report.items():
        bound = bounds.get(name, 0.08)
        assert abs(err) <= bound, f"{name}: estimate off by {err:+.1%} (bound {bound:.0%})"
    # chars/4 is far worse on numbers: the estimate must beat it where it matters.
    nums = corpora["numbers"]
    true = sum(exact.count(t) for t in nums)
    assert abs(sum(len(t) for t in nums) / 4 - true) / true > 0.5


def test_estimate_basic_properties() -> None:
    c = EstimateTokenCounter()
    assert c.count("") == 0
    assert c.count("a") == 1
    assert c.count("hello world") == 2
    assert c.count("12345") > c.count("hello")  # digits are one token each
    long = "The quick brown fox jumps over the lazy dog. " * 50
    assert c.count(long) == c.count(long)  # cached and stable
    assert 450 <= c.count(long) <= 600
    assert isinstance(c, TokenCounter)


def test_count_msgs_adds_overhead_for_blocks() -> None:
    c = EstimateTokenCounter()
    text = Msg.user("hello world")
    assert c.count_msgs([text]) == c.count("hello world") + 4
    call = Msg.tool_call("search", {"q": "weather in Lisbon"}, call_id="c1")
    assert c.count_msgs([call]) > 10
    img = Msg(role="user", content=(ImageBlock(url="data:x"),))
    assert c.count_msgs([img]) >= 512
    ref = Msg(role="user", content=(OffloadRefBlock(offload_id="off_1", preview="abc"),))
    assert c.count_msgs([ref]) > c.count("abc")
    both = [text, call, img]
    assert c.count_msgs(both) == sum(c.count_msgs([m]) for m in both)  # additive
    assert c.count_msgs([Msg(role="user", content=(TextBlock(""),))]) == 4


def test_tokenizer_counter_accepts_callables_and_encoders() -> None:
    by_int = TokenizerCounter(lambda s: len(s.split()))
    assert by_int.count("a b c") == 3
    by_list = TokenizerCounter(lambda s: list(s))
    assert by_list.count("abcd") == 4

    class Enc:
        def encode(self, text: str) -> list[int]:
            return [0] * (len(text) // 2)

    assert TokenizerCounter(Enc()).count("abcdef") == 3
    assert TokenizerCounter(Enc()).count_msgs([Msg.user("abcdef")]) == 3 + 4
    hf = TokenizerCounter(_llama())
    assert hf.count("Hello world") == 2  # no BOS token counted
    with pytest.raises(TypeError, match="callable"):
        TokenizerCounter(42)
    with pytest.raises(TypeError, match="returned"):
        TokenizerCounter(lambda s: object()).count("x")


def test_estimate_cache_is_bounded_in_entries_and_in_characters() -> None:
    """The cache's keys keep the counted texts alive: it must not grow with the traffic."""
    c = EstimateTokenCounter(cache_size=100, cache_chars=5_000)
    counts = {}
    for i in range(2_000):
        text = f"message {i}: " + "word " * (i % 40)
        counts[text] = c.count(text)
        assert len(c._cache) <= 100
        assert sum(map(len, c._cache)) <= 5_000
    assert all(c.count(t) == n for t, n in counts.items())  # same answers, cached or not
    big = "x " * 10_000  # longer than a quarter of the bound: counted, never cached
    assert c.count(big) > 0 and big not in c._cache
