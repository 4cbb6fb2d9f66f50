"""The parts of the wall clock the run summary names: the probes' part of the time
between steps is their own passes (the steps they slowed are inside those steps, under
slow steps), so no part is larger than its whole; a custom loop's time between steps
is named in a custom loop's words; the median and the mean step are said to enough
figures to differ where a share says they do."""

from __future__ import annotations

import re

import msgspec
import pytest
from recording_samples import script_start

from gpuscale.analysis.phase_report import throughput_text, wall_clock_text
from gpuscale.analysis.summary import summarize
from gpuscale.events.schema import PhaseEvent, StepEvent
from gpuscale.formatting import format_duration_s

T0 = 1_800_000_000.0
STEP = 0.01
PASSES = 0.002
EXCESS = 0.01


def _trainer_start():
    return msgspec.structs.replace(
        script_start(1, T0), source="trainer", model="mlp", config={"probe_budget": 0.02}
    )


def _split_step_run(passes: float = PASSES) -> list:
    """100 steps of 10 ms (2 warm-up); a split-step probe every 10 steps from step 20:
    the split step takes 10 ms more (its excess), its passes (2 ms) between it and the
    next step, and the step after it 10 ms more (cold caches)."""
    probed = set(range(20, 100, 10))
    events: list = []
    t = T0
    for step in range(100):
        took = STEP + (EXCESS if step in probed or step - 1 in probed else 0.0)
        t += took
        events.append(StepEvent(t=t, step=step, step_time_s=took, samples=64, warmup=step < 2))
        if step in probed:
            t += passes
            events.append(
                PhaseEvent(
                    t=t,
                    step=step,
                    step_time_s=STEP,
                    compute_s=0.006,
                    allreduce_s=0.001,
                    apply_s=0.003,
                    compute_allreduce_s=0.007,
                    method="split-step",
                    probe_cost_s=passes + EXCESS,
                    split_excess_s=EXCESS,
                )
            )
    return events


def test_the_probes_part_between_steps_is_their_passes_alone():
    s = summarize([_trainer_start(), *_split_step_run()])
    probes = 8
    assert s.probe_passes_s == pytest.approx(probes * PASSES)
    # what the scheduler counts: the passes, the split steps' and the next steps' excesses
    assert s.probe_cost_s == pytest.approx(probes * (PASSES + 2 * EXCESS))
    assert s.probe_passes_wall_share == pytest.approx(s.between_steps_share, rel=1e-3)
    assert s.probe_passes_wall_share <= s.between_steps_share + 1e-5  # the clock at 1.8e9 s
    said = wall_clock_text(s)
    assert said is not None
    between = s.between_steps_share
    said_between = f"{100 * between:.1f}%"
    assert f"between steps {said_between} (the probes {said_between}, the rest e.g." in said, said
    # the cost with the slowed steps (15%) is not a part of "between steps" (1%)
    assert f"the probes {100 * s.probe_wall_share:.0f}%" not in said


@pytest.mark.parametrize("passes", [0.002, 0.0035, 0.005])
def test_time_between_steps_is_said_to_its_parts_decimal(passes):
    # a trial: "between steps 2% (the probes 2.4%, ...)", a part said larger than its whole
    s = summarize([_trainer_start(), *_split_step_run(passes)])
    said = wall_clock_text(s)
    assert said is not None
    found = re.search(r"between steps ([0-9.]+)% \(the probes ([0-9.]+)%", said)
    assert found, said
    whole, part = (float(x) for x in found.groups())
    assert part <= whole, said
    assert whole == pytest.approx(100 * s.between_steps_share, abs=0.05), said


def _custom_loop_run() -> list:
    """A script's own loop (no epochs): 50 steps of 10 ms with 5 ms between each."""
    start = msgspec.structs.replace(
        script_start(1, T0), config={"custom_loop": True, "warmup_steps": 2}
    )
    events: list = [start]
    t = T0
    for step in range(50):
        t += STEP
        events.append(StepEvent(t=t, step=step, step_time_s=STEP, samples=64, warmup=step < 2))
        t += 0.005
    return events


def test_a_custom_loops_time_between_steps_is_named_in_its_words():
    s = summarize(_custom_loop_run())
    assert s.custom_loop
    said = wall_clock_text(s)
    assert said is not None
    assert said.endswith(
        "between steps 33% of it (e.g. the loop's own work between steps, data loading outside the step)"
    ), said
    assert "epoch" not in said
    fit = summarize(
        [msgspec.structs.replace(_custom_loop_run()[0], config={}), *_custom_loop_run()[1:]]
    )
    assert not fit.custom_loop
    assert "epoch starts, evaluation, checkpoints" in (wall_clock_text(fit) or "")


def test_median_and_mean_step_differ_where_the_slow_steps_share_says_so():
    # 0.5 ms steps, every tenth 1 ms: the mean step (0.55 ms) is 9% over the median
    events: list = [script_start(1, T0)]
    t = T0
    for step in range(102):
        took = 0.001 if step % 10 == 5 else 0.0005
        t += took
        events.append(StepEvent(t=t, step=step, step_time_s=took, samples=64, warmup=step < 2))
    s = summarize(events)
    assert throughput_text(s).endswith("at the median step (0.500 ms)")
    said = wall_clock_text(s)
    assert said is not None and "slow steps (mean step 0.550 ms) 9% of it" in said, said


def test_duration_to_significant_figures():
    assert format_duration_s(0.0005, 3) == "0.500 ms"
    assert format_duration_s(0.000547, 3) == "0.547 ms"
    assert format_duration_s(0.00547, 3) == "5.47 ms"
    assert format_duration_s(0.0557, 3) == "55.7 ms"  # never fewer decimals than without
    assert format_duration_s(0.1395, 3) == "139.5 ms"
    assert format_duration_s(0.0005) == "0.5 ms"
    assert format_duration_s(0.99996) == "1.00 s"  # not "1000.0 ms"
