"""Judgements shared by `gpuscale recommend` and the dashboard: run confidence,
a notable exposed all-reduce, the one-run recommendation, the CPU caveat."""

from __future__ import annotations

import pytest

from gpuscale.analysis import recommend as recommend_module
from gpuscale.analysis.confidence import (
    CPU_LOGICAL_CAVEAT,
    ENOUGH_STEPS,
    comm_share_is_notable,
    run_confidence,
)
from gpuscale.analysis.recommend import recommend, recommend_from_run
from gpuscale.analysis.summary import RunSummary, summarize
from gpuscale.analysis.sweep import SweepPoint, normalize
from gpuscale.events.schema import PhaseEvent, StartEvent, StepEvent


def cpu_run_events(steps: int = 30, devices: int = 2) -> list:
    """A run on CPU logical devices with a small exposed all-reduce."""
    events: list = [
        StartEvent(
            t=0.0,
            gpuscale_version="0",
            host="h",
            pid=1,
            model="mnist-cnn",
            strategy="mirrored",
            num_replicas=devices,
            scaling="strong",
            per_replica_batch=64 // devices,
            global_batch=64,
            payload_bytes=400_000,
            platform="cpu-logical",
        )
    ]
    for i in range(steps):
        events.append(StepEvent(t=i, step=i, step_time_s=0.1, samples=64, warmup=i < 2))
        if i % 5 == 4:
            events.append(
                PhaseEvent(
                    t=i,
                    step=i,
                    step_time_s=0.1,
                    compute_s=0.095,
                    allreduce_s=0.004,
                    apply_s=0.001,
                    payload_bytes=400_000,
                )
            )
    return events


def test_run_confidence_levels():
    assert run_confidence(RunSummary()).level == "none"
    few = RunSummary(steps_counted=ENOUGH_STEPS - 1, phase_steps=3, spread=0.1)
    assert (
        run_confidence(few).level == "low" and f"(< {ENOUGH_STEPS})" in run_confidence(few).reason
    )
    enough = RunSummary(steps_counted=ENOUGH_STEPS, phase_steps=3, spread=0.1, devices=2)
    trust = run_confidence(enough)
    assert trust.level == "medium" and "measured at 2 devices only" in trust.reason
    assert run_confidence(RunSummary(steps_counted=50, phase_steps=3, spread=0.9)).level == "low"
    assert run_confidence(RunSummary(steps_counted=50, phase_steps=0, spread=0.1)).level == "low"


def test_notable_comm_share():
    assert comm_share_is_notable(0.25) and not comm_share_is_notable(0.2)
    assert not comm_share_is_notable(None)


def test_recommend_from_run_waits_for_evidence_and_lets_bugs_through(monkeypatch):
    events = cpu_run_events()
    start, summary = events[0], summarize(events)
    assert recommend_from_run(None, summary) is None
    assert recommend_from_run(start, RunSummary()) is None
    assert recommend_from_run(start, summary) is not None

    def broken(points):
        raise ValueError("a bug")

    monkeypatch.setattr(recommend_module, "recommend", broken)
    with pytest.raises(ValueError, match="a bug"):
        recommend_from_run(start, summary)


def test_predictions_from_cpu_logical_devices_carry_the_caveat():
    events = cpu_run_events()
    rec = recommend_from_run(events[0], summarize(events))
    assert rec is not None and any(r.predicted for r in rec.table)
    assert rec.platform_note == CPU_LOGICAL_CAVEAT
    assert any("share this machine's cores" in line for line in rec.confidence)
    gpu = [
        normalize(
            SweepPoint(devices=n, scaling="weak", per_replica_batch=8, step_time_s=t, config="c")
        )
        for n, t in ((1, 0.1), (2, 0.11))
    ]
    assert recommend(gpu).platform_note is None
