"""An agent on PostgreSQL does not load DuckDB: each agent is a process of its own.

On a cluster every agent's actor is a Python process, so what it imports
is paid once per agent: DuckDB's library added 51 MB RSS and 6 MB of pages
of its own (USS) to each one, and its import time to every start and every
reload after an idle release.  The agent here runs in a fresh interpreter
where DuckDB cannot be imported (as if it were not installed): a
conversation with a PostgreSQL store and PostgreSQL sessions works end to
end, and DuckDB is still needed where it is used (a DuckDB path).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests._postgres import pg_url

_AGENT = """
import sys
sys.modules["duckdb"] = None  # import duckdb -> ImportError
from actormem import MemoryRuntime, Msg
from actormem.cluster._host import MemoryHost
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import Namespace

url = sys.argv[1]
rt = MemoryRuntime(
    namespace=Namespace(user_id="ada"),
    store=url,
    sessions=url,
    embedder=HashEmbedder(64),
    recorder=RecorderConfig(batch_seconds=0.05),
)
rt.add(Msg.user("I live in Porto."))
rt.record([Msg.user("My sister lives in Lisbon."), Msg.assistant("Noted.")])
rt.flush()
rt.save_session("ada-1")
hits = [h.memory.content for h in rt.retrieve("Lisbon", 3)]
rt.close()
print(len(hits) > 0, any("Lisbon" in h for h in hits))
try:
    MemoryRuntime(store=sys.argv[2])
except ImportError as exc:
    print("duckdb path refused:", "duckdb" in str(exc))
"""


def test_an_agent_on_postgresql_runs_without_duckdb(pg_dsn: str, tmp_path: object) -> None:
    url = pg_url(pg_dsn)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_AGENT), url, f"{tmp_path}/m.duckdb"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-2:] == ["True True", "duckdb path refused: True"], out.stdout
