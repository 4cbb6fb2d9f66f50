"""The slowest link among GPUs and the best subset to use, on stand-in topologies."""

from __future__ import annotations

import pytest
from fake_nvml import NVML_NVLINK_DEVICE_TYPE_GPU, FakeNvml, bus_id_of

from gpuscale.analysis.interconnect import pcie_peak_bytes_s
from gpuscale.analysis.topology import best_subset, pair_class, slowest_link
from gpuscale.events.schema import GpuLinks, GpuPair, Topology
from gpuscale.telemetry.topology import probe_topology


def topo(scenario: str, **kwargs) -> Topology:
    topology = probe_topology(FakeNvml.scenario(scenario, **kwargs))
    assert topology is not None
    return topology


def test_pair_classes():
    assert pair_class(None) == "unknown"
    assert pair_class(GpuPair(a=0, b=1)) == "unknown"
    assert pair_class(GpuPair(a=0, b=1, pcie="system", nvswitch=True)) == "nvswitch"
    assert pair_class(GpuPair(a=0, b=1, pcie="node", nvlinks=4)) == "nvlink"
    for level, link in (
        ("internal", "pcie-switch"),
        ("single", "pcie-switch"),
        ("multiple", "pcie-switch"),
        ("hostbridge", "pcie-hostbridge"),
        ("node", "pcie-hostbridge"),
        ("system", "cross-socket"),
    ):
        assert pair_class(GpuPair(a=0, b=1, pcie=level)) == link


def test_nvswitch_box_is_nvswitch_everywhere_at_nvlink4_rate():
    topology = topo("h100-box")
    link = slowest_link(topology, range(8))
    assert link.link_class == "nvswitch"
    assert link.peak_bytes_s == 18 * 25e9
    assert link.description == "NVSwitch, NVLink x18: 450.0 GB/s per direction"
    assert best_subset(topology, 4) == [0, 1, 2, 3]  # all equal: lowest indices


def test_two_sockets_pick_one_switch_then_one_socket():
    topology = topo("pcie-two-sockets")
    assert slowest_link(topology, range(8)).link_class == "cross-socket"
    assert slowest_link(topology, [0, 4]).slowest_pair == (0, 4)
    assert best_subset(topology, 2) == [0, 1]
    assert slowest_link(topology, [0, 1]).link_class == "pcie-switch"
    assert best_subset(topology, 3) == [0, 1, 2]
    assert best_subset(topology, 4) == [0, 1, 2, 3]
    assert slowest_link(topology, [0, 1, 2, 3]).link_class == "pcie-hostbridge"
    assert slowest_link(topology, [0, 1]).peak_bytes_s == pcie_peak_bytes_s(4, 16)


def test_the_best_subset_is_not_always_the_first_gpus():
    fake = FakeNvml.scenario("nvlink-bridge")
    for gpu in fake.gpus[:2]:  # move the bridge from 0-1 to 2-3
        gpu.nvlink_total_links = gpu.nvlink_active_links = 0
        gpu.nvlink_remotes = []
    for me, peer in ((2, 3), (3, 2)):
        gpu = fake.gpus[me]
        gpu.nvlink_total_links = gpu.nvlink_active_links = 4
        gpu.nvlink_remotes = [(NVML_NVLINK_DEVICE_TYPE_GPU, bus_id_of(peer))] * 4
    topology = probe_topology(fake)
    assert best_subset(topology, 2) == [2, 3]
    assert best_subset(topology, 3) == [0, 2, 3]


def test_a_socket_with_a_switch_beats_the_first_socket():
    fake = FakeNvml.scenario("pcie-two-sockets")
    fake.ancestors = {
        (a, b): (40 if a < 4 and b < 4 else 10 if a >= 4 and b >= 4 else 50)
        for a in range(8)
        for b in range(a + 1, 8)
    }
    topology = probe_topology(fake)
    assert best_subset(topology, 4) == [4, 5, 6, 7]
    assert best_subset(topology, 3) == [4, 5, 6]


