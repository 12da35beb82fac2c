"""Child process of the crash-safety test (``test_crash.py``); killed at random moments.

Usage: ``python _crash_worker.py STORE SESSION_DIR ACK_FILE RUN SEED``

It opens the store and the session left by the previous (killed) run, then
loops over a realistic workload -- adds with AutoContext compressions, turns
recorded and flushed, keyed facts, session saves -- and appends one line per
item to ACK_FILE, fsynced, *after* the call that acknowledges it returned:

* ``SUB <token>``   before ``record()`` (submitted, not yet acknowledged)
* ``REC <token>``   after ``flush()`` returned (acknowledged)
* ``FACT <key> <value>`` after ``save_fact()`` returned
* ``SESS <token>``  after ``save_session()`` returned: the last user token in it
* ``READY``         once the runtime is open and the session loaded
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from actormem import MemoryRuntime, Msg
from actormem.compress import AutoContextConfig
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace

NS = Namespace(user_id="crash", agent_id="worker")
SESSION = "crash"
WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelvin",
    "lagoon",
    "mosaic",
    "nectar",
    "orchid",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "velvet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]


def config() -> AutoContextConfig:
    """The small compressor budget shared with the parent (which reloads the session)."""
    return AutoContextConfig(msg_threshold=16, last_keep=4, large_payload_threshold=400)


def open_store(path: str) -> DuckDBStore:
    """The store as the worker and the checker open it (fast embedder, no near-dup merging)."""
    return DuckDBStore(
        path, embedder=HashEmbedder(64), near_duplicate_threshold=None, touch_flush_interval=None
    )


class Acks:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def log(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())
        os.fsync(self.fd)


def main(argv: list[str]) -> int:
    store_path, session_dir, ack_path = argv[:3]
    run, seed = int(argv[3]), int(argv[4])
    rng = random.Random(seed)
    acks = Acks(ack_path)
    store = open_store(store_path)
    rt = MemoryRuntime(
        session_dir=session_dir,
        store=store,
        namespace=NS,
        autocontext=config(),
        recorder=RecorderConfig(batch_seconds=0.02, idle_seconds=None),
    )
    rt.load_session(SESSION)
    acks.log("READY")
    unflushed: list[str] = []
    last_user = ""
    for i in range(1_000_000):
        token = f"tok{run}x{i}"
        words = " ".join(rng.sample(WORDS, 4))
        user = Msg.user(f"{token} please note {words}")
        if i % 7 == 3:
            user = Msg.user(f"{token} I live in {rng.choice(WORDS).title()}ville.")
        big = "lorem ipsum " * 60 if i % 5 == 0 else ""
        reply = Msg.assistant(f"Noted {token}: {words}. {big}")
        rt.add([user, reply])
        last_user = token
        acks.log(f"SUB {token}")
        rt.record([user, reply])
        unflushed.append(token)
        if i % 3 == 2:
            rt.flush(60)
            for t in unflushed:
                acks.log(f"REC {t}")
            unflushed.clear()
        if i % 4 == 1:
            key, value = f"k{run}_{i}", f"v{words.replace(' ', '-')}"
            rt.save_fact(key, value)
            acks.log(f"FACT {key} {value}")
            rt.save_fact("counter", f"{run:04d}.{i:06d}")
            acks.log(f"FACT counter {run:04d}.{i:06d}")
        if i % 6 == 5:
            rt.save_session(SESSION)
            acks.log(f"SESS {last_user}")
        if i % 10 == 9:
            rt.compress_now()
    return 0  # pragma: no cover - always killed first


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main(sys.argv[1:]))
