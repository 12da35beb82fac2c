"""The README's Python examples run as written.

Every ```python block of README.md that is a complete program (it starts
with an import and names no server, DSN or placeholder) is executed in
README order in one folder, the way a reader pastes them one after the other.
The README is the product's front page: an example that raises is a defect.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from actormem import MemoryRuntime

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
#: What marks a block as needing a server or a value the reader supplies.
_NOT_RUNNABLE = (
    "http://",
    "https://",
    "postgresql://",
    "model = ...",
    "off_6a10",
    "call_your_model",
)


def _blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        code = m.group(1)
        line = text.count("\n", 0, m.start()) + 2
        if code.lstrip().startswith(("from ", "import ")) and not any(
            s in code for s in _NOT_RUNNABLE
        ):
            out.append((line, code))
    return out


def test_the_readme_examples_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = _blocks()
    # usage, sessions, long-term memory, the agent, the journal (at least)
    assert len(blocks) >= 5, [line for line, _ in blocks]
    monkeypatch.chdir(tmp_path)
    for line, code in blocks:
        scope: dict[str, object] = {"__name__": f"readme_line_{line}"}
        try:
            exec(compile(code, f"README.md:{line}", "exec"), scope)
        except Exception as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"the README example at line {line} raised {exc!r}")
        finally:
            for value in scope.values():
                if isinstance(value, MemoryRuntime):
                    value.close()
    assert "19°C, sunny" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "sessions" / "ada.json")
