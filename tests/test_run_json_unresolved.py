"""``run --json`` and a recording's end summary say ``null`` for what the text calls
not resolved (as ``recommend --json`` does), keeping the values as measured under
``raw_phases``; the text, read from that summary, is unchanged."""

from __future__ import annotations

import json

import msgspec
from recording_samples import script_start

from gpuscale.analysis.summary import (
    RAW_PHASES_KEY,
    summarize,
    summary_document,
    with_defaults,
)
from gpuscale.commands.run import phase_lines, run_summary_of
from gpuscale.events.schema import PhaseEvent, StepEvent

T0 = 1_800_000_000.0


def _run(probes: list[tuple[float, float]]) -> list:
    """2 replicas, 40 steps of 55.7 ms; a probe (compute, exposed) every 5 steps from
    step 10: the trial's run had one, its compute 92.5 ms, longer than the step."""
    start = msgspec.structs.replace(script_start(1, T0), source="trainer", config={})
    events: list = [start]
    t = T0
    todo = list(probes)
    for step in range(40):
        t += 0.0557
        events.append(StepEvent(t=t, step=step, step_time_s=0.0557, samples=128, warmup=step < 2))
        if step >= 10 and step % 5 == 0 and todo:
            compute, exposed = todo.pop(0)
            events.append(
                PhaseEvent(
                    t=t,
                    step=step,
                    step_time_s=compute + max(0.0, exposed) + 0.0024,
                    compute_s=compute,
                    allreduce_s=max(0.0, exposed),
                    apply_s=0.0024,
                    compute_allreduce_s=compute + exposed,
                    allreduce_total_s=0.002,
                    payload_bytes=265_400,
                    method="differenced",
                )
            )
    return events


def test_phases_that_do_not_split_the_step_are_null_in_run_json():
    s = summarize(_run([(0.0925, 0.0011)]))
    assert s.unsplit_why is not None and s.comm_share is not None  # as the trial's
    doc = summary_document(s)
    said = json.loads(json.dumps(with_defaults(doc)))  # what `run --json` prints
    for name in ("comm_share", "compute_s", "compute_comm_ratio", "allreduce_s", "apply_s"):
        assert name in said and said[name] is None, name
    assert said["busbw_bytes_s"] is None and said["algbw_total_bytes_s"] is not None
    assert said["input_s"] == 0.0  # measured apart, and said as a number by the text too
    raw = said[RAW_PHASES_KEY]
    assert raw["compute_s"] == s.compute_s and raw["comm_share"] == s.comm_share
    assert raw["compute_comm_ratio"] == s.compute_comm_ratio
    # a summary an older gpuscale recorded (every figure a number) is said the same way
    assert with_defaults(msgspec.to_builtins(s)) == with_defaults(doc)
    # the text read from the recorded summary is the text of the summary itself
    assert phase_lines(doc, 2) == phase_lines(msgspec.to_builtins(s), 2)
    # compute 92.5 ms against the 55.7 ms step: the parts do not add up, so no figure
    # (not "≈ the whole step" beside a note that says they are not the step)
    assert "compute not resolved" in " ".join(phase_lines(doc, 2))
    assert run_summary_of(doc, 2).compute_s == s.compute_s


def test_an_exposed_exchange_within_its_noise_has_no_share_in_run_json():
    s = summarize(_run([(0.05, e) for e in (-0.002, 0.0, 0.001, 0.003, -0.001)]))
    assert s.phases_split_step and s.allreduce_err_s and s.allreduce_s <= s.allreduce_err_s
    said = with_defaults(summary_document(s))
    assert said["comm_share"] is None and said["compute_comm_ratio"] is None
    assert said["allreduce_s"] == s.allreduce_s and said["compute_s"] == s.compute_s
    assert "< " in " ".join(phase_lines(summary_document(s), 2))  # "< X ms (not resolved)"


def test_resolved_phases_are_numbers_with_nothing_raw():
    s = summarize(_run([(0.045, 0.006 + 0.0002 * i) for i in range(5)]))
    assert s.phases_split_step and s.comm_share
    doc = summary_document(s)
    assert RAW_PHASES_KEY not in doc and doc == msgspec.to_builtins(s)
    assert with_defaults(doc)["comm_share"] == s.comm_share
