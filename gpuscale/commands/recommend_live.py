"""The live part of `gpuscale recommend`: a short sweep of the trainer over 1, 2,
4, ... devices, one recorded run per count with a progress bar each. The counts
share one trainer child process where they can
(:mod:`gpuscale.live.trainer_sweep`; ``--no-reuse``: a process per count);
TensorFlow never loads here."""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gpuscale.analysis.summary import RunAccumulator
from gpuscale.analysis.sweep import Sweep, SweepPoint, point_from_summary, runs_topology
from gpuscale.analysis.topology import best_subset, pair_class
from gpuscale.errors import EXIT_FAILED, GpuscaleError
from gpuscale.events.schema import EndEvent, LogEvent, StartEvent, StepEvent, SweepRef, Topology
from gpuscale.formatting import plural, visible
from gpuscale.recording.sweeps import new_sweep_id

if TYPE_CHECKING:
    from gpuscale.live.trainer_sweep import TrainerSweep
    from gpuscale.trainer.options import TrainConfig

CPU_SWEEP_MAX = 4
"""Most CPU logical devices swept by default (they share the machine's cores)."""


def _doublings(limit: int) -> list[int]:
    counts, n = [], 1
    while n <= limit:
        counts.append(n)
        n *= 2
    if counts[-1] != limit:
        counts.append(limit)
    return counts


def plan(args: argparse.Namespace) -> tuple[list[int], str, list[int] | None, int]:
    """Device counts to run, the heading, the GPU indices to draw from, and how
    many devices there are (predictions stop there unless --max-devices says)."""
    from gpuscale.telemetry.nvml import probe

    found = probe()
    gpus: list[int] | None = getattr(args, "gpus", None)
    if found.ok and found.devices:
        pool = gpus if gpus is not None else [d.index for d in found.devices]
        limit = len(pool)
        names = sorted({d.name for d in found.devices if d.index in pool})
        what = f"{limit} x {', '.join(names)}"
        heading = f"Sweep on GPUs: {what} ({found.status})"
    else:
        if gpus is not None:
            raise GpuscaleError(f"--gpus given but no GPU found ({found.status})")
        cores = os.cpu_count() or 2
        limit = max(2, min(cores, CPU_SWEEP_MAX))
        pool = None
        # what was swept; what that means for the answer (more of them add no
        # compute, the answer is not one for GPUs) is the recommendation's caveat,
        # said once, under Confidence
        heading = (
            f"Sweep on CPU logical devices sharing {cores} CPU cores, NOT GPUs ({found.status})"
        )
    if getattr(args, "devices", None):
        limit = min(limit, args.devices) if found.ok else args.devices
    if not found.ok:  # the trainer's sweep checks this with its options; a script's here
        from gpuscale.trainer.options import TrainConfig, check_cpu_devices

        check_cpu_devices(TrainConfig(devices=getattr(args, "devices", None)), args.sweep)
    counts = args.sweep or _doublings(limit)
    if found.ok and counts[-1] > len(pool or []):
        raise GpuscaleError(
            f"--sweep asks for {counts[-1]} GPUs but {len(pool or [])} are available"
        )
    heading += f"; device counts {', '.join(map(str, counts))}"
    return counts, heading, pool, max(limit, counts[-1])


def sweep_topology(pool: list[int] | None, nvml: object = None) -> Topology | None:
    """The topology to pick each count's GPUs by: ``None`` (the pool's first N)
    without GPUs, with ``CUDA_VISIBLE_DEVICES`` set (CUDA's numbering is then not
    NVML's), or when NVML reports no link between any two GPUs."""
    if not pool or os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return None
    from gpuscale.telemetry.topology import probe_topology

    topology = probe_topology(nvml)
    if topology is None or all(pair_class(p) == "unknown" for p in topology.pairs):
        return None
    return topology


def count_gpus(pool: list[int], topology: Topology | None, n: int) -> list[int]:
    """The GPUs of the pool an ``n``-device run of the sweep uses: the
    best-connected by ``topology`` (:func:`gpuscale.analysis.topology.best_subset`),
    else the pool's first ``n``."""
    return best_subset(topology, n, among=pool) if topology is not None else pool[:n]


def picked_gpus_note(pool: list[int], topology: Topology | None, counts: list[int]) -> str | None:
    """The note that says which GPUs each count takes, when the topology chose
    other than the pool's first N; ``None`` otherwise."""
    if topology is None or all(count_gpus(pool, topology, n) == pool[:n] for n in counts):
        return None
    picked = "; ".join(f"{n}: {','.join(map(str, count_gpus(pool, topology, n)))}" for n in counts)
    return f"GPUs per count, the best-connected by topology: {picked}"


