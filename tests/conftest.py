from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from hypothesis import HealthCheck, settings

from actormem import MemoryRuntime

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("fuzz", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _stop_all_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[MemoryRuntime]:
    rt = MemoryRuntime(session_dir=tmp_path / "sessions")
    yield rt
    rt.close()


pytest_plugins = ["tests._postgres"]

# tests/llamacpp needs a llama.cpp build (about 20 minutes once): `make test-llamacpp`.
collect_ignore = [] if os.environ.get("ACTORMEM_LLAMACPP") else ["llamacpp"]
