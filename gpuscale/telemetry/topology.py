"""How the GPUs of this machine are connected, read through NVML.

Every call goes through the choke point (:meth:`gpuscale.telemetry.nvml.Nvml.query`):
a function the driver or the bindings lack, or ``NotSupported``, leaves that part
``None`` ("not known"), and a GPU that fell off the bus leaves its links and pairs
unknown; reading the topology never raises.

What is read:

* per GPU: ``nvmlDeviceGetPciInfo`` (bus id), the PCIe link's current and
  maximum generation and width, the active NVLink links
  (``nvmlDeviceGetNvLinkState``) and, per active link, what is at the far end
  (``nvmlDeviceGetNvLinkRemoteDeviceType``: GPU, NVSwitch, IBM NPU) and its bus id
  (``nvmlDeviceGetNvLinkRemotePciInfo``);
* per pair of GPUs: their nearest common PCIe ancestor
  (``nvmlDeviceGetTopologyCommonAncestor``), the NVLink links that join them
  directly (links of one whose far end is the other's bus id, as ``nvidia-smi
  topo -m`` counts ``NV#``), and whether both reach one NVSwitch fabric (their
  NVSwitch links share a switch's bus id; links to a switch whose bus id is not
  reported count as one fabric).
"""

from __future__ import annotations

from typing import Any

from gpuscale.events.schema import GpuLinks, GpuPair, NvLinkPeer, Topology, TopologyLevel
from gpuscale.telemetry.nvml import GpuLostError, Nvml, active_nvlinks, open_nvml

_LEVELS: dict[int, TopologyLevel] = {
    0: "internal",
    10: "single",
    20: "multiple",
    30: "hostbridge",
    40: "node",
    50: "system",
}
"""NVML's ``NVML_TOPOLOGY_*`` values (its ABI) and our names for them."""

_REMOTE_TYPES = {0x00: "gpu", 0x01: "ibmnpu", 0x02: "nvswitch"}
"""NVML's ``NVML_NVLINK_DEVICE_TYPE_*`` values; anything else (0xFF) is ``unknown``."""

_UNKNOWN_SWITCH = "nvswitch"
"""Stands for a switch whose bus id NVML did not report (all such are one fabric)."""


def bus_id(pci: Any) -> str | None:
    """A PCI bus id in one spelling (``00000000:18:00.0``) from an ``nvmlPciInfo_t``.

    Built from its ``domain``/``bus``/``device`` numbers when it has them, else
    its ``busId`` text (upper-cased, a 4-digit domain widened to 8)."""
    if pci is None:
        return None
    domain, bus, device = (getattr(pci, name, None) for name in ("domain", "bus", "device"))
    if all(isinstance(v, int) for v in (domain, bus, device)):
        return f"{domain:08X}:{bus:02X}:{device:02X}.0"
    text = getattr(pci, "busId", None)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    if not isinstance(text, str) or not text.strip("\x00 "):
        return None
    text = text.strip("\x00 ").upper()
    head, _, rest = text.partition(":")
    if rest and len(head) == 4:
        text = f"0000{head}:{rest}"
    return text


def _gpu_links(lib: Nvml, index: int, handle: Any, name: str | None) -> GpuLinks:
    """One GPU's PCIe and NVLink links; raises :class:`GpuLostError` if it is lost."""
    info = GpuLinks(
        index=index,
        name=name,
        pci_bus_id=bus_id(lib.query("nvmlDeviceGetPciInfo", handle)),
        pcie_gen=lib.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        pcie_width=lib.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
        pcie_max_gen=lib.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        pcie_max_width=lib.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
    )
    state_known = lib.query("nvmlDeviceGetNvLinkState", handle, 0) is not None
    links = active_nvlinks(lib, handle)
    info.nvlink_links = len(links) if (links or state_known) else _no_nvlink(lib)
    for link in links:
        kind = lib.query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        remote = _REMOTE_TYPES.get(kind, "unknown") if isinstance(kind, int) else "unknown"
        info.nvlink_peers.append(
            NvLinkPeer(
                link=link,
                remote=remote,  # type: ignore[arg-type]
                remote_bus_id=bus_id(lib.query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)),
            )
        )
    return info


