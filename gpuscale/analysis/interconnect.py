"""What the link between devices could carry: the peak against which a measured
all-reduce bandwidth is judged.

Both formulas live here and nowhere else:

* PCIe, per direction: ``lanes x per-lane rate(generation)``, where the per-lane
  rate is the signalling rate after line coding: gen 1 2.5 GT/s 8b/10b = 0.25 GB/s,
  gen 2 5 GT/s 8b/10b = 0.5 GB/s, gen 3 8 GT/s 128b/130b = 0.985 GB/s, gen 4 = 1.969 GB/s,
  gen 5 = 3.938 GB/s, gen 6 (64 GT/s PAM4, FLIT) about 7.56 GB/s. Packet headers take
  another 10-20 %, so no real transfer reaches these figures.
* NVLink, per direction: ``active links x per-link rate(generation)``; the
  generation is not reported by NVML, so it is inferred from the GPU's name
  (P100: NVLink 1, 20 GB/s; V100: 2, A100: 3, H100/H200: 4, each 25 GB/s;
  B100/B200: 5, 50 GB/s). Unknown name: the link count is reported without a rate.

A peak is a ceiling for one GPU's link; a PCIe switch or a CPU socket shared by
several GPUs divides it, which this module cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from gpuscale.events.schema import DeviceInfo

PCIE_LANE_BYTES_S: dict[int, float] = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5.0e9 * 8 / 10 / 8,
    3: 8.0e9 * 128 / 130 / 8,
    4: 16.0e9 * 128 / 130 / 8,
    5: 32.0e9 * 128 / 130 / 8,
    6: 64.0e9 * 242 / 256 / 8,
}
"""Bytes per second per lane per direction, by PCIe generation (after line coding)."""

NVLINK_LINK_BYTES_S: dict[int, float] = {1: 20e9, 2: 25e9, 3: 25e9, 4: 25e9, 5: 50e9}
"""Bytes per second per link per direction, by NVLink generation."""

_NVLINK_GENERATION_BY_NAME: tuple[tuple[str, int], ...] = (
    ("B200", 5),
    ("B100", 5),
    ("GB200", 5),
    ("H200", 4),
    ("H100", 4),
    ("H800", 4),
    ("A100", 3),
    ("A800", 3),
    ("A30", 3),
    ("V100", 2),
    ("P100", 1),
)


class Interconnect(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The fastest link of one device, per direction."""

    kind: str
    """``pcie``, ``nvlink`` or ``unknown``."""
    peak_bytes_s: float | None = None
    """Peak bytes per second per direction; ``None`` when it cannot be known."""
    description: str = ""
    """E.g. ``PCIe 3.0 x16: 15.8 GB/s per direction``."""


def pcie_peak_bytes_s(generation: int, lanes: int) -> float | None:
    """``lanes x PCIE_LANE_BYTES_S[generation]``; ``None`` for an unknown generation."""
    rate = PCIE_LANE_BYTES_S.get(generation)
    if rate is None or lanes <= 0:
        return None
    return rate * lanes


def nvlink_generation(device_name: str) -> int | None:
    """NVLink generation guessed from the GPU name (``None`` when unknown)."""
    upper = device_name.upper()
    for marker, generation in _NVLINK_GENERATION_BY_NAME:
        if marker in upper:
            return generation
    return None


def nvlink_peak_bytes_s(device_name: str, links: int) -> float | None:
    """``links x NVLINK_LINK_BYTES_S[generation(name)]``; ``None`` when unknown."""
    generation = nvlink_generation(device_name)
    if generation is None or links <= 0:
        return None
    return NVLINK_LINK_BYTES_S[generation] * links


def interconnect_of(device: DeviceInfo) -> Interconnect:
    """The fastest link of one device (NVLink if it has active links, else PCIe).

    Uses the current PCIe link generation and width (an idle GPU may train its link
    down, so read this from a device under load), falling back to the maximum.
    """
    if device.kind != "gpu":
        return Interconnect(kind="unknown", description="shared host memory (no device link)")
    if device.nvlink_links:
        peak = nvlink_peak_bytes_s(device.name, device.nvlink_links)
        if peak is not None:
            return Interconnect(
                kind="nvlink",
                peak_bytes_s=peak,
                description=f"NVLink x{device.nvlink_links}: {peak / 1e9:.0f} GB/s per direction",
            )
        return Interconnect(
            kind="nvlink",
            description=f"NVLink x{device.nvlink_links} (rate unknown for {device.name})",
        )
    generation = device.pcie_gen or device.pcie_max_gen
    lanes = device.pcie_width or device.pcie_max_width
    if generation and lanes:
        peak = pcie_peak_bytes_s(generation, lanes)
        if peak is not None:
            return Interconnect(
                kind="pcie",
                peak_bytes_s=peak,
                description=f"PCIe {generation}.0 x{lanes}: {peak / 1e9:.1f} GB/s per direction",
            )
    return Interconnect(kind="unknown", description="link not reported")


def slowest_interconnect(devices: Iterable[DeviceInfo]) -> Interconnect | None:
    """The slowest known link among the devices (a ring runs at its slowest hop)."""
    links = [interconnect_of(d) for d in devices]
    if not links:
        return None
    known = [link for link in links if link.peak_bytes_s is not None]
    if known:
        return min(known, key=lambda link: link.peak_bytes_s or 0.0)
    return links[0]
