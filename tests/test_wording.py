"""Wording a new user found wrong: plurals, "within 0%", joined notes, a file given
twice named as given, a note printed twice, and --record given a folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuscale.analysis.confidence import run_confidence
from gpuscale.analysis.summary import RunSummary
from gpuscale.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def test_one_phase_breakdown_is_singular():
    s = RunSummary(devices=2, steps_total=60, steps_counted=55, phase_steps=1)
    assert "1 phase breakdown," in run_confidence(s).reason
    s.phase_steps = 4
    assert "4 phase breakdowns," in run_confidence(s).reason


def test_a_close_fit_is_not_said_to_be_within_0_percent(capsys):
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json")]) == 0
    out = capsys.readouterr().out
    assert "within 0%" not in out
    assert "fits the measured points within 0.3%" in out


def test_notes_ending_with_a_full_stop_join_without_it():
    from gpuscale.formatting import join_clauses

    joined = join_clauses(["pass --width 128 for the original.", None, "", "recorded as sweep-1"])
    assert joined == "pass --width 128 for the original; recorded as sweep-1"


def test_a_file_given_twice_is_named_both_ways_as_given(capsys, tmp_path, monkeypatch):
    shutil.copy(SAMPLES / "seed002_mnist.json", tmp_path / "s.json")
    monkeypatch.chdir(tmp_path)
    assert main(["recommend", "--json", "--from", "s.json", "./s.json"]) == 0
    err = capsys.readouterr().err
    assert "./s.json: given twice (the same file as s.json); counted once" in err


def test_the_start_note_shown_while_running_is_not_repeated_in_the_summary(capsys):
    from gpuscale.commands.run import print_run_summary

    note = "CPU only (2 cores): mnist-cnn shrunk to 32 channels"
    start = SimpleNamespace(
        model="mnist-cnn",
        num_replicas=1,
        platform="cpu",
        strategy="none",
        cross_device_ops=None,
        scaling="strong",
        global_batch=64,
        per_replica_batch=64,
        note=note,
    )
    run = SimpleNamespace(
        start_event=start,
        end=SimpleNamespace(status="completed", summary={"steps_total": 10, "steps_counted": 5}),
        error=None,
        recording_path=None,
        recording_problem=None,
    )
    print_run_summary(run)  # replay: nothing printed it before
    assert capsys.readouterr().out.count("shrunk to 32 channels") == 1
    print_run_summary(run, shown_notes={note})
    assert "shrunk" not in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "watch"])
def test_record_into_a_folder_says_it_is_a_folder(capsys, tmp_path, command):
    assert main([command, "--record", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"--record {tmp_path}: is a folder; give a file path, e.g. {tmp_path / 'run.ndjson'}" in err
    )
    assert "the file exists" not in err


@pytest.mark.parametrize("command", ["run", "watch"])
def test_record_into_a_missing_folder_is_refused_and_nothing_is_made(capsys, tmp_path, command):
    target = tmp_path / "not" / "there" / "x.ndjson"
    assert main([command, "--steps", "10", "--record", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"gpuscale: error: --record {target}: the folder {target.parent} does not exist; "
        "create it first, or leave out --record to record to the runs folder"
    ]
    assert not (tmp_path / "not").exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main([command, "--record", str(afile / "x.ndjson")]) == 2
    assert f"{afile} is a file, not a folder" in capsys.readouterr().err


async def test_a_run_without_an_end_event_is_interrupted_everywhere(capsys, tmp_path):
    """One word, and its reason, for a killed run: `runs`, `replay`'s summary and the
    dashboard's header (they once said incomplete, interrupted and INTERRUPTED)."""
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import ReplaySource
    from gpuscale.ui.widgets.header import RunHeader

    killed = SAMPLES / "mnist-cnn_2xcpu_killed.ndjson"
    shutil.copy(killed, tmp_path / killed.name)
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if killed.name in line)
    assert " interrupted " in row and "incomplete" not in row
    assert main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["runs"]
    assert listed["status"] == "interrupted"  # --json says what the table says
    assert main(["replay", str(killed)]) == 0  # not a terminal: the summary as text
    assert "status: interrupted (no end event)" in capsys.readouterr().out
    app = build_app(ReplaySource(killed))
    async with app.run_test(size=(100, 30)) as pilot:
        app.action_jump_end()
        for _ in range(50):
            await app.settle()
            await pilot.pause(0.05)
            if app._finished_posted:
                break
        await app.settle()
        header = app.query_one(RunHeader)
        line = "".join(s.text for s in header.render_lines(header.region.reset_offset)[1])
    assert line.strip().startswith("INTERRUPTED (no end event)"), line


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{dir}"],
        ["replay", "{dir}", str(SAMPLES / "mnist-cnn_1xcpu.ndjson")],
        ["recommend", "--from", "{dir}"],
        ["recommend", "--from", str(SAMPLES / "mnist-cnn_1xcpu.ndjson"), "{dir}"],
    ],
    ids=["replay", "replay-several", "recommend", "recommend-several"],
)
def test_a_folder_given_as_a_file_is_said_in_one_wording(capsys, tmp_path, monkeypatch, argv):
    """Trial: `replay adir` said "adir is a directory, not a recording", `recommend
    --from adir` "adir: is a folder; give sweep files or recordings"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    assert main([a.replace("{dir}", "adir") for a in argv]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpuscale: error: adir: is a folder, not a recording or a sweep file "
        "(gpuscale runs --dir adir lists the recordings in it)"
    ]


def test_the_readers_say_a_folder_in_the_same_words(tmp_path):
    from gpuscale.analysis.sweep import read_sweep_file
    from gpuscale.errors import GpuscaleError, folder_given
    from gpuscale.recording.reader import load_run

    folder = tmp_path / "a b"
    folder.mkdir()
    said = f"{folder}: is a folder, not a recording or a sweep file (gpuscale runs --dir '{folder}' lists the recordings in it)"
    assert folder_given(folder) == said
    for read in (load_run, read_sweep_file):
        with pytest.raises(GpuscaleError) as refused:
            read(folder)
        assert str(refused.value) == said
