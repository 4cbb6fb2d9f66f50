"""summarize(): medians without warm-up, phases, bandwidth, imbalance, incremental use."""

from __future__ import annotations

import math

import msgspec
import pytest

from gpuscale.analysis.summary import RunAccumulator, summarize
from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    GpuSample,
    PhaseEvent,
    StartEvent,
    StepEvent,
)


def _start(**kw) -> StartEvent:
    base = dict(
        t=0.0,
        gpuscale_version="0",
        host="h",
        pid=1,
        model="mnist-cnn",
        strategy="mirrored",
        cross_device_ops="nccl",
        num_replicas=4,
        scaling="weak",
        per_replica_batch=64,
        global_batch=256,
        payload_bytes=4_000_000,
        platform="gpu",
        devices=[
            DeviceInfo(index=i, name="Tesla V100", pcie_gen=3, pcie_width=16) for i in range(4)
        ],
    )
    base.update(kw)
    return StartEvent(**base)


def _run(step_times, warmup=2, phases=()):
    events = [_start()]
    for i, t in enumerate(step_times):
        events.append(StepEvent(t=i, step=i, step_time_s=t, samples=256, warmup=i < warmup))
    events += list(phases)
    return events


def test_warmup_steps_are_left_out_of_the_statistics():
    s = summarize(_run([9.0, 9.0, 0.1, 0.2, 0.3]))
    assert s.steps_total == 5
    assert s.steps_counted == 3
    assert s.step_time_s == pytest.approx(0.2)
    assert s.throughput_samples_s == pytest.approx(256 / 0.2)
    assert s.spread == pytest.approx((0.28 - 0.12) / 0.2)
    assert s.devices == 4 and s.scaling == "weak" and s.status == "running"


def test_phases_give_shares_ratio_and_bandwidths():
    phases = [
        PhaseEvent(t=0, step=0, step_time_s=9, compute_s=9, allreduce_s=9, apply_s=9),  # warm-up
        PhaseEvent(
            t=1,
            step=3,
            step_time_s=0.1,
            compute_s=0.06,
            allreduce_s=0.03,
            apply_s=0.01,
            input_s=0.0,
            allreduce_total_s=0.04,
        ),
        PhaseEvent(
            t=2,
            step=4,
            step_time_s=0.1,
            compute_s=0.06,
            allreduce_s=0.03,
            apply_s=0.01,
            input_s=0.0,
            allreduce_total_s=0.04,
        ),
    ]
    s = summarize(_run([1, 1, 0.1, 0.1, 0.1], phases=phases))
    assert s.phase_steps == 2
    assert s.compute_s == pytest.approx(0.06)
    assert s.comm_share == pytest.approx(0.3)
    assert s.compute_comm_ratio == pytest.approx(2.0)
    assert s.algbw_bytes_s == pytest.approx(4e6 / 0.03)
    assert s.busbw_bytes_s == pytest.approx(4e6 / 0.03 * 1.5)
    assert s.algbw_total_bytes_s == pytest.approx(1e8)
    assert s.interconnect is not None and s.interconnect.kind == "pcie"


def test_the_probes_split_one_whole_step_and_an_old_summary_still_reads():
    """The phases split the median step (``step_time_s``), or the whole probed step
    (``phase_full_step_s``) where no step was counted: no third step time of the
    probes (``phase_step_time_s`` was computed and never read, so it is gone from
    the summary and `run --json`); a recording's summary that carries it still reads."""
    from gpuscale.analysis.summary import RunSummary

    phases = [
        PhaseEvent(t=1, step=3, step_time_s=0.1, compute_s=0.06, allreduce_s=0.03, apply_s=0.01)
    ]
    s = summarize(_run([1, 1, 0.1, 0.1, 0.1], phases=phases))
    doc = msgspec.to_builtins(s)
    assert "phase_step_time_s" not in doc
    assert doc["phase_full_step_s"] == pytest.approx(0.1) and doc["step_time_s"] == 0.1
    old = msgspec.convert({**doc, "phase_step_time_s": 0.1}, RunSummary)
    assert old == s


