from __future__ import annotations

import io
import json

import structlog

from actormem.logs import configure_logging, redact_secrets


def test_redaction_hides_keys_and_tokens() -> None:
    out = redact_secrets(
        None,
        "info",
        {
            "event": "call",
            "api_key": "sk-abcdefghijklmnop",
            "headers": {"Authorization": "Bearer abcdefghijkl", "x": 1},
            "note": "used sk-0123456789abcdef here",
            "count": 3,
        },
    )
    assert out["api_key"] == "***" and out["headers"] == {"Authorization": "***", "x": 1}
    assert "sk-0123456789abcdef" not in out["note"] and out["count"] == 3


def test_configured_logging_writes_redacted_json_to_the_stream() -> None:
    buf = io.StringIO()
    configure_logging("INFO", json=True, stream=buf)
    try:
        structlog.get_logger("t").info(
            "model.call", api_key="sk-secretsecretsecret", url="http://x"
        )
        structlog.get_logger("t").debug("hidden")
    finally:
        structlog.reset_defaults()
        configure_logging("WARNING")
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert len(lines) == 1 and lines[0]["api_key"] == "***" and lines[0]["url"] == "http://x"
