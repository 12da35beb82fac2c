"""The remote handle has the runtime's calls, and the core never imports Ray.

A walk over :class:`~actormem.runtime.MemoryRuntime`'s public members, those
of the class and those each runtime sets on itself (``fleeting``, ``bus``...,
on a runtime with every part switched on): a member added to the runtime
fails here until the handle forwards it (the table in
``actormem/cluster/_calls.py``) or says why not.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import pytest

from actormem.cluster import CALLS, NOT_FORWARDED, RemoteRuntime
from actormem.cluster._calls import ASYNC_TWINS, HOST_CALLS
from actormem.models.embedders import HashEmbedder
from actormem.runtime import MemoryRuntime


def _public(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_")]


@pytest.fixture(scope="module")
def instance_members(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """What a runtime with every part on sets on itself (store, compressor, journal)."""
    folder = tmp_path_factory.mktemp("walk")
    with MemoryRuntime(
        session_dir=folder,
        store=folder / "m.duckdb",
        embedder=HashEmbedder(16),
        autocontext=True,
        journal=True,
    ) as rt:
        names = [n for n in vars(rt) if not n.startswith("_")]
    assert {"fleeting", "bus", "short_term", "autocontext", "turns"} <= set(names)
    return names


def test_every_public_runtime_member_is_on_the_handle_or_said_why_not(
    instance_members: list[str],
) -> None:
    members = sorted({*_public(MemoryRuntime), *instance_members})
    missing = [n for n in members if not hasattr(RemoteRuntime, n) and n not in NOT_FORWARDED]
    assert missing == [], f"forward these in actormem/cluster/_calls.py: {missing}"
    stale = [n for n in [*CALLS, *NOT_FORWARDED] if n not in members and n not in HOST_CALLS]
    assert stale == [], f"the runtime no longer has: {stale}"
    assert not [n for n in NOT_FORWARDED if hasattr(RemoteRuntime, n)]


def test_a_member_not_forwarded_says_why_and_what_to_use() -> None:
    handle = RemoteRuntime.__new__(RemoteRuntime)  # no actor needed to read a member
    for name, why in NOT_FORWARDED.items():
        with pytest.raises(AttributeError, match="RemoteRuntime has no") as info:
            getattr(handle, name)
        assert why in str(info.value)
        assert not hasattr(handle, name)
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        handle.nonsense  # noqa: B018


def test_forwarded_calls_take_the_runtimes_arguments() -> None:
    for name in _public(MemoryRuntime):
        ours = inspect.getattr_static(MemoryRuntime, name)
        if name in NOT_FORWARDED or not inspect.isfunction(ours):
            continue
        theirs = inspect.signature(ours)
        handle = inspect.signature(getattr(RemoteRuntime, name))
        if name in ("save_session", "asave_session"):
            # the agent's own session by default
            assert handle.parameters["session_id"].default is None
            continue
        assert list(handle.parameters) == list(theirs.parameters), name
        for p in theirs.parameters.values():
            assert handle.parameters[p.name].default == p.default, (name, p.name)
            assert handle.parameters[p.name].kind == p.kind, (name, p.name)


def test_every_async_twin_is_a_coroutine_on_the_handle_too() -> None:
    twins = [
        n
        for n in _public(MemoryRuntime)
        if inspect.iscoroutinefunction(inspect.getattr_static(MemoryRuntime, n))
    ]
    assert twins
    for name in twins:
        assert inspect.iscoroutinefunction(getattr(RemoteRuntime, name)), name
        assert name in ASYNC_TWINS, name
    for twin, name in ASYNC_TWINS.items():
        assert name in CALLS or name == "close", twin


def test_the_core_never_imports_ray() -> None:
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class NoRay:
            def find_spec(self, name, path=None, target=None):
                if name == "ray" or name.startswith("ray."):
                    raise ImportError("ray is blocked in this test")
                return None

        sys.meta_path.insert(0, NoRay())
        import actormem
        names = [m.name for m in pkgutil.walk_packages(actormem.__path__, "actormem.")]
        for name in names:
            if name.startswith("actormem.cluster"):
                continue
            importlib.import_module(name)
        assert not any(m == "ray" or m.startswith("ray.") for m in sys.modules)
        import actormem.cluster  # importable; Ray is needed only to connect
        try:
            actormem.cluster.RemoteRuntime.connect("s")
        except ImportError as exc:
            assert "actormem[ray]" in str(exc), exc
        else:
            raise AssertionError("connect without Ray did not raise")
        print(len(names))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 50