def test_gpu_and_worker_imbalance():
    events = _run([0.1] * 6, warmup=0)
    for k in range(5):
        for gpu, util in ((0, 95.0), (1, 96.0), (2, 40.0), (3, 94.0)):
            events.append(GpuSample(t=k, index=gpu, util_gpu_pct=util))
    events += [StepEvent(t=9, step=i, step_time_s=0.3, samples=256, worker=1) for i in range(6)]
    s = summarize(events)
    assert s.gpu_util_min_index == 2 and s.gpu_util_min_pct == 40.0
    assert s.gpu_util_median_pct == pytest.approx(94.5)
    assert s.worker_step_time_s == {0: 0.1, 1: 0.3}
    assert s.worker_imbalance == pytest.approx(0.3 / 0.2)


def test_accumulator_is_incremental_and_summary_goes_into_end_event():
    acc = RunAccumulator()
    assert acc.summary().step_time_s is None
    events = _run([0.5, 0.5, 0.2, 0.4])
    for e in events:
        acc.add(e)
    assert acc.summary().step_time_s == pytest.approx(0.3)
    acc.add(EndEvent(t=5, status="completed", steps=4))
    s = acc.summary()
    assert s.status == "completed"
    end = EndEvent(t=5, status="completed", summary=msgspec.to_builtins(s))
    assert end.summary["step_time_s"] == pytest.approx(0.3)


def _phase(step: int, *, step_time_s: float, input_s: float, allreduce_s: float = 0.02):
    return PhaseEvent(
        t=step,
        step=step,
        step_time_s=step_time_s,
        compute_s=step_time_s - allreduce_s,
        allreduce_s=allreduce_s,
        apply_s=0.0,
        input_s=input_s,
    )


def test_shares_are_over_the_whole_step_input_wait_included():
    # The trainer's PhaseEvent.step_time_s excludes the input wait: a 0.1 s train
    # part after a 0.2 s wait is a 0.3 s step, of which input is 2/3, not 200 %.
    phases = [_phase(i, step_time_s=0.1, input_s=0.2) for i in (3, 4)]
    s = summarize(_run([1, 1, 0.3, 0.3, 0.3], phases=phases))
    assert s.phase_full_step_s == pytest.approx(0.3)
    assert s.input_share == pytest.approx(0.2 / 0.3)
    assert s.comm_share == pytest.approx(0.02 / 0.3)
    assert s.input_share + s.comm_share <= 1.0


def test_multi_worker_steps_are_counted_per_worker_not_added_up():
    events = [_start(num_workers=2, num_replicas=2)]
    for worker in (0, 1):
        events += [
            StepEvent(t=i, step=i, step_time_s=0.1, samples=128, warmup=i < 2, worker=worker)
            for i in range(10)
        ]
    s = summarize(events)
    assert (s.steps_total, s.steps_counted) == (10, 8)
    assert s.step_time_s == pytest.approx(0.1)


def test_busbw_uses_the_exchange_volume_not_always_the_ring():
    phase = PhaseEvent(t=1, step=3, step_time_s=0.1, compute_s=0.06, allreduce_s=0.03, apply_s=0.01)
    algbw = 4e6 / 0.03
    ring = summarize(_run([1, 1, 0.1, 0.1], phases=[phase]))
    assert ring.exchange == "ring" and ring.busbw_bytes_s == pytest.approx(algbw * 1.5)
    gather_start = _start(config={"strategy": "mirrored", "all_reduce": "reduce-to-one"})
    gather = summarize([gather_start, *_run([1, 1, 0.1, 0.1], phases=[phase])[1:]])
    assert gather.exchange == "gather" and gather.busbw_bytes_s == pytest.approx(algbw * 3)
    host = summarize(
        [_start(strategy="central-storage"), *_run([1, 1, 0.1, 0.1], phases=[phase])[1:]]
    )
    assert host.exchange == "host" and host.busbw_bytes_s == pytest.approx(algbw * 4)


def test_least_busy_gpu_keeps_its_worker():
    events = _run([0.1] * 4, warmup=0)
    for worker, gpu, util in ((0, 0, 90.0), (0, 1, 91.0), (1, 0, 92.0), (1, 1, 30.0)):
        events.append(GpuSample(t=1, index=gpu, util_gpu_pct=util, worker=worker))
    s = summarize(events)
    assert (s.gpu_util_min_worker, s.gpu_util_min_index, s.gpu_util_min_pct) == (1, 1, 30.0)


