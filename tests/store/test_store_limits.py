"""Every numeric field has a declared range, checked where the value enters, naming the field.

The tests walk the tables of :mod:`actormem.store._limits`: each declared
field refuses values just outside its range, non-finite numbers, bools and
strings, and accepts its bounds; and every numeric field or argument of the
store's and the recorder's entry points has a declared range (a new field
without one fails here).
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NewMemory,
    RelevanceWeights,
    SearchConfig,
)
from actormem.store._limits import (
    MAINTENANCE_ARGS,
    MEMORY_FIELDS,
    RECORDER_FIELDS,
    RELEVANCE_FIELDS,
    SEARCH_FIELDS,
    STORE_SETTINGS,
    Span,
)
from actormem.store._postgres import PostgresStore


def _numeric(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return bool({"int", "float"} & set(text.replace("|", " ").replace("'", " ").split()))


def _bad_values(span: Span) -> list[object]:
    step = 1 if span.integer else max(1e-6, (span.hi - span.lo) * 1e-6)
    values: list[object] = [span.lo - step, span.hi + step, float("nan"), math.inf, -math.inf]
    values += [True, "1", [1]]
    if span.lo_open:
        values.append(int(span.lo) if span.integer else span.lo)
    if span.integer:
        values.append(float(span.lo) + 0.5)
    if not span.optional:
        values.append(None)
    return values


def _good_values(span: Span) -> list[object]:
    lo = span.lo + (1 if span.integer else 1e-9) if span.lo_open else span.lo
    values: list[object] = [
        int(lo) if span.integer else lo,
        int(span.hi) if span.integer else span.hi,
    ]
    return [*values, None] if span.optional else values


# -- the tables cover every numeric field and argument -----------------------------------


@pytest.mark.parametrize(
    ("owner", "fields", "table"),
    [
        (
            "RecorderConfig",
            {f.name: f.type for f in RecorderConfig.__dataclass_fields__.values()},
            RECORDER_FIELDS,
        ),
        (
            "SearchConfig",
            {f.name: f.type for f in msgspec.structs.fields(SearchConfig)},
            SEARCH_FIELDS,
        ),
        (
            "RelevanceWeights",
            {f.name: f.type for f in msgspec.structs.fields(RelevanceWeights)},
            RELEVANCE_FIELDS,
        ),
        (
            "MemoryRecord",
            {f.name: f.type for f in msgspec.structs.fields(MemoryRecord)},
            MEMORY_FIELDS,
        ),
        ("NewMemory", {f.name: f.type for f in msgspec.structs.fields(NewMemory)}, MEMORY_FIELDS),
        ("DuckDBStore()", dict(inspect.signature(DuckDBStore.__init__).parameters), STORE_SETTINGS),
        (
            "PostgresStore()",
            dict(inspect.signature(PostgresStore.__init__).parameters),
            STORE_SETTINGS,
        ),
    ],
)
def test_every_numeric_field_has_a_declared_range(
    owner: str, fields: dict[str, Any], table: Mapping[str, Span]
) -> None:
    numeric = {
        name
        for name, ann in fields.items()
        if _numeric(getattr(ann, "annotation", ann)) and name != "self"
    }
    assert numeric, owner
    assert numeric <= set(table), f"{owner}: no declared range for {sorted(numeric - set(table))}"


def test_every_numeric_maintenance_argument_has_a_declared_range() -> None:
    for op in (
        "decay",
        "auto_forget",
        "prune_stale",
        "prune_duplicates",
        "consolidate",
        "enforce_cap",
    ):
        params = inspect.signature(getattr(MemoryStore, op)).parameters
        numeric = {n for n, p in params.items() if _numeric(p.annotation)}
        assert numeric, op
        for name in numeric:
            assert f"{op}.{name}" in MAINTENANCE_ARGS, f"{op}({name}=...) has no declared range"


# -- each door refuses what is outside, naming the field ----------------------------------


@pytest.mark.parametrize("field", list(RECORDER_FIELDS))
def test_recorder_config_refuses_out_of_range(field: str) -> None:
    """Regression: inject_limit=10**9 was accepted and then every injection failed."""
    for value in _bad_values(RECORDER_FIELDS[field]):
        with pytest.raises(ValueError, match=rf"RecorderConfig\.{field} must be"):
            RecorderConfig(**{field: value})


@pytest.mark.parametrize("field", list(RECORDER_FIELDS))
def test_recorder_config_accepts_its_bounds(field: str) -> None:
    for value in _good_values(RECORDER_FIELDS[field]):
        assert getattr(RecorderConfig(**{field: value}), field) == value


@pytest.mark.parametrize("field", list(SEARCH_FIELDS))
def test_search_config_refuses_out_of_range(field: str) -> None:
    for value in _bad_values(SEARCH_FIELDS[field]):
        with pytest.raises(InvalidMemoryError, match=rf"SearchConfig\.{field} must be"):
            SearchConfig(**{field: value})


@pytest.mark.parametrize("field", list(RELEVANCE_FIELDS))
def test_relevance_weights_refuse_out_of_range(field: str) -> None:
    for value in _bad_values(RELEVANCE_FIELDS[field]):
        with pytest.raises(InvalidMemoryError, match=rf"RelevanceWeights\.{field} must be"):
            RelevanceWeights(**{field: value})


def test_search_and_relevance_settings_accept_their_bounds() -> None:
    for field, span in SEARCH_FIELDS.items():
        for value in _good_values(span):
            assert getattr(SearchConfig(**{field: value}), field) == value
    for field, span in RELEVANCE_FIELDS.items():
        for value in _good_values(span):
            assert getattr(RelevanceWeights(**{field: value}), field) == value


_NEW = {k: v for k, v in MEMORY_FIELDS.items() if k in ("importance", "created_at")}


@pytest.mark.parametrize("field", list(_NEW))
def test_new_memory_refuses_out_of_range(field: str) -> None:
    """Regression: a created_at of 1e30 was taken and made timeline() fail for that user."""
    for value in _bad_values(_NEW[field]):
        if field == "created_at" and value is None:
            continue  # None means "now"
        with pytest.raises(InvalidMemoryError, match=field):
            NewMemory(content="x", **{field: value}).validate()  # type: ignore[arg-type]


@pytest.fixture(params=["duckdb", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> typing.Iterator[Any]:
    if request.param == "duckdb":
        with DuckDBStore(
            tmp_path / "m.duckdb", embedder=HashEmbedder(32), touch_flush_interval=None
        ) as s:
            yield s
    else:
        dsn = request.getfixturevalue("pg_dsn")
        with PostgresStore(dsn, embedder=HashEmbedder(32), touch_flush_interval=None) as p:
            yield p


def _takes(cls: type, field: str) -> bool:
    return field in inspect.signature(cls.__init__).parameters


@pytest.mark.parametrize("field", [f for f in STORE_SETTINGS if _takes(PostgresStore, f)])
def test_postgres_store_settings_refuse_out_of_range_before_connecting(field: str) -> None:
    for value in _bad_values(STORE_SETTINGS[field]):
        with pytest.raises(InvalidMemoryError, match=rf"{field} must be"):
            # nothing listens there: a check after connecting would raise StoreError
            PostgresStore("postgresql://nobody@127.0.0.1:9/none", **{field: value})


@pytest.mark.parametrize("field", [f for f in STORE_SETTINGS if _takes(DuckDBStore, f)])
def test_store_settings_refuse_out_of_range(field: str, tmp_path: Path) -> None:
    for value in _bad_values(STORE_SETTINGS[field]):
        with pytest.raises(InvalidMemoryError, match=rf"{field} must be"):
            DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(32), **{field: value})
        assert not (tmp_path / "m.duckdb").exists()  # refused before the file was created


_MAINT_CALLS: dict[str, Callable[[Any, Any, object], object]] = {
    "decay.rate": lambda s, ns, v: s.decay(ns, rate=v),
    "decay.threshold": lambda s, ns, v: s.decay(ns, threshold=v),
    "auto_forget.threshold": lambda s, ns, v: s.auto_forget(ns, threshold=v),
    "prune_stale.max_age_days": lambda s, ns, v: s.prune_stale(ns, max_age_days=v),
    "prune_duplicates.threshold": lambda s, ns, v: s.prune_duplicates(ns, threshold=v),
    "consolidate.threshold": lambda s, ns, v: s.consolidate(ns, threshold=v),
    "enforce_cap.max_memories": lambda s, ns, v: s.enforce_cap(ns, v),
}


@pytest.mark.parametrize("arg", list(MAINTENANCE_ARGS))
def test_maintenance_arguments_refuse_out_of_range(store: Any, arg: str) -> None:
    """Regression: prune_stale(max_age_days=nan) and unchecked thresholds were accepted."""
    ns = Namespace(user_id="u")
    store.add_many(ns, ["one memory", "another memory"])
    for value in _bad_values(MAINTENANCE_ARGS[arg]):
        with pytest.raises(InvalidMemoryError, match=rf"{arg.split('.')[1]} must be"):
            _MAINT_CALLS[arg](store, ns, value)
    assert store.count(ns) == 2
