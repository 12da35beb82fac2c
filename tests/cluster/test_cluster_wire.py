"""A forwarded call and its answer travel as one pickled ``bytes`` (``_wire``).

What a user relies on: anything Ray could send as an argument still arrives,
including a lambda and an object of a class defined in the caller's script
(its ``__main__``, which the actor's process does not have).  The last one
runs in two real processes: one packs, another one (another ``__main__``)
unpacks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from actormem.cluster._wire import pack, unpack
from actormem.messages import Msg


def test_a_call_and_its_answer_come_back_equal() -> None:
    m = Msg.user("I live in Porto.")
    call = ("add", ([m, Msg.assistant("Noted.")],), {"dedupe": True}, "ab" * 16, False)
    assert unpack(pack(call)) == call
    assert unpack(pack(("cd" * 16, None))) == ("cd" * 16, None)


def test_a_lambda_travels() -> None:
    double = unpack(pack(lambda x: 2 * x))
    assert double(21) == 42


def test_a_class_of_the_callers_script_reaches_another_process(tmp_path: Path) -> None:
    data = tmp_path / "payload.bin"
    packer = tmp_path / "packer.py"
    packer.write_text(
        "import sys\n"
        "from actormem.cluster._wire import pack\n"
        "class Note:\n"
        "    def __init__(self, text):\n"
        "        self.text = text\n"
        "    def shout(self):\n"
        "        return self.text.upper()\n"
        "open(sys.argv[1], 'wb').write(pack(('record', (Note('porto'),), {}, None, False)))\n"
    )
    subprocess.run([sys.executable, str(packer), str(data)], check=True, timeout=120)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from actormem.cluster._wire import unpack\n"
            "name, args, kwargs, expect, retry = unpack(open(sys.argv[1], 'rb').read())\n"
            "print(name, args[0].shout())\n",
            str(data),
        ],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == ["record", "PORTO"]
