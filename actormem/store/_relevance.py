"""Seed 000's relevance score and decay, vectorised with numpy.

A memory's relevance blends four signals, each in ``[0, 1]``::

    recency    = 1 / (1 + days_since_last_access)
    frequency  = min(access_count / 10, 1)
    importance = the memory's importance
    age        = 0.95 ** days_since_creation

    relevance  = 0.3 * recency + 0.2 * frequency + 0.4 * importance + 0.1 * age

Decay (the long-term garbage collector's rule) discounts relevance by time
unused: ``decayed = relevance * 0.95 ** days_since_last_access``; memories
whose decayed relevance falls below a threshold (0.10 by default) are
forgotten.  Negative ages (clock skew, imported future dates) count as zero.
"""

from __future__ import annotations

from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._limits import RELEVANCE_FIELDS, check_fields
from actormem.store._types import InvalidMemoryError

__all__ = [
    "DAY_SECONDS",
    "RelevanceWeights",
    "decayed_relevance",
    "relevance",
]

DAY_SECONDS: Final = 86_400.0

F64 = npt.NDArray[np.float64]


class RelevanceWeights(msgspec.Struct, frozen=True, kw_only=True):
    """The weights and rates of the relevance formula (seed 000's defaults)."""

    recency: float = 0.3
    frequency: float = 0.2
    importance: float = 0.4
    age: float = 0.1
    frequency_saturation: float = 10.0
    age_rate: float = 0.95

    def __post_init__(self) -> None:
        check_fields(self, RELEVANCE_FIELDS, "RelevanceWeights", error=InvalidMemoryError)


DEFAULT_WEIGHTS: Final = RelevanceWeights()


def _days(now: float, then: npt.ArrayLike) -> F64:
    return np.maximum((now - np.asarray(then, dtype=np.float64)) / DAY_SECONDS, 0.0)


def relevance(
    importance: npt.ArrayLike,
    access_count: npt.ArrayLike,
    last_accessed: npt.ArrayLike,
    created_at: npt.ArrayLike,
    now: float,
    weights: RelevanceWeights = DEFAULT_WEIGHTS,
) -> F64:
    """Relevance of one or many memories at time ``now`` (see module docstring).

    Args:
        importance: Importance values in ``[0, 1]``.
        access_count: Retrieval counts.
        last_accessed: Last access times (Unix seconds).
        created_at: Creation times (Unix seconds).
        now: The time to score at (Unix seconds).
        weights: The formula's weights.

    Returns:
        A float64 array (0-d for scalar input) of scores in ``[0, 1]``.
    """
    recency = 1.0 / (1.0 + _days(now, last_accessed))
    freq = np.minimum(
        np.asarray(access_count, dtype=np.float64) / weights.frequency_saturation, 1.0
    )
    age = weights.age_rate ** _days(now, created_at)
    imp = np.asarray(importance, dtype=np.float64)
    out: F64 = (
        weights.recency * recency
        + weights.frequency * freq
        + weights.importance * imp
        + weights.age * age
    )
    return out


def decayed_relevance(
    relevance_now: npt.ArrayLike,
    last_accessed: npt.ArrayLike,
    now: float,
    rate: float = 0.95,
) -> F64:
    """``relevance * rate ** days_since_last_access``.

    Args:
        relevance_now: Relevance scores.
        last_accessed: Last access times (Unix seconds).
        now: Current time (Unix seconds).
        rate: Daily retention factor.

    Returns:
        The decayed scores (float64).
    """
    out: F64 = np.asarray(relevance_now, dtype=np.float64) * rate ** _days(now, last_accessed)
    return out
