"""A Keras script's run spends much of its wall clock between the counted steps (each
epoch's start, evaluation, checkpoints): the step throughput stays (it is what scaling
compares), and the rate over the wall clock is said beside it, where it matters. And
the input wait the callback's probe cannot see reads "not measured", never 0.0 ms."""

from __future__ import annotations

import msgspec
import pytest
from recording_samples import script_start, write_run

from gpuscale.analysis.phase_report import parts_note, phase_items, throughput_text
from gpuscale.analysis.summary import summarize, with_defaults
from gpuscale.cli import main
from gpuscale.events.schema import EndEvent, PhaseEvent, StartEvent, StepEvent

T0 = 1_800_000_000.0


def _start(workers: int = 1) -> StartEvent:
    return script_start(workers, T0)


def _epochs(
    epochs: int = 3,
    steps: int = 50,
    step_s: float = 0.01,
    gap_s: float = 2.0,
    *,
    worker: int = 0,
    every: int = 1,
    method: str = "callback-probe",
) -> list:
    """``epochs`` of ``steps`` steps of ``step_s`` back to back, each epoch after a
    ``gap_s`` stall (Keras's epoch start); one event per ``every`` steps (its time
    the mean, its index the last: ``steps_per_execution``); a probe every 10 events."""
    events: list = []
    t, index = T0, -1
    for _ in range(epochs):
        t += gap_s
        for _ in range(steps // every):
            t += step_s * every
            index += every
            events.append(
                StepEvent(
                    t=t,
                    worker=worker,
                    step=index,
                    step_time_s=step_s,
                    samples=64,
                    warmup=index < 2,
                )
            )
            if index > 2 and (index // every) % 10 == 0:
                events.append(
                    PhaseEvent(
                        t=t,
                        worker=worker,
                        step=index,
                        step_time_s=step_s,
                        compute_s=0.006,
                        allreduce_s=0.001,
                        apply_s=0.003,
                        method=method,
                        probe_cost_s=0.0001,
                    )
                )
    return events


def test_epoch_stalls_are_a_share_of_the_wall_clock_and_a_lower_rate():
    s = summarize([_start(), *_epochs()])
    # 148 counted steps of 10 ms inside 2 gaps of 2 s (the first gap is before them)
    assert s.between_steps_share == pytest.approx(4.0 / (1.48 + 4.0), rel=1e-6)
    assert s.wall_throughput_samples_s == pytest.approx(148 * 64 / 5.48, rel=1e-6)
    assert s.throughput_samples_s == pytest.approx(6400)  # the step rate is kept
    text = throughput_text(s)
    assert text == "6,400 samples/s at the median step (10.0 ms)"


def test_back_to_back_steps_say_the_step_rate_alone():
    s = summarize([_start(), *_epochs(gap_s=0.0)])
    assert s.between_steps_share == pytest.approx(0.0, abs=1e-9)
    assert throughput_text(s) == "6,400 samples/s"


def test_steps_per_execution_counts_each_event_as_its_steps():
    # one event per 5 steps (their mean time): 5 steps' time and samples each
    s = summarize([_start(), *_epochs(every=5, gap_s=0.0)])
    assert s.between_steps_share == pytest.approx(0.0, abs=1e-9)
    assert s.wall_throughput_samples_s == pytest.approx(6400, rel=1e-6)


def test_workers_stepping_together_pool_their_wall_clocks():
    events = [_start(workers=2), *_epochs(worker=0), *_epochs(worker=1)]
    s = summarize(events)
    assert s.between_steps_share == pytest.approx(4.0 / 5.48, rel=1e-6)
    assert s.wall_throughput_samples_s == pytest.approx(148 * 64 / 5.48, rel=1e-6)


def test_the_callbacks_input_wait_is_not_measured_not_zero():
    s = summarize([_start(), *_epochs()])
    assert s.phase_steps and s.input_s is None and s.input_share is None
    items = {item.label: item.value for item in phase_items(s)}
    # fit waits for its batch within the step: the wait is in apply, said so
    assert items["input wait"] == "not measured apart: in apply + input"
    assert "apply + input" in items and "apply" not in items
    recorded = msgspec.to_builtins(s)  # the recording's end summary
    assert "input_s" not in recorded and recorded["between_steps_share"] > 0.7
    said = with_defaults(recorded)  # what `run --json` prints
    assert said["input_s"] is None and said["input_share"] is None
    assert said["between_steps_share"] == pytest.approx(s.between_steps_share)
    assert said["wall_throughput_samples_s"] == pytest.approx(s.wall_throughput_samples_s)
    apart = msgspec.structs.replace(s, phase_consistent=False, phase_parts_s=0.02)
    note = parts_note(apart)
    assert note is not None and "apply + input 4.0 ms)" in note and "input <" not in note


def test_the_trainers_input_wait_stays_measured():
    s = summarize([_start(), *_epochs(gap_s=0.0, method="differenced")])
    assert s.input_s == 0.0 and s.input_share == 0.0
    items = {item.label: item.value for item in phase_items(s)}
    # measured, and under the last digit: never a 0.0 that rounding made
    assert items["input wait"].startswith("< 0.1 ms")
    assert "input_s" in with_defaults(msgspec.to_builtins(s))


def test_replay_end_says_both_rates_and_input_not_measured(tmp_path, capsys):
    events = [_start(), *_epochs()]
    events.append(EndEvent(t=events[-1].t + 0.1, status="completed", steps=150, duration_s=6.1))
    path = write_run(tmp_path / "run.ndjson", events)
    assert main(["replay", str(path), "--end"]) == 0
    out = capsys.readouterr().out
    assert (
        "throughput: 6,400 samples/s at the median step (10.0 ms); 1,728 samples/s over "
        "the wall clock: between steps 73% of it (e.g. epoch starts, evaluation, checkpoints)"
    ) in out
    assert "input wait not measured apart: in apply + input" in out
    assert "input wait 0.0 ms" not in out
