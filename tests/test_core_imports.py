"""The headless core never imports TensorFlow or Textual, and `gpuscale --help`
starts without them."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import gpuscale

HEADLESS_PACKAGES = ("events", "telemetry", "recording", "analysis")
HEADLESS_MODULES = ("gpuscale.cli", "gpuscale.errors", "gpuscale.session", "gpuscale.cluster")
FORBIDDEN = ("tensorflow", "textual", "keras")


def _headless_modules() -> list[str]:
    names = [m for m in HEADLESS_MODULES if _exists(m)]
    for package in HEADLESS_PACKAGES:
        if not _exists(f"gpuscale.{package}"):
            continue
        names.append(f"gpuscale.{package}")
        path = [f"{gpuscale.__path__[0]}/{package}"]
        names += [f"gpuscale.{package}.{m.name}" for m in pkgutil.iter_modules(path)]
    return names


def _exists(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {name.split(".")[0] for name in out}


def test_headless_core_imports_neither_tensorflow_nor_textual():
    modules = _headless_modules()
    assert "gpuscale.events.schema" in modules
    code = "\n".join(f"import {m}" for m in modules)
    loaded = _loaded_after(code)
    assert not loaded & set(FORBIDDEN), f"headless core pulled in {loaded & set(FORBIDDEN)}"


def test_help_builds_every_command_without_tensorflow_or_textual():
    loaded = _loaded_after("from gpuscale.cli import build_parser; build_parser().format_help()")
    assert not loaded & set(FORBIDDEN)


def test_help_exits_zero_and_lists_commands():
    result = subprocess.run(
        [sys.executable, "-m", "gpuscale", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for command in ("run", "watch", "recommend", "replay", "runs", "devices"):
        assert command in result.stdout
