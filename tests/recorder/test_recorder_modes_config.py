from __future__ import annotations

import pytest

from actormem.recorder import LongTermMemoryMode, RecorderConfig


def test_mode_flags_and_parsing() -> None:
    m = LongTermMemoryMode
    assert (m.STATIC_CONTROL.static, m.STATIC_CONTROL.agent_tools) == (True, False)
    assert (m.AGENT_CONTROL.static, m.AGENT_CONTROL.agent_tools) == (False, True)
    assert (m.BOTH.static, m.BOTH.agent_tools) == (True, True)
    assert m.parse("both") is m.BOTH
    assert m.parse(" AGENT_CONTROL ") is m.AGENT_CONTROL
    assert m.parse(m.STATIC_CONTROL) is m.STATIC_CONTROL
    with pytest.raises(ValueError, match="choose one of STATIC_CONTROL, AGENT_CONTROL, BOTH"):
        m.parse("never")
    with pytest.raises(ValueError, match="unknown"):
        m.parse(3)  # type: ignore[arg-type]


def test_config_defaults_and_replace() -> None:
    cfg = RecorderConfig()
    assert cfg.batch_count > 1 and cfg.max_pending and cfg.idle_seconds
    assert cfg.replace(batch_count=3).batch_count == 3
    assert RecorderConfig(maintenance=["decay"]).maintenance == ("decay",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("batch_seconds", 0, "batch_seconds"),
        ("batch_count", 0, r"batch_count must be an int in \[1, 1000000\]"),
        ("max_pending", 0, "max_pending"),
        ("confidence_threshold", 1.5, "confidence_threshold"),
        ("record_episodes", "yes", "record_episodes"),
        ("idle_seconds", -1, "idle_seconds"),
        ("maintenance", ("decay", "vacuum"), "unknown action"),
        ("maintenance", "decay", "tuple of action names"),
        ("batch_seconds", float("nan"), "batch_seconds"),
        ("model_retries", True, "model_retries"),
    ],
)
def test_config_rejects_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecorderConfig(**{field: value})  # type: ignore[arg-type]