def _no_nvlink(lib: Nvml) -> int | None:
    """``0`` when NVML said the GPU has no NVLink (NotSupported), ``None`` when it
    could not say (the function is missing)."""
    failure = lib.failures.get("nvmlDeviceGetNvLinkState", "")
    return 0 if "Not Supported" in failure or failure == "NVMLError_NotSupported" else None


def read_topology(
    lib: Nvml, handles: dict[int, Any], names: dict[int, str] | None = None
) -> Topology:
    """The topology of the GPUs in ``handles`` (NVML index -> handle). Never raises."""
    names = names or {}
    gpus: list[GpuLinks] = []
    live: dict[int, Any] = {}
    for index in sorted(handles):
        try:
            gpus.append(_gpu_links(lib, index, handles[index], names.get(index)))
            live[index] = handles[index]
        except GpuLostError:
            gpus.append(GpuLinks(index=index, name=names.get(index)))
    by_bus = {g.pci_bus_id: g.index for g in gpus if g.pci_bus_id}
    switches: dict[int, set[str]] = {}
    direct: dict[tuple[int, int], int] = {}
    for gpu in gpus:
        for peer in gpu.nvlink_peers:
            far = by_bus.get(peer.remote_bus_id) if peer.remote_bus_id else None
            if far is not None and far != gpu.index and peer.remote in ("gpu", "unknown"):
                peer.remote = "gpu"
                peer.remote_gpu = far
                direct[(gpu.index, far)] = direct.get((gpu.index, far), 0) + 1
            elif peer.remote == "nvswitch":
                switches.setdefault(gpu.index, set()).add(peer.remote_bus_id or _UNKNOWN_SWITCH)
    pairs: list[GpuPair] = []
    indices = [g.index for g in gpus]
    for i, a in enumerate(indices):
        for b in indices[i + 1 :]:
            level = None
            if a in live and b in live:
                try:
                    value = lib.query("nvmlDeviceGetTopologyCommonAncestor", live[a], live[b])
                except GpuLostError:
                    value = None
                level = _LEVELS.get(value) if isinstance(value, int) else None
            both = switches.get(a, set()), switches.get(b, set())
            shared = bool(both[0] & both[1]) or (
                bool(both[0]) and bool(both[1]) and _UNKNOWN_SWITCH in both[0] | both[1]
            )
            # A link shows on both GPUs; either end may be all NVML reports.
            links = max(direct.get((a, b), 0), direct.get((b, a), 0))
            pairs.append(GpuPair(a=a, b=b, pcie=level, nvlinks=links, nvswitch=shared))
    return Topology(gpus=gpus, pairs=pairs)


def probe_topology(nvml: Any = None) -> Topology | None:
    """Start NVML, read the topology of every GPU, shut NVML down.

    ``None`` when NVML does not start or sees no GPU. Never raises. ``nvml``
    replaces the ``pynvml`` module (tests)."""
    lib, probe = open_nvml(nvml)
    if lib is None:
        return None
    try:
        if not probe.ok:
            return None
        return topology_of(lib, {d.index: d.name for d in probe.devices})
    finally:
        lib.close()


def topology_of(lib: Nvml, names: dict[int, str]) -> Topology:
    """:func:`read_topology` for the GPUs ``names`` lists (index -> name), their
    handles looked up by index. Never raises."""
    handles: dict[int, Any] = {}
    for index in names:
        try:
            handle = lib.query("nvmlDeviceGetHandleByIndex", index)
        except GpuLostError:
            handle = None
        handles[index] = handle
    lost = {i for i, h in handles.items() if h is None}
    topology = read_topology(lib, {i: h for i, h in handles.items() if h is not None}, names)
    if lost:  # a GPU that does not answer: its links and pairs stay unknown
        known = {g.index for g in topology.gpus}
        topology.gpus += [GpuLinks(index=i, name=names.get(i)) for i in sorted(lost - known)]
        topology.gpus.sort(key=lambda g: g.index)
        pairs = {(p.a, p.b) for p in topology.pairs}
        every = sorted(g.index for g in topology.gpus)
        topology.pairs += [
            GpuPair(a=a, b=b)
            for i, a in enumerate(every)
            for b in every[i + 1 :]
            if (a, b) not in pairs
        ]
        topology.pairs.sort(key=lambda p: (p.a, p.b))
    return topology