def sweep_configs(
    base: TrainConfig,
    counts: list[int],
    pool: list[int] | None,
    platform: str,
    topology: Topology | None = None,
) -> tuple[list[TrainConfig], list[str]]:
    """One validated trainer configuration per device count, all made before any
    TensorFlow starts, and notes on what was adjusted.

    Every count runs the same workload: the batch (global batch for strong
    scaling, batch per replica for weak) and the mnist-cnn width the trainer picks
    for the first count (:func:`gpuscale.trainer.sizing.resolve_sizing`, no
    TensorFlow) are pinned for the others. A picked global batch that some count
    does not divide is rounded up to one every count divides; a ``--global-batch``
    given by the user is never changed: a count it does not split across is an
    error, as is anything else :func:`gpuscale.trainer.options.validate` refuses.
    With a ``topology``, each count's GPUs are the best-connected of the pool
    (:func:`gpuscale.analysis.topology.best_subset`), else the pool's first N."""
    from gpuscale.trainer.options import validate
    from gpuscale.trainer.sizing import resolve_sizing

    def gpus(n: int) -> list[int]:
        assert pool
        return count_gpus(pool, topology, n)

    def at(n: int, **pinned: object) -> TrainConfig:
        changes: dict[str, object] = {"devices": None, "gpus": gpus(n)} if pool else {"devices": n}
        return msgspec.structs.replace(base, **changes, **pinned)

    first = at(counts[0])
    sizing = resolve_sizing(first, platform, counts[0])
    notes: list[str] = []
    pinned: dict[str, object] = {}
    if sizing.width is not None and base.width is None:
        pinned["width"] = sizing.width
    if sizing.scaling == "strong":
        global_batch = sizing.per_replica_batch * counts[0]
        step = math.lcm(*counts)
        if global_batch % step:
            listed = ", ".join(map(str, counts))
            if base.global_batch is not None:
                raise GpuscaleError(
                    f"--global-batch {base.global_batch} does not split evenly across every count "
                    f"of the sweep ({listed}); give a multiple of {step} or other --sweep counts"
                )
            rounded = -(-global_batch // step) * step
            notes.append(
                f"global batch {rounded} (rounded up from {global_batch}) so that it splits "
                f"evenly across {listed} devices"
            )
            global_batch = rounded
            first = at(counts[0], global_batch=global_batch, **pinned)
        pinned["global_batch"] = global_batch
    else:
        pinned["batch_per_replica"] = sizing.per_replica_batch
    # The first count pinned too, to what it would pick itself: every count's
    # configuration then differs only in its devices, and can share a process.
    # What was picked automatically is said once, for the sweep.
    configs = [at(n, **pinned) for n in counts]
    if sizing.note and configs[0] != first:
        notes.insert(0, sizing.note)
    picked = picked_gpus_note(pool, topology, counts) if pool else None
    if picked:
        notes.append(picked)
    for n, config in zip(counts, configs, strict=True):
        try:
            validate(config)
        except GpuscaleError as exc:
            raise GpuscaleError(f"the {n}-device run of the sweep: {exc}") from None
    return configs, notes


def run_sweep(args: argparse.Namespace, *, quiet: bool = False) -> tuple[Sweep, str]:
    """Run the trainer at each count of the plan; the measured points as a Sweep.
    ``quiet``: no progress on stderr (its heading and each count's line); what was
    adjusted and where the sweep is recorded are said all the same."""
    from gpuscale.commands.console import text_console
    from gpuscale.live.trainer_run import LiveRun
    from gpuscale.trainer.options import config_from_args
    from gpuscale.trainer.preflight import check_config

    counts, heading, pool, available = plan(args)
    base = config_from_args(args)
    check_config(msgspec.structs.replace(base, gpus=pool))  # the model module; nccl without GPUs
    configs, notes = sweep_configs(
        base, counts, pool, "gpu" if pool else "cpu-logical", sweep_topology(pool)
    )
    sweep_id = new_sweep_id()
    sweep_refs = {
        n: SweepRef(id=sweep_id, index=i, planned=counts, available_devices=available)
        for i, n in enumerate(counts)
    }
    console = text_console(stderr=True, highlight=False)
    record = None if args.no_record else "default"
    shared = shared_process(configs, record, no_reuse=getattr(args, "no_reuse", False))
    if shared is not None:
        shared.stamp(sweep_id, available)
    where = (
        f"one TensorFlow process for counts {', '.join(map(str, counts))}"
        if shared is not None
        else "a TensorFlow process each"
    )
    heading += f"; {where}"
    if not quiet:
        console.print(
            f"Running the trainer on {plural(counts, 'device')}, one run each, in {where}:",
            style="bold",
            markup=False,
        )
    for note in notes:  # with --json too: what was adjusted is no progress
        console.print(f"gpuscale: {note}", style="yellow", markup=False)
    points: list[SweepPoint] = []
    sources: list[str] = []
    starts: list[StartEvent] = []  # each measured count's: the machine's topology
    sweep_start = time.perf_counter()
    stopped_by: str | None = None
    cut_short: tuple[int, int] | None = None  # the count stopped, with steps counted
    failed: tuple[int, str] | None = None  # the count that failed after others, and why
    try:
        for i, (n, config) in enumerate(zip(counts, configs, strict=True)):
            if shared is not None:
                run = shared.runs[i]
            else:
                run = LiveRun(config, record=record)
                run.sweep_ref = sweep_refs[n]  # set before the run starts: every start carries it
            acc = RunAccumulator()
            starting = "starting TensorFlow" if i == 0 or shared is None else "building the model"
            try:
                run.start()
                _follow(run, acc, n, config.steps, console, quiet, starting)
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (gpuscale.cli)
                ignore_stop_signals()  # a second one must not cut the stop short
                stopped_by = exc.args[0] if exc.args else "Ctrl-C"
                console.print(
                    f"gpuscale: stopping the {n}-device run ({stopped_by})...",
                    markup=False,
                )
            finally:
                if not run.done:
                    run.stop()
            unrecorded = f"live run on {n} device{'s' if n > 1 else ''} (not recorded)"
            if stopped_by is not None:
                kept = kept_when_stopped(run, acc, n, unrecorded)
                if kept is not None:
                    summary, start, source = kept
                    points.append(point_from_summary(summary, start, source))
                    sources.append(source)
                    starts.append(start)
                    cut_short = (n, summary.steps_counted)
                break
            summary = acc.summary() if acc.start is not None else None
            if run.error is not None or summary is None or summary.step_time_s is None:
                message = (
                    run.error.message if run.error is not None else "the run ended without steps"
                )
                if not points:  # no report to name the sweep: the line names the run's file
                    raise GpuscaleError(
                        f"the {n}-device run failed: {message}{recorded_in(run.recording_path)}",
                        exit_code=EXIT_FAILED,
                    )
                # said after the report from the counts measured before it (exit 1)
                failed = (n, f"the {n}-device run failed: {message}")
                break
            source = source_of(run, unrecorded)
            points.append(point_from_summary(summary, acc.start, source))
            sources.append(source)
            starts.append(acc.start)
    finally:
        if shared is not None:
            shared.close()
    wall_s = time.perf_counter() - sweep_start  # said with the result (stdout, --json)
    if stopped_by is not None:
        say_stopped_sweep(console, sweep_id if not args.no_record else None, bool(points))
        if not points:
            raise KeyboardInterrupt(stopped_by)  # nothing measured: "gpuscale: interrupted"
    elif not args.no_record:
        say_sweep_recorded(console, sweep_id)
    sweep = Sweep(
        points=points,
        sources=sources,
        available_devices=available,
        wall_s=wall_s,
        name=None if args.no_record else sweep_id,
        topology=runs_topology(starts),
    )
    if stopped_by is not None:
        raise SweepInterrupted(
            sweep, stopped_heading(heading, stopped_by, points, cut_short), stopped_by
        )
    if failed is not None:
        n, message = failed
        raise SweepFailed(sweep, failed_heading(heading, n, points), message, EXIT_FAILED)
    return sweep, heading


def source_of(run, unrecorded: str) -> str:
    """What a sweep's run is named by in the result: its recording, else ``unrecorded``."""
    return str(run.recording_path) if run.recording_path else unrecorded


def recorded_in(path: str | Path | None) -> str:
    """`` (recorded in PATH)`` where a count's run left its recording at ``path``, else
    nothing: said by a sweep whose first count failed (no report names its sweep, as
    later ones do)."""
    return f" (recorded in {visible(str(path))})" if path and Path(path).exists() else ""


def kept_when_stopped(run, acc: RunAccumulator, n: int, unrecorded: str):
    """What a count stopped by Ctrl-C (SIGTERM, SIGHUP) keeps, for the live and the
    script sweep alike: ``(summary, start, source)`` of its events up to the stop,
    added to ``acc`` first (the run is over: what is queued is all of it), when it
    counted steps on its ``n`` devices (as its recording has them, and ``recommend
    --from`` reads them); ``None`` when it failed, stopped before its first counted
    step, or trained on another number of replicas (a script that picks its own
    devices). ``source``: :func:`source_of` with ``unrecorded``."""
    for event in run.drain():
        acc.add(event)
    if run.error is not None or acc.start is None:
        return None
    summary = acc.summary()
    if summary.step_time_s is None or summary.devices != n:
        return None
    return summary, acc.start, source_of(run, unrecorded)


def stopped_heading(
    heading: str, stopped_by: str, points: list[SweepPoint], cut_short: tuple[int, int] | None
) -> str:
    """The heading of a sweep stopped after ``points``: which count was cut short
    and what of it is kept."""
    measured = plural([p.devices for p in points], "device")
    if cut_short is None:
        return f"{heading}; stopped ({stopped_by}) after {measured}: recommending from those"
    n, counted = cut_short
    return (
        f"{heading}; stopped ({stopped_by}) during the {n}-device run, kept with the "
        f"{plural(counted, 'step')} it counted: recommending from {measured}"
    )


def say_stopped_sweep(console, sweep_id: str | None, measured: bool) -> None:
    """Where a stopped sweep's recordings are, said even with ``--json`` (on
    stderr): what it measured is read again by its name."""
    if sweep_id is None:
        return
    if measured:
        say_sweep_recorded(console, sweep_id)
    else:
        console.print(
            f"Recorded as {sweep_id} ('gpuscale replay {sweep_id}' shows it): no step was "
            "counted before the stop, so there is nothing to recommend from.",
            markup=False,
        )


def failed_heading(heading: str, n: int, points: list[SweepPoint]) -> str:
    """The heading of a sweep whose ``n``-device run failed after ``points`` were
    measured: which count failed and what the report rests on (why it failed is
    the error line said after the report)."""
    measured = plural([p.devices for p in points], "device")
    return f"{heading}; the {n}-device run failed: recommending from {measured}"


class SweepFailed(Exception):
    """A live sweep whose count failed after others were measured: what was
    measured and the heading for the report printed first, then ``message`` (one
    line: the count and why it failed) and exit ``exit_code``: 1 for the built-in
    trainer (a trainer that fails), the script's own status for a script's sweep
    (:func:`gpuscale.commands.run.script_status`)."""

    def __init__(self, sweep: Sweep, heading: str, message: str, exit_code: int):
        super().__init__(message)
        self.sweep = sweep
        self.heading = heading
        self.message = message
        self.exit_code = exit_code


class SweepInterrupted(KeyboardInterrupt):
    """A live sweep stopped by Ctrl-C (or SIGTERM, SIGHUP) after at least one count
    was measured: what was measured, for the report printed before exit 130."""

    def __init__(self, sweep: Sweep, heading: str, signal_name: str):
        super().__init__(signal_name)
        self.sweep = sweep
        self.heading = heading
        self.signal_name = signal_name


def ignore_stop_signals() -> None:
    """From now on SIGINT, SIGTERM and SIGHUP are ignored: gpuscale is stopping
    its trainer and then prints what ran (a second Ctrl-C must not cut that short)."""
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            try:
                signal.signal(getattr(signal, name), signal.SIG_IGN)
            except (ValueError, OSError):  # not the main thread
                pass


def shared_process(
    configs: list[TrainConfig], record: str | None, *, no_reuse: bool = False
) -> TrainerSweep | None:
    """A :class:`~gpuscale.live.trainer_sweep.TrainerSweep` running every count in
    one trainer process, or ``None`` for a process per count (``--no-reuse``, or
    runs that cannot share one: see
    :func:`gpuscale.trainer.options.shared_process_refusal`)."""
    from gpuscale.live.trainer_sweep import TrainerSweep
    from gpuscale.trainer.options import shared_process_refusal

    if no_reuse or shared_process_refusal(configs) is not None:
        return None
    return TrainerSweep(configs, record=record)


def say_sweep_recorded(console, sweep_id: str) -> None:
    """Where the sweep's recordings are found again, as one thing, on stderr (with
    ``--json`` too, whose document also names the sweep)."""
    console.print(
        f"Recorded as {sweep_id}: 'gpuscale replay {sweep_id}' shows it again, "
        f"'gpuscale recommend --from {sweep_id}' re-judges it.",
        markup=False,
    )


def counted_median(acc: RunAccumulator) -> float | None:
    """The median counted step of the run so far (what the count's row will show),
    ``None`` before its start or its first counted step."""
    return acc.summary().step_time_s if acc.start is not None else None


def _follow(
    run, acc: RunAccumulator, n: int, steps: int, console, quiet: bool, starting: str
) -> None:
    from gpuscale.commands.count_progress import CountProgress, median_words, step_words

    with CountProgress(console, n, total=steps, status=starting, quiet=quiet) as progress:
        for event in run.events(timeout=None):
            acc.add(event)
            if isinstance(event, StepEvent):
                progress.step(event.step + 1, step_words(event.step_time_s, event.warmup))
            elif isinstance(event, EndEvent):  # the median step, as the table says it
                progress.finish(event.status, median_words(counted_median(acc)))
            elif isinstance(event, LogEvent) and event.source == "precision":
                # --precision out of reach at this budget: said as soon as the trainer knows
                # (with --json too: a warning, not progress)
                progress.say(
                    f"gpuscale: {n} device{'s' if n > 1 else ''}: {visible(event.message)}",
                    style="yellow",
                )
