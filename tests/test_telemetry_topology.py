"""Reading the GPU topology through NVML, against the stand-in NVML scenarios."""

from __future__ import annotations

import pynvml  # constants only, never a call into NVML
import pytest
from fake_nvml import SCENARIOS, SWITCH_BUS_IDS, FakeNvml, bus_id_of

from gpuscale.events.schema import StartEvent, decode, encode
from gpuscale.telemetry.nvml import open_nvml
from gpuscale.telemetry.topology import _LEVELS, _REMOTE_TYPES, bus_id, probe_topology


def pairs(topology):
    return {(p.a, p.b): p for p in topology.pairs}


def test_level_and_remote_type_codes_are_nvmls():
    assert _LEVELS == {
        pynvml.NVML_TOPOLOGY_INTERNAL: "internal",
        pynvml.NVML_TOPOLOGY_SINGLE: "single",
        pynvml.NVML_TOPOLOGY_MULTIPLE: "multiple",
        pynvml.NVML_TOPOLOGY_HOSTBRIDGE: "hostbridge",
        pynvml.NVML_TOPOLOGY_NODE: "node",
        pynvml.NVML_TOPOLOGY_SYSTEM: "system",
    }
    assert _REMOTE_TYPES == {
        pynvml.NVML_NVLINK_DEVICE_TYPE_GPU: "gpu",
        pynvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU: "ibmnpu",
        pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH: "nvswitch",
    }


def test_bus_id_spellings():
    assert bus_id(None) is None
    real = pynvml.nvmlPciInfo_t()
    real.domain, real.bus, real.device = 0, 0x18, 0
    assert bus_id(real) == "00000000:18:00.0"

    class Text:
        busId = b"0000:3b:00.0\x00"

    assert bus_id(Text()) == "00000000:3B:00.0"

    class Empty:
        busId = b""

    assert bus_id(Empty()) is None


def test_h100_nvswitch_box():
    topology = probe_topology(FakeNvml.scenario("h100-box"))
    assert [g.index for g in topology.gpus] == list(range(8))
    first = topology.gpus[0]
    assert first.pci_bus_id == bus_id_of(0)
    assert (first.pcie_gen, first.pcie_width, first.pcie_max_gen, first.pcie_max_width) == (
        5,
        16,
        5,
        16,
    )
    assert first.nvlink_links == 18
    assert {p.remote for p in first.nvlink_peers} == {"nvswitch"}
    assert {p.remote_bus_id for p in first.nvlink_peers} == set(SWITCH_BUS_IDS)
    by_pair = pairs(topology)
    assert len(by_pair) == 28
    assert all(p.nvswitch and p.nvlinks == 0 for p in by_pair.values())
    assert by_pair[(0, 3)].pcie == "node" and by_pair[(3, 4)].pcie == "system"


def test_two_sockets_of_pcie_switches():
    by_pair = pairs(probe_topology(FakeNvml.scenario("pcie-two-sockets")))
    assert by_pair[(0, 1)].pcie == "single"
    assert by_pair[(1, 2)].pcie == "node"
    assert by_pair[(3, 4)].pcie == "system"
    assert not any(p.nvswitch or p.nvlinks for p in by_pair.values())


def test_nvlink_bridge_is_counted_once_per_link():
    topology = probe_topology(FakeNvml.scenario("nvlink-bridge"))
    assert topology.gpus[0].nvlink_links == 4 and topology.gpus[2].nvlink_links == 0
    assert {p.remote_gpu for p in topology.gpus[0].nvlink_peers} == {1}
    by_pair = pairs(topology)
    assert by_pair[(0, 1)].nvlinks == 4 and not by_pair[(0, 1)].nvswitch
    assert by_pair[(0, 2)].nvlinks == 0 and by_pair[(0, 2)].pcie == "node"


def test_a_bridge_seen_from_one_end_only_still_counts():
    fake = FakeNvml.scenario("nvlink-bridge")
    fake.gpus[1].nvlink_remotes = []  # GPU 1 does not say where its links go
    topology = probe_topology(fake)
    assert pairs(topology)[(0, 1)].nvlinks == 4
    assert topology.gpus[1].nvlink_links == 4 and topology.gpus[1].nvlink_peers[0].remote == (
        "unknown"
    )


