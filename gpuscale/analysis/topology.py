"""What a machine's GPU topology means for a set of GPUs: the slowest link among
them, and which ``k`` GPUs to use when fewer than all are best.

Pure functions of a :class:`~gpuscale.events.schema.Topology` (read through NVML
by :mod:`gpuscale.telemetry.topology`, or from a recording's start event).

Link classes, fastest first (how two GPUs exchange data):

========================  =====================================================
``nvswitch``              both reach one NVSwitch fabric (every pair at full NVLink rate)
``nvlink``                NVLink links join the two directly (a bridge, a mesh)
``pcie-switch``           PCIe through one or more PCIe switches, no CPU (PIX, PXB,
                          or one dual-GPU board)
``pcie-hostbridge``       PCIe through a CPU's host bridge(s) in one NUMA node (PHB, NODE)
``cross-socket``          PCIe across CPU sockets (SYS): peer-to-peer crosses the
                          inter-socket link (UPI / Infinity Fabric), or is off
``unknown``               NVML did not say
========================  =====================================================

The class of a set of GPUs is that of its slowest pair: conservative, since a
ring all-reduce uses only ``k`` of the pairs (on a partial NVLink mesh such as
the DGX-1's hybrid cube mesh a ring may avoid the slow pairs; this does not
look for one).

Nominal bandwidth per direction (:mod:`gpuscale.analysis.interconnect`'s
tables, nothing measured): ``nvswitch``, the least of the GPUs' NVLink links to
the switches x the per-link rate; ``nvlink``, the least over the NVLink-joined
pairs of their links x the per-link rate (the rate comes from the GPU's name,
``None`` when the name is not in the table, e.g. GeForce cards); the PCIe
classes, the slowest GPU's PCIe link at its maximum generation and width (an
idle GPU trains its link down, so the current one understates it). A shared
switch, host bridge or inter-socket link divides that further; the class, not
the number, says how likely that is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Literal

import msgspec

from gpuscale.analysis.interconnect import nvlink_peak_bytes_s, pcie_peak_bytes_s
from gpuscale.events.limits import MAX_DEVICES
from gpuscale.events.schema import GpuLinks, GpuPair, StartEvent, Topology

LinkClass = Literal[
    "nvswitch", "nvlink", "pcie-switch", "pcie-hostbridge", "cross-socket", "unknown"
]

LINK_CLASSES: tuple[LinkClass, ...] = (
    "nvswitch",
    "nvlink",
    "pcie-switch",
    "pcie-hostbridge",
    "cross-socket",
    "unknown",
)
"""Fastest first."""

LINK_LABELS: dict[str, str] = {
    "nvswitch": "NVSwitch",
    "nvlink": "NVLink",
    "pcie-switch": "PCIe switch",
    "pcie-hostbridge": "PCIe host bridge",
    "cross-socket": "across CPU sockets",
    "unknown": "link not reported",
}

_PCIE_CLASS: dict[str, LinkClass] = {
    "internal": "pcie-switch",
    "single": "pcie-switch",
    "multiple": "pcie-switch",
    "hostbridge": "pcie-hostbridge",
    "node": "pcie-hostbridge",
    "system": "cross-socket",
}

EXHAUSTIVE_LIMIT = 1_000
"""Most subsets :func:`best_subset` compares one by one; beyond, it grows subsets greedily."""


class SetLink(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The slowest link among a set of GPUs."""

    gpus: list[int]
    link_class: LinkClass
    peak_bytes_s: float | None = None
    """Nominal bytes per second per direction of that class's slowest link
    (module docstring); ``None`` when it cannot be known."""
    slowest_pair: tuple[int, int] | None = None
    """A pair with that link (the first by index)."""
    description: str = ""
    """E.g. ``PCIe switch, PCIe 4.0 x16: 31.5 GB/s per direction``."""


