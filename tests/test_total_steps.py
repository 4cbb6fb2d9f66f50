"""A step says where its training is planned to end (``StepEvent.total_steps``, format
1.8), so that ``gpuscale run``'s progress bar and the dashboard's header show N/total
for a script's ``fit`` as for the built-in trainer: a script's bar said ``30/?``
(only the trainer's ``--steps`` gave it a total) and the header ``step 30``. A step
that says none (a ``fit`` on data of unknown length, a custom loop, a recording before
1.8) keeps the total unknown; old recordings load and replay as before. No
TensorFlow: the events are made here (the callback's own: test_keras_callback.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
from ui_fixtures import FakeClock

from gpuscale.commands.run import _ProgressView
from gpuscale.events.schema import StartEvent, StepEvent, decode, encode
from gpuscale.recording.reader import load_run
from gpuscale.ui.app import build_app
from gpuscale.ui.model import RunModel
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.widgets.header import RunHeader

RECORDING = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"


def _start(source: str = "script") -> StartEvent:
    return StartEvent(t=1.0, gpuscale_version="test", host="h", pid=1, source=source)


def _step(step: int, total: int | None = None) -> StepEvent:
    return StepEvent(t=2.0 + step, step=step, step_time_s=0.01, samples=32, total_steps=total)


def test_a_step_says_its_total_and_a_recording_without_it_still_loads():
    line = encode(_step(3, 30))
    assert b'"total_steps":30' in line and decode(line).total_steps == 30
    assert b"total_steps" not in encode(_step(3))  # unknown: left out, as every default
    old = b'{"kind":"step","t":2.0,"step":3,"step_time_s":0.01,"samples":32}'
    assert decode(old).total_steps is None
    run = load_run(RECORDING)  # written before format 1.8
    steps = [e for e in run.events if isinstance(e, StepEvent)]
    assert len(steps) == 100 and all(s.total_steps is None for s in steps)
    try:
        decode(b'{"kind":"step","t":2.0,"step":3,"step_time_s":0.01,"samples":32,"total_steps":-1}')
    except msgspec.ValidationError:
        pass  # a damaged recording is refused naming the line, as for any count
    else:
        raise AssertionError("a negative total was accepted")


def _bar_total(view: _ProgressView) -> float | None:
    return view.progress.tasks[0].total


def test_runs_progress_bar_takes_a_scripts_total_from_its_steps():
    view = _ProgressView(None)  # a script: nothing known before its steps
    view.on_event(_start())
    assert _bar_total(view) is None
    view.on_event(_step(0, 16))  # the first fit: 2 epochs of 8 steps
    assert _bar_total(view) == 16
    view.on_event(_step(16, 28))  # a second fit of 12 steps: steps go on, the total too
    assert _bar_total(view) == 28 and view.progress.tasks[0].completed == 17
    view.on_event(_step(28))  # then data of unknown length (or a custom loop): N/?
    assert _bar_total(view) is None
    view.on_event(_step(31, 30))  # Keras overran its epoch: 32 of 32, not 32/30
    assert _bar_total(view) == 32


def test_runs_progress_bar_keeps_the_trainers_steps():
    view = _ProgressView(100)
    view.on_event(_start("trainer"))
    view.on_event(_step(0))  # a trainer before format 1.8 said none: its --steps stay
    assert _bar_total(view) == 100
    view.on_event(_step(1, 100))
    assert _bar_total(view) == 100


def test_the_dashboards_model_takes_the_latest_steps_total():
    model = RunModel()
    model.absorb([_start(), _step(0, 16), _step(1, 16)])
    snap = model.snapshot()
    assert (snap.steps_done, snap.steps_total) == (2, 16)
    model.absorb([_step(16, 28)])
    assert model.snapshot().steps_total == 28
    model.absorb([_step(17)])
    assert model.snapshot().steps_total is None


def _with_totals(path: Path) -> Path:
    """The sample recording as format 1.8 writes it: each step with the run's total."""
    out = path / "with_totals.ndjson"
    lines = []
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("kind") == "step":
            event["total_steps"] = 100
        lines.append(json.dumps(event))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


async def test_a_replay_header_says_step_n_of_total(tmp_path):
    clock = FakeClock()
    app = build_app(ReplaySource(_with_totals(tmp_path), clock=clock))
    async with app.run_test(size=(80, 24)) as pilot:
        clock.now += 13.4
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert re.search(r"RUNNING  replay 0:13/0:\d\d 1x · step \d+/100 ", header), header
        clock.now += 600  # past the end
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert "COMPLETED  replay " in header and "step 100/100" in header, header
