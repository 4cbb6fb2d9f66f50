"""The headless core never imports TensorFlow, Keras or Textual, the CLI never
imports the Keras callback, and `gpuscale --help` starts without any of them."""

from __future__ import annotations

import ast
import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import gpuscale

HEADLESS_PACKAGES = ("events", "telemetry", "recording", "analysis", "live", "plots")
"""Every module in these packages is headless."""
HEADLESS_MODULES = (
    "gpuscale.cli",
    "gpuscale.errors",
    "gpuscale.formatting",
    "gpuscale.ui.sources",
    "gpuscale.ui.synthetic",
    "gpuscale.ui.model",
)
"""Single headless modules (the dashboard's data side included)."""
FORBIDDEN = ("tensorflow", "textual", "keras")
PACKAGE_DIR = Path(gpuscale.__path__[0])


def _headless_modules() -> list[str]:
    names = list(HEADLESS_MODULES)
    for package in HEADLESS_PACKAGES:
        names.append(f"gpuscale.{package}")
        names += [
            f"gpuscale.{package}.{m.name}"
            for m in pkgutil.iter_modules([str(PACKAGE_DIR / package)])
        ]
    return names


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout


def _forbidden_by_module(modules: list[str]) -> dict[str, list[str]]:
    """Import ``modules`` one after the other in a fresh interpreter; for each,
    the forbidden top-level packages that were first loaded by it."""
    code = f"""
import importlib, json, sys
forbidden = {FORBIDDEN!r}
found = {{}}
for name in {modules!r}:
    before = set(sys.modules)
    importlib.import_module(name)
    new = {{m.split('.')[0] for m in set(sys.modules) - before}}
    hit = sorted(new & set(forbidden))
    if hit:
        found[name] = hit
print(json.dumps(found))
"""
    return json.loads(_run(code).strip().splitlines()[-1])


def _loaded_after(code: str) -> set[str]:
    out = _run(code + "\nimport sys; print(' '.join(sys.modules))").split()
    return set(out)


def test_every_listed_headless_module_exists():
    missing = [m for m in _headless_modules() if importlib.util.find_spec(m) is None]
    assert not missing, f"listed as headless but not found: {missing}"
    assert "gpuscale.events.schema" in _headless_modules()
    assert "gpuscale.telemetry.sampler" in _headless_modules()


def test_headless_core_imports_neither_tensorflow_keras_nor_textual():
    offenders = _forbidden_by_module(_headless_modules())
    assert not offenders, f"headless modules pulled in: {offenders}"


def test_the_check_catches_a_forbidden_import():
    """The detector itself works: a module that imports textual is reported."""
    assert _forbidden_by_module(["gpuscale.ui.app"]) == {"gpuscale.ui.app": ["textual"]}


def test_help_builds_every_command_without_tensorflow_keras_or_textual():
    loaded = _loaded_after("from gpuscale.cli import build_parser; build_parser().format_help()")
    assert not {m.split(".")[0] for m in loaded} & set(FORBIDDEN)
    assert "gpuscale.keras" not in loaded


def test_no_gpuscale_module_but_the_callback_imports_gpuscale_keras():
    """``gpuscale.keras`` imports TensorFlow and is meant for the user's script
    only; the CLI, the commands and the session never import it, not even
    inside a function."""
    importers = []
    for path in PACKAGE_DIR.rglob("*.py"):
        if path.parent == PACKAGE_DIR / "keras":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            if "gpuscale.keras" in names:
                importers.append(str(path.relative_to(PACKAGE_DIR)))
    assert not importers, f"these import gpuscale.keras: {importers}"


