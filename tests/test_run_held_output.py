"""`gpuscale run -- COMMAND`: the script's output waits for the run's start (the
callback's, or the one gpuscale makes up after 15 s), so a script without the
callback showed nothing for 15 s. Now `run` says so after a few seconds, in one line
on stderr (never recorded); the output and the recording are as before. No
TensorFlow: the script is plain Python."""

from __future__ import annotations

import queue
import sys
import time

import pytest

from gpuscale.cli import main
from gpuscale.commands import run as run_command
from gpuscale.events.schema import LogEvent, StartEvent
from gpuscale.live.base import RunBase
from gpuscale.recording.reader import load_run

NOTE = "is running; its output shows from the run's start"


class _Run:
    """What events_saying_the_wait reads of a run: its queue (events, then the end
    marker) and whether it is over."""

    events = RunBase.events

    def __init__(self, events, *, done: bool):
        self.queue: queue.Queue = queue.Queue()
        for event in events:
            self.queue.put(event)
        self.done = done


def _start() -> StartEvent:
    return StartEvent(t=time.time(), gpuscale_version="0", host="h", pid=1, model="train.py")


def _line(message: str) -> LogEvent:
    return LogEvent(t=time.time(), source="script", message=message)


def _through(run: _Run, after_s: float) -> list:
    said: list = []
    seen = list(
        run_command.events_saying_the_wait(run, lambda: said.append("note"), after_s=after_s)
    )
    return said + seen


def test_no_start_by_then_is_said_once_before_the_events():
    start, line = _start(), _line("hello")
    run = _Run([start, line, None], done=False)  # none came within after_s=0
    assert _through(run, after_s=0) == ["note", start, line]


def test_a_start_that_came_first_is_not_waited_for():
    start, line = _start(), _line("hello")
    run = _Run([start, line, None], done=True)
    assert _through(run, after_s=60) == [start, line]


def test_a_run_over_before_then_says_nothing():
    assert _through(_Run([None], done=True), after_s=60) == []


@pytest.mark.parametrize("record", [False, True])
def test_run_says_why_the_scripts_output_waits(tmp_path, monkeypatch, capsys, record):
    monkeypatch.setattr(run_command, "HELD_OUTPUT_NOTE_AFTER_S", 0.0)
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(tmp_path))
    path = tmp_path / "r.ndjson"
    where = ["--record", str(path)] if record else ["--no-record"]
    code = "import time; print('hello', flush=True); time.sleep(1)"
    assert main(["run", *where, "--", sys.executable, "-c", code]) == 0
    err = capsys.readouterr().err.splitlines()
    (note,) = [line for line in err if NOTE in line]
    assert note == (
        "gpuscale: python -c is running; its output shows from the run's start: its "
        "ScalingMonitor's first training step (a script that does not import gpuscale.keras: "
        "15 s after its launch)"
    )
    assert err.index(note) < err.index("hello")  # said first; the output as before
    if record:  # the note is the screen's: the recording has the script's line, not it
        messages = [e.message for e in load_run(path).events if isinstance(e, LogEvent)]
        assert "hello" in messages and not any(NOTE in m for m in messages)


def test_run_json_says_nothing_of_the_wait(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_command, "HELD_OUTPUT_NOTE_AFTER_S", 0.0)
    code = "import time; time.sleep(0.5)"
    assert main(["run", "--json", "--no-record", "--", sys.executable, "-c", code]) == 0
    assert NOTE not in capsys.readouterr().err
