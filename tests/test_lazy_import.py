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


def _type_checking_imports(init: Path) -> dict[str, str]:
    """Name -> module of the ``if TYPE_CHECKING:`` imports of a package's ``__init__``:
    what mypy and editors see (the lazy table is what runs)."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                for alias in imp.names:
                    found[alias.asname or alias.name] = imp.module
    return found


def _names_of(package: str, table: str) -> dict[str, object]:
    """In a fresh process: every name of ``package.__all__`` looked up, those of its
    lazy ``table`` compared with their module's object, ``import *``, ``dir()`` and
    an unknown name."""
    return _run(
        f"""
        import importlib, json, sys
        package = importlib.import_module({package!r})
        homes = getattr(package, {table!r})
        bad = [
            name for name in package.__all__
            if name in homes
            and getattr(package, name) is not getattr(importlib.import_module(homes[name]), name)
        ]
        for name in package.__all__:
            getattr(package, name)
        star = {{}}
        exec("from {package} import *", star)
        try:
            package.NoSuchName
            missing = "no error"
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({{
            "bad": bad,
            "star": sorted(n for n in star if n != "__builtins__"),
            "all": sorted(package.__all__),
            "dir_lacks": sorted(set(package.__all__) - set(dir(package))),
            "missing": missing,
            "numpy": "numpy" in sys.modules,
        }}))
        """
    )


def test_every_name_in_all_imports_and_is_the_object_of_its_module() -> None:
    got = _names_of("actormem", "_HOMES")
    assert got["bad"] == [] and got["dir_lacks"] == []
    assert got["star"] == got["all"]
    assert got["missing"] == "module 'actormem' has no attribute 'NoSuchName'"


def test_the_lazy_table_the_type_checkers_imports_and_all_agree() -> None:
    assert _type_checking_imports(PACKAGE / "__init__.py") == actormem._HOMES
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


# What a process that keeps only short-term memory must not load: numpy and
# pyarrow (the long-term store's vectors and files, ~130 ms of a cold start
# before actormem.store was lazy) and the databases' drivers.
STORE_ONLY = ("duckdb", "numpy", "psycopg", "pyarrow")


def test_short_term_memory_and_the_cli_help_load_no_numpy_pyarrow_or_database() -> None:
    got = _run(
        f"""
        import contextlib, io, json, sys, tempfile
        loaded = {{}}

        def heavy():
            return sorted(m for m in sys.modules if m.split(".")[0] in {STORE_ONLY!r})

        import actormem.store
        from actormem.store import KINDS, Namespace, NewMemory, MemoryStore, open_store
        Namespace(user_id="u1")
        NewMemory(content="Alice prefers green tea")
        loaded["store"] = heavy()
        from actormem import MemoryRuntime, Msg, TextBlock
        folder = tempfile.mkdtemp()
        rt = MemoryRuntime(sessions=folder)
        rt.add(Msg(role="user", content=(TextBlock(text="hi"),)))
        rt.save_session("s1")
        rt.close()
        again = MemoryRuntime(sessions=folder)
        assert again.load_session("s1") and len(again.messages()) == 1
        again.close()
        loaded["runtime"] = heavy()
        from actormem.cli import main
        sys.argv = ["actormem", "--help"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main()
        loaded["cli"] = heavy()
        print(json.dumps(loaded))
        """
    )
    assert got == {"store": [], "runtime": [], "cli": []}


def test_the_store_packages_lazy_names_import_and_agree_with_the_type_checkers() -> None:
    # actormem.store's PEP 562 table (_LAZY) against its TYPE_CHECKING imports, and
    # every name resolves (a lazy one to the object of its module; numpy loaded then).
    import actormem.store as store

    assert _type_checking_imports(PACKAGE / "store" / "__init__.py") == store._LAZY
    assert set(store._LAZY) <= set(store.__all__)
    got = _names_of("actormem.store", "_LAZY")
    assert got["bad"] == [] and got["dir_lacks"] == [] and got["numpy"] is True
    assert got["star"] == got["all"]
    assert got["missing"] == "module 'actormem.store' has no attribute 'NoSuchName'"
