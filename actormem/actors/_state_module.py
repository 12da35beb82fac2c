"""The StateModule face of an actor: its state fetched from and sent to its thread.

Used by :class:`~actormem.runtime.MemoryRuntime` to nest each actor's state
in a session (``state_dict`` / ``load_state_dict``) without touching the
actor's state from another thread.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actormem.actors._supervisor import Supervisor
from actormem.events import GetState, LoadState
from actormem.state import StateError, StateModule

__all__ = ["ActorStateModule"]


class ActorStateModule(StateModule):
    """The StateModule face of an actor: state is fetched from / sent to its thread.

    Args:
        supervisor: the actor's supervisor.
        state_type: the msgspec Struct of the actor's state (``GetState``
            answers one, ``LoadState`` takes one); JSON decodes straight into it.
        name: the component name.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        state_type: type[msgspec.Struct],
        name: str,
    ) -> None:
        super().__init__()
        self._sup = supervisor
        self._type = state_type
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(state_type)
        self._name = name

    @property
    def component_name(self) -> str:
        return self._name

    def state_dict(self) -> dict[str, Any]:
        state = self._sup.ask(GetState())
        return {f: getattr(state, f) for f in state.__struct_fields__}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        try:
            decoded = msgspec.convert(state, self._type)
        except msgspec.ValidationError as exc:
            raise StateError(f"{self._name}: invalid state: {exc}") from None
        self._sup.ask(LoadState(state=decoded))

    def load_state_json(self, data: bytes | msgspec.Raw, strict: bool = True) -> None:
        try:
            decoded = self._decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise StateError(f"{self._name}: invalid state: {exc}") from None
        self._sup.ask(LoadState(state=decoded))
