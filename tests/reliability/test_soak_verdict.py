"""The soak's pass/fail rule (``benchmarks/soak.py``) on synthetic samples.

The 10-minute soak itself is ``make soak``; this checks that its verdict
fails on a leak, passes on a plateau, and allows only the retained data's
footprint beyond the slack.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.soak import Sampler, verdict  # noqa: E402


def _samples(rss: list[float], live: list[float] | None = None) -> Sampler:
    s = Sampler()
    n = len(rss)
    s.t = [float(i) for i in range(n)]
    s.rss = rss
    s.threads = [17.0] * n
    s.fds = [8.0] * n
    s.turns = [20.0 * i for i in range(n)]
    s.live = live if live is not None else [500.0] * n
    return s


def test_a_plateau_passes() -> None:
    rss = [150 + min(i, 100) * 0.8 for i in range(600)]  # warm-up, then flat
    result = verdict(_samples(rss), rss_slack_mb=32)
    assert result["pass"] and result["rss_mb"]["growth"] < 1


def test_a_steady_leak_fails() -> None:
    rss = [150 + i * 0.2 for i in range(600)]  # 10 KB per turn at 20 turns/s
    result = verdict(_samples(rss), rss_slack_mb=32)
    assert not result["pass"] and not result["rss_mb"]["ok"]
    assert result["rss_mb"]["mb_per_1000_turns"] > 9


def test_growth_of_retained_memories_is_allowed_but_nothing_beyond() -> None:
    live = [float(100 * i) for i in range(600)]  # 100 memories kept per sample
    own = [150 + i * 100 * 4 / 1024 for i in range(600)]  # 4 KB per memory
    assert verdict(_samples(own, live), rss_slack_mb=32, kb_per_memory=4)["pass"]
    leak = [r + i * 0.2 for i, r in enumerate(own)]
    assert not verdict(_samples(leak, live), rss_slack_mb=32, kb_per_memory=4)["pass"]


def test_thread_or_file_growth_fails() -> None:
    s = _samples([150.0] * 600)
    s.threads = [17.0 + i // 50 for i in range(600)]
    assert not verdict(s, rss_slack_mb=32)["pass"]
