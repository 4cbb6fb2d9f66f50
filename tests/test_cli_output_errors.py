"""Output that cannot be written (stdout on a full disk, ``> /dev/full``; stderr
there; stdout closed, ``>&-``) is one line on stderr where stderr works and exit
74, never a traceback, for every command and with stdout buffered or not; a
reader that went away stays a quiet 0 (test_cli_broken_pipe.py). No TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.errors import EXIT_OUTPUT

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_runs"
FULL = "/dev/full"
SAID = "gpuscale: error: cannot write the output: No space left on device"

pytestmark = pytest.mark.skipif(not os.path.exists(FULL), reason="needs /dev/full (Linux)")

COMMANDS = {
    "recommend-json": ["recommend", "--from", str(SAMPLES / "seed002_mnist.json"), "--json"],
    "recommend": ["recommend", "--from", str(SAMPLES / "seed002_mnist.json")],
    "runs": ["runs", "--dir", str(SAMPLES)],
    "runs-json": ["runs", "--dir", str(SAMPLES), "--json"],
    "replay": ["replay", str(SAMPLES / "mnist-cnn_2xcpu.ndjson")],
    "devices-json": ["devices", "--json", "--no-tf"],
    "help": ["--help"],
    "version": ["--version"],
}


def _env(buffered: bool, data_dir: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCALE_")}
    if data_dir is not None:  # the runs folder of a command that records
        env["GPUSCALE_DATA_DIR"] = str(data_dir)
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "100"
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _gpuscale(
    argv, *, buffered: bool, stdout=None, stderr=subprocess.PIPE, shell_suffix="", data_dir=None
):
    if shell_suffix:  # what only a shell can do to the streams (>&-)
        quoted = " ".join(f"'{a}'" for a in [sys.executable, "-m", "gpuscale", *argv])
        return subprocess.run(
            ["sh", "-c", f"exec {quoted} {shell_suffix}"],
            stderr=stderr,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=_env(buffered),
        )
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *argv],
        stdout=stdout,
        stderr=stderr,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_env(buffered, data_dir),
    )


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", list(COMMANDS.values()), ids=list(COMMANDS))
def test_a_full_disk_on_stdout_is_one_line_and_exit_74(argv, buffered):
    with open(FULL, "w") as full:
        result = _gpuscale(argv, buffered=buffered, stdout=full)
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert result.stderr.splitlines() == [SAID], result.stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_closed_stdout_is_one_line_and_exit_74(buffered):
    result = _gpuscale(["runs", "--dir", str(SAMPLES)], buffered=buffered, shell_suffix=">&-")
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert result.stderr.splitlines() == [
        "gpuscale: error: cannot write the output: stdout is closed"
    ], result.stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "argv",
    [
        ["recommend", "--from", "no-such-file.json"],  # the error line itself
        ["recommend", "--from", str(SAMPLES / "mnist-cnn_2xcpu_killed.ndjson")],  # a warning
        ["--no-such-option"],  # argparse's own message
    ],
    ids=["error", "warning", "usage"],
)
def test_a_full_disk_on_stderr_is_exit_74_and_nothing_else(argv, buffered):
    with open(FULL, "w") as full:
        result = _gpuscale(argv, buffered=buffered, stdout=subprocess.PIPE, stderr=full)
    assert result.returncode == EXIT_OUTPUT
    assert "Traceback" not in result.stdout


def test_stdout_and_stderr_both_full_is_exit_74():
    with open(FULL, "w") as full:
        result = _gpuscale(["runs", "--dir", str(SAMPLES)], buffered=True, stdout=full, stderr=full)
    assert result.returncode == EXIT_OUTPUT


def test_a_failed_json_leaves_an_empty_file_that_from_calls_empty(tmp_path):
    """README: a `--json > sweep.json` that fails leaves an empty file (the JSON is
    written only once the answer is known), which `--from` then calls empty."""
    out = tmp_path / "sweep.json"
    with out.open("w") as f:
        result = _gpuscale(
            ["recommend", "--from", "no-such-file.json", "--json"], buffered=True, stdout=f
        )
    assert result.returncode == 2 and out.read_bytes() == b""
    again = _gpuscale(["recommend", "--from", str(out)], buffered=True, stdout=subprocess.PIPE)
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"gpuscale: error: {out}: empty file: neither a sweep file nor a recording"
    )


def test_the_streams_are_given_back_after_main(capsys):
    """In one process (the tests' own calls of main): sys.stdout and sys.stderr are
    the same objects after main as before, and what it printed is there."""
    from gpuscale.cli import main

    before = (sys.stdout, sys.stderr)
    assert main(["runs", "--dir", str(SAMPLES)]) == 0
    assert (sys.stdout, sys.stderr) == before
    assert "mnist-cnn_2xcpu.ndjson" in capsys.readouterr().out


HELLO = [sys.executable, "-c", "print('hello')"]


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gpuscale: error:")]


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "argv",
    [["run", "--"], ["run", "--json", "--"], ["watch", "--"]],
    ids=["run", "run-json", "watch"],
)
def test_a_full_stdout_still_names_the_recording_on_stderr(tmp_path, argv, buffered):
    """`gpuscale run -- ... > /dev/full`: the recording's path is printed on stdout
    only; the error line says it too, so the user learns where the run is."""
    record = tmp_path / "run.ndjson"
    with open(FULL, "w") as full:
        result = _gpuscale(
            [*argv[:-1], "--record", str(record), "--", *HELLO],
            buffered=buffered,
            stdout=full,
            data_dir=tmp_path,
        )
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert record.is_file()
    assert _errors(result.stderr) == [f"{SAID} (the run is recorded in {record})"], result.stderr


def test_a_full_stdout_names_the_recording_gpuscale_named_in_the_runs_folder(tmp_path):
    with open(FULL, "w") as full:
        result = _gpuscale(["run", "--", *HELLO], buffered=True, stdout=full, data_dir=tmp_path)
    assert result.returncode == EXIT_OUTPUT, result.stderr
    (recording,) = (tmp_path / "runs").glob("*.ndjson")
    assert _errors(result.stderr) == [f"{SAID} (the run is recorded in {recording})"]


def test_a_full_stdout_leaves_the_recorded_sweep_of_recommend_json_named(tmp_path):
    """`recommend --json -- python train.py > /dev/full`: stderr names the sweep before
    the JSON is written (as its text form does), so the error line need not."""
    script = Path(__file__).with_name("fake_script.py")
    argv = ["recommend", "--sweep", "1,2", "--json", "--", sys.executable, str(script)]
    with open(FULL, "w") as full:
        result = _gpuscale(argv, buffered=True, stdout=full, data_dir=tmp_path)
    assert result.returncode == EXIT_OUTPUT, result.stderr
    recordings = sorted((tmp_path / "runs").glob("*.ndjson"))
    assert len(recordings) == 2
    from gpuscale.recording.reader import load_run

    sweep = load_run(recordings[0]).start.sweep.id
    assert _errors(result.stderr) == [SAID]
    assert f"Recorded as {sweep}: 'gpuscale replay {sweep}'" in result.stderr


def test_no_recording_is_named_where_stdout_works_or_nothing_was_recorded(tmp_path):
    result = _gpuscale(
        ["run", "--", *HELLO], buffered=True, stdout=subprocess.PIPE, data_dir=tmp_path
    )
    assert result.returncode == 0 and "recorded to" in result.stdout
    assert _errors(result.stderr) == []
    with open(FULL, "w") as full:
        result = _gpuscale(
            ["run", "--no-record", "--", *HELLO], buffered=True, stdout=full, data_dir=tmp_path
        )
    assert result.returncode == EXIT_OUTPUT
    assert _errors(result.stderr) == [SAID]
