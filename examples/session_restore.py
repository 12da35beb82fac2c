"""Save a conversation to a session file, then restore it in a fresh runtime.

Run: python examples/session_restore.py [session-folder]
"""

from __future__ import annotations

import sys
import tempfile

from actormem import MemoryRuntime, Msg

folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="actormem-example-")

# First "process": talk, then save. The save is atomic (temp file, fsync, rename).
with MemoryRuntime(session_dir=folder) as rt:
    rt.add(Msg.system("You are a concise assistant."))
    rt.add(Msg.user("My name is Grace and my build number is 4242."))
    rt.add(Msg.assistant("Hello Grace, noted: build 4242."))
    path = rt.save_session("grace")
    print(f"saved {rt.size()} messages to {path}")

# Second "process": a fresh runtime knows nothing until it loads the session.
with MemoryRuntime(session_dir=folder) as rt:
    assert rt.size() == 0
    found = rt.load_session("grace")
    print(f"restored={found}:")
    for m in rt.messages():
        print(f"  {m.role:>9}: {m.text}")
    assert rt.messages()[1].text.endswith("4242.")
