"""Multi-worker scaling: communication inside a machine and between machines,
fitted separately (pure functions; no TensorFlow).

A run on ``W`` workers with ``G`` devices each reduces gradients in two levels
(TensorFlow's collective all-reduce and NCCL both do, across machines):
inside each machine over its fast links, then between the machines over the
network. So the step time is modelled as::

    t(W, G) = t_node(G) + inter(W)

    t_node(G)  one machine, G devices: compute + intra-node all-reduce, the
               one-machine model of :mod:`gpuscale.analysis.model` fitted on the
               configuration's single-worker points (or the measured W = 1 point)
    inter(W)   = a (W - 1) + b * 2 (W - 1) / W
               a ring between the W machines: ``a`` the latency per inter-node
               hop, ``b`` the time to move one gradient payload over one machine's
               network link (payload / network bandwidth)

Fitting: ``inter(W) = t(W, G) - t_node(G)`` for every measured multi-worker
point (the measured single-worker step at the same G when there is one, else
the one-machine model's prediction), then ``a`` and ``b`` by non-negative least
squares on relative error (``b`` alone with one multi-worker count). Throughput
is ``W x G x per-device batch / t(W, G)`` (weak scaling).

What it shows, e.g. for seed 004 (ResNet-50 on P40s, 8 per machine): inside one
machine NCCL beats the collective implementation (1.26 vs 1.06 steps/s); across
machines each worker adds little (``inter`` is small next to ``t_node``), so
throughput grows almost linearly with workers.

Workers that all ran on one machine's CPUs (``--local-workers N``) are not
machines: they share its cores, and the one-machine model with shared cores
stands for them (:func:`gpuscale.analysis.model.shares_cores`).

What it ignores: overlap that changes with W, stragglers, a network shared
with other jobs, machines with different G; strong scaling (the batch per
device shrinking with W) is not modelled here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.model import ScalingModel, fit, nnls, shares_cores
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.formatting import (
    format_fraction_pct,
    format_rate_bytes_s,
    format_rough_duration_s,
    plural,
)


def inter_hops(workers: int) -> float:
    """Latency hops of a ring between ``workers`` machines."""
    return float(max(workers - 1, 0))


def inter_volume(workers: int) -> float:
    """Payloads through each machine's network link per step (ring: 2(W-1)/W)."""
    return metrics.ring_volume_factor(workers) if workers > 1 else 0.0


