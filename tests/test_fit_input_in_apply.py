"""A Keras ``fit`` timed by gpuscale's callback waits for each batch within the step it
times, so an input-bound script's wait lands in what is left of the step after compute
and the exchange. A trial (a ``tf.data`` map sleeping 40 ms a batch, 41 ms steps at 1
and 2 CPU devices) read ``apply 31.7 ± 2.6 ms, input wait not measured``: the wait was
called the optimizer update, and ``recommend`` said nothing of the input (on GPUs its
Why only asked to measure the exchange longer). Every view now calls that part
``apply + input``, says where it is the largest part that the callback cannot tell the
wait apart and how to tell, and leaves a compute-bound twin, a script's own loop and
the built-in trainer (which measures the wait) as they were."""

from __future__ import annotations

import json

import pytest
from recording_samples import write_run

from gpuscale.analysis.phase_report import input_in_apply_note, parts_note, phase_items
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import summarize
from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main
from gpuscale.events.schema import EndEvent, PhaseEvent, StartEvent, StepEvent

T0 = 1_800_000_000.0

INPUT_BOUND = {
    # (compute, exposed all-reduce, apply) in ms of 5 probes: the trial's figures
    1: (
        0.041,
        [(9.2, 0.0, 31.0), (9.6, 0.0, 31.7), (10.0, 0.0, 32.5), (9.4, 0.0, 30.8), (9.9, 0.0, 31.9)],
    ),
    2: (
        0.041,
        [(7.0, 0.6, 33.0), (7.5, 0.2, 33.9), (8.1, 1.0, 34.4), (6.9, 0.4, 33.5), (7.8, 0.8, 34.1)],
    ),
}
"""Devices: (median step in s, probes)."""

COMPUTE_BOUND = {
    # apply as long as compute, within their noise: Keras's own per-step work
    1: (
        0.0116,
        [(5.5, 0.0, 5.9), (6.0, 0.0, 6.5), (6.4, 0.0, 5.6), (5.8, 0.0, 6.6), (6.2, 0.0, 6.1)],
    ),
    2: (
        0.0088,
        [(4.6, 0.3, 4.1), (4.9, 0.5, 3.6), (5.2, 0.1, 3.9), (4.4, 0.4, 4.3), (5.0, 0.2, 3.5)],
    ),
}


