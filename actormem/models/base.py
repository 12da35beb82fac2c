"""The model protocols every component talks to: chat models and embedders.

Implementations: :mod:`actormem.models.scripted` (offline, for tests and the
demo), :mod:`actormem.models.openai` (any OpenAI-compatible server over HTTP)
and :mod:`actormem.models.embedders` (the bundled WordLlama embedder and an
OpenAI-compatible embeddings adapter).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from actormem.messages import Msg

__all__ = [
    "ChatModel",
    "Embedder",
    "ModelError",
    "ModelTimeoutError",
    "ToolSpec",
    "WordVectors",
]

#: A tool definition in the OpenAI function-calling format:
#: ``{"type": "function", "function": {"name", "description", "parameters"}}``.
ToolSpec = dict[str, Any]


class ModelError(RuntimeError):
    """A model call failed (after retries) or returned something unusable."""


class ModelTimeoutError(ModelError, TimeoutError):
    """A model call did not answer within its timeout."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: messages (and optional tools) in, one assistant Msg out.

    ``timeout`` is the caller's limit in seconds for this one call; an
    implementation raises :class:`ModelError` (or ``TimeoutError``) when it
    cannot answer in time.  Tool calls come back as ``ToolUseBlock``s in the
    returned message's content.
    """

    name: str

    def chat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg: ...

    async def achat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts in, an ``(n, dim)`` float32 matrix out (rows L2-normalised)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class WordVectors(Protocol):
    """An embedder that can also embed single words (optional capability).

    Static embedders (WordLlama) have one vector per token, so a word's vector
    is cheap and meaningful; the store's second-stage *soft term match* uses
    it to credit synonyms and other forms of a query word.  Embedders without
    this method (remote models, the hash embedder) simply skip that stage.
    """

    def word_vectors(self, words: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(words), dim)`` L2-normalised vectors, one per word."""
        ...
