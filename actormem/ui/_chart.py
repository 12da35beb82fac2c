"""The timeline chart, drawn on the server as SVG.

Why SVG from Python rather than a JavaScript charting library: the chart is
a stacked bar per day (or week, or month) and kind, which is a few dozen
``<rect>`` elements; drawing them here needs no asset to vendor, works with
JavaScript off and under a strict Content-Security-Policy, and is escaped by
the same template engine as everything else on the page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = ["KIND_COLORS", "Bar", "Chart", "build_chart", "kind_color"]

#: Colours of the kinds the runtime writes (others cycle through ``_EXTRA``).
KIND_COLORS: Final = {
    "fact": "#4f7cff",
    "episode": "#22b8a6",
    "summary": "#f2a33a",
    "offload": "#9aa5b8",
    "preference": "#e5567a",
    "procedure": "#8f5cf7",
    "keyed": "#2f9e44",
}
_EXTRA: Final = ("#0ea5e9", "#d9480f", "#a61e4d", "#5c940d", "#364fc7", "#862e9c")

WIDTH: Final = 880
HEIGHT: Final = 260
_LEFT: Final = 44
_BOTTOM: Final = 34
_TOP: Final = 12
_RIGHT: Final = 10


def kind_color(kind: str, extra: dict[str, str] | None = None) -> str:
    """The colour of ``kind`` (stable for known kinds, assigned in order for others)."""
    if kind in KIND_COLORS:
        return KIND_COLORS[kind]
    if extra is None:
        return _EXTRA[sum(map(ord, kind)) % len(_EXTRA)]
    if kind not in extra:
        extra[kind] = _EXTRA[len(extra) % len(_EXTRA)]
    return extra[kind]


@dataclass
class Segment:
    kind: str
    count: int
    y: float
    height: float
    color: str


@dataclass
class Bar:
    label: str
    total: int
    x: float
    width: float
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Chart:
    """Everything the template needs to draw the chart."""

    bars: list[Bar]
    kinds: list[tuple[str, str, int]]  # kind, colour, total
    ticks: list[tuple[float, int]]  # y, value
    labels: list[tuple[float, str]]  # x, text
    bucket: str
    total: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = _LEFT
    base: float = HEIGHT - _BOTTOM


def _bucket_of(day: dt.date, bucket: str) -> dt.date:
    if bucket == "week":
        return day - dt.timedelta(days=day.weekday())
    if bucket == "month":
        return day.replace(day=1)
    return day


def _step(day: dt.date, bucket: str) -> dt.date:
    if bucket == "week":
        return day + dt.timedelta(days=7)
    if bucket == "month":
        return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return day + dt.timedelta(days=1)


def _nice_max(value: int) -> int:
    if value <= 5:
        return max(value, 1)
    magnitude = 10 ** (len(str(value)) - 1)
    for m in (1, 2, 2.5, 5, 10):
        top = int(m * magnitude)
        if top >= value:
            return top
    return value  # pragma: no cover


def build_chart(rows: Sequence[tuple[str, str, int]]) -> Chart:
    """Lay out stacked bars from ``(YYYY-MM-DD, kind, count)`` rows.

    Days without memories get an empty slot so the x axis is time; past 62
    days the bars are weeks, past 62 weeks months.
    """
    parsed = [(dt.date.fromisoformat(d), k, c) for d, k, c in rows if c > 0]
    if not parsed:
        return Chart(bars=[], kinds=[], ticks=[], labels=[], bucket="day", total=0)
    first = min(d for d, _, _ in parsed)
    last = max(d for d, _, _ in parsed)
    span = (last - first).days + 1
    bucket = "day" if span <= 62 else "week" if span <= 62 * 7 else "month"
    counts: dict[dt.date, dict[str, int]] = {}
    kind_totals: dict[str, int] = {}
    for d, k, c in parsed:
        slot = counts.setdefault(_bucket_of(d, bucket), {})
        slot[k] = slot.get(k, 0) + c
        kind_totals[k] = kind_totals.get(k, 0) + c
    slots: list[dt.date] = []
    cur, end = _bucket_of(first, bucket), _bucket_of(last, bucket)
    while cur <= end:
        slots.append(cur)
        cur = _step(cur, bucket)
    extra: dict[str, str] = {}
    order = sorted(kind_totals, key=lambda k: (-kind_totals[k], k))
    colors = {k: kind_color(k, extra) for k in order}
    top = _nice_max(max(sum(v.values()) for v in counts.values()))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    base = HEIGHT - _BOTTOM
    slot_w = plot_w / len(slots)
    bar_w = max(1.0, slot_w * 0.72)
    bars: list[Bar] = []
    for i, day in enumerate(slots):
        per = counts.get(day, {})
        label = day.isoformat() if bucket != "month" else day.strftime("%Y-%m")
        bar = Bar(
            label=label,
            total=sum(per.values()),
            x=_LEFT + i * slot_w + (slot_w - bar_w) / 2,
            width=bar_w,
        )
        y: float = base
        for k in order:
            n = per.get(k, 0)
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            bar.segments.append(Segment(kind=k, count=n, y=y, height=h, color=colors[k]))
        bars.append(bar)
    values = sorted({round(top * f) for f in (0.0, 0.25, 0.5, 0.75, 1.0)})
    ticks = [(base - plot_h * v / top, v) for v in values]
    every = max(1, len(slots) // 8)
    labels = [
        (_LEFT + i * slot_w + slot_w / 2, day.strftime("%b %d" if bucket != "month" else "%b %Y"))
        for i, day in enumerate(slots)
        if i % every == 0
    ]
    return Chart(
        bars=bars,
        kinds=[(k, colors[k], kind_totals[k]) for k in order],
        ticks=ticks,
        labels=labels,
        bucket=bucket,
        total=sum(kind_totals.values()),
    )