def _run(
    replicas: int,
    step_s: float,
    probes: list[tuple[float, float, float]],
    *,
    model: str = "train.py",
    source: str = "script",
    custom_loop: bool = False,
    input_ms: float | None = None,
    t0: float = T0,
) -> list:
    """A run of 60 steps of ``step_s`` (2 warm-up), a probe every 10th step from the
    10th: the callback's (``callback-probe``), or with ``input_ms`` the built-in
    trainer's, which times the wait for the batch apart."""
    config: dict = {"probe_budget": 0.02, "warmup_steps": 2}
    if custom_loop:
        config["custom_loop"] = True
    events: list = [
        StartEvent(
            t=t0,
            gpuscale_version="0",
            host="h",
            pid=1,
            source=source,
            model=model,
            strategy="mirrored",
            num_replicas=replicas,
            scaling="strong",
            global_batch=64,
            per_replica_batch=64 // replicas,
            platform="cpu-logical",
            payload_bytes=317_416,
            config=config,
        )
    ]
    t = t0
    for i in range(60):
        t += step_s
        events.append(StepEvent(t=t, step=i, step_time_s=step_s, samples=64, warmup=i < 2))
        if i >= 10 and i % 10 == 0:
            compute, exposed, apply = probes[i // 10 - 1]
            wait = (input_ms or 0.0) / 1000
            events.append(
                PhaseEvent(
                    t=t,
                    step=i,
                    # the trainer's probe step is the step less its input wait
                    step_time_s=step_s - wait,
                    compute_s=compute / 1000,
                    allreduce_s=exposed / 1000,
                    apply_s=apply / 1000 - wait,
                    input_s=wait,
                    method="callback-probe" if input_ms is None else "differenced",
                )
            )
    events.append(EndEvent(t=t + 0.01, status="completed", steps=60))
    return events


def _items(s) -> dict[str, str]:
    return {item.label: item.value for item in phase_items(s)}


def test_an_input_bound_fit_says_its_apply_holds_the_input_wait():
    s = summarize(_run(1, *INPUT_BOUND[1]))
    assert s.input_in_apply and s.input_s is None
    items = _items(s)
    assert "apply" not in items
    assert items["apply + input"].startswith("31.7 ± ")
    assert items["input wait"] == "not measured apart: in apply + input"
    note = input_in_apply_note(s)
    assert note is not None
    assert note.startswith("apply + input is 77% of the median step, more than compute: ")
    assert "time the dataset alone" in note and "more devices will not shorten it" in note


def test_its_compute_bound_twin_gets_no_note():
    """Apply as long as compute within their noise (Keras's own per-step work on a
    small model): the part is named as it is, but nothing is said of the input."""
    s = summarize(_run(1, *COMPUTE_BOUND[1]))
    assert s.input_in_apply and "apply + input" in _items(s)
    assert s.apply_s is not None and s.compute_s is not None and s.apply_s > s.compute_s
    assert input_in_apply_note(s) is None


def test_a_loop_and_the_trainer_keep_their_apply():
    # a script's own loop gets its batch outside the step it times: between steps
    loop = summarize(_run(1, *INPUT_BOUND[1], custom_loop=True))
    assert not loop.input_in_apply and input_in_apply_note(loop) is None
    assert _items(loop)["input wait"] == "not measured" and "apply" in _items(loop)
    # the built-in trainer times the wait apart: it is its own phase, not in apply
    trainer = summarize(_run(1, *INPUT_BOUND[1], source="trainer", input_ms=25.0))
    assert not trainer.input_in_apply and input_in_apply_note(trainer) is None
    assert _items(trainer)["input wait"].startswith("25.0 ms")


def test_a_breakdown_that_does_not_split_the_step_says_nothing_of_the_input():
    # probes whose parts add up to twice the step: not resolved, no share quoted
    s = summarize(_run(1, 0.020, INPUT_BOUND[1][1]))
    assert s.input_in_apply and parts_note(s) is not None
    assert input_in_apply_note(s) is None


def test_replay_prints_the_note_under_the_phases(tmp_path, capsys):
    path = write_run(tmp_path / "run.ndjson", _run(2, *INPUT_BOUND[2]))
    assert main(["replay", str(path), "--end"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "apply + input 33.9 ± " in out
    assert "input wait not measured apart: in apply + input" in out
    assert "apply + input is 83% of the median step, more than compute" in out


def _sweep(tmp_path, runs: dict, name: str) -> list:
    return [
        write_run(
            tmp_path / f"{name}_{n}.ndjson",
            _run(n, *runs[n], model=name, t0=T0 + 100 * n),
        )
        for n in sorted(runs)
    ]


def test_recommend_tells_the_input_bound_job_from_the_compute_bound_one(tmp_path, capsys):
    slow = _sweep(tmp_path, INPUT_BOUND, "slow-input")
    fast = _sweep(tmp_path, COMPUTE_BOUND, "fast-input")
    assert main(["recommend", "--from", *map(str, slow)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "Apply + input is 83% of each step at 2 devices, the largest part: Keras's fit "
        "waits for each batch within the step"
    ) in said
    assert "time the dataset alone" in said
    assert "█ apply + input" in said and "input wait" not in said  # the chart's legend
    assert main(["recommend", "--from", *map(str, fast)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "Apply + input is" not in said and "time the dataset alone" not in said


def test_the_point_keeps_it_through_combined_runs_and_json(tmp_path, capsys):
    slow = _sweep(tmp_path, INPUT_BOUND, "slow-input")
    again = write_run(
        tmp_path / "again.ndjson", _run(2, *INPUT_BOUND[2], model="slow-input", t0=T0 + 900)
    )
    points = load_inputs([*slow, again]).points
    assert all(p.input_in_apply for p in points)
    rec = recommend(points)
    assert all(r.input_in_apply for r in rec.table if not r.predicted)
    # a run whose probes did not split its step, combined with one whose did: the
    # row's phases are the latter's, and so is what its apply holds
    torn = [(c, e, 80.0) for c, e, _ in INPUT_BOUND[2][1]]
    unsplit = write_run(
        tmp_path / "torn.ndjson", _run(2, 0.041, torn, model="slow-input", t0=T0 + 800)
    )
    first, *rest = load_inputs([unsplit, again]).points
    assert first.apply_s is None and not first.input_in_apply
    (row,) = [r for r in recommend([first, *rest]).table if not r.predicted]
    assert row.apply_s is not None and row.input_in_apply
    assert any("Apply + input is" in line for line in rec.advice)
    assert main(["recommend", "--from", *map(str, slow), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = [p for p in doc["points"] if not p.get("predicted")]
    assert measured and all(p["input_in_apply"] is True for p in measured)
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    (back,) = {p.input_in_apply for p in load_inputs([path]).points}
    assert back is True


@pytest.mark.parametrize("runs", [INPUT_BOUND, COMPUTE_BOUND])
def test_a_trainer_sweep_is_not_told_about_fit(tmp_path, runs, capsys):
    paths = [
        write_run(
            tmp_path / f"t{n}.ndjson",
            _run(n, *runs[n], source="trainer", input_ms=0.5, t0=T0 + 100 * n),
        )
        for n in sorted(runs)
    ]
    assert main(["recommend", "--from", *map(str, paths)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "apply + input" not in said.lower()


def test_the_dashboard_says_it_as_the_printed_summary_does():
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.advice import advice_content
    from gpuscale.ui.widgets.charts import build_breakdown_chart

    model = RunModel()
    model.absorb(_run(1, *INPUT_BOUND[1]))
    summary = model.summary()[1]
    shown = " ".join(advice_content(summary).plain.split())
    assert "apply + input 31.7 ± " in shown
    assert "apply + input is 77% of the median step" in shown
    legend = " ".join(build_breakdown_chart(model.snapshot(), 80, 16, summary).plain.split())
    assert "apply + input" in legend and "input: not measured" not in legend


def test_a_chart_legend_keeps_an_input_wait_a_file_gave_beside_apply_and_input():
    """Found by review: a sweep file with input_in_apply and an input_s drew an input
    segment without its legend entry."""
    from gpuscale.plots.scaling import APPLY_WITH_INPUT, PHASES, PhaseBar, ScalingChart

    def chart(wait: float) -> ScalingChart:
        bar = PhaseBar(1, 0.05, (0.02, 0.0, 0.02, wait), False, 3, input_in_apply=True)
        point = None
        return ScalingChart(
            series=[],
            ideal=[],
            recommended=point,
            recommended_config="",
            bars=[bar],
            scaling="weak",
        )

    assert chart(0.0).phase_names == (*PHASES[:2], APPLY_WITH_INPUT, None)
    assert chart(0.01).phase_names == (*PHASES[:2], APPLY_WITH_INPUT, PHASES[3])
