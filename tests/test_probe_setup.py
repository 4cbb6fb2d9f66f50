"""The probes' one-time compiling (``PhaseEvent.setup_s``, schema 1.5): not the
recurring probe cost the budget pays, but measured, summed (per worker, as probe
costs are) and said: in the probes line, and as a named part of the time between
steps where it fell between counted steps (not in the warm-up)."""

from __future__ import annotations

import msgspec
import pytest
from recording_samples import script_start

from gpuscale.analysis.phase_report import probes_text, wall_clock_text
from gpuscale.analysis.summary import summarize
from gpuscale.events.schema import PhaseEvent, StartEvent, StepEvent

T0 = 1_800_000_000.0


def _start(workers: int = 1) -> StartEvent:
    return script_start(workers, T0)


def _run(*, setup_after: int, setup_s: float = 0.8, worker: int = 0, probe_at=(10, 60)) -> list:
    """100 steps of 10 ms, a 1 s stall (an epoch start) after step 49, the
    compiling's ``setup_s`` after step ``setup_after`` and probes (5 ms each, right
    after their step) at ``probe_at``; the first probe says the compiling."""
    events: list = []
    t = T0
    for step in range(100):
        t += 0.01
        events.append(
            StepEvent(t=t, worker=worker, step=step, step_time_s=0.01, samples=64, warmup=step < 2)
        )
        if step == setup_after:
            t += setup_s
        if step in probe_at:
            t += 0.005
            events.append(
                PhaseEvent(
                    t=t,
                    worker=worker,
                    step=step,
                    step_time_s=0.01,
                    compute_s=0.006,
                    allreduce_s=0.001,
                    apply_s=0.003,
                    method="callback-probe",
                    probe_cost_s=0.005,
                    setup_s=setup_s if step == probe_at[0] else None,
                )
            )
        if step == 49:
            t += 1.0
    return events


def test_the_callbacks_compiling_is_measured_apart_and_named_between_steps():
    s = summarize([_start(), *_run(setup_after=10)])
    assert s.probe_setup_s == pytest.approx(0.8)
    assert s.probe_cost_s == pytest.approx(0.01, abs=0.002)  # the compiling is not in it
    wall = s.counted_wall_s
    assert wall == pytest.approx(0.98 + 1.0 + 0.8 + 0.01, abs=1e-6)
    assert s.probe_setup_wall_share == pytest.approx(0.8 / wall)
    text = probes_text(s)
    assert "of wall (" in text and ") plus 800.0 ms compiling them once" in text
    said = wall_clock_text(s)
    assert said is not None
    assert (
        "between steps 65% of it (compiling the probes 29%, the probes 0.4%, the rest e.g. " in said
    )
    assert said.endswith("epoch starts, evaluation, checkpoints)")


def test_a_compile_in_the_warm_up_is_said_but_not_a_part_between_counted_steps():
    # the built-in trainer compiles after the first step (a warm-up one here)
    s = summarize([_start(), *_run(setup_after=0)])
    assert s.probe_setup_s == pytest.approx(0.8)
    assert s.probe_setup_wall_share == 0.0
    said = wall_clock_text(s)
    assert said is not None and "compiling" not in said
    assert "between steps 51% of it (the probes 0.5%, the rest e.g. epoch starts" in said
    assert "plus 800.0 ms compiling them once" in probes_text(s)


def test_workers_compiling_together_count_once():
    events = [_start(workers=2), *_run(setup_after=10), *_run(setup_after=10, worker=1)]
    s = summarize(events)
    assert s.probe_setup_s == pytest.approx(0.8)
    assert s.probe_setup_wall_share == pytest.approx(0.8 / s.counted_wall_s)


def test_a_recording_without_setup_says_nothing_of_it():
    events = [_start(), *_run(setup_after=-1)]
    events = [
        msgspec.structs.replace(e, setup_s=None) if isinstance(e, PhaseEvent) else e for e in events
    ]
    s = summarize(events)
    assert s.probe_setup_s is None and s.probe_setup_wall_share is None
    assert "compiling" not in probes_text(s)
    said = wall_clock_text(s)
    assert said is not None and "compiling" not in said and "the probes 0.5%" in said
