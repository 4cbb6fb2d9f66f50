"""Every formula of gpuscale.analysis.metrics and interconnect, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from gpuscale.analysis import interconnect, metrics
from gpuscale.events.schema import DeviceInfo


def test_percentile_and_median_interpolate_like_numpy():
    values = [4.0, 1.0, 3.0, 2.0]
    assert metrics.median(values) == 2.5
    assert metrics.percentile(values, 0) == 1.0
    assert metrics.percentile(values, 100) == 4.0
    assert metrics.percentile(values, 10) == pytest.approx(1.3)


def test_spread_is_p10_to_p90_over_median():
    values = [float(v) for v in range(1, 12)]  # 1..11, median 6
    assert metrics.spread(values) == pytest.approx((10.0 - 2.0) / 6.0)
    assert metrics.spread([5.0] * 7) == 0.0


def test_throughput_speedup_efficiency():
    assert metrics.throughput(1024, 0.5) == 2048
    assert metrics.speedup(300.0, 100.0) == 3.0
    assert metrics.efficiency(3.0, 4) == 0.75
    assert metrics.efficiency(1.5, 16, base_devices=8) == 0.75


def test_marginal_efficiency_per_doubling():
    # Seed 002 NCCL 4 -> 8: 2.208 s -> 1.448 s per epoch, strong scaling.
    assert metrics.marginal_efficiency(1 / 2.208, 4, 1 / 1.448, 8) == pytest.approx(
        0.7624, abs=1e-4
    )
    # 1 -> 4 with 4x the throughput is perfect; with 2x it is sqrt(2)/2 per doubling.
    assert metrics.marginal_efficiency(1.0, 1, 4.0, 4) == pytest.approx(1.0)
    assert metrics.marginal_efficiency(1.0, 1, 2.0, 4) == pytest.approx(math.sqrt(2) / 2)
    assert metrics.marginal_efficiency(1.0, 2, 0.0, 4) == 0.0
    with pytest.raises(ValueError):
        metrics.marginal_efficiency(1.0, 4, 2.0, 4)


def test_ring_volume_algbw_busbw():
    assert metrics.ring_volume_factor(1) == 0.0
    assert metrics.ring_volume_factor(2) == 1.0
    assert metrics.ring_volume_factor(8) == 1.75
    algbw = metrics.algbw_bytes_s(4e6, 0.002)
    assert algbw == 2e9
    assert metrics.busbw_bytes_s(algbw, 4) == pytest.approx(3e9)
    assert metrics.share(1.0, 4.0) == 0.25
    assert metrics.share(1.0, 0.0) == 0.0


def test_pcie_and_nvlink_peaks():
    assert interconnect.pcie_peak_bytes_s(3, 16) == pytest.approx(15.75e9, rel=1e-3)
    assert interconnect.pcie_peak_bytes_s(4, 16) == pytest.approx(31.5e9, rel=1e-3)
    assert interconnect.pcie_peak_bytes_s(1, 1) == 0.25e9
    assert interconnect.pcie_peak_bytes_s(9, 16) is None
    assert interconnect.nvlink_peak_bytes_s("Tesla V100-SXM2-16GB", 6) == 150e9
    assert interconnect.nvlink_peak_bytes_s("NVIDIA H100 80GB HBM3", 18) == 450e9
    assert interconnect.nvlink_peak_bytes_s("Mystery GPU", 4) is None


def test_interconnect_of_devices_prefers_nvlink_and_takes_the_slowest():
    v100 = DeviceInfo(index=0, name="Tesla V100-SXM2", pcie_gen=3, pcie_width=16, nvlink_links=6)
    pcie = DeviceInfo(index=1, name="Tesla M60", pcie_gen=3, pcie_width=8, nvlink_links=0)
    assert interconnect.interconnect_of(v100).kind == "nvlink"
    slowest = interconnect.slowest_interconnect([v100, pcie])
    assert slowest is not None and slowest.kind == "pcie"
    assert slowest.description.startswith("PCIe 3.0 x8")
    cpu = DeviceInfo(index=0, name="cpu:0", kind="cpu-logical")
    assert interconnect.interconnect_of(cpu).peak_bytes_s is None
