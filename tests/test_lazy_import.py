"""``import actormem`` is cheap, and every public name still imports.

The package's names are imported on first use (PEP 562, actormem/__init__.py):
a bare ``import actormem`` (a CLI's ``--help``, a client that only builds
``Msg`` values, a cluster agent's reload) loaded every module and numpy,
pyarrow, structlog and, through structlog, rich -- most of a cold start.
Each check runs in a fresh interpreter: in this one everything is loaded.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import actormem

PACKAGE = Path(actormem.__file__).parent

# What `python -X importtime -c "import actormem"` showed before the names were
# lazy (ms, cumulative, an idle machine): structlog 92 (rich 69 of it, pulled in by
# structlog.dev), numpy 50, pyarrow 26, reactivex 14, pykka 6, msgspec 5;
# DuckDB (0.1-0.3 s), psycopg, ray, wordllama and httpx are loaded only by the
# stores, models and cluster that need them.
HEAVY = (
    "duckdb",
    "httpx",
    "msgspec",
    "numpy",
    "psycopg",
    "pyarrow",
    "pykka",
    "ray",
    "reactivex",
    "rich",
    "structlog",
    "wordllama",
)


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_bare_import_loads_no_module_of_the_library_and_no_heavy_dependency() -> None:
    got = _run(
        f"""
        import json, sys
        import actormem
        print(json.dumps({{
            "heavy": sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}),
            "ours": sorted(m for m in sys.modules if m.startswith("actormem.")),
            "version": actormem.__version__,
        }}))
        """
    )
    assert got == {"heavy": [], "ours": [], "version": actormem.__version__}


def test_every_name_in_all_imports_and_is_the_object_of_its_module() -> None:
    got = _run(
        """
        import importlib, json
        import actormem
        bad = []
        for name in actormem.__all__:
            value = getattr(actormem, name)
            home = actormem._HOMES.get(name)
            if home is not None and value is not getattr(importlib.import_module(home), name):
                bad.append(name)
        star = {}
        exec("from actormem import *", star)
        try:
            actormem.NoSuchName
            missing = "no error"
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({
            "bad": bad,
            "star": sorted(n for n in star if n != "__builtins__"),
            "all": sorted(actormem.__all__),
            "dir_lacks": sorted(set(actormem.__all__) - set(dir(actormem))),
            "missing": missing,
        }))
        """
    )
    assert got["bad"] == [] and got["dir_lacks"] == []
    assert got["star"] == got["all"]
    assert got["missing"] == "module 'actormem' has no attribute 'NoSuchName'"


def test_the_lazy_table_the_type_checkers_imports_and_all_agree() -> None:
    # The TYPE_CHECKING imports are what mypy and editors see; _HOMES is what runs.
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for_checkers: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                for alias in imp.names:
                    for_checkers[alias.asname or alias.name] = imp.module
    assert for_checkers == actormem._HOMES
    assert set(actormem._HOMES) | {"__version__"} == set(actormem.__all__)


def test_the_logging_default_is_installed_by_the_first_module_that_logs() -> None:
    code = """
        import json, sys
        {setup}
        import structlog
        before = structlog.get_config()["processors"]
        {entry}
        print(json.dumps({{
            "configured": structlog.is_configured(),
            "kept": structlog.get_config()["processors"] is before,
        }}))
        """
    # The application's own configuration is left as it is, whichever way in.
    mine = (
        "import structlog; "
        "structlog.configure(processors=[structlog.processors.KeyValueRenderer()])"
    )
    for entry in (
        "from actormem import MemoryRuntime",
        "import actormem.store",
        "import actormem.models.scripted",
        "from actormem.cluster import RemoteRuntime",
    ):
        assert _run(code.format(setup="", entry=entry))["configured"] is True, entry
        assert _run(code.format(setup=mine, entry=entry))["kept"] is True, entry


def _calls_default(path: Path) -> bool:
    return "_configure_default()" in path.read_text()


def test_every_module_that_logs_installs_the_default_first() -> None:
    # A module that logs before the default is installed writes every level to
    # stdout (structlog's own default).  So each one calls _configure_default()
    # itself or lives in a subpackage whose __init__ does (run before it).
    uncovered = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "logs.py" or "import structlog" not in path.read_text():
            continue
        covered = _calls_default(path)
        folder = path.parent
        while not covered and folder != PACKAGE:
            covered = _calls_default(folder / "__init__.py")
            folder = folder.parent
        if not covered:
            uncovered.append(str(path.relative_to(PACKAGE)))
    assert uncovered == []


def test_every_module_imports_first_in_a_process() -> None:
    # With the eager package every import started at actormem/__init__, whose order
    # hid import cycles (actormem._door -> the store -> actormem._door).  Each way in
    # (the package's top-level modules, every public module) is imported here as the
    # first of the library, the dependencies kept loaded.
    got = _run(
        """
        import importlib, json, pkgutil, sys
        import actormem
        names = sorted(
            m.name
            for m in pkgutil.walk_packages(actormem.__path__, "actormem.")
            if m.name.count(".") == 1 or "._" not in m.name
        )
        failed = {}
        for name in names:
            for loaded in [m for m in sys.modules if m.startswith("actormem.")]:
                del sys.modules[loaded]
            try:
                importlib.import_module(name)
            except Exception as exc:
                failed[name] = repr(exc)
        print(json.dumps({"count": len(names), "failed": failed}))
        """
    )
    assert got["failed"] == {}
    assert isinstance(got["count"], int) and got["count"] > 40
