"""`gpuscale runs`: file names are never broken mid-word; a pipe gets them whole."""

from __future__ import annotations

import json
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
def test_file_names_are_whole_and_never_hidden(runs_dir, capsys, monkeypatch, columns):
    import rich.console

    real = rich.console.Console
    monkeypatch.setattr(
        rich.console,
        "Console",
        lambda **kw: real(**{**kw, "force_terminal": True, "width": int(columns)}),
    )
    assert main(["runs", "--dir", str(runs_dir)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= int(columns)
    words = set(out.split())
    for path in runs_dir.iterdir():  # narrow: a line of its own under the run, still whole
        assert path.name in words
    if int(columns) >= 120:
        assert re.search(rf"completed +{LONG}", out)  # in the table's File column


def test_a_pipe_gets_every_file_name_whole(runs_dir, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--dir", str(runs_dir)]) == 0  # capsys: not a terminal
    out = capsys.readouterr().out
    assert LONG in out and "2026-11-21 20:48" in out
    assert re.search(rf"completed +{LONG}", out)  # one line per run


def test_older_runs_of_one_sweep_are_grouped_by_a_guess(capsys, tmp_path):
    for name in ("mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson", "mlp_2xcpu.ndjson"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[-1]: line.split() for line in out.splitlines() if "ndjson" in line}
    assert rows["mnist-cnn_1xcpu.ndjson"][2] == rows["mnist-cnn_2xcpu.ndjson"][2] == "A?"
    assert rows["mlp_2xcpu.ndjson"][2] == "mlp"  # no sweep label
    (line,) = [line for line in out.splitlines() if line.startswith("A? ")]
    assert re.match(r"A\? +guess-20\d{6}-\d{6} +mnist-cnn-w32, measured on 1, 2 \(a guess", line)
    assert f"gpuscale replay {tmp_path}/NAME" in out


def _multi_worker_copy(source: Path, target: Path) -> Path:
    """``source`` as if recorded by a 2-worker multi-worker run, 100 s later."""
    lines = source.read_text().splitlines()
    start = json.loads(lines[0])
    start.update(strategy="multi-worker", num_workers=2, t=start["t"] + 100)
    lines[0] = json.dumps(start)
    target.write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.parametrize("columns", [None, "80"])
def test_the_strategy_shows_where_the_runs_differ_in_it(capsys, monkeypatch, tmp_path, columns):
    """A mirrored and a multi-worker run of one model on 2 devices are told apart;
    runs that all share a strategy get no Strategy column."""
    shutil.copy(SAMPLES / "mlp_2xcpu.ndjson", tmp_path / "mlp_2xcpu.ndjson")
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    assert "Strategy" not in capsys.readouterr().out
    _multi_worker_copy(SAMPLES / "mlp_2xcpu.ndjson", tmp_path / "mlp_2xcpu_mw.ndjson")
    if columns is not None:  # a narrow terminal keeps the column
        import rich.console

        real = rich.console.Console
        monkeypatch.setattr(
            rich.console,
            "Console",
            lambda **kw: real(**{**kw, "force_terminal": True, "width": int(columns)}),
        )
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "Strategy" in out
    assert re.search(r"mlp +2xcpu +mirrored +100 ", out)
    assert re.search(r"mlp +2xcpu +(multi-worker, 2 workers|mw×2) +100 ", out)
    assert main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["strategy"], r["workers"]) for r in runs] == [("mirrored", 1), ("multi-worker", 2)]


def _default_named(tmp_path: Path) -> Path:
    """The sample runs as gpuscale's runs folder names them (time_model_devices)."""
    for stamp, name, target in (
        ("20261121-204803", "mnist-cnn_1xcpu.ndjson", "mnist-cnn-w32_1xcpu"),
        ("20261121-204821", "mnist-cnn_2xcpu.ndjson", "mnist-cnn-w32_2xcpu"),
        ("20261121-204842", "mlp_2xcpu.ndjson", "mlp_2xcpu"),
        ("20261121-204901", "mnist-cnn_2xcpu_killed.ndjson", "mnist-cnn-w32_2xcpu"),
    ):
        shutil.copy(SAMPLES / name, tmp_path / f"{stamp}_{target}.ndjson")
    return tmp_path


def test_the_runs_folder_fits_80_columns_one_line_per_run(capsys, monkeypatch, tmp_path):
    import rich.console

    real = rich.console.Console
    monkeypatch.setattr(
        rich.console, "Console", lambda **kw: real(**{**kw, "force_terminal": True, "width": 80})
    )
    folder = _default_named(tmp_path)
    assert main(["runs", "--dir", str(folder)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    table = out.split("\n\n")[0].splitlines()
    assert max(len(line.rstrip()) for line in table) <= 80
    rows = [line for line in table if ".ndjson" in line]
    assert len(rows) == 4  # no row wrapped onto a second line
    for path in folder.iterdir():  # each row has its status and whole file name
        assert re.search(rf"(completed|interrupted) +{path.name} *$", out, re.MULTILINE), out


@pytest.mark.parametrize("columns", [80, 70])
def test_names_without_their_time_keep_the_when_column(capsys, monkeypatch, columns):
    """The trial's ``COLUMNS=80 gpuscale runs --dir sample_runs``: the file names
    (``mnist-cnn_1xcpu.ndjson``) move under their runs, but carry no time, so When
    stays (only what the names already say is dropped)."""
    import rich.console

    real = rich.console.Console
    monkeypatch.setattr(
        rich.console,
        "Console",
        lambda **kw: real(**{**kw, "force_terminal": True, "width": columns}),
    )
    assert main(["runs", "--dir", str(SAMPLES)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
    assert "…" not in out, out
    table = out.split("\n\n")[0]
    assert table.splitlines()[1].split()[0] == "When", out
    assert re.search(r"^2026-11-21 20:48 .*completed$\n  mnist-cnn_1xcpu\.ndjson$", table, re.M)


def test_a_pipe_gets_no_padding(capsys, tmp_path):
    assert main(["runs", "--dir", str(_default_named(tmp_path))]) == 0  # capsys: not a terminal
    out = capsys.readouterr().out
    assert "2026-11-21 20:48" in out  # a pipe has the room for When
    assert all(line == line.rstrip() for line in out.splitlines()), out


def test_a_sweep_and_a_multi_worker_run_fit_80_columns(capsys, monkeypatch, runs_dir):
    """The Strategy column with the Sw column: the strategy is shortened, so that
    time and status stay whole; the names do not all carry their time, so When
    stays and Size goes; the sweeps' lines end without spaces."""
    import rich.console

    _multi_worker_copy(SAMPLES / "mlp_2xcpu.ndjson", runs_dir / "mlp_2xcpu_mw.ndjson")
    real = rich.console.Console
    monkeypatch.setattr(
        rich.console, "Console", lambda **kw: real(**{**kw, "force_terminal": True, "width": 80})
    )
    assert main(["runs", "--dir", str(runs_dir)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "…" not in out, out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert re.search(
        r"^2026-11-21 \d\d:\d\d +mlp +2xcpu +mw×2 +100 +[\d.]+ m?s +completed$", out, re.M
    )
    assert "mw×N = multi-worker, N workers" in out
    assert all(line == line.rstrip() for line in out.splitlines()), out


def test_a_runs_folder_that_cannot_be_read_is_said_not_listed_as_empty(
    tmp_path, monkeypatch, capsys
):
    """A data folder gpuscale may not read (chmod 000, another user's) was listed as
    "No recordings in ..." with exit 0, and `replay guess` said there was no such
    sweep: the recordings are there, unread. One line and exit 2, for every command
    that lists them; a folder that does not exist still holds no recordings."""
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(Path(__file__).resolve().parent.parent / "sample_runs" / "mlp_2xcpu.ndjson", folder)
    real_iterdir = Path.iterdir

    def denied(self):
        if self == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", denied)
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(tmp_path))
    for argv in (
        ["runs"],
        ["runs", "--json"],
        ["replay", "guess"],
        ["recommend", "--from", "sweep"],
    ):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"gpuscale: error: cannot list the recordings in {folder}: permission denied\n"
        ), argv
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(tmp_path / "none"))
    assert main(["runs"]) == 0
    assert "No recordings" in capsys.readouterr().out
