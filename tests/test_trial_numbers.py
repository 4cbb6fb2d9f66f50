"""Numbers a new user found wrong or contradictory (the trial of 2026-11-23), from
its own recordings (``tests/fixtures/trial``: start, step, phase and end events
only): every view says the same number for the same thing, and never a phase
larger than the step."""

from __future__ import annotations

import re
from pathlib import Path

from gpuscale.analysis.phase_report import parts_note, phase_items, phases_heading
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import RunSummary, summarize
from gpuscale.analysis.sweep import SweepPoint, load_inputs, point_from_summary
from gpuscale.commands.recommend_render import measured_share
from gpuscale.recording.reader import iter_events, load_run

TRIAL = Path(__file__).parent / "fixtures" / "trial"


def _summary(name: str) -> RunSummary:
    return summarize(iter_events(TRIAL / f"{name}.ndjson.gz"))


def _items(s: RunSummary) -> dict[str, str]:
    return {item.label: item.value for item in phase_items(s)}


def _percents(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def test_an_exposed_all_reduce_larger_than_the_step_is_no_number():
    # item 1: "exposed all-reduce 25.4 ms (195.1% of the step)"
    s = _summary("20261123-154832_train.py_2xcpu")
    items = _items(s)
    assert "25.4" not in items["exposed all-reduce"]
    assert items["exposed all-reduce"] == "not resolved"
    assert all(p <= 100 for v in items.values() for p in _percents(v))
    note = parts_note(s)
    # the probe contradicts itself (its exposed part is ten times the exchange timed
    # alone), which says more than its parts not adding up to the 4.4 ms step
    assert note and "not resolved" in note
    assert "25.4 ms is over twice the whole exchange timed alone, 2.4 ms" in note


def test_phases_adding_up_to_more_than_the_step_are_said_not_to():
    # item 4: "compute 803.8 ms ... apply 523.0 ms" against a 695.6 ms median step
    s = _summary("20261123-154046_mnist-cnn-w32_2xcpu")
    items = _items(s)
    assert s.phase_consistent is False
    assert "803.8" not in items["compute"] and "523.0" not in items["apply"]
    # compute alone longer than compute + all-reduce: the note names the contradiction
    # (before it did, it said the parts add up to 1.3 s against the 695.6 ms step)
    assert "compute alone 803.8 ms is longer than compute + all-reduce 505.5 ms" in parts_note(s)
    # "compute ≈ the whole step" followed by "apply 136.3 ms" on top of it; then (one
    # probe) "compute ≈ the whole step (1 probe…)" beside "the probes contradict each
    # other … no figure is taken from it": a contradiction makes compute no figure too
    s = _summary("20261123-153729_mnist-cnn-w32_2xcpu")
    items = _items(s)
    assert s.probes_run == 1 and s.compute_fills_step and s.phase_contradiction
    assert items["compute"] == "not resolved"
    assert "136.3" not in items["apply"] and items["apply"] == "not resolved"
    note = parts_note(s)
    assert note.startswith("the probe contradicts itself, its parts do not add up: compute alone")
    assert "contradict each other" not in note and "(1 probe; a busy machine?)" in note


def test_a_probe_against_an_outlier_step_does_not_split_the_median_step():
    # item 2: "phases 1 probe, vs 117.0 ms steps" while the median step is 5.0 ms;
    # "apply 96.7 ms" for an 11 kB model
    s = _summary("20261123-154406_train.py_2xcpu")
    assert "5.0 ms" in phases_heading(s) and "117.0" not in phases_heading(s)
    assert "96.7" not in _items(s)["apply + input"]  # a script's fit: the wait is in it
    assert s.compute_comm_ratio is None or s.phase_consistent is False


def test_the_probes_reference_is_the_median_of_the_usual_steps():
    # item 2, at its source: the trainer and the callback measure against this
    from gpuscale.trainer.schedule import ProbeScheduler

    sched = ProbeScheduler(0.02)
    assert sched.reference_step_s(0.117) == 0.117  # nothing else known yet
    for t in (0.005, 0.005, 0.004, 0.006, 0.117):
        sched.add_step(t)
    assert sched.reference_step_s(0.117) == 0.005
    sched.add_probe(0.02, 0.1)
    sched.add_step(0.050)  # the step after a probe is not a usual one
    assert sched.reference_step_s(0.050) == 0.005


def test_the_exposed_share_is_one_number_in_the_run_and_in_recommend():
    # item 3: recommend said 14% (against the 3.0 ms median step), replay 10.4%
    # (against the 4.1 ms probed step): one definition, the median step
    s = RunSummary(
        devices=2,
        steps_counted=100,
        step_time_s=0.003,
        phase_steps=5,
        compute_s=0.0014,
        allreduce_s=0.0004,
        apply_s=0.0012,
        input_s=0.0,
    )
    acc_share = 0.0004 / 0.003
    from gpuscale.analysis import metrics

    assert metrics.parts_fit_whole(0.003, 0.003)
    point = SweepPoint(
        devices=2,
        scaling="strong",
        step_time_s=0.003,
        global_batch=64,
        allreduce_s=0.0004,
        probes=5,
        throughput=64 / 0.003,
    )
    one = SweepPoint(
        devices=1, scaling="strong", step_time_s=0.002, global_batch=64, throughput=64 / 0.002
    )
    rec = recommend([one, point])
    (row,) = [r for r in rec.table if r.devices == 2 and not r.predicted]
    assert abs(row.comm_share - acc_share) < 1e-9
    # the run's own summary over the same whole
    events = list(iter_events(TRIAL / "20261123-154857_train.py_1xcpu.ndjson.gz"))
    summary = summarize(events)
    assert summary.comm_share == (summary.allreduce_s or 0.0) / summary.step_time_s
    assert s.devices == 2


def test_the_recorded_sweep_says_what_its_runs_say():
    # items 3 and 5: the 2-device run of sweep C, and sweep A's "0% (1 probe)"
    for name in ("20261123-154909_train.py_2xcpu", "20261123-154046_mnist-cnn-w32_2xcpu"):
        run = load_run(TRIAL / f"{name}.ndjson.gz")
        s = summarize(run.events)
        point = point_from_summary(s, run.start, name)
        rec = recommend([point])
        (row,) = [r for r in rec.table if not r.predicted]
        assert _items(s)["exposed all-reduce"] == "not resolved"
        assert measured_share(row) == "not resolved (1 probe)"


def test_an_exchange_of_zero_from_one_probe_is_not_resolved():
    # item 5: "0% (1 probe)" where replay says "not resolved (too few probes)"
    point = SweepPoint(
        devices=2,
        scaling="strong",
        step_time_s=0.7,
        global_batch=128,
        allreduce_s=0.0,
        probes=1,
        comm_share=0.0,
    )
    assert measured_share(point) == "not resolved (1 probe)"


def test_recommend_from_a_recorded_sweep_has_no_zero_share(tmp_path):
    sweep = load_inputs(
        [
            str(TRIAL / "20261123-153958_mnist-cnn-w32_1xcpu.ndjson.gz"),
            str(TRIAL / "20261123-154046_mnist-cnn-w32_2xcpu.ndjson.gz"),
        ]
    )
    rec = recommend(sweep.points)
    (two,) = [r for r in rec.table if r.devices == 2 and not r.predicted]
    assert not measured_share(two).startswith("0%")


def test_a_scripts_run_is_strong_scaling_in_every_view():
    # item 7: run/replay said "weak scaling (32 per replica, global batch 64)" then
    # "gpuscale cannot tell ...", recommend "strong scaling, global batch 64"
    from gpuscale.analysis.script_runs import note_of, scaling_of
    from gpuscale.commands.run import _scaling

    run = load_run(TRIAL / "20261123-154909_train.py_2xcpu.ndjson.gz")
    assert scaling_of(run.start) == "strong"
    assert summarize(run.events).scaling == "strong"
    assert _scaling(run.start).startswith("strong scaling (global batch 64")
    assert "cannot tell" not in note_of(run.start)
    point = point_from_summary(summarize(run.events), run.start, "x")
    assert point.scaling == "strong" and "global batch 64" in point.config


def test_the_step_time_bars_are_the_measured_step_times():
    # item 6: bars of ~730 and ~810 ms (the probes' phase sums) beside measured
    # medians of 583.7 and 695.6 ms
    from gpuscale.plots.scaling import build_scaling_chart

    sweep = load_inputs(
        [
            str(TRIAL / "20261123-153958_mnist-cnn-w32_1xcpu.ndjson.gz"),
            str(TRIAL / "20261123-154046_mnist-cnn-w32_2xcpu.ndjson.gz"),
        ]
    )
    chart = build_scaling_chart(recommend(sweep.points))
    totals = {
        b.devices: round((sum(b.phases_s) if b.phases_s else b.step_time_s) * 1000, 1)
        for b in chart.bars
        if not b.predicted
    }
    assert totals == {1: 583.7, 2: 695.6}


def test_a_split_that_adds_up_within_its_noise_is_drawn_as_the_step():
    from gpuscale.plots.scaling import build_scaling_chart

    one = SweepPoint(
        devices=1,
        scaling="strong",
        step_time_s=0.010,
        global_batch=64,
        throughput=6400.0,
        compute_s=0.007,
        allreduce_s=0.0,
        apply_s=0.0035,
        input_s=0.0,
        probes=5,
    )
    (bar,) = build_scaling_chart(recommend([one])).bars
    assert abs(sum(bar.phases_s) - 0.010) < 1e-12
    assert bar.phases_s[0] > bar.phases_s[2] > 0


def test_a_live_sweep_and_its_recordings_say_why_their_predictions_differ():
    # item 8: live recommend showed rows 1 and 2, --from the same sweep added 4 and 8
    from gpuscale.commands.recommend_render import predictions_reach_line

    sweep = load_inputs(
        [
            str(TRIAL / "20261123-154857_train.py_1xcpu.ndjson.gz"),
            str(TRIAL / "20261123-154909_train.py_2xcpu.ndjson.gz"),
        ]
    )
    assert sweep.available_devices is None
    again = recommend(sweep.points)
    assert {r.devices for r in again.table if r.predicted} == {4, 8}
    line = predictions_reach_line(again, sweep)
    assert "Predicted up to 8 devices" in line and "does not say how many" in line
    sweep.available_devices = 2  # what the live sweep knew
    live = recommend(sweep.points, available_devices=2)
    assert not [r for r in live.table if r.predicted]
    line = predictions_reach_line(live, sweep)
    assert "No predictions past the 2 devices available" in line and "--max-devices" in line


def test_an_ended_runs_duration_is_one_number_in_the_header_toast_and_log():
    # item 9: "elapsed 0:11", "80 steps in 11.9 s", "run completed after 80 steps, 10.9 s":
    # host samples still arrive after the end event; the run ended at its end event
    from gpuscale.events.schema import EndEvent, HostSample, StartEvent, StepEvent
    from gpuscale.ui.model import RunModel

    start = StartEvent(t=100.0, gpuscale_version="t", host="h", pid=1, model="mlp")
    steps = [StepEvent(t=101.0 + i, step=i, step_time_s=0.1, samples=64) for i in range(9)]
    end = EndEvent(t=110.9, status="completed", steps=9)
    model = RunModel()
    model.absorb(
        [start, *steps, end, HostSample(t=111.9, cpu_pct=5.0, mem_used_bytes=1, mem_total_bytes=2)]
    )
    snap = model.snapshot()
    assert abs(snap.elapsed_s - 10.9) < 1e-9
    assert any("10.9 s" in x.message for x in snap.logs if "run completed" in x.message)


def test_recommend_says_which_whole_its_exposed_share_is_of():
    # item 3: "pick one definition (say which in the wording)"
    import io

    from rich.console import Console

    from gpuscale.commands.recommend_render import EXPOSED_SHARE_MEANS, render

    point = SweepPoint(
        devices=2,
        scaling="strong",
        step_time_s=0.003,
        global_batch=64,
        throughput=64 / 0.003,
        compute_s=0.0014,
        allreduce_s=0.0004,
        apply_s=0.0012,
        probes=1,
    )
    one = SweepPoint(
        devices=1, scaling="strong", step_time_s=0.002, global_batch=64, throughput=32000.0
    )
    from gpuscale.analysis.sweep import Sweep

    out = io.StringIO()
    render(
        recommend([one, point]),
        Sweep(points=[one, point]),
        console=Console(file=out, width=160),
        chart=False,
    )
    text = out.getvalue()
    assert "13% (1 probe)" in text  # 0.4 ms of the 3.0 ms median step, as run says
    assert EXPOSED_SHARE_MEANS in text


SWEEP_1126 = [
    str(TRIAL / "20261126-123458_mnist-cnn-w32_1xcpu.ndjson.gz"),
    str(TRIAL / "20261126-123505_mnist-cnn-w32_2xcpu.ndjson.gz"),
]
"""Trial of 2026-11-26: the 2-device run's one probe timed compute (122.2 ms) longer
than the median step (121.0 ms), its parts adding up within their noise."""


def test_compute_filling_the_step_leaves_the_point_unsplit_in_every_view():
    # --json wrote "compute_s": 0.1222 beside "step_time_s": 0.1210 and
    # "allreduce_s": 0.0, "comm_share": 0.0 where the table said "not resolved
    # (1 probe)", and the scaling view drew the bar in the compute colour
    from gpuscale.plots.scaling import build_scaling_chart

    s = _summary("20261126-123505_mnist-cnn-w32_2xcpu")
    assert s.phase_consistent is True and s.compute_fills_step
    assert _items(s)["compute"].startswith("\u2248 the whole step")
    assert _items(s)["exposed all-reduce"] == "not resolved"
    rec = recommend(load_inputs(SWEEP_1126).points)
    (two,) = [r for r in rec.table if r.devices == 2 and not r.predicted]
    assert two.compute_s is None and two.allreduce_s is None and two.comm_share is None
    assert measured_share(two) == "not resolved (1 probe)"
    bars = {b.devices: b for b in build_scaling_chart(rec).bars if not b.predicted}
    assert bars[2].phases_s is None and bars[1].phases_s  # grey "not split" beside a split


def test_recommend_json_writes_null_where_the_table_says_not_resolved(capsys, tmp_path):
    import json

    from gpuscale.cli import main

    assert main(["recommend", "--from", *SWEEP_1126, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    two = next(p for p in first["points"] if p["devices"] == 2 and not p.get("predicted"))
    for name in ("compute_s", "allreduce_s", "apply_s", "input_s", "comm_share"):
        assert name in two and two[name] is None, name
    one = next(p for p in first["points"] if p["devices"] == 1)
    assert one["comm_share"] == 0.0  # one device: nothing to exchange, a real 0
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(first))
    assert main(["recommend", "--from", str(saved), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["points"] == first["points"]
    assert second["recommendation"] == first["recommendation"]


def test_predicted_rows_do_not_model_an_exposed_share_the_measured_ones_did_not_resolve(
    capsys,
):
    # the table said "0% (model)" at 4 and 8 devices right beside the 2-device
    # row's "not resolved (1 probe)": a modelled 0% where nothing measured the exchange
    import io
    import json

    from rich.console import Console

    from gpuscale.cli import main
    from gpuscale.commands.recommend_render import render

    sweep = load_inputs(SWEEP_1126)
    rec = recommend(sweep.points)
    predicted = [r for r in rec.table if r.predicted]
    assert predicted and all(r.comm_share is None for r in predicted)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=160, color_system=None), chart=False)
    text = out.getvalue()
    assert "(model)" not in text, text
    rows = {line.split("\u2502")[1].strip(): line for line in text.splitlines() if "\u2502" in line}
    assert "not resolved" in rows["4"] and "predicted" in rows["4"], rows
    assert main(["recommend", "--from", *SWEEP_1126, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["comm_share"] for p in doc["points"] if p.get("predicted")] == [None, None]


def test_json_nulls_a_share_within_its_noise_beside_its_measured_value():
    from gpuscale.analysis.sweep import sweep_document

    noisy = SweepPoint(
        devices=2,
        scaling="strong",
        step_time_s=0.1,
        global_batch=64,
        compute_s=0.09,
        allreduce_s=0.0003,
        allreduce_err_s=0.0005,
        probes=14,
        comm_share=0.003,
    )
    (doc,) = sweep_document([noisy])["points"]
    assert doc["comm_share"] is None  # the table's "not resolved (14 probes)"
    assert doc["allreduce_s"] == 0.0003 and doc["allreduce_err_s"] == 0.0005


def test_one_device_whose_pass_is_a_little_over_the_median_keeps_its_phases():
    """Review of 2026-11-26: every probe's compute of sample_runs' 1-device run raised
    2% (a pass just over the median step, which per-probe noise gives) made --json
    drop the point's compute and the chart grey it. One device derives no exposed
    exchange from it: the text says compute is about the whole step, the point keeps
    its numbers."""
    import msgspec

    from gpuscale.events.schema import PhaseEvent

    path = Path(__file__).parent.parent / "sample_runs" / "mnist-cnn_1xcpu.ndjson"
    events = [
        msgspec.structs.replace(e, compute_s=e.compute_s * 1.02) if isinstance(e, PhaseEvent) else e
        for e in iter_events(path)
    ]
    s = summarize(events)
    assert s.devices == 1 and s.compute_fills_step  # as the text words it
    assert s.phases_split_step
    assert _items(s)["compute"].startswith("\u2248 the whole step")
    point = point_from_summary(s, load_run(path).start, "one")
    assert point.compute_s is not None and point.comm_share in (None, 0.0)