def _probe(step, compute, fused, step_s=0.1, cost=0.2):
    """A schema-1.2 probe: T(compute), T(compute + all-reduce), the probed step."""
    return PhaseEvent(
        t=step,
        step=step,
        step_time_s=step_s,
        compute_s=compute,
        allreduce_s=max(0.0, fused - compute) if fused is not None else 0.0,
        apply_s=max(0.0, step_s - (fused if fused is not None else compute)),
        compute_allreduce_s=fused,
        probe_cost_s=cost,
    )


def test_every_phase_has_an_uncertainty_and_a_small_exchange_is_not_resolved():
    # the exchange is noise around 0 (+-4 ms); compute is steady at 60 ms
    diffs = [0.004, -0.004, 0.001, -0.002, 0.003, -0.001, 0.0]
    phases = [_probe(2 + i, 0.06, 0.06 + d) for i, d in enumerate(diffs)]
    s = summarize(_run([0.1] * 10, phases=phases))
    assert s.phase_steps == 7
    assert s.compute_s == pytest.approx(0.06) and s.compute_err_s == pytest.approx(0.0)
    # the median of the unfloored differences, not of differences floored at 0
    assert s.allreduce_s == pytest.approx(0.0)
    assert s.allreduce_err_s is not None and s.allreduce_err_s > 0.001
    assert s.comm_share_err is not None
    assert s.probe_cost_s == pytest.approx(7 * 0.2)
    assert s.phase_consistent is True


def test_a_clear_exchange_is_resolved():
    phases = [_probe(2 + i, 0.06, 0.08 + 0.001 * (i % 3)) for i in range(6)]
    s = summarize(_run([0.1] * 8, phases=phases))
    assert s.allreduce_s == pytest.approx(0.021)
    assert s.allreduce_err_s is not None and s.allreduce_s > s.allreduce_err_s


def test_one_replica_has_no_exchange_and_apply_is_the_rest_of_the_step():
    phases = [_probe(2 + i, 0.07, None) for i in range(4)]
    s = summarize(_run([0.1] * 8, phases=phases))
    assert s.allreduce_s == 0.0 and s.allreduce_total_s is None
    assert s.apply_s == pytest.approx(0.03)


def test_probes_longer_than_their_steps_are_flagged():
    # issue 18: compute 76 ms beside a 60 ms step cannot be a breakdown of that step
    phases = [_probe(2 + i, 0.076, 0.12, step_s=0.06) for i in range(4)]
    s = summarize(_run([0.06] * 8, phases=phases))
    assert s.phase_consistent is False


def test_schema_1_0_phases_still_summarize_with_floored_values():
    phases = [
        PhaseEvent(
            t=i, step=2 + i, step_time_s=0.1, compute_s=0.06, allreduce_s=0.01 * i, apply_s=0.01
        )
        for i in range(3)
    ]
    s = summarize(_run([0.1] * 6, phases=phases))
    assert s.allreduce_s == pytest.approx(0.01) and s.apply_s == pytest.approx(0.01)
    assert s.probe_cost_s is None


def _precision_run(step_times, diffs, precision=0.03):
    events = [_start(config={"precision": precision, "probe_budget": 0.02})]
    for i, t in enumerate(step_times):
        events.append(StepEvent(t=i, step=i, step_time_s=t, samples=256))
    events += [_probe(10 * i, 0.06, 0.08 + d) for i, d in enumerate(diffs)]
    return events


def test_a_precision_reached_says_so_and_needs_no_more_steps():
    steps = [0.1 + 0.001 * (i % 5) for i in range(100)]  # steady: +-0.3 % on the median
    s = summarize(_precision_run(steps, [0.0, 0.001, -0.001, 0.0, 0.002]))
    assert s.precision_asked == 0.03
    assert s.precision_reached is not None and s.precision_reached <= 0.03
    assert s.precision_more_steps == 0


