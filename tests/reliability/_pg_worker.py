"""One worker process of ``test_workers.py``: 4 runtimes on a shared PostgreSQL store.

Usage: ``python _pg_worker.py URL WORKER``

Like a web worker behind a load balancer, it serves every user: runtime
``r`` holds ``Namespace(user_id=f"user{r}", agent_id="svc")`` (so the four
workers write the same four namespaces at once).  The process opens one
store (one connection pool) shared by its runtimes, and each runtime has its
own ``PostgresSession`` on the same URL.

It reads one JSON command per line on stdin and answers one JSON line on
stdout (the parent waits on those lines, never on time):

* ``{"op": "write", "n": N}``: every runtime records N turns at once (one
  thread each) and flushes; answers ``{"acked": {user: [token, ...]}}``
  once every flush returned (the turns are acknowledged).
* ``{"op": "note", "user": U, "word": W}``: one turn mentioning W, flushed.
* ``{"op": "find", "user": U, "word": W}``: the contents of ``retrieve(W)``.
* ``{"op": "save", "user": U, "sid": S, "text": T}``: adds a user message T
  and a reply, saves session S; answers with the session's messages.
* ``{"op": "load", "user": U, "sid": S}``: loads session S; its messages.
* ``{"op": "stream"}``: records turns without end, flushing every 3;
  prints ``{"sub": token}`` before each ``record()`` and ``{"acked":
  [tokens]}`` after each flush returned.  The parent SIGKILLs it mid-batch.
* ``{"op": "quit"}``: closes everything and exits 0.

Tokens are letters only (``w<worker>`` + base-26 counter + ``u<user>``), so
every backend's keyword search indexes them as one word.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from actormem import MemoryRuntime, Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import Namespace, open_store

USERS = 4
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def namespace(user: int) -> Namespace:
    return Namespace(user_id=f"user{user}", agent_id="svc")


def open_shared_store(url: str) -> Any:
    """The store as workers and the checker open it (fast embedder, no near-dup merging)."""
    return open_store(url, embedder=HashEmbedder(64), near_duplicate_threshold=None)


def token(worker: int, n: int, user: int) -> str:
    letters = ""
    while True:
        n, r = divmod(n, 26)
        letters = LETTERS[r] + letters
        if n == 0:
            break
    return f"w{LETTERS[worker]}{letters}u{LETTERS[user]}"


def user_of(tok: str) -> int:
    return LETTERS.index(tok[-1])


class Worker:
    def __init__(self, url: str, worker: int) -> None:
        self.worker = worker
        self.counter = 0
        self.lock = threading.Lock()
        self.store = open_shared_store(url)
        self.runtimes = [
            MemoryRuntime(
                store=self.store,
                sessions=url,
                namespace=namespace(u),
                recorder=RecorderConfig(batch_seconds=0.02, idle_seconds=None),
            )
            for u in range(USERS)
        ]

    def next_token(self, user: int) -> str:
        with self.lock:
            self.counter += 1
            return token(self.worker, self.counter, user)

    def turn(self, user: int, tok: str) -> list[Msg]:
        return [
            Msg.user(f"please remember {tok} for me"),
            Msg.assistant(f"Noted {tok}."),
        ]

    def write(self, n: int) -> dict[str, Any]:
        acked: dict[str, list[str]] = {}
        errors: list[str] = []

        def run(user: int) -> None:
            try:
                rt = self.runtimes[user]
                toks = [self.next_token(user) for _ in range(n)]
                for tok in toks:
                    rt.record(self.turn(user, tok))
                rt.flush(60)
                acked[str(user)] = toks
            except Exception as exc:  # reported to the parent, which fails the test
                errors.append(f"user{user}: {exc!r}")

        threads = [threading.Thread(target=run, args=(u,)) for u in range(USERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"acked": acked, "errors": errors}

    def stream(self) -> None:
        rt = self.runtimes[0]
        pending: list[str] = []
        while True:
            tok = self.next_token(0)
            answer({"sub": tok})
            rt.record(self.turn(0, tok))
            pending.append(tok)
            if len(pending) == 3:
                rt.flush(60)
                answer({"acked": pending})
                pending = []

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any] | None:
        op = cmd["op"]
        if op == "write":
            return self.write(int(cmd["n"]))
        rt = self.runtimes[int(cmd.get("user", 0))]
        if op == "note":
            rt.record(self.turn(int(cmd["user"]), cmd["word"]))
            rt.flush(60)
            return {"ok": True}
        if op == "find":
            hits = rt.retrieve(cmd["word"], 5)
            return {"hits": [[h.memory.namespace.user_id, h.memory.content] for h in hits]}
        if op == "save":
            rt.add([Msg.user(cmd["text"]), Msg.assistant("ok")])
            where = rt.save_session(cmd["sid"])
            return {"where": str(where), "texts": [m.text for m in rt.messages()]}
        if op == "load":
            found = rt.load_session(cmd["sid"])
            return {"found": found, "texts": [m.text for m in rt.messages()]}
        if op == "stream":
            self.stream()
        if op == "quit":
            for rt in self.runtimes:
                rt.close()
            self.store.close()
            return None
        raise ValueError(f"unknown op {op!r}")


def answer(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    worker = Worker(argv[0], int(argv[1]))
    answer({"ready": worker.worker})
    for line in sys.stdin:
        reply = worker.handle(json.loads(line))
        if reply is None:
            answer({"bye": worker.worker})
            return 0
        answer(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
