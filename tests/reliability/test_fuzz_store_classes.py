"""Fuzzing the store-side classes of issue 12: what maintenance may touch, what may merge,
what an import and a setting may carry.

Bounded for ``make test`` by the "ci" hypothesis profile; ``make fuzz`` runs
the "fuzz" profile.  Invariants:

* cross-level namespaces: keyed facts saved at any level (user, agent, run,
  session) keep their exact values through any sequence of maintenance
  operations, with any arguments, run on any enclosing scope;
* recorded turns (episodes) are never merged, however alike: as many stay as
  were added, through write-time deduplication and maintenance;
* an imported row with any value in any column is either stored as given
  or refused with ``InvalidMemoryError`` naming the row and the column, and
  a refused import stores nothing;
* any value for any numeric setting is either inside its declared range or
  refused with an error naming the field.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actormem.models.embedders import HashEmbedder
from actormem.recorder import KeyedFacts, RecorderConfig
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    Namespace,
    NewMemory,
    RelevanceWeights,
    SearchConfig,
)
from actormem.store._limits import (
    MAINTENANCE_ARGS,
    RECORDER_FIELDS,
    RELEVANCE_FIELDS,
    SEARCH_FIELDS,
    Span,
)

#: Examples of the tests that write many rows per example: fewer than the profile's.
FEW = max(20, (settings.default.max_examples or 100) // 5)
_FUNCTION_FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    """One store for the module; every example writes under a fresh user id."""
    path = tmp_path_factory.mktemp("fuzzclasses") / "m.duckdb"
    with DuckDBStore(
        path, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=0.5
    ) as s:
        yield s


def _number(span: Span) -> st.SearchStrategy[Any]:
    """Values inside, at and around ``span``, and of the wrong kind."""
    lo, hi = span.lo, span.hi
    inside = (
        st.integers(min_value=int(lo), max_value=int(min(hi, 2**62)))
        if span.integer
        else st.floats(min_value=lo, max_value=hi)
    )
    return (
        inside
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.sampled_from([lo, hi, True, False, None, "1", [1], {"a": 1}])
    )


# -- cross-level namespaces: keyed facts survive every maintenance ---------------------------

_LEVEL_FIELDS = ("user_id", "agent_id", "run_id", "session_id")
_OPS = ("decay", "auto_forget", "prune_stale", "prune_duplicates", "consolidate", "enforce_cap")


def _op_args(op: str) -> st.SearchStrategy[dict[str, Any]]:
    spans = {k.split(".")[1]: v for k, v in MAINTENANCE_ARGS.items() if k.startswith(op + ".")}
    return st.fixed_dictionaries(
        {
            name: (
                st.integers(min_value=int(s.lo), max_value=5)
                if s.integer
                else st.floats(min_value=s.lo, max_value=s.hi).filter(
                    lambda v, s=s: not (s.lo_open and v == s.lo)
                )
            )
            for name, s in spans.items()
        }
    )


maintenance_steps = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=4),  # how many levels the scope names
        st.sampled_from(_OPS).flatmap(lambda op: st.tuples(st.just(op), _op_args(op))),
    ),
    min_size=1,
    max_size=8,
)


@settings(suppress_health_check=_FUNCTION_FIXTURE, max_examples=FEW)
@given(
    owners=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4),
    facts=st.lists(
        st.tuples(st.sampled_from(["plan", "phone", "name", "card"]), st.text(min_size=1)),
        min_size=1,
        max_size=8,
    ),
    steps=maintenance_steps,
)
def test_keyed_facts_survive_any_maintenance_on_any_enclosing_scope(
    store: DuckDBStore,
    owners: list[int],
    facts: list[tuple[str, str]],
    steps: list[tuple[int, tuple[str, dict[str, Any]]]],
) -> None:
    base = ("u" + uuid.uuid4().hex[:8], "bot", "r1", "s1")
    saved: dict[int, dict[str, str]] = {}
    for level, (key, value) in zip(itertools.cycle(owners), facts):
        ns = Namespace(**dict(zip(_LEVEL_FIELDS[:level], base[:level], strict=True)))
        kf = KeyedFacts(store, ns)
        try:
            kf.save(key, value)
        except ValueError:
            continue  # an empty or unencodable value: refused, nothing to keep
        saved.setdefault(level, {})[key] = value
        store.add_many(ns, [NewMemory(content=f"{key} note {value}"[:200], importance=0.0)])
    for levels, (op, args) in steps:
        scope = Namespace(**dict(zip(_LEVEL_FIELDS[:levels], base[:levels], strict=True)))
        method = getattr(store, op)
        if op == "enforce_cap":
            method(scope, args["max_memories"])
        else:
            method(scope, **args)
    for level, values in saved.items():
        ns = Namespace(**dict(zip(_LEVEL_FIELDS[:level], base[:level], strict=True)))
        kf = KeyedFacts(store, ns)
        assert kf.items() == values
        for key in values:
            assert {h.op for h in kf.history(key)} <= {"ADD", "UPDATE"}


# -- episodes never merge --------------------------------------------------------------------


@settings(suppress_health_check=_FUNCTION_FIXTURE, max_examples=FEW)
@given(
    stem=st.text(min_size=1, max_size=40),
    variants=st.lists(st.sampled_from(["", " ok", " ok.", "!", " Ok", " 1", "  "]), max_size=12),
    splits=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=6),
    threshold=st.floats(min_value=0.01, max_value=1.0),
)
def test_episodes_are_never_merged(
    store: DuckDBStore, stem: str, variants: list[str], splits: list[int], threshold: float
) -> None:
    ns = Namespace(user_id="e" + uuid.uuid4().hex[:8])
    texts = [f"user: {stem}{v} assistant: noted" for v in variants] or ["user: hi assistant: hi"]
    try:
        items = [NewMemory(content=t, kind="episode") for t in texts]
        for item in items:
            item.validate()
    except InvalidMemoryError:
        return  # e.g. a lone surrogate in the stem: refused, nothing stored
    pos = 0
    for size in itertools.cycle(splits):
        if pos >= len(items):
            break
        store.add_many(ns, items[pos : pos + size])
        pos += size
    store.consolidate(ns, threshold=threshold)
    store.prune_duplicates(ns, threshold=threshold)
    assert store.count(ns) == len(items)


# -- imported rows with any value in any column ----------------------------------------------

_COLUMNS = (
    "id",
    "user_id",
    "kind",
    "content",
    "importance",
    "tags",
    "source_ids",
    "created_at",
    "updated_at",
    "last_accessed",
    "access_count",
    "superseded_by",
    "deleted_at",
    "metadata",
)
any_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def template(store: DuckDBStore, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Three valid exported rows (JSONL) to mutate."""
    ns = Namespace(user_id="template-" + uuid.uuid4().hex[:6])
    store.add_many(ns, [f"template memory {i}" for i in range(3)])
    out = tmp_path_factory.mktemp("tmpl") / "rows.jsonl"
    store.export(ns, out)
    return [json.loads(line) for line in out.read_text().splitlines()]