def test_a_precision_not_reached_says_how_far_and_how_many_more_steps():
    steps = [0.1 + 0.001 * (i % 5) for i in range(100)]
    diffs = [0.02, -0.02, 0.01, -0.015, 0.018, -0.01]  # exposed share noisy: +-~20 points
    s = summarize(_precision_run(steps, diffs))
    assert s.precision_reached == pytest.approx(s.comm_share_err)
    assert s.precision_reached > 0.03
    # (err / 3 %)^2 x 6 probes needed in all, at the pace the budget pays for: a probe
    # costs 0.2 s = 2 steps, the probes' 1 % of the 2 % budget pays one every 200 steps
    needed = math.ceil(6 * (s.comm_share_err / 0.03) ** 2)
    rate = 0.2 / (0.01 * s.step_time_s)  # 196 steps a probe at the 102 ms median step
    assert s.precision_more_steps == pytest.approx(needed * rate - 100, abs=1)
    assert s.precision_more_steps > 100


def test_too_few_probes_give_no_precision_but_a_lower_bound_on_the_steps():
    s = summarize(_precision_run([0.1] * 50, [0.0]))
    assert s.precision_reached is None
    # 3 probes at least, at one per 200 steps (what the budget pays for), in all
    assert s.precision_more_steps == 3 * 200 - 50


def test_with_a_fixed_period_the_steps_needed_come_at_that_period():
    events = _precision_run([0.1] * 50, [0.0])
    events[0] = _start(config={"precision": 0.03, "phase_every": 10})
    assert summarize(events).precision_more_steps == 20  # 2 more probes, one every 10 steps


def test_the_probes_cost_holds_the_slower_step_after_each_as_the_scheduler_counts_it():
    # a user saw "0.5% of wall" (the passes) while the scheduler counted 2.5 steps a probe
    steps = [0.1] * 40
    steps[11] = steps[21] = 0.15  # the steps after the probes of steps 10 and 20
    steps[31] = 0.08  # faster after the third: noise cancels in the sum
    phases = [_probe(s, 0.06, 0.08, cost=0.1) for s in (10, 20, 30)]
    s = summarize(_run(steps, phases=phases, warmup=0))
    assert s.probe_cost_s == pytest.approx(3 * 0.1 + 0.05 + 0.05 - 0.02)


def test_a_probes_cost_is_taken_against_the_usual_steps_before_it_as_the_scheduler_did():
    # a user's run: the step after the probe took 264 ms against the usual ~86 ms at the
    # time, while the run's final median (its steps slowed later) was 443 ms: taken
    # against that, the probe looked 180 ms cheaper than free
    from gpuscale.trainer.schedule import ProbeScheduler

    steps = [0.086] * 9 + [0.2637] + [0.443] * 30  # the probe after step 8, split-free
    phases = [_probe(8, 0.05, 0.06, step_s=0.086, cost=0.07)]
    s = summarize(_run(steps, phases=phases, warmup=0))
    assert s.probe_cost_s == pytest.approx(0.07 + 0.2637 - 0.086)
    sched = ProbeScheduler()  # the scheduler, fed the same run, counted the same
    for n, took in enumerate(steps):
        sched.add_step(took)
        if n == 8:
            sched.add_probe(0.07)
    assert sched.probe_wall_s == pytest.approx(s.probe_cost_s)


def test_several_workers_probing_the_same_step_are_one_probe_at_one_workers_cost():
    from gpuscale.analysis.phase_report import probes_text

    events = [_start(num_workers=2, config={"probe_budget": 0.02})]
    for n in range(60):
        for w in (0, 1):
            took = 0.25 if n == 9 else 0.1  # both workers' steps after the probe
            events.append(
                StepEvent(t=n * 0.1 + 0.1, worker=w, step=n, step_time_s=took, samples=256)
            )
    for w, cost in ((0, 0.2), (1, 0.3)):
        events.append(msgspec.structs.replace(_probe(8, 0.06, 0.08, cost=cost), worker=w))
    s = summarize(events)
    assert s.probes == 1 and s.phase_steps == 1
    assert s.probe_cost_s == pytest.approx((0.2 + 0.3) / 2 + 0.15)
    assert probes_text(s).startswith("1, ")
    assert "the first probe always runs" in probes_text(s)  # 0.4 s of a 6 s run: over 2%


