"""Long-term memory modes: who decides when to record and retrieve."""

from __future__ import annotations

import enum

__all__ = ["LongTermMemoryMode"]


class LongTermMemoryMode(enum.Enum):
    """How the agent uses its long-term memory.

    Attributes:
        STATIC_CONTROL: The framework does it: before each reasoning step it
            retrieves for the latest user message and injects the result in
            ``<long_term_memory>`` tags; after each reply it records the turn.
        AGENT_CONTROL: The model does it, through two tools
            (``record_to_memory`` and ``retrieve_from_memory``).
        BOTH: Both of the above.
    """

    STATIC_CONTROL = "static_control"
    AGENT_CONTROL = "agent_control"
    BOTH = "both"

    @property
    def static(self) -> bool:
        """Whether the framework retrieves before and records after each turn."""
        return self is not LongTermMemoryMode.AGENT_CONTROL

    @property
    def agent_tools(self) -> bool:
        """Whether the model is offered the two memory tools."""
        return self is not LongTermMemoryMode.STATIC_CONTROL

    @classmethod
    def parse(cls, value: LongTermMemoryMode | str) -> LongTermMemoryMode:
        """Accept a member or its name/value in any case (``"both"``, ``"AGENT_CONTROL"``).

        Raises:
            ValueError: ``value`` names no mode.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().lower()
            for mode in cls:
                if key in (mode.value, mode.name.lower()):
                    return mode
        choices = ", ".join(m.name for m in cls)
        raise ValueError(f"unknown long-term memory mode {value!r} (choose one of {choices})")
