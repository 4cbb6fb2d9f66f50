"""`gpuscale runs`: file names are never broken mid-word; a pipe gets them whole."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gpuscale.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
LONG = "20261121-193000_mnist-cnn-w32_2xcpu.ndjson"


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    for path in SAMPLES.glob("*.ndjson"):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(SAMPLES / "mnist-cnn_2xcpu.ndjson", tmp_path / LONG)
    return tmp_path


@pytest.mark.parametrize("columns", ["80", "100", "120", "200"])
def test_file_names_are_whole_or_absent(runs_dir, capsys, monkeypatch, columns):
    import rich.console

    real = rich.console.Console
    monkeypatch.setattr(
        rich.console,
        "Console",
        lambda **kw: real(**{**kw, "force_terminal": True, "width": int(columns)}),
    )
    assert main(["runs", "--dir", str(runs_dir)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    # the table itself; the sweep lines after it are commands to copy, never cut
    out = "\n".join(line for line in out.splitlines() if not line.startswith("sweep of"))
    assert max(len(line) for line in out.splitlines()) <= int(columns)
    if LONG in out:
        assert all(name in out for name in ("mlp_2xcpu.ndjson", "mnist-cnn_2xcpu_killed.ndjson"))
    else:
        assert "file names: a wider terminal" in out
        assert "ndjson" not in out  # no name cut in the middle
    if int(columns) >= 120:
        assert LONG in out


def test_a_pipe_gets_every_file_name_whole(runs_dir, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--dir", str(runs_dir)]) == 0  # capsys: not a terminal
    out = capsys.readouterr().out
    assert LONG in out and "2026-11-21 20:48" in out
    assert "file names: a wider terminal" not in out


def test_runs_of_one_sweep_are_grouped_with_the_replay_command(capsys, tmp_path):
    for name in ("mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson", "mlp_2xcpu.ndjson"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sweep of")]
    assert lines == [
        f"sweep of mnist-cnn-w32 on 1, 2 devices; its scaling view: gpuscale replay "
        f"{tmp_path / 'mnist-cnn_1xcpu.ndjson'} {tmp_path / 'mnist-cnn_2xcpu.ndjson'}"
    ]
