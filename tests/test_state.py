from __future__ import annotations

import pytest

from actormem.state import StateError, StateModule


class Leaf(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.tags: set[str] = set()
        self.register_state("count")
        self.register_state("tags", to_json=sorted, from_json=set)


class Branch(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.left = Leaf()
        self.right = Leaf()
        self.unsaved = "not registered"


def test_nested_modules_are_saved_and_restored() -> None:
    b = Branch()
    b.left.count = 3
    b.right.tags = {"b", "a"}
    state = b.state_dict()
    assert state == {"left": {"count": 3, "tags": []}, "right": {"count": 0, "tags": ["a", "b"]}}
    fresh = Branch()
    fresh.load_state_dict(state)
    assert fresh.left.count == 3 and fresh.right.tags == {"a", "b"}


def test_strict_load_names_missing_and_unexpected_keys() -> None:
    with pytest.raises(StateError, match=r"missing \['right'\].*unexpected \['extra'\]"):
        Branch().load_state_dict({"left": {"count": 1, "tags": []}, "extra": 1})
    b = Branch()
    b.load_state_dict({"left": {"count": 7}}, strict=False)
    assert b.left.count == 7


def test_reassigning_a_module_attribute_to_a_plain_value_unnests_it() -> None:
    b = Branch()
    b.right = None  # type: ignore[assignment]
    assert set(b.state_dict()) == {"left"}


def test_errors() -> None:
    with pytest.raises(StateError, match="must be a dict"):
        Leaf().load_state_dict([])  # type: ignore[arg-type]
    with pytest.raises(StateError, match="no attribute"):
        Leaf().register_state("nope")

    class Forgot(StateModule):
        def __init__(self) -> None:
            self.x = 1

    with pytest.raises(StateError, match="super"):
        Forgot()
