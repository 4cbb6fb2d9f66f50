"""The communication model: it recovers known parameters, predicts what it
should, and says what batch would make a step pay."""

from __future__ import annotations

import msgspec
import pytest

from gpuscale.analysis.model import (
    compute_scale_for,
    fit,
    hops,
    nnls,
    predict,
    threshold_compute_scale,
    volume,
)
from gpuscale.analysis.sweep import SweepPoint, normalize


def _points(times: dict[int, float], *, scaling="weak", exchange="ring", **kw) -> list[SweepPoint]:
    batch = {"per_replica_batch": 32} if scaling == "weak" else {"global_batch": 1024}
    return [
        normalize(
            SweepPoint(
                devices=n,
                scaling=scaling,
                exchange=exchange,
                step_time_s=t,
                config="c",
                **batch,
                **kw,
            )
        )
        for n, t in times.items()
    ]


def test_hops_and_volume_per_exchange():
    assert [volume("ring", n) for n in (1, 2, 4)] == [0.0, 1.0, 1.5]
    assert [volume("gather", n) for n in (1, 2, 4)] == [0.0, 1.0, 3.0]
    assert [volume("host", n) for n in (1, 2, 4)] == [1.0, 2.0, 4.0]
    assert hops("ring", 4) == 3 and hops("host", 4) == 4


def test_nnls_keeps_terms_non_negative():
    # y = 2 x0 exactly; a negative second coefficient would fit noise better.
    x = nnls([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]], [2.0, 1.9, 1.8])
    assert x[1] == 0.0 and x[0] > 0


def test_weak_ring_fit_from_step_times_recovers_the_parameters():
    c, alpha, beta = 0.1, 0.002, 0.03
    truth = {n: c + alpha * (n - 1) + beta * 2 * (n - 1) / n for n in (1, 2, 4, 8)}
    m = fit(_points(truth))
    assert m.basis == "step times"
    assert (m.c0_s, m.alpha_s, m.beta_s) == pytest.approx((c, alpha, beta), rel=1e-6)
    assert m.step_time_s(16) == pytest.approx(c + alpha * 15 + beta * 2 * 15 / 16)
    assert m.fit_error == pytest.approx(0.0, abs=1e-9)


def test_two_points_fit_bandwidth_only_and_predictions_are_marked():
    m = fit(_points({1: 0.1, 2: 0.15}))
    assert m.alpha_s == 0.0 and m.beta_s == pytest.approx(0.05)
    assert m.fit_error is None  # passes through both points: nothing checked
    p = predict(m, 4, _points({1: 0.1})[0])
    assert p.predicted and p.step_time_s == pytest.approx(0.1 + 0.05 * 1.5)
    assert p.throughput == pytest.approx(128 / p.step_time_s)
    assert p.comm_share == pytest.approx(0.075 / 0.175)


def test_strong_scaling_without_phases_assumes_a_perfect_split():
    m = fit(_points({1: 8.0, 2: 4.5}, scaling="strong"))
    assert m.serial_s == 0.0 and m.parallel_s == pytest.approx(8.0)
    assert m.beta_s == pytest.approx(0.5)
    assert m.step_time_s(4) == pytest.approx(2.0 + 0.75)
    assert m.throughput(4) == pytest.approx(1024 / 2.75)


def test_strong_scaling_with_phases_fits_serial_and_parallel_parts():
    serial, parallel, beta = 0.02, 0.4, 0.01
    pts = []
    for n in (1, 2, 4):
        comm = beta * 2 * (n - 1) / n
        compute = serial + parallel / n
        pts += _points({n: compute + comm}, scaling="strong", compute_s=compute, allreduce_s=comm)
    m = fit(pts)
    assert m.basis == "phases"
    assert (m.serial_s, m.parallel_s) == pytest.approx((serial, parallel), rel=1e-6)
    assert m.beta_s == pytest.approx(beta, rel=1e-6)


def test_gather_grows_with_n_minus_1_and_host_pays_at_one_device():
    m = fit(_points({1: 1.0, 2: 1.2}, exchange="gather"))
    assert m.step_time_s(8) == pytest.approx(1.0 + 0.2 * 7)
    h = fit(_points({1: 1.2, 2: 1.4, 4: 1.8}, exchange="host"))
    assert h.beta_s == pytest.approx(0.2) and h.c0_s == pytest.approx(1.0)


def test_one_point_predicts_only_from_a_known_link_peak():
    lone = fit(_points({1: 0.1}))
    assert not lone.predicts
    peak = fit(_points({1: 0.1}, payload_bytes=10_000_000, interconnect_bytes_s=1e10))
    assert peak.predicts and peak.basis == "link peak"
    assert peak.comm_time_s(2) == pytest.approx(0.001)


@pytest.mark.parametrize("scaling", ["weak", "strong"])
def test_a_link_peak_count_above_one_holds_its_exchange(scaling):
    """One count measured at 2 devices: its step already holds the exchange, so the
    model passes through it (it added the exchange on top of the whole step: 9.3% off
    the only measured point, and exposed shares of 8%, 3%, 7% at 2, 4 and 8)."""
    peak = fit(
        _points({2: 0.0674}, scaling=scaling, payload_bytes=100_000_000, interconnect_bytes_s=16e9)
    )
    assert peak.basis == "link peak"
    assert peak.step_time_s(2) == pytest.approx(0.0674)
    assert peak.comm_time_s(2) == pytest.approx(0.00625)
    shares = [peak.comm_share(n) for n in (2, 4, 8)]
    assert shares == sorted(shares) and shares[0] == pytest.approx(0.00625 / 0.0674)


