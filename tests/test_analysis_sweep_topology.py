"""A recording's measured topology (its start event) becomes its sweep point's
interconnect, and the prediction's interconnect class understands it."""

from __future__ import annotations

import msgspec
import pytest
from fake_nvml import FakeNvml
from recording_samples import sample_events, write_run

from gpuscale.analysis.predict import interconnect_class
from gpuscale.analysis.summary import summarize
from gpuscale.analysis.sweep import SweepPoint, load_inputs, point_from_summary
from gpuscale.analysis.topology import slowest_link
from gpuscale.events.schema import DeviceInfo
from gpuscale.telemetry.topology import probe_topology


def _events(scenario: str | None, gpus: int = 8, **device):
    events = sample_events(gpus=gpus)
    start = events[0]
    devices = [DeviceInfo(index=i, name="NVIDIA H100", **device) for i in range(gpus)]
    topology = probe_topology(FakeNvml.scenario(scenario)) if scenario else None
    events[0] = msgspec.structs.replace(start, devices=devices, topology=topology)
    return events


@pytest.mark.parametrize(
    ("scenario", "link_class", "klass"),
    [
        ("h100-box", "nvswitch", "nvswitch"),
        ("pcie-two-sockets", "cross-socket", "pcie"),
    ],
)
def test_the_start_events_topology_sets_the_points_link(tmp_path, scenario, link_class, klass):
    events = _events(scenario)
    path = write_run(tmp_path / "run.ndjson", events)
    (point,) = load_inputs([path]).points
    link = slowest_link(events[0].topology, range(8))
    assert point.interconnect == f"{link_class}: {link.description}"
    assert point.interconnect_bytes_s == link.peak_bytes_s
    assert interconnect_class(point) == klass


def test_topology_outranks_each_gpus_own_pcie_link():
    """Each H100's own link says PCIe 5.0 x16; the topology says NVSwitch."""
    events = _events("h100-box", pcie_max_gen=5, pcie_max_width=16)
    point = point_from_summary(summarize(events), events[0], "run")
    assert interconnect_class(point) == "nvswitch"
    assert point.interconnect_bytes_s == 18 * 25e9


def test_without_a_topology_the_gpus_own_link_is_kept():
    events = _events(None, pcie_max_gen=4, pcie_max_width=16)
    point = point_from_summary(summarize(events), events[0], "run")
    assert point.interconnect is not None and "PCIe 4.0" in point.interconnect
    assert interconnect_class(point) == "pcie"


@pytest.mark.parametrize(
    ("label", "klass"),
    [
        ("nvswitch", "nvswitch"),
        ("nvlink: NVLink x4: 100.0 GB/s per direction", "nvlink"),
        ("pcie-switch: PCIe switch, PCIe 4.0 x16: 31.5 GB/s per direction", "pcie"),
        ("pcie-hostbridge", "pcie"),
        ("cross-socket: across CPU sockets, PCIe 3.0 x16: 15.8 GB/s per direction", "pcie"),
        ("PCIe 3.0 x16", "pcie"),  # free text, as before
        ("SXM2", "nvlink"),
        ("something else", "unknown"),
    ],
)
def test_interconnect_class_reads_the_topology_labels(label, klass):
    point = SweepPoint(devices=2, scaling="weak", per_replica_batch=8, interconnect=label)
    assert interconnect_class(point) == klass
