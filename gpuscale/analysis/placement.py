"""Which of the machine's GPUs a recommended count should use, and which measured
counts ran on worse-connected GPUs than the machine offers: what ``recommend``
adds where its runs' recordings carry the machine's topology
(:attr:`gpuscale.analysis.sweep.Sweep.topology`).

One rule chooses, the one ``gpuscale devices`` lists and ``gpuscale run --devices
N`` applies: :func:`gpuscale.analysis.topology.best_gpus` (one NVLink island or
PCIe switch before a host bridge, before two sockets). A measured count's run
whose GPUs (:attr:`~gpuscale.analysis.sweep.SweepPoint.gpus`) have a slower
slowest link than that choice (:func:`gpuscale.analysis.topology.worse_link`)
exchanged its gradients over a slower path than it had to: its throughput
understates what well-chosen GPUs do, and a walk that stops there may stop too
early. Only GPU runs of one machine (one worker) are judged; nothing is said
without a topology, for one device (no link), or where the count uses every GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from gpuscale.analysis.topology import (
    LINK_LABELS,
    SetLink,
    best_gpus,
    slowest_link,
    worse_link,
)
from gpuscale.events.schema import Topology
from gpuscale.formatting import plural


class BetterGpus(msgspec.Struct, kw_only=True):
    """A measured count whose run used worse-connected GPUs than the best choice."""

    config: str
    devices: int
    gpus: list[int]
    """The GPUs the run used."""
    link_class: str
    """Their slowest link (:data:`gpuscale.analysis.topology.LINK_CLASSES`)."""
    link: str
    """It in words: its class (``across CPU sockets``), or where both links are of
    one class the description that tells them apart (the nominal bandwidth)."""
    better_gpus: list[int]
    """The best-connected ``devices`` GPUs of the machine: what to measure again on."""
    better_link_class: str
    better_link: str


def listed(gpus: Sequence[int]) -> str:
    """``0,1,2,3``: as ``--gpus`` and ``CUDA_VISIBLE_DEVICES`` take them."""
    return ",".join(map(str, gpus))


def _one_machine_gpus(points: Sequence[Any]) -> bool:
    measured = [p for p in points if not p.predicted]
    return bool(measured) and all(p.platform == "gpu" and p.workers <= 1 for p in measured)


def gpus_to_use(
    devices: int, points: Sequence[Any], topology: Topology | None
) -> tuple[list[int], str] | None:
    """The GPUs to use for ``devices`` of the configuration measured at ``points``,
    and the line that says so; ``None`` where there is nothing to choose (module
    docstring)."""
    if devices < 2 or not _one_machine_gpus(points):
        return None
    gpus = best_gpus(topology, devices)
    if gpus is None or topology is None:
        return None
    link = slowest_link(topology, gpus)
    shown = listed(gpus)
    slowest = f" (slowest link: {link.description})" if link is not None else ""
    return gpus, (
        f"Use GPUs {shown} for {plural(devices, 'device')} on the machine the runs were "
        f"recorded on (gpuscale run --gpus {shown}, or CUDA_VISIBLE_DEVICES={shown}): "
        f"the best-connected {devices} of its "
        f"{len(topology.gpus)}, as 'gpuscale devices' lists them{slowest}"
    )


def worse_placed(groups: Sequence[Any], topology: Topology | None) -> list[BetterGpus]:
    """The measured counts of ``groups`` (:class:`~gpuscale.analysis.decide.Group`)
    whose run used GPUs with a slower slowest link than the best ``devices`` of
    the machine (module docstring), in order of configuration and count."""
    if topology is None:
        return []
    known = {g.index for g in topology.gpus}
    found: list[BetterGpus] = []
    for g in groups:
        runs = g.runs or g.points  # each run's own GPUs, before a count's runs were combined
        if not _one_machine_gpus(runs):
            continue
        seen: set[tuple[int, ...]] = set()
        for p in sorted(runs, key=lambda p: p.devices):
            used = p.gpus
            if p.predicted or used is None or len(used) != p.devices or not set(used) <= known:
                continue
            if tuple(used) in seen:  # two runs of one count on the same GPUs: said once
                continue
            seen.add(tuple(used))
            better = best_gpus(topology, p.devices)
            if better is None or better == sorted(used):
                continue
            link, best = slowest_link(topology, used), slowest_link(topology, better)
            if link is None or best is None or link.link_class == "unknown":
                continue
            if worse_link(link, best):
                found.append(
                    BetterGpus(
                        config=g.config,
                        devices=p.devices,
                        gpus=sorted(used),
                        link_class=link.link_class,
                        link=_said(link, best),
                        better_gpus=better,
                        better_link_class=best.link_class,
                        better_link=_said(best, link),
                    )
                )
    return found


def _said(link: SetLink, other: SetLink) -> str:
    """The slowest link in words: its class, or where both are of one class the
    nominal bandwidth that tells them apart."""
    if link.link_class != other.link_class:
        return LINK_LABELS[link.link_class]
    return link.description


def placement_sentence(found: Sequence[BetterGpus], several: bool) -> str | None:
    """One Confidence sentence on :func:`worse_placed`'s counts: which GPUs each
    used, which are better connected, and what to measure again; ``None`` when none."""
    if not found:
        return None
    clauses = []
    for i, b in enumerate(found):
        at = f"at {plural(b.devices, 'device')}" + (f" with {b.config!r}" if several else "")
        clauses.append(
            f"{at} {'the run used ' if i == 0 else ''}GPUs {listed(b.gpus)} (slowest link: "
            f"{b.link}), though GPUs {listed(b.better_gpus)} are better connected ({b.better_link})"
        )
    text = "; ".join(clauses)
    commands = " and ".join(
        dict.fromkeys(f"'gpuscale run --gpus {listed(b.better_gpus)}'" for b in found)
    )
    if len(found) == 1:
        where, what = "there", f"{found[0].devices} well-chosen GPUs"
        again = f"measure it again with {commands} and the run's other options, and give "
        again += "that recording to --from in place of the old one"
    else:
        where, what = "at those counts", "well-chosen GPUs"
        again = f"measure them again with {commands} and the runs' other options, and give "
        again += "those recordings to --from in place of the old ones"
    return (
        f"{text[0].upper()}{text[1:]}: the throughput measured {where} may understate what "
        f"{what} do, and so may the recommendation and the predictions built on it; {again}."
    )