def test_several_workers_probes_are_counted_once_per_probed_step_in_every_view():
    """A multi-worker run's summary said "phases (2 probes, ...)" and then "probes: 1":
    the heading, the reasons and the precision count probed steps, as the probes
    line does; the workers' breakdowns of one step are one sample for the ranges."""
    from gpuscale.analysis.phase_report import phases_heading, probes_text
    from gpuscale.analysis.sweep import point_from_summary

    def run(diffs, config):
        events = [_start(num_workers=2, config=config)]
        for n in range(100):
            for w in (0, 1):
                events.append(StepEvent(t=n, worker=w, step=n, step_time_s=0.1, samples=256))
        for i, d in enumerate(diffs):
            for w in (0, 1):
                probe = _probe(10 * i, 0.06, 0.08 + d)
                events.append(msgspec.structs.replace(probe, worker=w))
        return events

    one = summarize(run([0.0], {}))
    assert one.phase_steps == 1 and one.probes == 1
    assert phases_heading(one).startswith("1 probe, too few for ranges")
    assert probes_text(one).startswith("1, ")
    assert point_from_summary(one, _start(num_workers=2), "r").probes == 1

    diffs = [0.02, -0.02, 0.01, -0.015, 0.018, -0.01]  # exposed share noisy
    s = summarize(run(diffs, {"precision": 0.03, "phase_every": 10}))
    assert s.phase_steps == 6 and s.probes == 6
    assert phases_heading(s).startswith("6 probes, 95% ranges")
    # (err / 3 %)^2 x 6 probed steps needed in all, one every 10 steps: not 12 probes'
    needed = math.ceil(6 * (s.comm_share_err / 0.03) ** 2)
    assert s.precision_more_steps == needed * 10 - 100


def test_several_workers_breakdowns_of_one_step_are_one_sample_for_the_ranges():
    """Two workers time the same collective step: 2 probed steps are too few for a
    range (as for one process), and with more the half-widths are those of the
    per-step means, not of twice as many samples."""
    from gpuscale.analysis import metrics
    from gpuscale.analysis.confidence import run_confidence
    from gpuscale.analysis.phase_report import phases_heading

    def run(fused_by_worker):
        events = [_start(num_workers=2, num_replicas=2)]
        for n in range(100):
            for w in (0, 1):
                events.append(StepEvent(t=n, worker=w, step=n, step_time_s=0.1, samples=256))
        for i, fused in enumerate(fused_by_worker):
            for w, f in enumerate(fused):
                events.append(msgspec.structs.replace(_probe(10 + 10 * i, 0.06, f), worker=w))
        return summarize(events)

    two = run([(0.08, 0.082), (0.085, 0.079)])
    assert two.phase_steps == 2 and two.probes == 2
    assert two.comm_share_err is None and two.allreduce_err_s is None
    assert phases_heading(two).startswith("2 probes, too few for ranges")
    assert "2 phase breakdowns" in run_confidence(two).reason

    fused = [(0.08, 0.09), (0.085, 0.075), (0.07, 0.072), (0.09, 0.086)]
    s = run(fused)
    assert s.phase_steps == 4 and s.probes == 4
    means = [(a + b) / 2 - 0.06 for a, b in fused]
    assert s.allreduce_s == pytest.approx(metrics.median(means))
    assert s.allreduce_err_s == pytest.approx(metrics.median_halfwidth(means))
    assert s.comm_share_err == pytest.approx(metrics.median_halfwidth(means) / 0.1)


def test_no_precision_asked_no_precision_fields():
    s = summarize(_run([0.1] * 10))
    assert s.precision_asked is None and s.precision_more_steps is None
    assert "precision_asked" not in msgspec.to_builtins(s)


def test_one_probe_that_does_not_fit_its_step_is_flagged_without_a_range():
    # one probe: no uncertainty, so compute + exposed all-reduce must fit as measured
    s = summarize(_run([0.06] * 8, phases=[_probe(3, 0.058, 0.066, step_s=0.06)]))
    assert s.phase_steps == 1 and s.compute_err_s is None
    assert s.phase_consistent is False
    s = summarize(_run([0.1] * 8, phases=[_probe(3, 0.06, 0.07)]))
    assert s.phase_consistent is True


