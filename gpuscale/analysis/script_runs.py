"""Runs of one user script at several device counts, named as one workload; and
what a script's batch means, said by one function for every view.

``model.fit(batch_size=64)`` under ``MirroredStrategy`` is a *global* batch:
Keras splits it across the replicas. So a run of a script with gpuscale's
callback is strong scaling (:func:`scaling_of`), whatever its start event says
(the callback's start said weak scaling before 2026-11-23). A script that
multiplies its batch by the replicas itself is weak scaling, and only runs at
several counts can show it: :func:`settle_script_runs` rewrites such runs (one
batch per replica, a global batch that grows) to weak scaling, and calls a lone
CPU device ``cpu-logical`` as the built-in trainer does, before they become sweep
points (``recommend --from`` and ``recommend -- python train.py``). A custom loop
may say its scaling (``ScalingMonitor.start(scaling="weak")``, config
``batch_scaling_told``): then every view takes it as said.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec

from gpuscale.formatting import plural


def is_callback_start(start: Any) -> bool:
    """A start sent by ``gpuscale.keras.ScalingMonitor`` (not made up by gpuscale)."""
    cfg = getattr(start, "config", None) or {}
    return getattr(start, "source", None) == "script" and "every" in cfg


def is_callbackless_start(start: Any) -> bool:
    """The start gpuscale made up for a script without ``ScalingMonitor`` (its
    settled one, not the provisional start): no step time will come."""
    cfg = getattr(start, "config", None) or {}
    return (
        getattr(start, "source", None) == "script"
        and cfg.get("callback") is False
        and not getattr(start, "provisional", False)
    )


def count_chosen(asked: Any) -> str:
    """Who chose the provisional start's device count: its run's options (the
    trainer's ``TrainConfig`` in ``config``) leave ``devices`` and ``gpus`` at
    ``None`` where the user gave neither and the default was picked (all GPUs
    found, else :data:`gpuscale.trainer.options.DEFAULT_CPU_DEVICES` CPU logical devices)."""
    cfg = asked.config or {}
    if (
        cfg.get("devices") is not None
        or cfg.get("gpus") is not None
        or asked.strategy == "one-device"
        or "devices" not in cfg  # not the trainer's options: nothing says it was not asked
    ):
        return "as asked"
    return "all GPUs found" if asked.platform == "gpu" else "the default"


def steps_elsewhere(start: Any) -> str | None:
    """Where the steps of a worker of a multi-host run are shown instead of on its own
    screen: its script sends them to the chief (the start's ``config["events_to"]``,
    :mod:`gpuscale.live.script_run`); ``None`` for any other start."""
    chief = (getattr(start, "config", None) or {}).get("events_to")
    if not chief:
        return None
    return (
        f"This worker's steps, telemetry and output go to the chief at {chief}: its "
        "gpuscale shows them and records the whole run"
    )


def before_own_start(start: Any, gpus_sampled: int) -> str | None:
    """What is true of a run shown with gpuscale's provisional start (the script's
    first sample, a trainer's launch): telemetry flows, but no step time comes before
    the run's own start (the callback's with its first step, the trainer's once
    TensorFlow has started). ``None`` for any other start. ``gpus_sampled``: the GPUs
    whose samples came so far."""
    if not getattr(start, "provisional", False):
        return None
    seen = f"telemetry from {plural(gpus_sampled, 'GPU')}" if gpus_sampled else "telemetry only"
    if getattr(start, "source", None) == "script":
        awaited = "waiting for the script's start from gpuscale's callback"
    else:
        awaited = "waiting for the trainer's start (TensorFlow is starting)"
    return f"{seen}, no step times yet: {awaited}"


SCRIPT_BATCH_NOTE = (
    "the batch is the script's own: Keras splits it across the replicas (strong scaling); "
    "if the script multiplies it by the replicas instead (weak scaling), only runs at two "
    "or more device counts can show it, and recommend then reads them as weak"
)
"""What a ``fit`` run with the callback says about its batch (in place of the older
start's note)."""

CUSTOM_LOOP_BATCH_NOTE = (
    "the batch is the loop's own: tf.distribute splits it across the replicas (strong "
    "scaling, taken as fit's: the loop did not say; ScalingMonitor.start(scaling='weak') "
    "says it multiplies a batch per replica by the replicas)"
)
"""What a custom loop's run (the ScalingMonitor's ``start``/``step`` helper, config
``custom_loop``) says about its batch when the loop did not say its scaling."""


def script_batch_note(start_config: dict | None) -> str:
    """What a callback's run says about its batch, in the words of how the run was
    made: ``fit`` (Keras splits the batch) or a custom loop (tf.distribute does, and
    the loop may say its scaling: :func:`told_note`)."""
    cfg = start_config or {}
    if cfg.get("batch_scaling_told") and cfg.get("batch_scaling") in ("strong", "weak"):
        return told_note(cfg["batch_scaling"])
    return CUSTOM_LOOP_BATCH_NOTE if cfg.get("custom_loop") else SCRIPT_BATCH_NOTE


def told_note(scaling: str) -> str:
    """What a run says about its batch where the script said its scaling
    (``ScalingMonitor.start(scaling=...)``: a custom loop, whose batch is its own)."""
    if scaling == "weak":
        return (
            "the script said weak scaling: its global batch is the batch per replica times "
            "the replicas (ScalingMonitor.start(scaling='weak'))"
        )
    return (
        "the script said strong scaling: its global batch is split across the replicas "
        "(ScalingMonitor.start(scaling='strong'))"
    )


def scaling_told(start: Any) -> bool:
    """The script said its scaling (``start(scaling=...)``): no view overrides it."""
    return bool((getattr(start, "config", None) or {}).get("batch_scaling_told"))


def scaling_of(start: Any) -> str:
    """``strong`` or ``weak``: a callback's run is strong scaling unless runs at
    several counts showed otherwise (:func:`settle_script_runs` writes that into the
    start's config, ``batch_scaling``); any other run says its own (``start.scaling``)."""
    if is_callback_start(start):
        return (start.config or {}).get("batch_scaling", "strong")
    return start.scaling


def note_of(start: Any) -> str | None:
    """The start's note, with a callback's batch said in the words of
    :func:`scaling_of` (an older callback's start said it could not tell)."""
    if is_callback_start(start) and start.note and "cannot tell" in start.note:
        return script_batch_note(start.config)
    return start.note


def settle_script_runs(runs: list[tuple[Any, Any, str]]) -> list[tuple[Any, Any, str]]:
    """``(summary, start, source)`` per run, in the same order; the runs of one
    script (same workload name) at two or more device counts with one global batch
    are strong scaling (:func:`scaling_of`) unless the batch per replica stays the
    same while the global batch grows (weak), and their lone CPU devices become
    logical ones (see the module docstring). Other runs are returned unchanged."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (_summary, start, _source) in enumerate(runs):
        if is_callback_start(start) and start.global_batch:
            groups[start.model].append(i)
    settled = list(runs)
    for members in groups.values():
        members = [i for i in members if not scaling_told(runs[i][1])]  # the script said it
        if not members:
            continue
        starts = [runs[i][1] for i in members]
        several = len({s.num_replicas for s in starts}) >= 2
        grows = several and (
            len({s.global_batch for s in starts}) > 1
            and len({s.per_replica_batch for s in starts}) == 1
        )
        logical = several and any(s.platform == "cpu-logical" for s in starts)
        for i in members:
            summary, start, source = runs[i]
            scaling = "weak" if grows else "strong"
            changes: dict[str, str] = {"scaling": scaling}
            # a lone CPU device is a logical one of its machine; a multi-worker run's
            # workers each have their own CPU (recorded "cpu"), not carved ones
            if logical and start.platform == "cpu" and start.num_workers <= 1:
                changes["platform"] = "cpu-logical"
            if any(getattr(start, k) != v for k, v in changes.items()) or grows:
                config = {**(start.config or {}), "batch_scaling": scaling}
                settled[i] = (
                    msgspec.structs.replace(summary, **changes),
                    msgspec.structs.replace(start, config=config, **changes),
                    source,
                )
    return settled