def test_help_exits_zero_and_lists_commands():
    result = subprocess.run(
        [sys.executable, "-m", "gpuscale", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for command in ("run", "watch", "recommend", "replay", "runs", "devices"):
        assert command in result.stdout
    flat = " ".join(result.stdout.split())
    assert "or a recorded sweep (sweep-..." in flat  # replay is not only for one run


def test_every_source_folder_is_a_regular_package():
    """A folder without ``__init__.py`` is an implicit namespace package, which
    setuptools' ``packages.find`` (not ``find_namespace``) does not list: its
    files reach the wheel only by accident."""
    missing = sorted(
        str(folder.relative_to(PACKAGE_DIR.parent))
        for folder in [PACKAGE_DIR, *PACKAGE_DIR.rglob("*")]
        if folder.is_dir()
        and folder.name != "__pycache__"
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    )
    assert not missing, f"folders without __init__.py: {missing}"


# -- layers: nothing imports a higher layer, no two modules import each other ------------

LAYERS: dict[str, int] = {
    # 0: shared leaves
    "gpuscale": 0,
    "gpuscale.__main__": 6,
    "gpuscale.errors": 0,
    "gpuscale.formatting": 0,
    # 1: the stream
    "gpuscale.events": 1,
    # 2: the headless core around it
    "gpuscale.telemetry": 2,
    "gpuscale.recording": 2,
    "gpuscale.analysis": 2,
    # 3: sources of a run (the trainer and the callback in their own process, the
    #    parent's side of a live run)
    "gpuscale.trainer": 3,
    "gpuscale.keras": 3,
    "gpuscale.live": 3,
    # 4: views
    "gpuscale.plots": 4,
    "gpuscale.ui": 4,
    # 5: commands, 6: the entry point
    "gpuscale.commands": 5,
    "gpuscale.cli": 6,
}
"""Each package's (or top-level module's) layer, as ``docs/architecture.md`` draws them."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{module}: no layer (add it to LAYERS and docs/architecture.md)")


def _import_graph() -> dict[str, set[str]]:
    """Every gpuscale module and the gpuscale modules it imports, at the top or
    inside a function alike (a lazy import is still a dependency); imports under
    ``if TYPE_CHECKING:`` are left out (they never run)."""
    paths = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = {  # imports under `if TYPE_CHECKING:` are for annotations only
            id(child)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
            for stmt in block.body
            for child in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names
                ]
            else:
                continue
            deps |= {t for t in targets if t in paths and t != name}
        graph[name] = deps
    return graph


def test_every_module_has_a_layer():
    for module in _import_graph():
        _layer(module)


def test_no_module_imports_a_higher_layer():
    graph = _import_graph()
    upward = sorted(
        f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
        for a, deps in graph.items()
        for b in deps
        if _layer(b) > _layer(a) and not b == "gpuscale"
    )
    assert not upward, "\n".join(upward)


def test_no_two_modules_import_each_other():
    graph = _import_graph()
    pairs = sorted(
        f"{a} <-> {b}" for a, deps in graph.items() for b in deps if a < b and a in graph[b]
    )
    assert not pairs, pairs


def test_the_layer_check_catches_an_upward_import(tmp_path):
    """The detector itself works: ``gpuscale.events`` importing the UI is upward."""
    assert _layer("gpuscale.events.schema") < _layer("gpuscale.ui.app")
    assert _layer("gpuscale.live.cluster") == _layer("gpuscale.trainer.multiworker")


PROSE_ROWS = ("ui", "commands")
"""Rows of docs/architecture.md's table whose imports are said in words ("everything below")."""


def test_the_architecture_table_lists_what_each_package_imports():
    """Each row of docs/architecture.md's table names every other package (or module
    of one: ``live.devices``) its package imports, lazy imports included: the
    ``keras`` row names ``live.devices``, whose row names ``trainer.options``."""
    table = (PACKAGE_DIR.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): set(re.findall(r"[a-z_]+(?:\.[a-z_]+)*", m.group(2)))
        for m in re.finditer(r"^\| `(\w+)/` \| .* \| (.*) \|$", table, re.M)
    }
    assert {"keras", "live", "trainer"} <= rows.keys()
    unlisted = set()
    for module, deps in _import_graph().items():
        package = module.split(".")[1] if "." in module else ""
        if package not in rows or package in PROSE_ROWS:
            continue
        for dep in deps:
            short = dep.removeprefix("gpuscale.")
            top = short.split(".")[0]
            if dep == "gpuscale" or top in (package, "errors", "formatting"):
                continue
            named = rows[package]
            if top not in named and not any(short == w or short.startswith(w + ".") for w in named):
                unlisted.add(f"{package}/ imports {short} ({module})")
    assert not unlisted, sorted(unlisted)
