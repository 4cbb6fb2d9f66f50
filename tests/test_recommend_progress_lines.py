"""A live sweep's progress on stderr: redrawn in place on a terminal, plain lines off
one (``2>file``: no spinner frames, bars or carriage returns in the file); with
``--json`` off a terminal none at all, but stderr still says where the sweep is
recorded, and the document names the sweep so that ``recommend --from NAME`` and
``replay NAME`` find it again. No TensorFlow: the script is a stand-in
(tests/fake_script.py) run as a real one, and the progress line is driven by hand."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.commands.count_progress import CountProgress
from gpuscale.recording.reader import load_run
from gpuscale.recording.store import runs_dir

SCRIPT = Path(__file__).with_name("fake_script.py")
ARGV = ["recommend", "--sweep", "1,2", "--no-chart"]
COMMAND = ["--", sys.executable, str(SCRIPT)]
REDRAWN = re.compile("[\r\u2800-\u28ff\u2501\u2578\u257a]")
"""What a redrawn progress line leaves in a file: carriage returns, the spinner's
braille frames, the bar's lines."""


@pytest.fixture(autouse=True)
def _two_counts(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep on CPU", None, 2))


def _recorded_sweep() -> str:
    recordings = sorted(runs_dir().glob("*.ndjson"))
    assert len(recordings) == 2
    ids = {load_run(path).start.sweep.id for path in recordings}
    assert len(ids) == 1
    return ids.pop()


def test_a_script_sweeps_progress_off_a_terminal_is_plain_lines(capsys):
    assert main([*ARGV, *COMMAND]) == 0
    err = capsys.readouterr().err
    assert not REDRAWN.search(err), err
    lines = err.splitlines()
    for label in ("1 device", "2 devices"):
        assert f"{label}: starting the script" in lines
        (done,) = [line for line in lines if line.startswith(f"{label}: completed")]
        assert re.fullmatch(rf"{label}: completed, step 12, median \d+ ms/step", done), done
    assert lines.index("1 device: starting the script") < lines.index(
        "2 devices: starting the script"
    )
    sweep = _recorded_sweep()
    assert lines[-1].startswith(f"Recorded as {sweep}: ")


def test_json_off_a_terminal_says_where_the_sweep_is_recorded_and_names_it(capsys):
    assert main([*ARGV, "--json", *COMMAND]) == 0
    out, err = capsys.readouterr()
    sweep = _recorded_sweep()
    # no progress beside the document, but where the sweep is recorded, as the text says it
    assert err.splitlines() == [
        f"Recorded as {sweep}: 'gpuscale replay {sweep}' shows it again, "
        f"'gpuscale recommend --from {sweep}' re-judges it."
    ]
    doc = json.loads(out)
    assert doc["sweep"] == sweep
    # found again by the name the document gives, which the document read back keeps
    assert main(["recommend", "--from", doc["sweep"], "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["sweep"] == sweep
    assert [p["step_time_s"] for p in again["points"] if not p.get("predicted")] == [
        p["step_time_s"] for p in doc["points"] if not p.get("predicted")
    ]


def test_json_with_stderr_on_a_terminal_shows_the_progress(monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: stderr is a terminal
    assert main([*ARGV, "--json", *COMMAND]) == 0
    out, err = capsys.readouterr()
    assert "2 devices" in err and "Running " in err
    assert f"Recorded as {json.loads(out)['sweep']}" in err


def test_json_of_a_sweep_not_recorded_names_none(capsys):
    assert main([*ARGV, "--json", "--no-record", *COMMAND]) == 0
    out, err = capsys.readouterr()
    assert "sweep" not in json.loads(out) and err == ""


@pytest.mark.parametrize("terminal", [False, True])
def test_the_trainers_count_line(terminal):
    file = io.StringIO()
    console = Console(file=file, force_terminal=terminal, width=100)
    with CountProgress(console, 2, total=12, status="starting TensorFlow") as progress:
        progress.step(1, "warm-up")
        progress.say("gpuscale: 2 devices: a warning", style="yellow")
        progress.step(12, "52 ms/step")
        progress.status("completed")
    text = file.getvalue()
    assert "gpuscale: 2 devices: a warning" in text
    if terminal:  # a bar, redrawn in place
        assert "━" in text and "12/12" in text and "completed" in text
    else:
        assert not REDRAWN.search(text), text
        assert text.splitlines() == [
            "2 devices: starting TensorFlow",
            "gpuscale: 2 devices: a warning",
            "2 devices: completed, 12/12 steps, 52 ms/step",
        ]


class _Run:
    """A count's run as :func:`recommend_live._follow` reads it: its events."""

    def __init__(self, events):
        self._events = events

    def events(self, timeout=None):
        yield from self._events


def test_a_trainer_counts_ending_line_says_its_median_step_as_the_table_does():
    # a trial: "1 device: completed, 100/100 steps, 53 ms/step" (its last step) above
    # a table whose 1-device row said 54.1 ms (the median step)
    import msgspec
    from recording_samples import script_start

    from gpuscale.analysis.summary import RunAccumulator
    from gpuscale.events.schema import EndEvent, StepEvent

    t0 = 1_800_000_000.0
    start = msgspec.structs.replace(script_start(1, t0), source="trainer", model="mlp")
    times = [0.5, 0.5, 0.054, 0.056, 0.055, 0.058, 0.053]  # 2 warm-up; the last 53 ms
    events, t = [start], t0
    for step, took in enumerate(times):
        t += took
        events.append(StepEvent(t=t, step=step, step_time_s=took, samples=64, warmup=step < 2))
    events.append(EndEvent(t=t, status="completed", steps=len(times)))
    file = io.StringIO()
    acc = RunAccumulator()
    recommend_live._follow(
        _Run(events), acc, 1, len(times), Console(file=file, width=200), False, "starting"
    )
    assert acc.summary().step_time_s == pytest.approx(0.055)
    last = file.getvalue().splitlines()[-1]
    assert last == "1 device: completed, 7/7 steps, median 55 ms/step", last


def test_a_count_stopped_before_its_end_says_how_far_it_got():
    file = io.StringIO()
    console = Console(file=file, force_terminal=False)
    with (
        pytest.raises(KeyboardInterrupt),
        CountProgress(console, 1, status="starting the script") as p,
    ):
        p.step(5, "step 5, 3 ms/step")
        raise KeyboardInterrupt
    assert file.getvalue().splitlines()[-1] == "1 device: step 5, 3 ms/step"


def test_a_steps_time_keeps_a_decimal_under_10_ms():
    """``1 ms/step`` for 0.8 and 1.6 ms steps alike, ``0 ms/step`` for 0.3 ms (a trial)."""
    from gpuscale.commands.count_progress import step_words

    assert step_words(0.0008, False) == "0.8 ms/step"
    assert step_words(0.0016, False) == "1.6 ms/step"
    assert step_words(0.00003, False) == "< 0.1 ms/step"
    assert step_words(0.052, False) == "52 ms/step"
    assert step_words(0.00996, False) == "10 ms/step"  # not "10.0"
    assert step_words(0.5, True) == "warm-up"