@settings(suppress_health_check=_FUNCTION_FIXTURE, max_examples=FEW)
@given(column=st.sampled_from(_COLUMNS), value=any_value)
def test_imported_rows_are_stored_as_given_or_refused_naming_the_column(
    store: DuckDBStore,
    template: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
    column: str,
    value: Any,
) -> None:
    user = "imp-" + uuid.uuid4().hex[:8]
    rows = [dict(r, user_id=user, id=uuid.uuid4().hex) for r in template]
    rows[1][column] = value
    path = tmp_path_factory.mktemp("imp") / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scope = Namespace(user_id=user) if column != "user_id" else None
    try:
        store.import_(path)
    except InvalidMemoryError as exc:
        assert "import row 2" in str(exc) and column in str(exc), str(exc)
        if scope is not None:
            assert store.count(scope, include_deleted=True) == 0
        return
    if column in ("importance", "access_count", "content", "kind"):
        got = store.get(Namespace(user_id=user), rows[1]["id"], include_deleted=True)
        if got is not None:  # (None: merged into a twin)
            # Stored as given, never coerced; a null access_count is the
            # export format's "never accessed" (older exports wrote none).
            expected = 0 if column == "access_count" and value is None else value
            assert getattr(got, column) == expected


# -- any value for any numeric setting -------------------------------------------------------


