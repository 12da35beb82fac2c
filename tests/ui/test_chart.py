from __future__ import annotations

import datetime as dt

from actormem.ui._chart import KIND_COLORS, build_chart


def test_bars_stack_kinds_per_day_with_empty_days_kept() -> None:
    chart = build_chart(
        [("2026-03-01", "fact", 2), ("2026-03-01", "episode", 3), ("2026-03-04", "fact", 1)]
    )
    assert chart.bucket == "day"
    assert [b.label for b in chart.bars] == [
        "2026-03-01",
        "2026-03-02",
        "2026-03-03",
        "2026-03-04",
    ]
    assert [b.total for b in chart.bars] == [5, 0, 0, 1]
    first = chart.bars[0]
    assert {s.kind: s.count for s in first.segments} == {"fact": 2, "episode": 3}
    # Segments stack from the base without overlapping.
    ordered = sorted(first.segments, key=lambda s: s.y)
    assert abs(ordered[0].y + ordered[0].height - ordered[1].y) < 1e-6
    assert abs(ordered[1].y + ordered[1].height - chart.base) < 1e-6
    assert chart.kinds[0] == ("episode", KIND_COLORS["episode"], 3)
    assert chart.total == 6
    assert [v for _, v in chart.ticks] == sorted({v for _, v in chart.ticks})  # no repeats


def test_long_spans_become_weeks_then_months() -> None:
    start = dt.date(2024, 1, 1)
    weeks = build_chart(
        [((start + dt.timedelta(days=d)).isoformat(), "fact", 1) for d in range(0, 200, 3)]
    )
    assert weeks.bucket == "week" and weeks.total == len(range(0, 200, 3))
    assert sum(b.total for b in weeks.bars) == weeks.total
    months = build_chart([(start.isoformat(), "fact", 1), ("2026-06-30", "summary", 2)])
    assert months.bucket == "month" and len(months.bars) == 30
    assert months.bars[-1].label == "2026-06"


def test_unknown_kinds_get_distinct_colours_and_empty_input_draws_nothing() -> None:
    chart = build_chart([("2026-03-01", "a", 1), ("2026-03-01", "b", 1)])
    colours = [c for _, c, _ in chart.kinds]
    assert len(set(colours)) == 2
    assert build_chart([]).bars == []
