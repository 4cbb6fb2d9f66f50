"""The headless core never imports TensorFlow, Keras or Textual, the CLI never
imports the Keras callback, and `gpuscale --help` starts without any of them."""

from __future__ import annotations

import ast
import importlib.util
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import gpuscale

HEADLESS_PACKAGES = ("events", "telemetry", "recording", "analysis", "plots")
"""Every module in these packages is headless."""
HEADLESS_MODULES = (
    "gpuscale.cli",
    "gpuscale.errors",
    "gpuscale.formatting",
    "gpuscale.session",
    "gpuscale.cluster",
    "gpuscale.script",
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
        if path.name == "keras.py" and path.parent == PACKAGE_DIR:
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