def test_probes_that_contradict_each_other_are_not_a_breakdown():
    from gpuscale.analysis.phase_report import parts_note, phase_items

    # a user's recording: compute alone 1316 ms beside compute + all-reduce 1133 ms
    s = summarize(_run([1.5] * 8, phases=[_probe(3, 1.316, 1.133, step_s=1.5)]))
    assert s.phase_consistent is False
    assert "compute alone 1316.0 ms is longer than compute + all-reduce 1133.0 ms" in parts_note(s)
    assert all(i.value == "not resolved" for i in phase_items(s)[:3])
    # exposed all-reduce 398.6 ms beside the all-reduce alone: 4.0 ms
    probe = msgspec.structs.replace(_probe(3, 0.4, 0.7986, step_s=0.9), allreduce_total_s=0.004)
    s = summarize(_run([0.9] * 8, phases=[probe]))
    assert s.phase_consistent is False
    assert "exposed all-reduce 398.6 ms is over twice the whole exchange timed alone, 4.0 ms" in (
        parts_note(s)
    )
    # a busy CPU: 69.6 ms exposed beside 33.9 ms alone (the exchange competes with the
    # compute for cores inside the step) is within the rule's reach, not a contradiction
    probe = msgspec.structs.replace(_probe(3, 0.05, 0.1196, step_s=0.094), allreduce_total_s=0.0339)
    assert summarize(_run([0.094] * 8, phases=[probe])).phase_contradiction is None
    # within the noise (10% of the step below 3 probes): a breakdown
    probe = msgspec.structs.replace(_probe(3, 0.4, 0.45, step_s=0.9), allreduce_total_s=0.004)
    assert summarize(_run([0.9] * 8, phases=[probe])).phase_contradiction is None
    # a sub-ms step (a custom loop's 0.77 ms): the two are said with the decimals that
    # tell them apart, never "compute alone 0.7 ms is longer than compute + all-reduce 0.7 ms"
    s = summarize(_run([0.00077] * 8, phases=[_probe(3, 0.00074, 0.00066, step_s=0.00077)]))
    assert "compute alone 0.74 ms is longer than compute + all-reduce 0.66 ms" in parts_note(s)


def test_a_negative_exposed_part_floored_out_of_the_sum_is_the_contradiction_said():
    from gpuscale.analysis.phase_report import parts_note

    # a user's run: compute alone 180.4 ms, compute + all-reduce 163.9 ms (within the
    # 10% noise of a 217 ms step), apply 64.6 ms: floored at 0, the exposed part makes
    # the phases 245 ms, not the step; unfloored they add up. The reason is the negative part.
    probe = msgspec.structs.replace(
        _probe(3, 0.1804, 0.1639, step_s=0.2285), allreduce_total_s=0.0202
    )
    s = summarize(_run([0.2174] * 8, phases=[probe]))
    assert s.phase_consistent is False
    note = parts_note(s)
    assert "compute alone 180.4 ms is longer than compute + all-reduce 163.9 ms" in note
    assert "counted as 0" in note and "beyond their noise" not in note
    # the same probe where the floored sum still fits the step: nothing to say
    s = summarize(_run([0.245] * 8, phases=[probe]))
    assert s.phase_contradiction is None and s.phase_consistent is True


def test_split_steps_noise_cancels_in_the_probes_cost_as_the_scheduler_counts_it():
    # one replica: a probe is its split step alone; its excess over the usual step is
    # noise around 0, which floored probe by probe added up to "4.8% of wall"
    excesses = [0.03, -0.03, 0.02, -0.02, 0.01, -0.01]
    phases = [
        msgspec.structs.replace(
            _probe(10 * i + 2, 0.07, None),
            method="split-step",
            probe_cost_s=max(0.0, e),
            split_excess_s=e,
        )
        for i, e in enumerate(excesses)
    ]
    s = summarize(_run([0.1] * 70, phases=phases))
    assert s.probe_cost_s == pytest.approx(0.0)
    # two probes in a row: the second's split step is not also the first's step after
    back_to_back = [
        msgspec.structs.replace(_probe(s, 0.07, None), method="split-step", split_excess_s=0.02)
        for s in (10, 11)
    ]
    steps = [0.1] * 30
    steps[10] = steps[11] = 0.12
    assert summarize(_run(steps, phases=back_to_back)).probe_cost_s == pytest.approx(
        2 * 0.2 - 2 * 0.02 + 0.04
    )
    old = [msgspec.structs.replace(p, split_excess_s=None) for p in phases]
    assert summarize(_run([0.1] * 70, phases=old)).probe_cost_s == pytest.approx(0.06)
