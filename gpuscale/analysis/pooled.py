"""The phase probes of several runs of one configuration at one device count,
pooled into one breakdown: two recordings of 10 and 9 probes count as 19 probes.

Each run carries its probes' medians and their 95 % half-widths
(:func:`gpuscale.analysis.metrics.median_halfwidth`: ``h = c sigma / sqrt(n)`` with
``c = 1.96 x 1.2533``), not the probes themselves, so the pool is rebuilt from them:

- a phase: the probe-weighted mean of the runs' medians, ``m = sum(n_i m_i) / N``
  with ``N = sum(n_i)``;
- its spread: each run's probe sigma ``sigma_i = h_i sqrt(n_i) / c``, pooled with the
  runs' distance from the pooled value, ``sigma^2 = sum(n_i (sigma_i^2 + (m_i - m)^2)) / N``
  (runs that disagree widen it), and ``h = c sigma / sqrt(N)``;
- the exposed share's half-width: ``h`` of the exposed all-reduce over the step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

HALFWIDTH_FACTOR = 1.96 * 1.2533
"""``c``: a median's 95 % half-width over its sigma / sqrt(n) (as in metrics.median_halfwidth)."""


def pooled_phases(points: Sequence[Any], step_time_s: float) -> dict[str, Any] | None:
    """The fields of a sweep point (``compute_s``, ``allreduce_s``, ``allreduce_err_s``,
    ``apply_s``, ``input_s``, ``allreduce_total_s``, ``probes``, ``comm_share_err``) for
    the probes of ``points`` pooled, over the combined ``step_time_s``; ``None`` when
    fewer than two of them carry probed phases (nothing to pool)."""
    probed = [p for p in points if p.probes and p.allreduce_s is not None]
    if len(probed) < 2:
        return None
    total = sum(p.probes for p in probed)

    def mean(field: str) -> float | None:
        known = [(p.probes, v) for p in probed if (v := getattr(p, field)) is not None]
        if not known:
            return None
        weight = sum(n for n, _ in known)
        return sum(n * v for n, v in known) / weight

    exposed = mean("allreduce_s")
    assert exposed is not None
    err = _pooled_halfwidth([(p.probes, p.allreduce_s, p.allreduce_err_s) for p in probed])
    return {
        "compute_s": mean("compute_s"),
        "allreduce_s": exposed,
        "allreduce_err_s": err,
        "apply_s": mean("apply_s"),
        "input_s": mean("input_s"),
        "allreduce_total_s": mean("allreduce_total_s"),
        "probes": total,
        "comm_share_err": err / step_time_s if err is not None and step_time_s > 0 else None,
    }


def _pooled_halfwidth(runs: Sequence[tuple[int, float, float | None]]) -> float | None:
    """``h`` of the pooled value for ``(n_i, m_i, h_i)`` runs (module docstring);
    ``None`` when a run's half-width is unknown (fewer than 3 probes) and the runs
    together hold fewer than 3 probes."""
    total = sum(n for n, _, _ in runs)
    if total < 3:
        return None
    m = sum(n * v for n, v, _ in runs) / total
    variance = 0.0
    for n, v, h in runs:
        sigma = (h or 0.0) * math.sqrt(n) / HALFWIDTH_FACTOR
        variance += n * (sigma**2 + (v - m) ** 2)
    return HALFWIDTH_FACTOR * math.sqrt(variance / total) / math.sqrt(total)


__all__ = ["pooled_phases"]