def test_a_link_peak_slower_than_the_measured_step_predicts_nothing():
    """The exchange alone at the peak (6.25 ms) longer than the whole measured step
    (5 ms): compute was floored at 0, every count's exposed share read 100% and
    1-device throughput divided by zero. The peak cannot be right: no prediction."""
    from gpuscale.analysis.model import IMPLAUSIBLE_PEAK

    pts = _points({2: 0.005}, payload_bytes=100_000_000, interconnect_bytes_s=16e9)
    peak = fit(pts)
    assert not peak.predicts and peak.basis == IMPLAUSIBLE_PEAK


def test_compute_scale_matches_the_closed_form():
    # Weak ring 1 -> 2: marginal efficiency = k c / (k c + beta); reaching f needs
    # k = f beta / ((1 - f) c).
    c, beta, f = 0.1, 0.2, 0.6
    m = fit(_points({1: c, 2: c + beta}))
    assert compute_scale_for(m, 1, 2, f) == pytest.approx(f * beta / ((1 - f) * c), rel=1e-6)
    assert compute_scale_for(m, 1, 2, 0.01) == 1.0


def test_compute_drift_caps_what_any_batch_can_do():
    # Compute per device grows from 0.1 s at one device to 0.3 s at two (drift
    # c1 = 0.2 s): however large the batch, 1 -> 2 gives at most 2 x 0.1 / 0.3 =
    # 0.67x the samples per second, a marginal efficiency of 33 %, never 60 %.
    pts = _points({1: 0.1}, compute_s=0.1, allreduce_s=0.0) + _points(
        {2: 0.31}, compute_s=0.3, allreduce_s=0.01
    )
    drifting = fit(pts)
    assert drifting.basis == "phases" and drifting.c1_s == pytest.approx(0.2)
    assert compute_scale_for(drifting, 1, 2, 0.6) is None
    assert threshold_compute_scale(drifting, 1, 2, 0.6) is None


def test_threshold_scale_is_zero_when_a_step_pays_at_any_ratio():
    # A ring's exchange hardly grows from 4 to 8 devices (1.5 -> 1.75 payloads):
    # even with no compute at all, 4 -> 8 gives 2 x 1.5 / 1.75 = 1.71x, 86 %.
    m = fit(_points({1: 0.1, 2: 0.115, 4: 0.1225}))
    assert threshold_compute_scale(m, 4, 8, 0.6) == 0.0
    assert compute_scale_for(m, 4, 8, 0.6) == 1.0
    # Between the extremes it is the one bisection: efficiency at k equals the floor.
    c, beta = 0.1, 0.2
    m = fit(_points({1: c, 2: c + beta}))
    k = threshold_compute_scale(m, 1, 2, 0.3)
    assert k == pytest.approx(0.3 * beta / (0.7 * c), rel=1e-9) and k < 1


def _cpu_points(rows: dict[int, tuple[float, float]], scaling: str) -> list[SweepPoint]:
    """(step time, exposed all-reduce) per count, as the trainer records them on
    CPU logical devices (numbers of the shape measured on a 2-core machine)."""
    return [
        msgspec.structs.replace(p, compute_s=step - ar, allreduce_s=ar)
        for p, (step, ar) in zip(
            _points({n: s for n, (s, _) in rows.items()}, scaling=scaling, platform="cpu-logical"),
            rows.values(),
            strict=True,
        )
    ]


def test_cpu_logical_devices_share_the_cores_weak_scaling():
    # One device alone is fast (20 ms); from 2 on, N devices' work shares the same
    # cores, so compute grows as q N (36 ms per device), not as 1 -> 2 suggests.
    m = fit(_cpu_points({1: (0.020, 0.0), 2: (0.074, 0.002)}, "weak"))
    assert m.shared_cores and m.basis == "phases"
    assert m.compute_time_s(4) == pytest.approx(0.072 / 2 * 4)
    assert m.step_time_s(4) == pytest.approx(0.144 + 0.002 * 3)  # ring: 6 payloads, not 2
    # The same numbers on GPUs: independent devices, compute per device drifts.
    gpu = fit(
        [
            msgspec.structs.replace(p, platform="gpu")
            for p in _cpu_points({1: (0.020, 0.0), 2: (0.074, 0.002)}, "weak")
        ]
    )
    assert not gpu.shared_cores
    assert gpu.compute_time_s(4) == pytest.approx(0.020 + 0.052 * 3)


def test_cpu_logical_devices_share_the_cores_strong_scaling():
    m = fit(_cpu_points({1: (0.100, 0.0), 2: (0.108, 0.004), 4: (0.112, 0.004)}, "strong"))
    assert m.shared_cores and m.parallel_s == 0.0
    assert m.serial_s == pytest.approx(0.106)  # the median of 104 and 108 ms
    # The same global batch on the same cores: compute does not shrink with N.
    assert m.step_time_s(8) == pytest.approx(0.106 + m.comm_time_s(8))
    assert m.step_time_s(8) > m.step_time_s(4)


def test_cpu_logical_step_times_alone_grow_with_the_work():
    m = fit(_points({1: 0.02, 2: 0.07}, platform="cpu-logical"))
    assert m.shared_cores and m.basis == "step times"
    assert m.step_time_s(4) == pytest.approx(0.14)
    assert m.throughput(4) == pytest.approx(m.throughput(2))


def test_cpu_logical_exchange_counts_every_payload_moved():
    # 2 ms of exchange at 2 devices is 2 payloads moved; at 4 devices a ring moves 6.
    m = fit(_cpu_points({1: (0.020, 0.0), 2: (0.074, 0.002)}, "weak"))
    assert m.comm_time_s(4) == pytest.approx(0.002 * 3)
    # So more devices sharing the cores never raise the samples per second.
    assert m.throughput(2) >= m.throughput(4) >= m.throughput(8)
