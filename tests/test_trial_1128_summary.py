"""What the new-user trial of 2026-11-28 found in the summaries, from its own
recordings (``tests/fixtures/trial/20261128-*``): after Ctrl-C in ``watch --steps
150`` (71 steps) the summary said ``compute ≈ the whole step (1 probe; ...)`` and,
the next line, that the probes' phases add up to 111.2 ms (compute 108.6), not the
median step 90.2 ms: a compute pass 20% longer than the step is no "≈ the whole
step". A run whose phases do not add up says compute "not resolved", whether it
completed or was stopped, and whatever its compute."""

from __future__ import annotations

import itertools
from pathlib import Path

import msgspec
import pytest

from gpuscale.analysis.phase_report import parts_note, phase_items
from gpuscale.analysis.summary import RunSummary, summarize
from gpuscale.events.schema import EndEvent
from gpuscale.recording.reader import iter_events

TRIAL = Path(__file__).parent / "fixtures" / "trial"
STOPPED = TRIAL / "20261128-013542_mnist-cnn-w32_2xcpu.ndjson.gz"
"""``watch --steps 150`` stopped by Ctrl-C at step 71: one probe, compute 108.6 ms
against a 90.2 ms median step."""

WHOLE = "\u2248 the whole step"


def _items(s: RunSummary) -> dict[str, str]:
    return {item.label: item.value for item in phase_items(s)}


def test_the_stopped_watchs_compute_agrees_with_its_note():
    s = summarize(iter_events(STOPPED))
    assert s.status == "stopped" and s.compute_fills_step and s.phase_consistent is False
    note = parts_note(s)
    assert "not the median step 90.2 ms: the breakdown is not resolved" in note
    assert _items(s)["compute"] == "not resolved"


def test_stopped_or_completed_the_same_events_say_the_same():
    events = list(iter_events(STOPPED))
    completed = [
        msgspec.structs.replace(e, status="completed") if isinstance(e, EndEvent) else e
        for e in events
    ]
    stopped, done = summarize(events), summarize(completed)
    assert done.status == "completed"
    assert phase_items(stopped) == phase_items(done)
    assert parts_note(stopped) == parts_note(done)


CASES = [
    (devices, consistent, compute_s, contradiction)
    for devices, consistent, compute_s, contradiction in itertools.product(
        (1, 2), (True, None, False), (0.050, 0.090, 0.1086), (None, "compute alone ...")
    )
    # a contradiction is judged on several devices, and makes the phases apart
    if contradiction is None or (devices > 1 and consistent is False)
]


@pytest.mark.parametrize(("devices", "consistent", "compute_s", "contradiction"), CASES)
def test_compute_and_the_note_never_contradict(devices, consistent, compute_s, contradiction):
    s = RunSummary(
        devices=devices,
        steps_total=71,
        steps_counted=66,
        step_time_s=0.0902,
        phase_steps=1,
        probes=1,
        compute_s=compute_s,
        allreduce_s=0.0 if devices > 1 else None,
        apply_s=0.0026,
        input_s=0.0,
        phase_parts_s=compute_s + 0.0026,
        phase_consistent=consistent,
        phase_contradiction=contradiction,
    )
    compute, note = _items(s)["compute"], parts_note(s) or ""
    if compute.startswith(WHOLE):
        # about the whole step: only where the phases add up to it within their noise
        assert "not the median step" not in note and "contradict" not in note, (compute, note)
    if "the breakdown is not resolved" in note:
        assert compute == "not resolved", (compute, note)
    if s.phase_consistent is False:
        assert compute == "not resolved", compute


def test_steps_are_counted_not_events_with_several_steps_a_call():
    """``steps_per_execution=4``: an event a call, its index the call's last step. The
    summary said ``16 steps (15 counted, 1 warm-up)`` where Keras ran 60 (the end
    event, ``runs`` and the stderr line said 60)."""
    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import StepEvent

    events = [
        StepEvent(
            t=1000.0 + i, worker=0, step=4 * i + 3, step_time_s=0.01, samples=64, warmup=i == 0
        )
        for i in range(15)
    ]
    summary = summarize(events)
    assert summary.steps_total == 60
    assert summary.steps_counted == 56