def test_nvlink_bridge_pair_and_unknown_rate():
    topology = topo("nvlink-bridge")
    assert best_subset(topology, 2) == [0, 1]
    link = slowest_link(topology, [0, 1])
    assert link.link_class == "nvlink"
    assert link.peak_bytes_s is None  # GeForce: not in interconnect's NVLink table
    assert "NVLink x4" in link.description and "rate not known" in link.description
    assert slowest_link(topology, range(4)).link_class == "pcie-hostbridge"


def test_nvlink_rate_from_a_known_name():
    topology = Topology(
        gpus=[GpuLinks(index=0, name="Tesla V100-SXM2"), GpuLinks(index=1, name="Tesla V100-SXM2")],
        pairs=[GpuPair(a=0, b=1, nvlinks=2, pcie="node")],
    )
    assert slowest_link(topology, [0, 1]).peak_bytes_s == 2 * 25e9


def test_unknown_topology():
    topology = topo("topology-not-supported")
    link = slowest_link(topology, range(4))
    assert link.link_class == "unknown" and link.peak_bytes_s is None
    assert best_subset(topology, 2) == [0, 1]


def test_a_gpu_missing_from_the_topology_makes_it_unknown():
    assert slowest_link(topo("pcie-one-switch"), [0, 9]).link_class == "unknown"


def test_one_gpu_has_no_link_and_k_bounds():
    topology = topo("pcie-one-switch")
    assert slowest_link(topology, [2]) is None
    assert best_subset(topology, 1) == [0]
    assert best_subset(topology, 4) == [0, 1, 2, 3]
    assert best_subset(topology, 9) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        best_subset(topology, 0)


def test_pcie_peak_uses_the_maximum_link_not_an_idle_one():
    topology = topo("pcie-one-switch")
    topology.gpus[1].pcie_gen = 1  # idle, trained down
    assert slowest_link(topology, [0, 1]).peak_bytes_s == pcie_peak_bytes_s(4, 16)
    topology.gpus[1].pcie_max_gen = 3  # a slower slot is the limit
    assert slowest_link(topology, [0, 1]).peak_bytes_s == pcie_peak_bytes_s(3, 16)


def test_many_gpus_fall_back_to_greedy():
    topology = probe_topology(FakeNvml.h100_box(16))
    assert best_subset(topology, 8) == list(range(8))
    fake = FakeNvml.scenario("pcie-two-sockets")
    fake.gpus += [FakeNvml.scenario("pcie-two-sockets").gpus[0] for _ in range(8)]
    for i, gpu in enumerate(fake.gpus):
        gpu.pci_bus_id = bus_id_of(i)
    fake.ancestors = {
        (a, b): 10 if a // 4 == b // 4 else (40 if a // 8 == b // 8 else 50)
        for a in range(16)
        for b in range(a + 1, 16)
    }
    topology = probe_topology(fake)
    assert best_subset(topology, 4) == [0, 1, 2, 3]
    assert best_subset(topology, 8) == list(range(8))


def test_best_subset_among_some_gpus():
    topology = topo("pcie-two-sockets")
    assert best_subset(topology, 2, among=[1, 2, 3, 5]) == [2, 3]
    assert best_subset(topology, 3, among=[0, 4, 5, 9]) == [0, 4, 5]
    assert best_subset(topology, 1, among=[6, 7]) == [6]


def test_link_of_a_recorded_run():
    from gpuscale.analysis.topology import link_of_run
    from gpuscale.events.schema import DeviceInfo, StartEvent

    topology = topo("pcie-two-sockets")

    def start(indices, with_topology=True):
        return StartEvent(
            t=1.0,
            gpuscale_version="0",
            host="h",
            pid=1,
            platform="gpu",
            devices=[DeviceInfo(index=i, name="A100") for i in indices],
            topology=topology if with_topology else None,
        )

    assert link_of_run(start([0, 1])).link_class == "pcie-switch"
    assert link_of_run(start([0, 4])).link_class == "cross-socket"
    assert link_of_run(start([3])) is None
    assert link_of_run(start([0, 1], with_topology=False)) is None
