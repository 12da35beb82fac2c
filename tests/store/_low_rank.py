"""A test embedder whose vectors span few dimensions, as a text embedder's do.

The stores' approximate first pass is learnt only for such vectors: a hash
embedder's spread evenly over every dimension (``HashEmbedder.isotropic``),
so tests of the approximate path embed with this one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from actormem.models.embedders import HashEmbedder


class LowRankEmbedder:
    """HashEmbedder's 12-d vectors mixed into 64 dims: texts that share words are near,
    and the vectors span 12 dimensions, as real embeddings span few of theirs (a
    64-d hash embedding is isotropic: a 16-d projection keeps little of it)."""

    name = "low-rank-12-64"
    dim = 64

    def __init__(self) -> None:
        self._hash = HashEmbedder(12)
        self._mix = np.random.default_rng(5).standard_normal((12, 64)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = self._hash.embed(texts) @ self._mix
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)
