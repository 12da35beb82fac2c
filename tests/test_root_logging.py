"""actormem leaves the standard library's root logger exactly as the application set it.

``wordllama`` calls ``logging.basicConfig(level=INFO)`` when imported, which put
``INFO:httpx:HTTP Request: ...`` lines from every library on stderr (and in the
middle of ``actormem chat``).  Each case runs in a fresh interpreter, because
only the first import of a library runs its side effects.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USE_EVERYTHING = """
import json, logging, sys
{setup}
root = logging.getLogger()
before = (root.level, [id(h) for h in root.handlers])

import actormem, actormem.cli, actormem.ui, actormem.journal
from actormem import AutoContextConfig, MemoryRuntime, Msg, ReActAgent
from actormem.compress import compress
from actormem.models.openai import OpenAIChatModel
from actormem.store import DuckDBStore, Namespace
from tests._strict_openai import Answer, strict_server

def brain(req):
    if req.tools and not req.last_tool_results:
        return Answer(tool_calls=[("add", '{{"a": 2, "b": 3}}')])
    return Answer(text="[]" if "Conversation" in req.prompt_text else "5")

def add(a: int, b: int) -> int:
    '''Add.

    Args:
        a: one.
        b: two.
    '''
    return a + b

tmp = sys.argv[1]
with strict_server(brain) as srv:
    model = OpenAIChatModel(srv.url, "m", max_retries=0)
    store = DuckDBStore(tmp + "/mem.duckdb")  # the bundled WordLlama embedder
    with MemoryRuntime(
        session_dir=tmp + "/s", store=store, namespace=Namespace(user_id="u"),
        model=model, autocontext=AutoContextConfig(msg_threshold=8),
    ) as rt:
        rt.serve_ui(port=0)
        agent = ReActAgent("bot", model, rt, tools=[add], session_id="s1")
        agent.reply("what is 2 + 3? my name is Ada and I live in Porto")
        rt.flush()
        rt.retrieve("where does Ada live")
        list(model.stream([Msg.user("hi")]))
        compress([Msg.user("x " * 50)] * 12, AutoContextConfig(msg_threshold=8))
    store.close()
after = (root.level, [id(h) for h in root.handlers])
print(json.dumps({{"before": before, "after": after}}))
"""


@pytest.mark.parametrize(
    "setup",
    [
        "",  # an application that never configured logging
        "logging.basicConfig(level=logging.ERROR, stream=sys.stderr)",  # one that did
    ],
)
def test_using_every_part_leaves_the_root_logger_alone(tmp_path: Path, setup: str) -> None:
    code = USE_EVERYTHING.format(setup=setup)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state["after"] == state["before"]
    assert "INFO:" not in proc.stderr, proc.stderr[-2000:]
