"""How well the breakdown is known, said alike everywhere (issue 13): the probes'
share of the wall clock against their budget, whether the exposed share is known to
its target, and --precision per count in `recommend` (text and --json). Recorded
events built here or taken from sample_runs/; no TensorFlow."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from recording_samples import write_run
from rich.console import Console

from gpuscale.analysis.phase_report import phase_items, probes_text, share_known_text
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import DEFAULT_SHARE_PRECISION, summarize
from gpuscale.analysis.sweep import load_inputs
from gpuscale.events.schema import EndEvent, PhaseEvent, StartEvent, StepEvent

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
T0 = 1_790_000_000.0
STEP_S = 0.1


def run_events(
    devices: int,
    *,
    steps: int = 100,
    probe_at: tuple[int, ...] = (10, 40, 70, 95),
    precision: float | None = 0.03,
    noise: float = 0.0,
    budget: float = 0.02,
) -> list:
    """A recorded run of ``steps`` steps of 100 ms (5 warm-up) on CPU logical
    devices, a probe of 50 ms after each step of ``probe_at``; the exposed
    all-reduce of each probe 20 ms apart from ``noise`` (deterministic, alternating)."""
    config = {
        "devices": devices,
        "strategy": "mirrored",
        "steps": steps,
        "phase_every": None,
        "probe_budget": budget,
        "precision": precision,
    }
    events: list = [
        StartEvent(
            t=T0,
            gpuscale_version="0.1.0",
            tensorflow_version="2.21.0",
            host="testhost",
            pid=1,
            model="mnist-cnn",
            platform="cpu-logical",
            strategy="mirrored",
            num_replicas=devices,
            global_batch=64 * devices,
            per_replica_batch=64,
            config=config,
        )
    ]
    t = T0 + 1.0
    for step in range(steps):
        wobble = 0.002 * ((step * 7) % 5 - 2)  # a little spread, the same every time
        t += STEP_S + wobble
        events.append(
            StepEvent(
                t=t, step=step, step_time_s=STEP_S + wobble, samples=64 * devices, warmup=step < 5
            )
        )
        if step in probe_at:
            offset = (1.0, -1.0, 0.5, -0.5, 0.8, -0.8)[probe_at.index(step) % 6]
            exposed = 0.0 if devices == 1 else 0.02 + offset * noise
            t += 0.05
            events.append(
                PhaseEvent(
                    t=t,
                    step=step,
                    step_time_s=STEP_S,
                    compute_s=0.07,
                    allreduce_s=max(exposed, 0.0),
                    apply_s=0.01,
                    compute_allreduce_s=0.07 + exposed,
                    probe_cost_s=0.05,
                )
            )
    events.append(EndEvent(t=t + 0.01, status="completed", steps=steps, duration_s=t - T0))
    return events


def test_the_probes_share_of_the_wall_clock_and_their_budget_are_summarised():
    from gpuscale.trainer.schedule import ProbeScheduler

    events = run_events(2)
    s = summarize(events)
    # 4 probes' passes (0.2 s) and the steps after them against the usual steps before
    # each (the wobble: +1 ms in all), as the scheduler fed the same run counts them
    sched = ProbeScheduler()
    for e in events:
        if isinstance(e, StepEvent):
            sched.add_step(e.step_time_s, warmup=e.warmup)
        elif isinstance(e, PhaseEvent):
            sched.add_probe(e.probe_cost_s)
    assert s.probe_cost_s == pytest.approx(sched.probe_wall_s) and sched.probes == 4
    assert s.probe_cost_s == pytest.approx(0.201)
    # the counted steps' wall clock: 95 steps of about 100 ms and the 4 probes between them
    assert s.counted_wall_s == pytest.approx(95 * STEP_S + 0.2, rel=0.01)
    assert s.probe_wall_share == pytest.approx(0.201 / s.counted_wall_s)
    assert s.probe_budget == 0.02 and s.probe_every is None
    assert s.share_target == 0.03  # --precision, where asked
    text = probes_text(s)
    assert text.startswith(
        "4, 2.1% of wall (201.0 ms with the steps they slowed; budget 2%: 1% for the probes, 1% for the per-step cost), "
        "over the budget: "  # 4 probes of a step each in 100 steps: over 2%, and said so
    )
    assert "exposed share known to \u00b13 points" in text


def test_the_share_target_is_the_schedulers_own_default_without_precision():
    from gpuscale.trainer.schedule import DEFAULT_PRECISION

    assert DEFAULT_SHARE_PRECISION == DEFAULT_PRECISION
    s = summarize(run_events(2, precision=None, noise=0.03))
    assert s.share_target == DEFAULT_PRECISION
    assert share_known_text(s).startswith("exposed share not yet known to \u00b12 points (\u00b1")
    assert share_known_text(summarize(run_events(1))) is None  # nothing exchanged


def test_a_first_probe_over_the_budget_is_said_to_be_the_exception():
    s = summarize(run_events(2, steps=15, probe_at=(10,)))
    assert s.probe_wall_share > s.probe_budget
    assert (
        "(51.0 ms with the steps they slowed; budget 2%: 1% for the probes, 1% for the per-step cost), "
        "over the budget: the first probe always runs"
    ) in probes_text(s)
    assert "over the budget" not in probes_text(summarize(run_events(2, probe_at=(10, 70))))


def test_a_fixed_period_is_said_instead_of_a_budget():
    events = run_events(2)
    events[0].config["phase_every"] = 10
    s = summarize(events)
    assert s.probe_every == 10 and s.probe_budget is None
    assert "(201.0 ms with the steps they slowed; every 10 steps)" in probes_text(s)


def test_an_old_recording_without_probe_costs_still_reads():
    events = list(load_inputs([str(SAMPLES / "mnist-cnn_2xcpu.ndjson")]).points)
    assert events  # it loads as a sweep point
    from gpuscale.recording.reader import iter_events

    s = summarize(iter_events(SAMPLES / "mnist-cnn_2xcpu.ndjson"))
    assert s.probe_cost_s is None and s.probe_wall_share is None
    assert s.probe_every == 10  # its --phase-every
    text = probes_text(s)
    assert text.startswith("10 (every 10 steps); exposed share ")
    assert "of wall" not in text


def test_run_and_the_dashboard_say_the_breakdown_in_the_same_words():
    import msgspec

    from gpuscale.commands.run import phase_lines
    from gpuscale.ui.widgets.advice import advice_content

    s = summarize(run_events(2, noise=0.004))
    run_text = "\n".join(phase_lines(msgspec.to_builtins(s), 2))
    panel = advice_content(s).plain
    said = [probes_text(s), *(item.value for item in phase_items(s))]
    for words in said:
        assert words in run_text and words in panel, words
    assert "exposed all-reduce 20.0 \u00b1" in run_text
    assert "exposed all-reduce 20.0 \u00b1" in panel


def test_the_dashboard_says_precision_not_reached_while_running():
    from gpuscale.ui.widgets.advice import advice_content

    events = run_events(2, precision=0.001)[:-1]  # no end yet: still running
    panel = advice_content(summarize(events)).plain
    assert (
        "precision: \u00b10.1% asked (step time \u00b10.1%, exposed share \u00b10.1 points), "
        "not reached yet (step time \u00b1"
    ) in panel


def _sweep(tmp_path, runs: dict[int, list]):
    paths = [write_run(tmp_path / f"{n}.ndjson", events) for n, events in runs.items()]
    return load_inputs([str(p) for p in paths])


def test_recommend_says_for_each_count_whether_it_reached_the_precision(tmp_path):
    from gpuscale.commands.recommend_render import render

    sweep = _sweep(tmp_path, {1: run_events(1), 2: run_events(2, noise=0.03)})
    sweep.wall_s = 95.0
    rec = recommend(sweep.points)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=200, color_system=None), chart=False)
    text = out.getvalue()
    assert (
        "Precision asked: \u00b13.0%, the median step time to \u00b13.0% of itself and the "
        "exposed share to \u00b13 points of the step (95% ranges)"
    ) in text
    one = next(line for line in text.splitlines() if line.startswith("  1 device, 95 steps: "))
    assert one.startswith("  1 device, 95 steps: reached; step time \u00b1")
    assert "; step time \u00b1" in one and "nothing exchanged" in one
    two = next(line for line in text.splitlines() if line.startswith("  2 devices, 95 steps: "))
    # each half-width said once (it was "reached only ±4.2%; step time ±4.2%")
    assert "not reached within --steps; step time \u00b1" in two and "reached only" not in two
    assert "exposed share \u00b1" in two and "points (4 probes)" in two
    assert "more steps would likely reach it" in two
    assert "The sweep took 1m 35s (2 runs, TensorFlow's start included)." in text


def test_recommend_without_precision_says_nothing_of_it():
    from gpuscale.commands.recommend_render import precision_lines

    sweep = load_inputs(
        [str(SAMPLES / n) for n in ("mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson")]
    )
    assert precision_lines(recommend(sweep.points), sweep) == []


def test_recommend_json_carries_the_precision_per_count_and_the_sweeps_time(tmp_path, capsys):
    from gpuscale.commands.recommend import report

    sweep = _sweep(tmp_path, {1: run_events(1), 2: run_events(2, noise=0.03)})
    sweep.wall_s = 95.0
    assert report(sweep, floor=0.6, max_devices=None, as_json=True, heading=None) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sweep_wall_s"] == 95.0
    measured = {p["devices"]: p for p in doc["points"] if not p.get("predicted")}
    assert measured[1]["precision_asked"] == 0.03 and measured[1]["precision_more_steps"] == 0
    assert measured[1]["step_time_err"] > 0 and "comm_share_err" not in measured[1]
    assert measured[2]["precision_more_steps"] > 0
    assert measured[2]["precision_reached"] == pytest.approx(measured[2]["comm_share_err"])
    predicted = [p for p in doc["points"] if p.get("predicted")]
    assert predicted and all("precision_asked" not in p for p in predicted)
    # and the file reads back as a sweep (the new fields are part of the format)
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    again = load_inputs([str(path)])
    assert {p.devices: p.precision_asked for p in again.points} == {1: 0.03, 2: 0.03}


def test_the_dashboard_derives_no_ratio_from_an_unresolved_exchange():
    from gpuscale.ui.widgets.advice import advice_content

    resolved = advice_content(summarize(run_events(2, noise=0.004))).plain
    assert "compute:comm 3.5" in resolved
    events = run_events(2, noise=0.03)  # the exposed all-reduce within its own noise
    s = summarize(events)
    assert s.allreduce_s <= s.allreduce_err_s
    panel = advice_content(s).plain
    assert "(not resolved)" in panel and "compute:comm" not in panel


def test_the_live_sweeps_recommendation_panel_says_each_counts_precision(tmp_path):
    from gpuscale.commands.recommend_render import precision_lines
    from gpuscale.ui.widgets.scaling import recommendation_text

    sweep = _sweep(tmp_path, {1: run_events(1), 2: run_events(2, noise=0.03)})
    rec = recommend(sweep.points)
    panel = recommendation_text(rec).plain
    assert "Precision (\u00b13.0% asked)\n- 1 device, 95 steps: reached; step time \u00b1" in panel
    # the same words as recommend's text
    for line in precision_lines(rec, sweep)[1:]:
        assert f"- {line.strip()}" in panel


def test_a_short_run_says_how_many_steps_would_tell_the_exposed_share():
    """The README's first command (100 steps, 2% budget) gets one probe: the probes
    line says how long a run at this budget it takes, not only "not yet known"."""
    from pathlib import Path

    from gpuscale.analysis.phase_report import share_known_text
    from gpuscale.analysis.summary import summarize
    from gpuscale.recording.reader import load_run

    trial = Path(__file__).parent / "fixtures" / "trial"
    s = summarize(load_run(trial / "20261123-153729_mnist-cnn-w32_2xcpu.ndjson.gz").events)
    assert (s.devices, s.phase_steps, s.steps_total) == (2, 1, 100)
    assert s.share_more_steps is not None and s.share_more_steps > 0
    text = share_known_text(s)
    assert text.startswith("exposed share not yet known to ±2 points (fewer than 3 probes): ")
    assert f"at least {100 + s.share_more_steps:,} steps at this probe budget" in text
    s.status = "running"  # while it runs, the run may yet get there
    assert "steps at this probe budget" not in share_known_text(s)


def test_a_count_whose_phases_do_not_split_the_step_did_not_reach_the_precision(tmp_path):
    """Probes steady to a point (±3 asked) over phases that do not add up to the
    step: the run's summary calls the share not resolved, and --precision is not
    reached on it (it said "reached", the share's spread taken for a precision)."""
    import msgspec

    from gpuscale.commands.recommend_render import render

    events = [  # each probe against a 140 ms training part, the steps' median 100 ms
        msgspec.structs.replace(e, step_time_s=0.14) if isinstance(e, PhaseEvent) else e
        for e in run_events(2, precision=0.5)
    ]
    s = summarize(events)
    assert s.comm_share_err is not None and s.comm_share_err <= 0.5
    assert s.unsplit_why == "the phases do not add up to the step"
    assert s.precision_reached is None and s.precision_more_steps is None
    sweep = _sweep(tmp_path, {1: run_events(1, precision=0.5), 2: events})
    sweep.wall_s = 95.0
    out = io.StringIO()
    render(
        recommend(sweep.points),
        sweep,
        console=Console(file=out, width=200, color_system=None),
        chart=False,
    )
    two = next(ln for ln in out.getvalue().splitlines() if ln.startswith("  2 devices, 95 st"))
    assert two.startswith(
        "  2 devices, 95 steps: not reached within --steps: the phases do not split the "
        "step: not resolved; step time \u00b1"
    )
    assert two.endswith("exposed share from 4 probes, not resolved")