def test_gpu_remote_type_missing_is_recognised_by_bus_id():
    fake = FakeNvml.scenario("nvlink-bridge", absent={"nvmlDeviceGetNvLinkRemoteDeviceType"})
    topology = probe_topology(fake)
    assert pairs(topology)[(0, 1)].nvlinks == 4
    assert topology.gpus[0].nvlink_peers[0].remote == "gpu"


def test_switches_of_two_fabrics_do_not_join_them():
    fake = FakeNvml.scenario("h100-box", n=4)
    for gpu in fake.gpus[2:]:  # a second baseboard with its own switch
        gpu.nvlink_remotes = [(pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH, "00000000:99:00.0")] * 18
    by_pair = pairs(probe_topology(fake))
    assert by_pair[(0, 1)].nvswitch and by_pair[(2, 3)].nvswitch
    assert not by_pair[(1, 2)].nvswitch


def test_not_supported_topology_is_unknown_not_an_error():
    topology = probe_topology(FakeNvml.scenario("topology-not-supported"))
    assert len(topology.gpus) == 4 and len(topology.pairs) == 6
    gpu = topology.gpus[0]
    assert gpu.pci_bus_id is None and gpu.pcie_max_gen is None and gpu.pcie_gen == 4
    assert gpu.nvlink_links is None  # the driver lacks the function: not known, not 0
    assert all(p.pcie is None and p.nvlinks == 0 and not p.nvswitch for p in topology.pairs)


def test_no_nvlink_is_zero():
    topology = probe_topology(FakeNvml.scenario("pcie-one-switch"))
    assert [g.nvlink_links for g in topology.gpus] == [0, 0, 0, 0]


def test_a_lost_gpu_leaves_its_links_unknown():
    fake = FakeNvml.scenario("lost-gpu", n=4, lost_index=2)
    lib, probe = open_nvml(fake)
    fake.lose()
    from gpuscale.telemetry.topology import topology_of

    topology = topology_of(lib, {d.index: d.name for d in probe.devices})
    lib.close()
    assert [g.index for g in topology.gpus] == [0, 1, 2, 3]
    assert topology.gpus[2].nvlink_links is None and topology.gpus[2].pci_bus_id is None
    by_pair = pairs(topology)
    assert by_pair[(1, 2)].pcie is None and not by_pair[(1, 2)].nvswitch
    assert by_pair[(0, 1)].pcie == "node" and by_pair[(0, 1)].nvswitch


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_reads_without_raising(scenario):
    topology = probe_topology(FakeNvml.scenario(scenario))
    assert topology is None or all(p.a < p.b for p in topology.pairs)


def test_no_gpu_no_topology():
    assert probe_topology(FakeNvml.scenario("no-gpus")) is None
    assert probe_topology(FakeNvml.scenario("library-missing")) is None


def test_topology_round_trips_in_the_start_event():
    topology = probe_topology(FakeNvml.scenario("nvlink-bridge"))
    start = StartEvent(t=1.0, gpuscale_version="0", host="h", pid=1, topology=topology)
    again = decode(encode(start))
    assert again.topology == topology
    old = decode(b'{"kind":"start","schema":"1.0","t":1,"gpuscale_version":"0","host":"h","pid":1}')
    assert old.topology is None


def test_the_sampler_reads_the_whole_machine_once():
    from gpuscale.telemetry.sampler import Sampler

    fake = FakeNvml.scenario("pcie-two-sockets")
    sampler = Sampler(lambda event: None, nvml=fake, gpu_indices=[0, 1])
    sampler.open()
    try:
        assert [d.index for d in sampler.devices] == [0, 1]
        assert [g.index for g in sampler.topology.gpus] == list(range(8))
        assert fake.calls["nvmlDeviceGetTopologyCommonAncestor"] == 28
    finally:
        sampler.stop()
    assert Sampler(lambda event: None, nvml=FakeNvml.scenario("no-driver")).topology is None
