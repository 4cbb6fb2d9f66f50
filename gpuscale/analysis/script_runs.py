"""Runs of one user script at several device counts, named as one workload.

A script's start event cannot say whether its batch is per replica or global
(``model.fit(batch_size=64)`` under ``MirroredStrategy`` is global: Keras splits
it across the replicas), so it says weak scaling; and the callback calls a lone
CPU device ``cpu`` where the built-in trainer says ``cpu-logical``. Several runs
of one script can tell: one global batch at every device count is strong
scaling. :func:`settle_script_runs` rewrites the runs so, before they become
sweep points (``recommend --from`` and ``recommend -- python train.py``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec


def is_callback_start(start: Any) -> bool:
    """A start sent by ``gpuscale.keras.ScalingMonitor`` (not made up by gpuscale)."""
    cfg = start.config or {}
    return start.source == "script" and "every" in cfg


def settle_script_runs(runs: list[tuple[Any, Any, str]]) -> list[tuple[Any, Any, str]]:
    """``(summary, start, source)`` per run, in the same order; the runs of one
    script (same workload name) at two or more device counts with one global batch
    become strong scaling, and their lone CPU devices logical ones (see the module
    docstring). Other runs are returned unchanged."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (_summary, start, _source) in enumerate(runs):
        if is_callback_start(start) and start.global_batch:
            groups[start.model].append(i)
    settled = list(runs)
    for members in groups.values():
        starts = [runs[i][1] for i in members]
        if len({s.num_replicas for s in starts}) < 2:
            continue
        strong = len({s.global_batch for s in starts}) == 1
        logical = any(s.platform == "cpu-logical" for s in starts)
        for i in members:
            summary, start, source = runs[i]
            changes: dict[str, str] = {"scaling": "strong"} if strong else {}
            if logical and start.platform == "cpu":
                changes["platform"] = "cpu-logical"
            if changes:
                settled[i] = (
                    msgspec.structs.replace(summary, **changes),
                    msgspec.structs.replace(start, **changes),
                    source,
                )
    return settled
