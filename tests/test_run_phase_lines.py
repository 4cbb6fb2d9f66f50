"""`gpuscale run`'s phase lines: every phase with its probes and uncertainty, noise
never shown as 0.0, one device without an exchange."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuscale.commands.run import phase_lines


def _summary(**kw) -> dict:
    base = dict(
        phase_steps=12,
        step_time_s=0.1,
        compute_s=0.06,
        compute_err_s=0.002,
        allreduce_s=0.0,
        allreduce_err_s=0.003,
        apply_s=0.038,
        apply_err_s=0.004,
        input_s=0.0,
        comm_share=0.0,
        comm_share_err=0.03,
        phase_consistent=True,
        probe_cost_s=2.5,
        status="completed",
    )
    base.update(kw)
    return base


def test_an_exchange_within_its_noise_is_not_resolved():
    text = "\n".join(phase_lines(_summary(), replicas=2))
    assert "12 probes" in text and "100.0 ms" in text
    assert "compute 60.0 ± 2.0 ms" in text
    assert "exposed all-reduce < 3.0 ms (not resolved)" in text
    assert "0.0 ms (0" not in text
    assert "probes: 12, 2.50 s" in text


def test_a_resolved_exchange_shows_its_share_with_points():
    text = "\n".join(
        phase_lines(_summary(allreduce_s=0.02, comm_share=0.2, comm_share_err=0.015), 2)
    )
    assert "exposed all-reduce 20.0 ± 3.0 ms (20.0% ± 1.5 points of the median step)" in text


def test_one_device_has_nothing_to_exchange():
    text = "\n".join(phase_lines(_summary(allreduce_s=0.05), replicas=1))
    assert "none (1 device" in text


def test_probes_longer_than_the_step_are_said_to_be_unresolved():
    text = "\n".join(phase_lines(_summary(phase_consistent=False, phase_parts_s=0.25), replicas=2))
    assert "compute not resolved" in text and "apply not resolved" in text
    assert "60.0 ± 2.0" not in text
    assert "add up to 250.0 ms" in text and "not the median step 100.0 ms" in text
    # 12 probes: not "too few probes"; the reason fits the count
    assert "(too few probes" not in text
    assert "(12 probes agree on it: their passes ran longer than the usual steps" in text
    two = "\n".join(
        phase_lines(_summary(phase_consistent=False, phase_parts_s=0.25, phase_steps=2), 2)
    )
    assert "(too few probes, or probes at unusual steps)" in two


def test_with_phase_every_what_would_tell_the_share_is_a_shorter_period_not_a_budget():
    s = _summary(probe_every=10, share_target=0.02, share_more_steps=1215, steps_total=100)
    text = "\n".join(phase_lines(s, replicas=2))
    assert "about 1,315 steps at a probe every 10 steps to tell it" in text
    assert "(a longer run, or a shorter --phase-every)" in text
    assert "probe budget" not in text
    budgeted = _summary(
        probe_budget=0.02, share_target=0.02, share_more_steps=1215, steps_total=100
    )
    text = "\n".join(phase_lines(budgeted, replicas=2))
    assert "about 1,315 steps at this probe budget to tell it (a longer run, or a larger" in text


def test_probes_turned_off_are_said_so_not_missing():
    from gpuscale.commands.run import no_probe_why

    assert no_probe_why({"phase_every": 0}) == "probes turned off: --phase-every 0"
    off = {"phase_every": None, "probe_budget": 0.0}
    assert no_probe_why(off) == "probes turned off: --probe-budget 0"
    assert no_probe_why({"phase_every": None, "probe_budget": 0.02}).startswith(
        "no probe after the warm-up"
    )
    assert no_probe_why({"argv": ["train.py"]}).startswith("no probe after the warm-up")


def test_a_precision_not_reached_is_said_with_the_steps_still_needed():
    from gpuscale.commands.run import precision_line

    assert precision_line({}) is None
    line = precision_line(
        {
            "precision_asked": 0.03,
            "precision_reached": 0.051,
            "precision_more_steps": 1890,
            "status": "completed",
        }
    )
    assert "±3.0% asked, not reached by the end: reached only ±5.1%" in line
    assert "about 1,890 more steps would likely reach it" in line
    line = precision_line(
        {"precision_asked": 0.03, "precision_reached": None, "precision_more_steps": 100}
    )
    assert "not yet known" in line and "at least 100 more steps" in line
    line = precision_line(
        {"precision_asked": 0.03, "precision_reached": 0.021, "precision_more_steps": 0}
    )
    assert line == "  precision: ±3.0% asked, reached (±2.1%)"


def test_the_probes_cost_is_said_against_the_wall_clock_and_the_budget():
    s = _summary(counted_wall_s=125.0, probe_wall_share=0.02, probe_budget=0.02, share_target=0.02)
    text = "\n".join(phase_lines(s, replicas=2))
    assert (
        "probes: 12, 2.0% of wall (2.50 s with the steps they slowed; budget 2%: 1% for the probes, 1% for the per-step cost); "
    ) in text
    assert "exposed share not yet known to \u00b12 points (\u00b13 so far)" in text
    fixed = _summary(probe_every=10, probe_wall_share=0.2, comm_share_err=0.011, share_target=0.03)
    text = "\n".join(phase_lines(fixed, replicas=2))
    assert "probes: 12, 20.0% of wall (2.50 s with the steps they slowed; every 10 steps); " in text
    assert "exposed share known to \u00b13 points (\u00b11.1)" in text


def test_probes_of_an_old_recording_say_what_is_known():
    # schema 1.1: no probe cost, no budget in the start's config
    s = _summary(probe_cost_s=None, comm_share_err=None, phase_steps=2, share_target=0.02)
    text = "\n".join(phase_lines(s, replicas=2))
    assert (
        "  probes: 2; exposed share not yet known to \u00b12 points (fewer than 3 probes)" in text
    )
    one = "\n".join(phase_lines(s, replicas=1))
    assert one.endswith("  probes: 2")


def test_a_precision_said_while_the_run_goes_on_is_not_yet_reached():
    from gpuscale.commands.run import precision_line

    line = precision_line({"precision_asked": 0.03, "precision_reached": 0.05})
    assert "not reached yet" in line


def test_compute_above_the_step_with_one_probe_is_not_printed_as_a_fact():
    # the new-user trial: "against the probed steps' median 477.1 ms: compute 534.7 ms"
    one_probe = _summary(
        phase_steps=1,
        compute_s=0.5347,
        compute_err_s=None,
        allreduce_s=0.012,
        allreduce_err_s=None,
        apply_s=0.0,
        apply_err_s=None,
        comm_share=0.025,
        comm_share_err=None,
        phase_consistent=False,
    )
    text = "\n".join(phase_lines(one_probe, replicas=2))
    assert "534.7" not in text
    # the parts do not add up to the step (phase_consistent False): no figure, and no
    # "≈ the whole step" beside the note that says they are not the step (trial 11-28)
    assert "compute not resolved" in text and "\u2248 the whole step" not in text
    assert "exposed all-reduce not resolved" in text and "of the step" not in text
    one_device = "\n".join(phase_lines(one_probe, replicas=1))
    assert "compute not resolved," in one_device
    agreeing = {**one_probe, "phase_consistent": True}  # within their noise: about the step
    assert "compute \u2248 the whole step (1 probe; exposed exchange not resolved)" in "\n".join(
        phase_lines(agreeing, replicas=2)
    )


def test_a_phase_within_the_step_keeps_its_value():
    from gpuscale.formatting import format_phase_in_step_s

    assert format_phase_in_step_s(0.2471, None, 0.263, 1, 2) == "247.1 ms"
    assert format_phase_in_step_s(0.263, 0.01, 0.2471, 4, 2).startswith("\u2248 the whole step")
    assert format_phase_in_step_s(None, None, 0.2, 1) == "n/a"


def test_a_value_no_larger_than_its_halfwidth_as_shown_is_not_resolved():
    # the half-cut sample's replay: 5.32 ± 5.28 ms printed as "5.3 ± 5.3 ms" was
    # called resolved; as shown, the value is no larger than its half-width
    from gpuscale.analysis.metrics import resolved
    from gpuscale.formatting import format_phase_s

    assert format_phase_s(0.00532, 0.00528) == "< 10.6 ms (not resolved)"
    assert not resolved(0.00532, 0.00528)
    assert resolved(0.0054, 0.0053)
    text = "\n".join(
        phase_lines(_summary(allreduce_s=0.00532, allreduce_err_s=0.00528, comm_share=0.036), 2)
    )
    assert "exposed all-reduce < 10.6 ms (not resolved)" in text
    assert "3.6%" not in text


def test_a_precision_not_yet_known_says_whether_steps_or_probes_are_too_few():
    from gpuscale.commands.run import precision_line

    # a new user's 2-device run: 145 counted steps, 1 probe; "fewer than 3 steps or probes"
    s = {
        "precision_asked": 0.1,
        "precision_reached": None,
        "precision_more_steps": 590,
        "step_time_rel_err": 0.01,
        "phase_steps": 1,
        "status": "completed",
    }
    line = precision_line(s, replicas=2)
    assert (
        "precision: \u00b110.0% asked (step time \u00b110.0%, exposed share \u00b110 points)"
        in line
    )
    assert "not yet known (fewer than 3 probes: 1 so far)" in line
    assert "steps or probes" not in line
    line = precision_line({**s, "step_time_rel_err": None, "phase_steps": 0}, replicas=1)
    assert "not yet known (fewer than 3 steps)" in line and "exposed share" not in line


def test_probes_over_the_budget_say_why():
    s = _summary(counted_wall_s=50.0, probe_wall_share=0.048, probe_budget=0.02, phase_steps=10)
    text = "\n".join(phase_lines(s, replicas=1))
    assert "over the budget: the probes cost more than their median so far" in text


def test_a_precision_on_several_devices_says_each_number_in_its_own_unit():
    from gpuscale.commands.run import precision_line

    # it said "reached only ±37.2%" for an exposed share known to ±37.2 points
    s = {
        "precision_asked": 0.1,
        "precision_reached": 0.372,
        "precision_more_steps": 5807,
        "step_time_rel_err": 0.012,
        "comm_share_err": 0.372,
        "phase_steps": 3,
        "status": "completed",
    }
    line = precision_line(s, replicas=2)
    assert (
        "not reached by the end (step time \u00b11.2%, exposed share \u00b137.2 points); "
        "about 5,807 more steps"
    ) in line
    assert "37.2%" not in line
    line = precision_line({**s, "precision_reached": 0.05, "precision_more_steps": 0}, 2)
    assert line.endswith("reached (step time \u00b11.2%, exposed share \u00b137.2 points)")


UNSPLIT = (
    Path(__file__).parent / "fixtures" / "trial" / "20261126-155647_mnist-cnn-w32_2xcpu.ndjson.gz"
)
"""trial10: `gpuscale run --devices 2 --steps 300`, 4 probes that agree, whose phases
add up to 80.7 ms, not the median step 130.7 ms."""


def test_a_share_whose_phases_do_not_split_the_step_is_not_called_known():
    # it said "compute not resolved, exposed all-reduce not resolved, ..." and then
    # "exposed share known to ±2 points (±1.5)"
    done = subprocess.run(
        [sys.executable, "-m", "gpuscale", "replay", str(UNSPLIT), "--end"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "exposed all-reduce not resolved" in text
    assert "known to" not in text
    assert (
        "exposed share spread \u00b11.5 points across probes, but the phases do not add up "
        "to the step: not resolved"
    ) in text


def test_a_share_whose_compute_fills_the_step_is_not_called_known():
    s = _summary(compute_s=0.11, share_target=0.05)  # a pass longer than the median step
    text = "\n".join(phase_lines(s, replicas=2))
    assert "known to" not in text
    assert "spread \u00b13 points across probes, but compute alone fills the step" in text
    # the same probes with a pass inside the step: known
    assert "exposed share known to \u00b15 points (\u00b13)" in "\n".join(
        phase_lines(_summary(share_target=0.05), replicas=2)
    )


async def test_the_dashboard_probes_line_says_the_same_of_that_run():
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import ReplaySource
    from gpuscale.ui.widgets.advice import AdvicePanel

    app = build_app(ReplaySource(UNSPLIT, end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        text = str(app.query_one(AdvicePanel).body.render())
        assert "known to" not in text
        assert "spread \u00b11.5 points across probes, but the phases do not add up" in text


def test_a_summary_read_back_from_json_keeps_its_per_worker_figures():
    """An end event's summary that went through JSON has string keys for the
    per-worker step times: it still reads as a summary (was: the whole summary
    silently empty)."""
    import json

    import msgspec

    from gpuscale.analysis.summary import RunSummary
    from gpuscale.commands.run import run_summary_of

    s = RunSummary(steps_counted=10, step_time_s=0.1, worker_step_time_s={0: 0.1, 1: 0.2})
    back = json.loads(json.dumps(msgspec.to_builtins(s)))
    read = run_summary_of(back, 2)
    assert read.steps_counted == 10 and read.worker_step_time_s == {0: 0.1, 1: 0.2}
