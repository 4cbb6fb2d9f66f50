"""The recommendation on synthetic sweeps whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.analysis.recommend import choose_devices, recommend
from gpuscale.analysis.sweep import SweepPoint, normalize
from gpuscale.errors import GpuscaleError


def _sweep(times: dict[int, float], config="c", exchange="ring", **kw) -> list[SweepPoint]:
    return [
        normalize(
            SweepPoint(
                devices=n,
                scaling="weak",
                per_replica_batch=64,
                step_time_s=t,
                config=config,
                exchange=exchange,
                **kw,
            )
        )
        for n, t in times.items()
    ]


def test_communication_free_scales_linearly_and_extends_by_prediction():
    rec = recommend(_sweep({1: 0.1, 2: 0.1, 4: 0.1}), max_devices=4)
    assert (rec.verdict, rec.devices, rec.predicted) == ("multi", 4, False)
    assert rec.speedup == pytest.approx(4.0) and rec.efficiency == pytest.approx(1.0)
    rec8 = recommend(_sweep({1: 0.1, 2: 0.1, 4: 0.1}), max_devices=8)
    assert (rec8.devices, rec8.predicted) == (8, True)
    assert any("PREDICTION" in line for line in rec8.confidence)


def test_communication_heavy_stays_single_and_says_which_batch_would_pay():
    rec = recommend(_sweep({1: 0.1, 2: 0.3}))
    assert (rec.verdict, rec.devices) == ("single", 1)
    # 1 -> 2 at weak scaling: efficiency k c / (k c + beta) with c = 0.1, beta = 0.2;
    # 60% needs k = 0.6 * 0.2 / (0.4 * 0.1) = 3, so a batch of 192 per replica.
    assert any("from 64 to about 192" in line for line in rec.advice)
    assert any("compute:communication is 0.5, below the 1.5" in r for r in rec.reasons)


def test_walk_stops_at_the_first_doubling_below_the_floor():
    # Throughput per step: 1 -> 2 gives 1.8x, 2 -> 4 1.2x (60% would need 1.2x: accepted
    # at exactly the floor), 4 -> 8 1.1x.
    times = {1: 1.0, 2: 2 / 1.8, 4: 4 / (1.8 * 1.2), 8: 8 / (1.8 * 1.2 * 1.1)}
    rec = recommend(_sweep(times), min_efficiency=0.6)
    assert rec.devices == 4
    assert [s.accepted for s in rec.walk] == [True, True, False]
    assert recommend(_sweep(times), min_efficiency=0.7).devices == 2


def test_a_step_must_gain_whatever_the_floor():
    """A marginal efficiency of 50% is 1.00x the samples/s: below the gain floor
    (52%), so a low ``--min-efficiency`` never calls adding devices that do
    nothing (or slow training down) worth it."""
    from gpuscale.analysis.recommend import _Candidate

    flat = [_Candidate(1, 100.0, "c", False), _Candidate(2, 100.0, "c", False)]
    slower = [_Candidate(1, 100.0, "c", False), _Candidate(2, 95.0, "c", False)]
    gains = [_Candidate(1, 100.0, "c", False), _Candidate(2, 110.0, "c", False)]
    for floor in (0.1, 0.4, 0.5):
        assert choose_devices(flat, floor)[0].devices == 1
        assert choose_devices(slower, floor)[0].devices == 1
        assert choose_devices(gains, floor)[0].devices == 2  # 55%: a real gain
    rec = recommend(_sweep({1: 1.0, 2: 2.0, 4: 4.0}), min_efficiency=0.4)
    assert (rec.verdict, rec.devices) == ("single", 1)
    assert rec.min_efficiency == 0.4 and rec.floor == 0.52
    assert any(
        "marginal efficiency 50% (floor 52%" in r and "not worth it" in r for r in rec.reasons
    )


def test_the_rule_line_says_a_low_floor_was_raised(capsys):
    from gpuscale.cli import main

    sweep = Path(__file__).resolve().parent.parent / "sample_runs" / "seed002_mnist.json"
    assert main(["recommend", "--no-chart", "--from", str(sweep), "--min-efficiency", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "at least 52% (--min-efficiency 40%, raised" in out
    assert main(["recommend", "--no-chart", "--from", str(sweep)]) == 0
    assert "at least 60% (--min-efficiency)." in capsys.readouterr().out


def test_the_fastest_configuration_wins_at_each_count():
    slow_everywhere = _sweep({1: 0.4, 2: 0.4, 4: 0.4}, config="host vars", exchange="host")
    fast_single = _sweep({1: 0.05, 2: 0.2, 4: 0.3}, config="gpu vars", exchange="gather")
    rec = recommend(slow_everywhere + fast_single, max_devices=4)
    assert (rec.verdict, rec.config) == ("single", "gpu vars")
    assert {c.config: c.devices for c in rec.configs} == {"host vars": 4, "gpu vars": 1}


def test_mixed_workloads_are_refused():
    a = _sweep({1: 0.1})
    b = [normalize(SweepPoint(devices=1, scaling="strong", global_batch=512, step_time_s=0.1))]
    with pytest.raises(GpuscaleError, match="mix workloads"):
        recommend(a + b)


def test_choose_devices_stops_at_the_first_rejected_step():
    from gpuscale.analysis.recommend import _Candidate

    cands = [
        _Candidate(1, 100.0, "c", False),
        _Candidate(2, 105.0, "c", False),
        _Candidate(4, 330.0, "c", False),
    ]
    chosen, steps = choose_devices(cands, 0.6)
    assert chosen.devices == 1  # 1 -> 2 fails; 4 is not judged against 1 across the gap
    assert len(steps) == 1 and not steps[0].accepted


def test_input_wait_and_compute_bound_runs_get_their_advice():
    input_bound = _sweep(
        {1: 0.10, 2: 0.10},
        compute_s=0.03,
        allreduce_s=0.0,
        input_s=0.06,
        apply_s=0.01,
        platform="gpu",
    )
    rec = recommend(input_bound, max_devices=2)
    assert any("Waiting for input is 60%" in a for a in rec.advice)
    compute_bound = _sweep(
        {1: 0.10, 2: 0.11}, compute_s=0.09, allreduce_s=0.01, apply_s=0.005, platform="gpu"
    )
    rec = recommend(compute_bound, max_devices=2)
    assert any("mixed precision" in a for a in rec.advice)
    assert not any("input" in a for a in rec.advice)
    # the trainer's flag, and what a script does (it has no --mixed-precision to pass)
    (advice,) = [a for a in rec.advice if "mixed precision" in a]
    assert "--mixed-precision" in advice and "set_global_policy('mixed_float16')" in advice


def test_a_gathering_configuration_alone_is_told_what_a_ring_would_do():
    # Weak scaling: 1 -> 2 is 0.1 / 0.15 = 67%, 2 -> 4 0.15 / 0.24 = 62.5%, 4 -> 8 0.24 / 0.45 = 53%.
    rec = recommend(_sweep({1: 0.1, 2: 0.15, 4: 0.24, 8: 0.45}, exchange="gather"))
    assert rec.devices == 4
    ring = [a for a in rec.advice if "MirroredStrategy with NCCL" in a]
    assert ring and "instead of 53%" in ring[0]


def test_measured_counts_above_the_device_limit_are_not_recommended():
    # Linear scaling measured up to 8; the user has 2 devices.
    points = _sweep({1: 0.1, 2: 0.1, 4: 0.1, 8: 0.1})
    rec = recommend(points, max_devices=2)
    assert (rec.verdict, rec.devices, rec.device_limit) == ("multi", 2, 2)
    assert [s.devices_to for s in rec.walk] == [2]
    assert rec.configs[0].devices == 2
    # The rows stay in the table, and the confidence says why they were not used.
    assert sorted(r.devices for r in rec.table if not r.predicted) == [1, 2, 4, 8]
    assert any("above the limit of 2" in line for line in rec.confidence)
    # The machine's own count caps it the same way.
    assert recommend(points, available_devices=4).devices == 4
    with pytest.raises(GpuscaleError, match="above the limit of 2"):
        recommend(_sweep({4: 0.1, 8: 0.1}), max_devices=2)


def test_a_step_that_pays_at_any_ratio_says_so_instead_of_a_zero_threshold():
    # A ring's exchange barely grows from 4 to 8 devices: 4 -> 8 pays even with no compute.
    beta = 0.015
    rec = recommend(_sweep({1: 0.1, 2: 0.1 + beta, 4: 0.1 + 1.5 * beta, 8: 0.1 + 1.75 * beta}))
    assert rec.devices == 8
    comm = [r for r in rec.reasons if "compute:communication" in r]
    assert comm and "4 -> 8 pays at any compute:communication ratio" in comm[0]
    assert "above the 0.0" not in comm[0]


def test_long_extrapolations_are_called_so():
    two = recommend(_sweep({1: 0.100, 2: 0.105}))  # predicted up to 8: 4x beyond 2
    assert any(
        "beyond twice the largest measured count (from 2 devices)" in line
        for line in two.confidence
    )
    four = recommend(_sweep({1: 0.100, 2: 0.105, 4: 0.110}))  # 8 is only 2x beyond 4
    assert not any("beyond twice" in line for line in four.confidence)


def test_cpu_logical_devices_are_told_they_share_the_cores():
    points = _sweep({1: 0.020, 2: 0.074}, platform="cpu-logical")
    rec = recommend(points)
    assert (rec.verdict, rec.devices) == ("single", 1)
    reason = next(r for r in rec.reasons if "sharing the same cores" in r)
    assert "from 2 devices on, N devices' batches take N times as long" in reason
    # the model's compute is the step less the exchange: named for what it is, since
    # run's "compute" is the probed forward and backward pass alone
    assert (
        "37.0 ms per device per step for compute, apply and input, all but the exchange;" in reason
    )
    assert "of compute" not in reason
    # predicted rows never gain samples/s on shared cores, and no batch advice is given
    rows = [r for r in rec.table if r.predicted]
    assert rows and all((r.throughput or 0) <= 128 / 0.074 + 1e-9 for r in rows)
    assert not any(a.startswith("Raise the") for a in rec.advice)


def test_cpu_logical_devices_that_did_scale_are_not_told_they_cannot():
    # e.g. many cores that one device alone could not keep busy: 2 devices measured 1.8x
    rec = recommend(_sweep({1: 0.100, 2: 0.111}, platform="cpu-logical"), max_devices=2)
    assert (rec.verdict, rec.devices) == ("multi", 2)
    assert not any("sharing the same cores" in r for r in rec.reasons)


def _probed_pair(allreduce_s: float, err_s: float) -> list:
    common = dict(scaling="weak", model="m", per_replica_batch=64, payload_bytes=10**8)
    one = SweepPoint(devices=1, step_time_s=0.1, compute_s=0.09, allreduce_s=0.0, **common)
    two = SweepPoint(
        devices=2,
        step_time_s=0.25,
        compute_s=0.09,
        allreduce_s=allreduce_s,
        allreduce_err_s=err_s,
        probes=12,
        **common,
    )
    return [normalize(one), normalize(two)]


def test_the_measured_exchange_in_the_reasons_carries_its_range_and_probes():
    rec = recommend(_probed_pair(0.15, 0.01))
    text = " ".join(rec.reasons)
    assert "Gradient exchange takes 60% of each step at 2 devices" in text
    assert "measured (±4 points, 12 probes)" in text


def test_an_exchange_within_its_noise_is_not_given_as_a_reason():
    rec = recommend(_probed_pair(0.15, 0.2))
    text = " ".join(rec.reasons)
    assert "Gradient exchange takes" not in text
    assert "within its probes' noise" in text and "12 probes): not resolved" in text


def test_cpu_logical_devices_on_shared_cores_are_not_told_to_measure_more():
    """One configuration at 1 CPU logical device, another at 2 (the trial's guessed
    sweep on a 2-core machine): the model says more cannot pay on shared cores, so it
    does not say "measure 4 devices to know", which `run` would refuse there."""
    common = dict(scaling="strong", global_batch=128, platform="cpu-logical", model="m")
    points = [
        normalize(SweepPoint(devices=1, step_time_s=0.0966, config="one", **common)),
        normalize(SweepPoint(devices=2, step_time_s=0.1039, config="two", **common)),
    ]
    rec = recommend(points)
    text = " ".join([*rec.reasons, rec.measure_next or ""])
    assert "sharing the same cores" in text
    assert "measure 4" not in text and "GPUs are what the question needs" in text


def test_a_lone_shared_cores_count_gets_no_measure_next_count():
    common = dict(scaling="strong", global_batch=128, platform="cpu-logical", model="m")
    rec = recommend([normalize(SweepPoint(devices=2, step_time_s=0.1, config="c", **common))])
    assert rec.verdict == "none"
    # the 1-device baseline is still worth measuring; a bigger count is not
    assert rec.measure_next is not None and "measure 4" not in rec.measure_next


def _throughputs(config: str, tput: dict[int, float]) -> list[SweepPoint]:
    return [
        normalize(
            SweepPoint(
                devices=n,
                scaling="weak",
                per_replica_batch=64,
                throughput=x,
                config=config,
            )
        )
        for n, x in tput.items()
    ]


def test_a_predicted_count_is_not_bet_on_past_where_its_own_configuration_stops():
    # 'A' measured at 1, 2; 'B' at 1, 2, 4 (slower). At 4 the envelope takes B's
    # measured 2,400; at 8 A's prediction. A on its own stops at 4 (its 4 -> 8 is
    # not a safe bet), yet the walk bet on A at 8 from B's 4 (3.03x, "152%"), so the
    # verdict said "8 devices with 'A'" beside "Each configuration on its own: 'A'
    # -> 4 devices".
    a = _throughputs("A", {1: 1000, 2: 1900})
    b = _throughputs("B", {1: 900, 2: 1500, 4: 2400})
    rec = recommend(a + b, available_devices=8)
    own = {c.config: c.devices for c in rec.configs}
    assert own == {"A": 4, "B": 4}
    assert not (rec.config == "A" and rec.devices > own["A"])
    assert (rec.devices, rec.config, rec.predicted) == (4, "B", False)
    last = rec.walk[-1]
    assert (last.devices_to, last.config_to, last.accepted) == (8, "A", False)
    assert last.uncertain and rec.measure_next
    assert rec.measure_next.startswith("measure 8 with 'A' next")
    why = next(r for r in rec.reasons if r.startswith("4 ('B') -> 8 ('A')"))
    assert "'A' on its own stops at 4 devices" in why
