"""Every numeric setting of the runtime's configs has a declared range, checked where it enters.

(issue 12, point 8, the runtime side; the store's and the recorder's numbers
are walked in ``tests/store/test_store_limits.py``.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime
from actormem._door import RUNTIME_SETTINGS
from actormem._settings import AGENT_ARGS, AUTOCONTEXT_FIELDS, JOURNAL_FIELDS, UI_FIELDS
from actormem.agent import ReActAgent
from actormem.compress import AutoContextConfig
from actormem.journal import JournalConfig
from actormem.models.scripted import ScriptedModel
from actormem.recorder import RecorderConfig
from actormem.store._limits import Span
from actormem.ui import UIConfig

CONFIGS: list[tuple[str, Callable[..., Any], Mapping[str, Span]]] = [
    ("AutoContextConfig", AutoContextConfig, AUTOCONTEXT_FIELDS),
    ("JournalConfig", JournalConfig, JOURNAL_FIELDS),
    ("UIConfig", UIConfig, UI_FIELDS),
]


#: Fields that must stay below another one: that one, at its bound.
COMPANIONS: dict[str, dict[str, int]] = {
    "last_keep": {"msg_threshold": AUTOCONTEXT_FIELDS["msg_threshold"].hi},  # type: ignore[dict-item]
    "offload_preview": {
        "large_payload_threshold": AUTOCONTEXT_FIELDS["large_payload_threshold"].hi  # type: ignore[dict-item]
    },
    "log_keep_entries": {"log_max_entries": JOURNAL_FIELDS["log_max_entries"].hi},  # type: ignore[dict-item]
}


def _bad_values(span: Span) -> list[object]:
    out: list[object] = [span.hi * 2 + 1 if span.hi < 1e15 else 10**30, -(10**30)]
    if span.integer:
        out += [1.5, "3", True]
    else:
        out += [math.nan, math.inf, -math.inf, "0.5"]
    if not span.optional:
        out.append(None)
    return out


def _numeric_fields(cls: type) -> set[str]:
    hints: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        hints.update(getattr(klass, "__annotations__", {}))
    names = (
        [f.name for f in dataclasses.fields(cls) if f.init]
        if dataclasses.is_dataclass(cls)
        else list(getattr(cls, "__struct_fields__", ()))
    )
    out = set()
    for name in names:
        text = str(hints.get(name, "")).replace(" ", "")
        parts = set(text.split("|"))
        if parts & {"int", "float"} and not name.startswith("_"):
            out.add(name)
    return out


@pytest.mark.parametrize(("owner", "cls", "spans"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_every_numeric_field_has_a_declared_range(
    owner: str, cls: type, spans: Mapping[str, Span]
) -> None:
    fields = _numeric_fields(cls)
    assert fields, owner
    assert fields == set(spans), f"{owner}: undeclared {fields - set(spans)}"


@pytest.mark.parametrize(
    ("owner", "make", "name", "span"),
    [(owner, make, name, span) for owner, make, spans in CONFIGS for name, span in spans.items()],
    ids=[f"{owner}.{name}" for owner, _, spans in CONFIGS for name in spans],
)
def test_out_of_range_values_are_refused_naming_the_field(
    owner: str, make: Callable[..., Any], name: str, span: Span
) -> None:
    # The bound itself is accepted (with the field it must stay below at its own bound).
    make(**{name: span.hi, **COMPANIONS.get(name, {})})
    for value in _bad_values(span):
        with pytest.raises((ValueError, TypeError, Exception)) as info:
            make(**{name: value})
        assert f"{owner}.{name}" in str(info.value) or name in str(info.value), (value, info)


@pytest.mark.parametrize(("name", "span"), list(AGENT_ARGS.items()))
def test_agent_numbers_are_refused_naming_the_field(tmp_path: Path, name: str, span: Span) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        ReActAgent("a", ScriptedModel([]), rt, **{name: span.hi})
        for value in _bad_values(span):
            with pytest.raises(ValueError, match=f"ReActAgent.{name}"):
                ReActAgent("a", ScriptedModel([]), rt, **{name: value})


@pytest.mark.parametrize(("name", "span"), list(RUNTIME_SETTINGS.items()))
def test_runtime_numbers_are_refused_naming_the_field(
    tmp_path: Path, name: str, span: Span
) -> None:
    for value in _bad_values(span):
        with pytest.raises(ValueError, match=f"MemoryRuntime.{name}"):
            MemoryRuntime(session_dir=tmp_path, **{name: value})


def test_inject_limit_is_refused_before_the_runtime_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"RecorderConfig\.inject_limit"):
        MemoryRuntime(
            session_dir=tmp_path,
            store=tmp_path / "m.duckdb",
            recorder=RecorderConfig(inject_limit=10**9),
        )
    with pytest.raises(ValueError, match=r"MemoryRuntime\.max_msg_bytes"):
        MemoryRuntime(session_dir=tmp_path, max_msg_bytes=-1)