def pair_class(pair: GpuPair | None) -> LinkClass:
    """The link class of one pair (NVSwitch, then direct NVLink, then the PCIe path)."""
    if pair is None:
        return "unknown"
    if pair.nvswitch:
        return "nvswitch"
    if pair.nvlinks > 0:
        return "nvlink"
    if pair.pcie is None:
        return "unknown"
    return _PCIE_CLASS[pair.pcie]


def _rank(link: LinkClass) -> int:
    return LINK_CLASSES.index(link)


def _pairs(topology: Topology) -> dict[tuple[int, int], GpuPair]:
    """The pairs by ``(lower index, higher index)``, whichever order a start event
    lists them in (NVML's reader lists ``a < b``; a recording is input)."""
    return {(min(p.a, p.b), max(p.a, p.b)): p for p in topology.pairs}


def _switch_links(gpu: GpuLinks) -> int:
    return sum(1 for peer in gpu.nvlink_peers if peer.remote == "nvswitch")


def _pcie_peak(gpu: GpuLinks) -> tuple[float | None, str]:
    generation = gpu.pcie_max_gen or gpu.pcie_gen
    lanes = gpu.pcie_max_width or gpu.pcie_width
    if not generation or not lanes:
        return None, "PCIe link not reported"
    return pcie_peak_bytes_s(generation, lanes), f"PCIe {generation}.0 x{lanes}"


def slowest_link(topology: Topology, gpus: Iterable[int]) -> SetLink | None:
    """The slowest link among ``gpus`` and its nominal bandwidth per direction;
    ``None`` for fewer than two GPUs. A GPU the topology does not list makes
    the class ``unknown``."""
    chosen = sorted(set(gpus))
    if len(chosen) < 2:
        return None
    by_pair = _pairs(topology)
    by_index = {g.index: g for g in topology.gpus}
    worst: LinkClass = "nvswitch"
    worst_pairs: list[tuple[int, int]] = []
    for a, b in itertools.combinations(chosen, 2):
        link = pair_class(by_pair.get((a, b)))
        if _rank(link) > _rank(worst):
            worst, worst_pairs = link, []
        if link == worst:
            worst_pairs.append((a, b))
    peak, detail = _peak(worst, worst_pairs, [by_index.get(i) for i in chosen], by_pair, by_index)
    label = "" if worst == "nvlink" else f"{LINK_LABELS[worst]}, "
    if worst == "unknown":
        description = "link not reported by NVML"
    elif peak is None:
        description = f"{label}{detail} (rate not known)"
    else:
        description = f"{label}{detail}: {peak / 1e9:.1f} GB/s per direction"
    return SetLink(
        gpus=chosen,
        link_class=worst,
        peak_bytes_s=peak,
        slowest_pair=worst_pairs[0],
        description=description,
    )


def _peak(
    link: LinkClass,
    worst_pairs: list[tuple[int, int]],
    members: list[GpuLinks | None],
    by_pair: dict[tuple[int, int], GpuPair],
    by_index: dict[int, GpuLinks],
) -> tuple[float | None, str]:
    """Nominal per-direction bandwidth of the slowest link of class ``link``."""
    if link == "unknown":
        return None, ""
    options: list[tuple[float | None, str]] = []
    if link == "nvswitch":
        for gpu in members:
            if gpu is not None:
                links = _switch_links(gpu)
                options.append((nvlink_peak_bytes_s(gpu.name or "", links), f"NVLink x{links}"))
    elif link == "nvlink":
        for a, b in worst_pairs:
            gpu = by_index.get(a)
            links = by_pair[(a, b)].nvlinks
            name = gpu.name if gpu is not None else ""
            options.append((nvlink_peak_bytes_s(name or "", links), f"NVLink x{links}"))
    else:
        options = [_pcie_peak(gpu) for gpu in members if gpu is not None]
    if not options:
        return None, ""
    known = [o for o in options if o[0] is not None]
    if len(known) < len(options):  # one GPU's rate not known: the set's is not either
        return None, next(o[1] for o in options if o[0] is None)
    return min(known, key=lambda o: o[0] or 0.0)


