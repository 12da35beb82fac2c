"""StateModule: objects whose state saves to and restores from session files.

A :class:`StateModule` assigned as an attribute of another StateModule is
nested automatically: the parent's :meth:`~StateModule.state_dict` holds the
child's state dict under the attribute name, and
:meth:`~StateModule.load_state_dict` hands it back.  Plain attributes are
saved when registered with :meth:`~StateModule.register_state`, optionally
with custom to/from JSON functions.

State dicts hold JSON-compatible values (msgspec Structs such as ``Msg`` are
allowed: the session encoder writes them natively).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

__all__ = ["StateError", "StateModule"]


class StateError(ValueError):
    """A state dict does not fit the module that loads it."""


_Codec = tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]
_RAW_DICT: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])


class StateModule:
    """Base class of everything that saves to a session.

    Subclasses call ``super().__init__()`` first, then assign attributes.
    Override :meth:`state_dict` / :meth:`load_state_dict` for state that is
    not held in attributes (actors do: their state lives on the actor thread).
    """

    _state_modules: dict[str, StateModule]
    _state_attrs: dict[str, _Codec]

    def __init__(self) -> None:
        object.__setattr__(self, "_state_modules", {})
        object.__setattr__(self, "_state_attrs", {})

    def __setattr__(self, name: str, value: Any) -> None:
        modules: dict[str, StateModule] | None = self.__dict__.get("_state_modules")
        if modules is None:
            raise StateError(
                f"{type(self).__name__}.__init__ must call super().__init__() "
                "before setting attributes"
            )
        if isinstance(value, StateModule):
            modules[name] = value
        else:
            modules.pop(name, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._state_modules.pop(name, None)
        self._state_attrs.pop(name, None)
        object.__delattr__(self, name)

    @property
    def component_name(self) -> str:
        """The key of this module in a session file (the class name by default)."""
        return type(self).__name__

    def register_state(
        self,
        name: str,
        to_json: Callable[[Any], Any] | None = None,
        from_json: Callable[[Any], Any] | None = None,
    ) -> None:
        """Save the plain attribute ``name`` with this module's state.

        Args:
            name: attribute name; it must exist.
            to_json: converts the value to a JSON-compatible one when saving.
            from_json: converts it back when loading.

        Raises:
            StateError: the attribute does not exist.
        """
        if not hasattr(self, name):
            raise StateError(f"{type(self).__name__} has no attribute {name!r} to register")
        self._state_attrs[name] = (to_json, from_json)

    def state_dict(self) -> dict[str, Any]:
        """Return this module's state, nested modules included."""
        out: dict[str, Any] = {}
        for name, (to_json, _) in self._state_attrs.items():
            value = getattr(self, name)
            out[name] = to_json(value) if to_json else value
        for name, module in self._state_modules.items():
            out[name] = module.state_dict()
        return out

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore state produced by :meth:`state_dict`.

        Args:
            state: the state dict.
            strict: when True, a missing or unexpected key is an error.

        Raises:
            StateError: ``state`` is not a dict, or (strict) keys do not match.
        """
        if not isinstance(state, dict):
            raise StateError(
                f"{type(self).__name__}: state must be a dict, got {type(state).__name__}"
            )
        self._check_keys(state.keys(), strict)
        for name, (_, from_json) in self._state_attrs.items():
            if name in state:
                value = state[name]
                object.__setattr__(self, name, from_json(value) if from_json else value)
        for name, module in self._state_modules.items():
            if name in state:
                module.load_state_dict(state[name], strict=strict)

    def load_state_json(self, data: bytes | msgspec.Raw, strict: bool = True) -> None:
        """Restore state from its JSON encoding (what sessions call).

        The default decodes one level and hands each nested module its own
        raw JSON, so a module that knows its state's type (an actor's
        message list, say) decodes it straight into typed objects.

        Raises:
            StateError: the JSON is not an object, or (strict) keys do not match.
        """
        try:
            parts = _RAW_DICT.decode(data)
        except msgspec.DecodeError as exc:
            raise StateError(f"{type(self).__name__}: state must be a JSON object: {exc}") from None
        self._check_keys(parts.keys(), strict)
        for name, (_, from_json) in self._state_attrs.items():
            if name in parts:
                value = msgspec.json.decode(parts[name])
                object.__setattr__(self, name, from_json(value) if from_json else value)
        for name, module in self._state_modules.items():
            if name in parts:
                module.load_state_json(parts[name], strict=strict)

    def _check_keys(self, keys: Any, strict: bool) -> None:
        if not strict:
            return
        expected = set(self._state_attrs) | set(self._state_modules)
        missing = expected - set(keys)
        unexpected = set(keys) - expected
        if missing or unexpected:
            raise StateError(
                f"{type(self).__name__}: state keys do not match "
                f"(missing {sorted(missing)}, unexpected {sorted(unexpected)})"
            )
