"""`gpuscale recommend -- python train.py`: the live sweep for the user's own script.

Like the built-in trainer's sweep (:mod:`gpuscale.commands.recommend_live`), over
the same device counts (1, 2, 4, ... up to the GPUs, or CPU logical devices; or
``--sweep``), one run each, recorded. Each run is a
:class:`~gpuscale.live.script_run.ScriptRun` whose script gets its devices from
``GPUSCALE_DEVICES`` (see :mod:`gpuscale.live.devices`), so the script needs
``ScalingMonitor`` in its ``fit`` and ``tf.distribute.MirroredStrategy()`` (no
device list). TensorFlow never loads here.

The script's batch is its own. When it is the same global batch at every count
(``model.fit(batch_size=64)`` under MirroredStrategy splits it across the
replicas) the sweep is strong scaling; when the batch per replica stays the
same, weak scaling. Anything else is refused as a mix of workloads later.

A count whose script fails ends the sweep there, and gpuscale exits with the
script's own status as ``run`` passes it through (:func:`script_status`): the
first count's failure is one line; a later one's
(:class:`~gpuscale.commands.recommend_live.SweepFailed`: the count, the script,
its status, its last stderr line) comes after the report from the counts
measured before it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import time

from gpuscale.analysis.script_runs import settle_script_runs
from gpuscale.analysis.summary import RunAccumulator, RunSummary
from gpuscale.analysis.sweep import Sweep, point_from_summary, runs_topology
from gpuscale.commands.run import script_status
from gpuscale.errors import EXIT_FAILED, GpuscaleError
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent, SweepRef
from gpuscale.formatting import plural, step_of
from gpuscale.live.base import passed_on_note
from gpuscale.recording.sweeps import new_sweep_id


def run_script_sweep(
    args: argparse.Namespace, command: list[str], *, quiet: bool = False
) -> tuple[Sweep, str]:
    """Run ``command`` at each device count of the plan; the measured points as a
    Sweep. ``quiet``: no progress on stderr, as :func:`~gpuscale.commands.recommend_live.run_sweep`."""
    from gpuscale.commands.console import text_console
    from gpuscale.commands.recommend_live import (
        SweepFailed,
        SweepInterrupted,
        failed_heading,
        ignore_stop_signals,
        kept_when_stopped,
        picked_gpus_note,
        plan,
        recorded_in,
        say_stopped_sweep,
        say_sweep_recorded,
        source_of,
        stopped_heading,
        sweep_topology,
    )
    from gpuscale.live.child import cannot_start
    from gpuscale.live.script_run import ScriptRun
    from gpuscale.live.script_sweep import NO_STEPS, wrong_devices

    why = cannot_start(command)
    if why is not None:  # one line, before the sweep's banner (as `run -- ...` says it)
        raise GpuscaleError(f"cannot start {shlex.join(command)}: {why}")
    counts, heading, pool, available = plan(args)
    topology = sweep_topology(pool)
    console = text_console(stderr=True, highlight=False)
    if not quiet:
        console.print(
            f"Running {shlex.join(command)} on {plural(counts, 'device')}, one run each:",
            style="bold",
            markup=False,
        )
    picked = picked_gpus_note(pool, topology, counts) if pool else None
    if picked:  # with --json too: no progress, but which GPUs each count took
        console.print(f"gpuscale: {picked}", style="yellow", markup=False)
    runs: list[tuple[RunSummary, StartEvent, str]] = []
    sweep_id = new_sweep_id()
    began = time.perf_counter()
    stopped_by: str | None = None
    cut_short: tuple[int, int] | None = None  # the count stopped, with steps counted
    failed: tuple[int, str, int] | None = None  # the count that failed, why, its status
    for index, (n, env) in enumerate(zip(counts, count_envs(pool, topology, counts), strict=True)):
        run = ScriptRun(command, record=None if args.no_record else "default", env=env)
        run.sweep_ref = SweepRef(
            id=sweep_id, index=index, planned=counts, available_devices=available
        )
        acc = RunAccumulator()
        try:
            run.start()
            _follow(run, acc, n, console, quiet)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (gpuscale.cli)
            ignore_stop_signals()  # a second one must not cut the stop short
            stopped_by = exc.args[0] if exc.args else "Ctrl-C"
            # Ctrl-C reaches the script as Ctrl-C (its own `except KeyboardInterrupt`
            # runs), as under `gpuscale run`; SIGTERM, SIGHUP stop it at once
            how = passed_on_note(run, by_hand=not exc.args)
            console.print(
                f"gpuscale: stopping the {n}-device run ({stopped_by}){how}...", markup=False
            )
            if not exc.args:
                run.interrupt()
        finally:
            if not run.done:
                run.stop()
        unrecorded = f"{n}-device run (not recorded)"
        if stopped_by is not None:
            kept = kept_when_stopped(run, acc, n, unrecorded)  # what the count cut short counted
            if kept is not None:
                runs.append(kept)
                cut_short = (n, kept[0].steps_counted)
            break
        summary = acc.summary() if acc.start is not None else None
        if run.error is not None or summary is None or summary.step_time_s is None:
            message = run.error.message if run.error is not None else NO_STEPS
            # the script's own status, passed through as `run` does; said after the
            # report from the counts measured before it, where there are some
            status = script_status(getattr(run, "returncode", None) if run.error else None)
            if not runs:  # no report to name the sweep: the line names the run's file
                raise GpuscaleError(
                    f"the {n}-device run failed: {message}{recorded_in(run.recording_path)}",
                    exit_code=status,
                )
            failed = (n, f"the {n}-device run failed: {message}", status)
            break
        wrong = wrong_devices(n, summary.devices)
        if wrong is not None:
            raise GpuscaleError(wrong, exit_code=EXIT_FAILED)
        runs.append((summary, acc.start, source_of(run, unrecorded)))
    if stopped_by is not None:
        say_stopped_sweep(console, sweep_id if not args.no_record else None, bool(runs))
        if not runs:
            raise KeyboardInterrupt(stopped_by)  # nothing measured: "gpuscale: interrupted"
    elif not args.no_record:
        say_sweep_recorded(console, sweep_id)
    points = [point_from_summary(s, start, src) for s, start, src in settle_script_runs(runs)]
    sweep = Sweep(
        points=points,
        sources=[r[2] for r in runs],
        available_devices=available,
        wall_s=time.perf_counter() - began,
        name=None if args.no_record else sweep_id,
        topology=runs_topology(r[1] for r in runs),
    )
    if stopped_by is not None:
        heading = stopped_heading(heading, stopped_by, points, cut_short)
        raise SweepInterrupted(sweep, heading, stopped_by)
    if failed is not None:
        n, message, status = failed
        raise SweepFailed(sweep, failed_heading(heading, n, points), message, status)
    return sweep, heading


def count_envs(pool: list[int] | None, topology, counts: list[int]) -> list[dict[str, str]]:
    """Each count's environment for the script: its devices in ``GPUSCALE_DEVICES``
    (:mod:`gpuscale.live.devices`), the GPUs picked by topology where there are GPUs."""
    from gpuscale.commands.recommend_live import count_gpus
    from gpuscale.live.devices import device_env

    return [
        {
            **os.environ,
            **(device_env(None, count_gpus(pool, topology, n)) if pool else device_env(n, None)),
        }
        for n in counts
    ]


def _follow(run, acc: RunAccumulator, n: int, console, quiet: bool) -> None:
    from gpuscale.commands.count_progress import CountProgress, median_words, step_words
    from gpuscale.commands.recommend_live import counted_median

    last = None  # the latest step, counted from 1
    with CountProgress(console, n, status="starting the script", quiet=quiet) as progress:
        for event in run.events(timeout=None):
            acc.add(event)
            if isinstance(event, StepEvent):
                last = event.step + 1
                what = step_words(event.step_time_s, event.warmup)
                progress.step(last, f"step {step_of(last, event.total_steps)}, {what}")
            elif isinstance(event, EndEvent):  # the median step, as the table says it
                median = median_words(counted_median(acc))
                progress.finish(event.status, median and f"step {last}, {median}")
