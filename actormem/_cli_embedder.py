"""``--embedder`` of the store commands: which embedder opens a store built with another.

A store records the name and size of the embedder that built it and refuses
to open with another (its vectors would mean nothing to it).  The CLI opens
with the bundled embedder unless told otherwise; without ``--embedder`` a
store built with another one is opened with the embedder it recorded, when
the CLI can build that one from its name (``hash-<dim>``, the bundled
WordLlama, ``openai:<model>`` with ``OPENAI_API_KEY`` set) -- so ``forget``,
``stats`` or ``export`` work on any store.
"""

from __future__ import annotations

import os
from typing import Any

from actormem._cli_chat import UsageError

__all__ = ["EMBEDDER_HELP", "embedder_named"]

EMBEDDER_HELP = (
    "the embedder the store was built with: hash-<dim>, wordllama, or openai:<model> "
    "(OPENAI_API_KEY / OPENAI_BASE_URL); default: the one the store recorded"
)


def embedder_named(spec: str, dim: int = 0) -> Any:
    """The embedder ``spec`` names (``dim``: an OpenAI model's size, from the store).

    Raises:
        UsageError: ``spec`` names no embedder the CLI can build.
    """
    from actormem.models.embedders import HashEmbedder, OpenAIEmbedder, WordLlamaEmbedder

    name = spec.strip()
    if name in ("wordllama", WordLlamaEmbedder.name):
        return WordLlamaEmbedder()
    if name.startswith("hash-") and name[5:].isdigit():
        try:
            return HashEmbedder(int(name[5:]))
        except ValueError as exc:
            raise UsageError(f"--embedder {spec!r}: {exc}") from None
    if name.startswith("openai:") and len(name) > 7:
        if not os.environ.get("OPENAI_API_KEY"):
            raise UsageError(f"embedder {spec!r} needs OPENAI_API_KEY in the environment")
        if dim <= 0:
            raise UsageError(f"embedder {spec!r}: its vector size is not known")
        kwargs: dict[str, Any] = {
            "model": name[7:],
            "dim": dim,
            "api_key": os.environ["OPENAI_API_KEY"],
        }
        if os.environ.get("OPENAI_BASE_URL"):
            kwargs["base_url"] = os.environ["OPENAI_BASE_URL"]
        return OpenAIEmbedder(**kwargs)
    raise UsageError(
        f"--embedder {spec!r} is none of hash-<dim>, wordllama or openai:<model>; open the "
        "store with the embedder it was built with"
    )