def best_subset(topology: Topology, k: int, among: Iterable[int] | None = None) -> list[int]:
    """The ``k`` GPUs to use: the set whose slowest link is fastest (same NVSwitch
    fabric or NVLink island, then one PCIe switch, then one socket), then the
    highest nominal bandwidth of that link, then the most fast pairs (least sum
    of pair class ranks), then the lowest indices. All GPUs when ``k`` is at
    least their number. Raises ``ValueError`` for ``k < 1``.

    Compares every subset up to :data:`EXHAUSTIVE_LIMIT` of them (8 GPUs: at
    most 70; 16 GPUs: k up to 3 or from 13); beyond, grows one subset greedily
    from each GPU and compares those. ``among`` limits the choice to those GPUs
    (e.g. the ones ``--gpus`` allows); indices the topology does not list are
    ignored."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    indices = sorted(g.index for g in topology.gpus)
    if among is not None:
        allowed = set(among)
        indices = [i for i in indices if i in allowed]
    if k >= len(indices):
        return indices
    if k == 1:
        return indices[:1]
    by_pair = _pairs(topology)
    ranks = {key: _rank(pair_class(pair)) for key, pair in by_pair.items()}
    if math.comb(len(indices), k) <= EXHAUSTIVE_LIMIT:
        candidates = list(itertools.combinations(indices, k))
    else:
        candidates = sorted({_grow(seed, k, indices, ranks) for seed in indices})

    def coarse(subset: tuple[int, ...]) -> tuple[int, int]:
        pair_ranks = [ranks.get(p, _UNKNOWN) for p in itertools.combinations(subset, 2)]
        return max(pair_ranks), sum(pair_ranks)

    scored = [(coarse(c), c) for c in candidates]
    fastest = min(worst for (worst, _), _ in scored)
    tied = [(total, c) for (worst, total), c in scored if worst == fastest]

    def key(item: tuple[int, tuple[int, ...]]) -> tuple[float, int, tuple[int, ...]]:
        total, subset = item
        link = slowest_link(topology, subset)
        return (-(link.peak_bytes_s or 0.0) if link else 0.0, total, subset)

    return list(min(tied, key=key)[1])


_UNKNOWN = LINK_CLASSES.index("unknown")


def links_known(topology: Topology) -> bool:
    """NVML reported the link of at least one pair of GPUs (else nothing can be chosen by it)."""
    return any(pair_class(p) != "unknown" for p in topology.pairs)


def best_gpus(topology: Topology | None, k: int) -> list[int] | None:
    """The GPUs to advise for a run on ``k`` of them, as ``gpuscale devices``,
    ``gpuscale run --devices N`` and ``recommend --from`` advise them: the
    best-connected ``k`` (:func:`best_subset`); ``None`` when there is nothing to
    choose: no topology, NVML reported no pair's link, or ``k`` at least the GPUs
    the machine has."""
    if topology is None or k < 1 or k >= len(topology.gpus) or not links_known(topology):
        return None
    return best_subset(topology, k)


def worse_link(link: SetLink, than: SetLink) -> bool:
    """``link`` is slower than ``than``: a slower class (:data:`LINK_CLASSES`), or
    the same class at a lower nominal bandwidth when both are known (the order
    :func:`best_subset` chooses by)."""
    if _rank(link.link_class) != _rank(than.link_class):
        return _rank(link.link_class) > _rank(than.link_class)
    if link.peak_bytes_s is None or than.peak_bytes_s is None:
        return False
    return link.peak_bytes_s < than.peak_bytes_s


def _grow(
    seed: int, k: int, indices: list[int], ranks: dict[tuple[int, int], int]
) -> tuple[int, ...]:
    """Greedy: from ``seed``, add the GPU whose worst link to the chosen ones is
    fastest (ties: least sum of ranks, lowest index)."""
    chosen = [seed]
    while len(chosen) < k:

        def cost(i: int) -> tuple[int, int, int]:
            pair_ranks = [ranks.get((min(i, c), max(i, c)), _UNKNOWN) for c in chosen]
            return (max(pair_ranks), sum(pair_ranks), i)

        chosen.append(min((i for i in indices if i not in chosen), key=cost))
    return tuple(sorted(chosen))


MAX_MACHINE_GPUS = 64
"""Most GPUs a recorded topology may list for ``recommend --from`` to choose GPUs
by it (a machine has 16 at most today; a recording is untrusted input, and
:func:`best_subset` grows with the GPUs)."""


def gpus_of_run(start: StartEvent) -> list[int] | None:
    """The GPUs a recorded run used, as NVML numbers them, where its start event
    says so for sure: a run of the built-in trainer on one machine whose
    ``config.gpus`` lists its GPU devices (``--gpus``, or ``--devices N`` turned
    into the best-connected N, or a live sweep's choice), or that used every GPU
    its ``topology`` lists. ``None`` otherwise: a user's script numbers its devices
    as TensorFlow does (from 0 among those ``CUDA_VISIBLE_DEVICES`` shows), and so
    does the trainer under a ``CUDA_VISIBLE_DEVICES`` the user set."""
    if start.source != "trainer" or start.num_workers > 1 or start.platform != "gpu":
        return None
    used = sorted({d.index for d in start.devices if d.kind == "gpu"})
    if not used or len(used) != sum(1 for d in start.devices if d.kind == "gpu"):
        return None
    if used[0] < 0 or used[-1] > MAX_DEVICES:  # a hand-edited recording: no --gpus to say
        return None
    given = (start.config or {}).get("gpus")
    if isinstance(given, list) and all(type(i) is int for i in given) and sorted(given) == used:
        return used
    topology = start.topology
    if topology is not None and used == sorted(g.index for g in topology.gpus):
        return used
    return None


def machine_topology(topologies: Iterable[Topology | None]) -> Topology | None:
    """The one machine's topology that runs' start events (``topologies``, one a
    run) all describe; ``None`` when one of them has none (a recording older than
    format 1.1, no NVML), when they describe different machines (other GPUs,
    bus ids or links; the current PCIe link, which an idle GPU trains down, may
    differ), or when the topology lists a GPU twice or more than
    :data:`MAX_MACHINE_GPUS`. The last one given is returned."""
    shapes: set[bytes] = set()
    last: Topology | None = None
    for topology in topologies:
        if topology is None or len(topology.gpus) > MAX_MACHINE_GPUS:
            return None
        indices = [g.index for g in topology.gpus]
        if len(set(indices)) != len(indices):
            return None
        gpus = sorted(
            (
                (g.index, g.name, g.pci_bus_id, g.pcie_max_gen, g.pcie_max_width, g.nvlink_links)
                for g in topology.gpus
            ),
            key=lambda gpu: gpu[0],
        )
        pairs = sorted(
            ((p.a, p.b, p.pcie, p.nvlinks, p.nvswitch) for p in topology.pairs),
            key=lambda pair: pair[:2],
        )
        shapes.add(msgspec.json.encode([gpus, pairs]))
        last = topology
    return last if len(shapes) == 1 else None


def link_of_run(start: StartEvent) -> SetLink | None:
    """The slowest link among the GPUs a recorded run used: its start event's
    ``topology`` and the indices of its ``gpu`` devices. ``None`` without a
    topology (no NVML, a recording older than format 1.1) or with fewer than two
    GPUs. The indices are NVML's when the run chose its GPUs (``--gpus``, or
    ``--devices`` under ``gpuscale run``); under a ``CUDA_VISIBLE_DEVICES`` set by
    the user they are CUDA's and may not match."""
    if start.topology is None:
        return None
    gpus = [d.index for d in start.devices if d.kind == "gpu"]
    return slowest_link(start.topology, gpus)