class TwoLevelModel(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The fitted two-level model of one configuration; see the module docstring."""

    config: str
    devices_per_worker: int
    per_replica_batch: int
    node_step_s: float
    """``t_node(G)``: one machine's step (compute + intra-node all-reduce)."""
    node_comm_s: float | None = None
    """The intra-node all-reduce part of ``node_step_s`` (when the one-machine fit has it)."""
    inter_alpha_s: float = 0.0
    """Latency per inter-node hop."""
    inter_beta_s: float = 0.0
    """One gradient payload over one machine's network link."""
    payload_bytes: int | None = None
    network_bytes_s: float | None = None
    """``payload / inter_beta_s``: the effective network bandwidth per machine."""
    fitted_workers: list[int] = []
    measured_step_s: list[float] = []
    """Median measured step time at each of ``fitted_workers``."""
    fit_error: float | None = None
    """Largest relative error on the measured multi-worker points (None when the
    fit has as many terms as points)."""

    def inter_s(self, workers: int) -> float:
        """``inter(W)``: what the step pays for the exchange between machines."""
        return self.inter_alpha_s * inter_hops(workers) + self.inter_beta_s * inter_volume(workers)

    def step_time_s(self, workers: int) -> float:
        return self.node_step_s + self.inter_s(workers)

    def throughput(self, workers: int) -> float:
        """Samples per second with ``workers`` machines (weak scaling)."""
        samples = self.per_replica_batch * self.devices_per_worker * workers
        return metrics.throughput(samples, self.step_time_s(workers))

    def efficiency(self, workers: int) -> float:
        """Throughput over ``workers`` x one machine's throughput (1.0 = linear)."""
        return self.throughput(workers) / (workers * self.throughput(1))


def _node_model(single: Sequence[SweepPoint]) -> ScalingModel | None:
    return fit(single) if single else None


def fit_two_level(points: Sequence[SweepPoint]) -> TwoLevelModel | None:
    """Fit the model to the normalized points of ONE configuration. ``None`` when it
    does not apply: no multi-worker point, no single-worker point with the same
    devices per machine to stand for ``t_node``, strong scaling, machines of
    different sizes, or workers that all ran on one machine's CPUs (they share its
    cores: no second level, :func:`gpuscale.analysis.model.shares_cores`)."""
    if shares_cores(points):
        return None
    multi = [p for p in points if p.workers > 1 and p.step_time_s]
    single = [p for p in points if p.workers == 1 and p.step_time_s]
    if not multi or not single or any(p.scaling != "weak" for p in points):
        return None
    per_worker = {p.devices // p.workers for p in multi if p.devices % p.workers == 0}
    if len(per_worker) != 1 or len({p.devices for p in multi}) != len(
        {(p.devices, p.workers) for p in multi}
    ):
        return None
    g = per_worker.pop()
    same_g = [p.step_time_s for p in single if p.devices == g]
    node_model = _node_model(single)
    if same_g:
        node_step = metrics.median(same_g)
    elif node_model is not None and node_model.predicts:
        node_step = node_model.step_time_s(g)
    else:
        return None
    by_workers: dict[int, list[float]] = defaultdict(list)
    for p in multi:
        by_workers[p.workers].append(p.step_time_s)
    workers = sorted(by_workers)
    steps = [metrics.median(by_workers[w]) for w in workers]
    inter = [max(t - node_step, 1e-9) for t in steps]
    if len(workers) >= 2:
        alpha, beta = nnls(
            [[inter_hops(w) for w in workers], [inter_volume(w) for w in workers]], inter
        )
    else:
        alpha, beta = 0.0, inter[0] / inter_volume(workers[0])
    payloads = [p.payload_bytes for p in points if p.payload_bytes]
    payload = int(metrics.median(payloads)) if payloads else None
    first = min(points, key=lambda p: p.devices)
    model = TwoLevelModel(
        config=first.config,
        devices_per_worker=g,
        per_replica_batch=first.per_replica_batch or 1,
        node_step_s=node_step,
        node_comm_s=node_model.comm_time_s(g) if node_model and node_model.predicts else None,
        inter_alpha_s=alpha,
        inter_beta_s=beta,
        payload_bytes=payload,
        network_bytes_s=payload / beta if payload and beta > 0 else None,
        fitted_workers=workers,
        measured_step_s=steps,
    )
    if len(workers) > sum(1 for v in (alpha, beta) if v > 0):
        model.fit_error = max(
            abs(model.step_time_s(w) / t - 1) for w, t in zip(workers, steps, strict=True)
        )
    return model


def anchor_of_two_level(model: TwoLevelModel, at_top: SweepPoint) -> float:
    """:func:`gpuscale.analysis.predict.anchor_of` for the two-level model: the
    measured over the modelled throughput at the largest measured count (1.0 when
    that count is not whole machines)."""
    g = model.devices_per_worker
    if at_top.devices % g or not at_top.throughput:
        return 1.0
    modelled = model.throughput(at_top.devices // g)
    return at_top.throughput / modelled if modelled > 0 else 1.0


def explain(
    points: Sequence[SweepPoint], rows: Mapping[str, Sequence[SweepPoint]] | None = None
) -> list[str]:
    """Sentences on intra-node vs inter-node communication for a sweep with
    multi-worker points: which configuration is fastest inside one machine, and
    how throughput grows across machines, measured, and predicted where the
    configuration's table (``rows``, by configuration) has predicted rows: their
    throughput and range, as the table says them (never a number of its own), as
    efficiencies against one machine. Empty when the sweep has no multi-worker point."""
    by_config: dict[str, list[SweepPoint]] = defaultdict(list)
    for p in points:
        by_config[p.config].append(p)
    if not any(p.workers > 1 for p in points):
        return []
    lines: list[str] = []
    # Inside one machine: the configurations compared at the largest shared count.
    single: dict[str, dict[int, float]] = defaultdict(dict)
    for config, ps in by_config.items():
        for p in ps:
            if p.workers == 1 and p.throughput:
                single[config][p.devices] = p.throughput
    shared = set.intersection(*(set(v) for v in single.values())) if len(single) > 1 else set()
    if shared:
        g = max(shared)
        ranked = sorted(single, key=lambda c: single[c][g], reverse=True)
        best, worst = ranked[0], ranked[-1]
        gain = single[best][g] / single[worst][g] - 1
        lines.append(
            f"Inside one machine ({plural(g, 'device')}): '{best}' is fastest, {format_fraction_pct(gain)} more samples/s "
            f"than '{worst}' (intra-node all-reduce)."
        )
    for config, ps in sorted(by_config.items()):
        model = fit_two_level(ps)
        if model is None:
            continue
        # weak scaling: efficiency = one machine's step / the step with W machines
        measured = ", ".join(
            f"{w} workers {format_fraction_pct(model.node_step_s / t)}"
            for w, t in zip(model.fitted_workers, model.measured_step_s, strict=True)
        )
        network = (
            f", an effective {format_rate_bytes_s(model.network_bytes_s)} per machine"
            if model.network_bytes_s
            else ""
        )
        lines.append(
            f"Across machines ('{config}', {plural(model.devices_per_worker, 'device')} each): the "
            f"inter-node exchange costs about {format_rough_duration_s(model.inter_s(2))} per step "
            f"at 2 workers, modelled from step times ({format_fraction_pct(model.inter_s(2) / model.step_time_s(2))} "
            f"of the step{network}); "
            f"efficiency against linear: {measured} (measured)"
            + _predicted(model, (rows or {}).get(config, ()))
            + "."
        )
    return lines


def _predicted(model: TwoLevelModel, rows: Sequence[SweepPoint]) -> str:
    """``, 4 workers 91% (82%–96%) (predicted; ...)``: the table's predicted rows beyond
    the measured workers, against one machine as the measured ones are; or nothing."""
    base = model.throughput(1)  # one machine: the measured efficiencies' base
    ahead = sorted(
        (r for r in rows if r.predicted and r.throughput and r.workers > max(model.fitted_workers)),
        key=lambda r: r.workers,
    )
    if not ahead or base <= 0:
        return ""

    def eff(x: float | None, w: int) -> str:
        return format_fraction_pct((x or 0.0) / (w * base))

    said = ", ".join(
        f"{r.workers} workers {eff(r.throughput, r.workers)}"
        + (
            f" ({eff(r.throughput_low, r.workers)}–{eff(r.throughput_high, r.workers)})"
            if r.throughput_low is not None and r.throughput_high is not None
            else ""
        )
        for r in ahead
    )
    ranged = [r for r in ahead if r.throughput_low is not None]
    if not ranged:
        how = ", as in its table"
    elif all(r.coverage for r in ranged):
        how = (
            f"; as in its table, {ranged[0].coverage:.0%} ranges borrowed from one-machine "
            "tables: no published table has several machines"
        )
    else:
        how = "; as in its table, the ranges a guess"
    return f", {said} (predicted{how})"
