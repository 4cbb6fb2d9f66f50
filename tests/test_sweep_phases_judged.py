"""A sweep file's phases are judged as a recording's summary judges its probes
(:func:`gpuscale.analysis.summary.judge_phases`): phases that do not add up to the
step, or an exposed all-reduce over twice the exchange timed alone, are not resolved:
the table, Why and advice say so and the model is fitted on step times."""

from __future__ import annotations

import json

import msgspec
import pytest
from recording_samples import script_start

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import judge_phases, summarize
from gpuscale.analysis.sweep import (
    exposed_unresolved,
    phases_unsplit_why,
    point_from_summary,
    read_sweep_file,
    sweep_document,
)
from gpuscale.events.schema import PhaseEvent, StepEvent

DEFAULTS = {"model": "m", "scaling": "weak", "per_replica_batch": 64}


def _file(tmp_path, second: dict) -> object:
    path = tmp_path / "sweep.json"
    path.write_text(
        json.dumps({"defaults": DEFAULTS, "points": [{"devices": 1, "step_time_s": 0.1}, second]})
    )
    return path


def test_an_exposed_exchange_over_twice_the_exchange_alone_is_not_resolved(tmp_path):
    # the trial's sw/imp6.json: exposed 50 ms, alone 10 ms, phases 125% of the step
    second = {
        "devices": 2,
        "step_time_s": 0.12,
        "compute_s": 0.1,
        "allreduce_s": 0.05,
        "allreduce_total_s": 0.01,
        "probes": 5,
    }
    sweep = read_sweep_file(_file(tmp_path, second))
    point = sweep.points[1]
    assert point.compute_s is None and point.allreduce_s is None  # left out, as a recording's
    assert point.probes == 5 and point.allreduce_total_s == 0.01 and point.step_time_s == 0.12
    assert exposed_unresolved(point)
    assert sweep.warnings == [
        f"{tmp_path / 'sweep.json'}: points[1]: the exposed all-reduce 50.0 ms is over twice "
        "the whole exchange timed alone, 10.0 ms, beyond their noise: its phases are not "
        "resolved (5 probes); left out, its step time kept"
    ]
    rec = recommend(sweep.points)
    row = next(r for r in rec.table if r.devices == 2 and not r.predicted)
    assert exposed_unresolved(row)
    assert rec.models[0].basis == "step times"  # no model fitted on those phases
    said = " ".join([*rec.reasons, *rec.advice])
    assert "not resolved" in said
    assert "Compute is" not in said and "83%" not in " ".join(rec.advice)


def test_phases_that_do_not_add_up_to_the_step_are_not_resolved(tmp_path):
    second = {
        "devices": 2,
        "step_time_s": 0.1,
        "compute_s": 0.1,
        "allreduce_s": 0.02,
        "apply_s": 0.005,
        "probes": 5,
    }
    sweep = read_sweep_file(_file(tmp_path, second))
    assert sweep.points[1].compute_s is None and exposed_unresolved(sweep.points[1])
    assert (
        "its phases (compute_s + allreduce_s + apply_s = 0.125 s) are 125% of its step"
        in (sweep.warnings[0])
    )


def test_phases_that_fit_and_a_few_phases_given_are_kept(tmp_path):
    fits = {"devices": 2, "step_time_s": 0.1, "compute_s": 0.08, "allreduce_s": 0.015,
            "apply_s": 0.006, "probes": 5}  # fmt: skip
    sweep = read_sweep_file(_file(tmp_path, fits))
    assert sweep.points[1].compute_s == 0.08 and not sweep.warnings
    # a published table with the exposed all-reduce alone: short of the step, not wrong
    some = {"devices": 2, "step_time_s": 0.1, "allreduce_s": 0.02}
    sweep = read_sweep_file(_file(tmp_path, some))
    assert sweep.points[1].allreduce_s == 0.02 and not sweep.warnings


def test_the_summary_and_a_sweep_point_use_the_same_judgement():
    args = dict(compute_s=0.1, apply_s=0.0, input_s=None, whole_s=0.12, devices=2)
    judged = judge_phases(exposed_s=0.05, alone_s=0.01, **args)
    assert judged.consistent is False and "over twice" in (judged.contradiction or "")
    assert judge_phases(exposed_s=0.015, alone_s=0.01, **args).consistent is True


def _probed_run() -> list:
    """2 devices, 10 ms steps; 9 probes whose compute is noisy (5.0 to 11.4 ms):
    compute 8.2 ms, exposed 0.5 ms, apply 2.6 ms: 11.3 ms, 13% over the step, within
    the probes' noise (their compute's half-width), so the summary calls them resolved."""
    events: list = [script_start(1, 1_800_000_000.0)]
    t = 1_800_000_000.0
    computes = [0.0050 + 0.0008 * i for i in range(9)]
    for step in range(60):
        t += 0.01
        events.append(StepEvent(t=t, step=step, step_time_s=0.01, samples=64, warmup=step < 2))
        if step >= 10 and step % 5 == 0 and computes:
            c = computes.pop(0)
            events.append(
                PhaseEvent(
                    t=t,
                    step=step,
                    step_time_s=c + 0.0005 + 0.0026,
                    compute_s=c,
                    allreduce_s=0.0005,
                    apply_s=0.0026,
                    compute_allreduce_s=c + 0.0005,
                    method="callback-probe",
                )
            )
    return events


def test_a_recordings_resolved_phases_stay_resolved_when_its_point_is_read_back(tmp_path):
    events = _probed_run()
    s = summarize(events)
    assert s.phase_consistent is True and s.phase_parts_s > 1.1 * s.step_time_s
    point = point_from_summary(s, events[0], "run.ndjson")
    assert point.compute_err_s == pytest.approx(s.compute_err_s)
    assert phases_unsplit_why(point) is None
    path = tmp_path / "back.json"
    path.write_bytes(msgspec.json.encode(sweep_document([point])))
    back = read_sweep_file(path)
    assert back.points[0].compute_s == pytest.approx(s.compute_s) and not back.warnings