@given(
    data=st.data(),
    owner=st.sampled_from(
        [
            (RecorderConfig, RECORDER_FIELDS, ValueError),
            (SearchConfig, SEARCH_FIELDS, InvalidMemoryError),
            (RelevanceWeights, RELEVANCE_FIELDS, InvalidMemoryError),
        ]
    ),
)
def test_any_setting_value_is_inside_its_range_or_refused_naming_it(
    data: st.DataObject, owner: tuple[Any, dict[str, Span], type[Exception]]
) -> None:
    cls, table, error = owner
    field = data.draw(st.sampled_from(sorted(table)))
    value = data.draw(_number(table[field]))
    try:
        obj = cls(**{field: value})
    except error as exc:
        assert field in str(exc)
        return
    got = getattr(obj, field)
    span = table[field]
    if got is None:
        assert span.optional
    else:
        assert not isinstance(got, bool) and span.lo <= got <= span.hi
        assert not (span.lo_open and got == span.lo)


def test_a_refused_setting_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidMemoryError, match="checkpoint_mb"):
        DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(8), checkpoint_mb=10**9)
    assert list(tmp_path.iterdir()) == []


# -- mistyped fields and depth at the store's door ----------------------------------------------

_ANY_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=3)
    | st.sets(st.integers(0, 3), max_size=2)
)


@st.composite
def _deep(draw: st.DrawFn) -> Any:
    """A value nested 0-120 levels deep (objects, lists, tuples, int-keyed objects)."""
    value: Any = draw(_ANY_LEAF)
    for kind in draw(st.lists(st.sampled_from("dltk"), max_size=120)):
        value = {"d": {"a": value}, "l": [value], "t": (value, 1), "k": {1: value}}[kind]
    return value


_JSON_OBJECT = st.dictionaries(st.text(max_size=4), _deep(), max_size=3)
_TEXTS = st.lists(st.text(max_size=6), max_size=3)
# Each field: values it may hold (often) and values of any type and depth.
_NEW_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "content": st.text(min_size=1, max_size=30),
    "kind": st.sampled_from(["fact", "episode", "note", "k" * 64]),
    "importance": st.floats(0.0, 1.0),
    "tags": _TEXTS | _TEXTS.map(tuple),
    "source_ids": _TEXTS.map(tuple),
    "metadata": _JSON_OBJECT,
    "created_at": st.floats(0.0, 253_402_300_799.0) | st.integers(0, 253_402_300_799),
    "id": st.text(min_size=1, max_size=12),
}


@st.composite
def _new_fields(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.sets(st.sampled_from(sorted(_NEW_FIELDS)), min_size=1, max_size=4))
    return {
        name: draw(_NEW_FIELDS[name] | _ANY_LEAF | _deep() | _JSON_OBJECT) for name in sorted(names)
    }


@settings(suppress_health_check=_FUNCTION_FIXTURE, max_examples=FEW)
@given(fields=_new_fields(), many=st.booleans())
def test_any_field_value_is_stored_equal_or_refused_naming_the_field(
    store: DuckDBStore, fields: dict[str, Any], many: bool
) -> None:
    """Whatever ``add()``/``add_many()`` is given is stored and reads back equal, or is
    refused with ``InvalidMemoryError`` naming one of the given fields, storing nothing."""
    ns = Namespace(user_id="door-" + uuid.uuid4().hex[:8])
    if isinstance(fields.get("id"), str):
        fields["id"] = uuid.uuid4().hex + fields["id"]  # unique across examples
    fields.setdefault("content", "a memory " + ns.user_id)
    item = NewMemory(**fields)
    try:
        if many:
            store.add_many(ns, [NewMemory(content="its good neighbour"), item])
        else:
            store.add(ns, item)
    except InvalidMemoryError as exc:
        assert any(name in str(exc) for name in fields), (fields, str(exc))
        assert store.count(ns, include_deleted=True) == 0
        event("refused")
        return
    event("stored")
    got = [m for m in store.list(ns, limit=10) if m.content == item.content]
    assert len(got) == 1, got
    m = got[0]
    # Stored as given: JSON values normalised the way the door says (tuples become lists).
    assert m.metadata == json.loads(json.dumps(item.metadata))
    # a repeated tag or source id is kept once, in order (the store's new_record)
    assert (m.kind, m.importance, m.tags, m.source_ids) == (
        item.kind,
        item.importance,
        tuple(dict.fromkeys(item.tags)),
        tuple(dict.fromkeys(item.source_ids)),
    )
    if item.created_at is not None:
        assert m.created_at == pytest.approx(item.created_at, abs=1e-6)
    if item.id is not None:
        assert m.id == item.id
