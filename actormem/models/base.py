"""The model protocols every component talks to: chat models and embedders.

Implementations: :mod:`actormem.models.scripted` (offline, for tests and the
demo), :mod:`actormem.models.openai` (any OpenAI-compatible server over HTTP)
and :mod:`actormem.models.embedders` (the bundled WordLlama embedder and an
OpenAI-compatible embeddings adapter).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from actormem.messages import Msg

__all__ = [
    "ChatModel",
    "Embedder",
    "MalformedCall",
    "MalformedToolCallError",
    "ModelError",
    "ModelTimeoutError",
    "ToolSpec",
    "WordVectors",
]

#: A tool definition in the OpenAI function-calling format:
#: ``{"type": "function", "function": {"name", "description", "parameters"}}``.
ToolSpec = dict[str, Any]


class ModelError(RuntimeError):
    """A model call failed (after retries) or returned something unusable.

    The message may quote the server (an error body's first characters, a
    redirect's target): fine for a person reading a log, not for a model's
    prompt.  :meth:`summary` is the error without anything the server wrote,
    which is what an agent keeps in its memory.

    Attributes:
        problem: the kind of failure in the adapter's own words (``"timed
            out"``, ``"HTTP error status"``, ``"reply too large"`` ...);
            empty when the raiser gave none.
        status: the HTTP status, when there was one.
        endpoint: the URL called, without credentials or query string.
    """

    def __init__(
        self,
        message: str,
        *,
        problem: str = "",
        status: int | None = None,
        endpoint: str = "",
    ) -> None:
        super().__init__(message)
        self.problem = problem
        self.status = status
        self.endpoint = endpoint

    def summary(self) -> str:
        """The class, problem, status and endpoint -- no text from the server.

        An error raised without ``problem`` (a plain ``ModelError("...")``)
        gives only its class name: its message may hold anything.
        """
        parts = [type(self).__name__]
        if self.problem:
            parts.append(f": {self.problem}")
        if self.status is not None:
            parts.append(f" (HTTP {self.status})")
        if self.endpoint:
            parts.append(f" at {self.endpoint}")
        return "".join(parts)


class ModelTimeoutError(ModelError, TimeoutError):
    """A model call did not answer within its timeout."""


@dataclasses.dataclass(frozen=True)
class MalformedCall:
    """One tool call of a reply whose arguments could not be used.

    Attributes:
        id: the call id the model gave (or one made up when it gave none).
        name: the function name.
        arguments: the raw ``arguments`` string as the model wrote it.
        problem: what is wrong with it, in words.
    """

    id: str
    name: str
    arguments: str
    problem: str


class MalformedToolCallError(ModelError):
    """The model asked for tool calls whose arguments are not a JSON object.

    Small models do this often, and a reply cut at ``max_tokens`` always does
    (``'{"city": "Lis'``).  The reply itself arrived, so it is not a transport
    failure: an agent gives each problem back to the model as a tool result
    error and lets it try again (see :class:`~actormem.agent.ReActAgent`).

    Attributes:
        text: the reply's text content, if any.
        calls: every tool call of the reply, in order; the usable ones have an
            empty ``problem`` and their ``arguments`` parse.
        finish_reason: the server's ``finish_reason`` (``length`` = truncated).
        usage: the call's token usage when the server reported it (it is
            already counted in the model's ``total_usage``).
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        calls: Sequence[MalformedCall] = (),
        finish_reason: str = "",
        usage: dict[str, int] | None = None,
        endpoint: str = "",
    ) -> None:
        super().__init__(message, problem="malformed tool call", endpoint=endpoint)
        self.text = text
        self.calls = tuple(calls)
        self.finish_reason = finish_reason
        self.usage = usage

    @property
    def truncated(self) -> bool:
        """True when the server cut the reply at its token limit."""
        return self.finish_reason == "length"


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
