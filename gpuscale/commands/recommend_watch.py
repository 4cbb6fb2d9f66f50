"""`gpuscale recommend --watch`: the live sweep inside the scaling view, then the
usual recommendation printed in the terminal. The sweep is planned and every
count's configuration checked (:mod:`gpuscale.commands.recommend_live`) before the
screen opens; ``q`` or Ctrl-C stops it cleanly and the recommendation is made
from the counts measured, saying so."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from gpuscale.analysis.sweep import Sweep
from gpuscale.errors import EXIT_FAILED, EXIT_INTERRUPTED, GpuscaleError
from gpuscale.formatting import join_clauses, plural


def watch_sweep(
    args: argparse.Namespace, floor: float, command: list[str] | None = None
) -> tuple[Sweep | None, str, str | None]:
    """Run the sweep on screen: the built-in trainer's, or ``command``'s (the user's
    script, ``recommend --watch -- python train.py``: one run of it per count, as
    :func:`~gpuscale.commands.recommend_script.run_script_sweep` runs it). Returns
    the measured sweep, the heading for the printed report, and the name of the
    signal that stopped it (or None); the sweep is None where ``q`` stopped it
    before a count was measured, the heading then the note to say
    (:func:`nothing_measured`). A count that failed after others were measured
    raises :class:`~gpuscale.commands.recommend_live.SweepFailed` (the report, then
    its line, exit 1 or the script's own status, however the screen was closed)."""
    if command:
        runner, heading, notes, shared, available = _script_runner(args, command, floor)
    else:
        runner, heading, notes, shared, available = _trainer_runner(args, floor)
    return _watch(args, runner, heading, notes, shared, available)


def _trainer_runner(args: argparse.Namespace, floor: float) -> tuple[Any, str, list[str], Any, int]:
    """The built-in trainer's counts: their runner (whose ``view`` the screen
    shows), the heading, its notes, the one trainer process they share (or
    ``None``) and how many devices there are."""
    import msgspec

    from gpuscale.commands.recommend_live import plan, shared_process, sweep_configs
    from gpuscale.trainer.options import config_from_args
    from gpuscale.trainer.preflight import check_config
    from gpuscale.ui.live_sweep import LiveSweep

    counts, heading, pool, available = plan(args)
    base = config_from_args(args)
    check_config(msgspec.structs.replace(base, gpus=pool))  # the model module; nccl without GPUs
    configs, notes = sweep_configs(base, counts, pool, "gpu" if pool else "cpu-logical")
    shared = shared_process(
        configs, None if args.no_record else "default", no_reuse=getattr(args, "no_reuse", False)
    )
    if shared is not None:
        heading += f"; one TensorFlow process for counts {', '.join(map(str, counts))}"
    view = _empty_view(args, heading, counts, available, floor)
    if shared is not None:  # the counts in one trainer process, each its own run
        runner = LiveSweep(
            view,
            configs,
            record=not args.no_record,
            run_factory=shared.factory(),
            one_process=True,
        )
        shared.stamp(runner.sweep_id, available)
    else:
        runner = LiveSweep(view, configs, record=not args.no_record)
    return runner, heading, notes, shared, available


def _empty_view(
    args: argparse.Namespace, heading: str, counts: list[int], available: int, floor: float
) -> Any:
    """The scaling view before its first count: what is planned, nothing measured."""
    from gpuscale.ui.sweep_app import SweepView

    return SweepView(
        points=[],
        heading=heading,
        planned=counts,
        state="running",
        available_devices=available,
        min_efficiency=floor,
        max_devices=args.max_devices,
    )


def _script_runner(
    args: argparse.Namespace, command: list[str], floor: float
) -> tuple[Any, str, list[str], Any, int]:
    """The user's script's counts, as :func:`_trainer_runner` returns the trainer's
    (no shared process: each count is its own run of the script)."""
    from gpuscale.commands.recommend_live import picked_gpus_note, plan, sweep_topology
    from gpuscale.commands.recommend_script import count_envs
    from gpuscale.live.child import cannot_start
    from gpuscale.live.script_sweep import ScriptCounts
    from gpuscale.ui.live_sweep import LiveSweep

    why = cannot_start(command)
    if why is not None:  # one line, before the screen opens (as `run -- ...` says it)
        raise GpuscaleError(f"cannot start {shlex.join(command)}: {why}")
    counts, heading, pool, available = plan(args)
    topology = sweep_topology(pool)
    picked = picked_gpus_note(pool, topology, counts) if pool else None
    heading += f"; {shlex.join(command)}, one run per count"
    view = _empty_view(args, heading, counts, available, floor)
    runner = LiveSweep(
        view,
        count_envs(pool, topology, counts),
        record=not args.no_record,
        script=ScriptCounts(command),
    )
    return runner, heading, [picked] if picked else [], None, available


def _watch(
    args: argparse.Namespace,
    runner: Any,
    heading: str,
    notes: list[str],
    shared: Any,
    available: int,
) -> tuple[Sweep | None, str, str | None]:
    """:func:`watch_sweep` once its runner is made: the screen, then what it measured."""
    from gpuscale.commands.recommend_live import SweepFailed
    from gpuscale.ui.app import run_until_stop_signal
    from gpuscale.ui.sweep_app import SweepApp

    view = runner.view
    app = SweepApp(view, runner=runner)
    app.source = _SweepStop(runner, shared)  # type: ignore[attr-defined]
    began = time.perf_counter()
    try:
        signal_name = run_until_stop_signal(app)
    finally:
        if shared is not None:
            with _stop_signals_ignored():  # a second Ctrl-C must not cut the stop short
                shared.close()  # a count the view never reached is not left running
    final = runner.view
    status = EXIT_FAILED
    if runner.script is not None and runner.failed_returncode is not None:
        from gpuscale.commands.run import script_status

        status = script_status(runner.failed_returncode)  # passed through, as `run` does
    if not final.points:  # q: the note, exit 0; else an error (exit 1, or 130 on a signal)
        said = nothing_measured(
            runner.failure,
            signal_name,
            runner.cut_short,
            runner.cut_short_recording,
            failed_recording=runner.failed_recording,
            failed_status=status,
        )
        return None, said, signal_name
    state = final.state_line()
    if runner.failure:  # why is the error line said after the report
        what = (
            f"the {runner.failed_devices}-device run"
            if runner.failed_devices is not None
            else "the sweep"
        )
        measured = plural(final.measured_counts, "device")
        state = f"{what} failed: recommending from what was measured ({measured})"
    recorded = None if args.no_record else f"recorded as {runner.sweep_id}"
    if recorded is not None:  # the heading says it on stdout only
        from gpuscale.commands.stdout_fallback import say_if_stdout_fails

        say_if_stdout_fails(f"the sweep is {recorded}")
    heading = _heading(heading, notes, state, recorded)
    sweep = Sweep(
        points=final.points,
        sources=final.sources,
        available_devices=available,
        wall_s=time.perf_counter() - began,
        topology=final.topology,
    )
    if runner.failure:  # the report from the counts measured, then the failure: exit 1
        raise SweepFailed(sweep, heading, runner.failure, status)
    return sweep, heading, signal_name


def _heading(heading: str | None, notes: list[str], state: str | None, recorded: str | None) -> str:
    """What was swept and its notes on one line; where the sweep did not complete,
    what the recommendation rests on (and where it is recorded) on a line of its
    own, a sentence: never ``...for the original; Sweep stopped after ...``."""
    if not state:
        return join_clauses((heading, *notes, recorded))
    rests = join_clauses((state, recorded))
    rests = rests[:1].upper() + rests[1:] + "."
    return "\n".join(p for p in (join_clauses((heading, *notes)), rests) if p)


def nothing_measured(
    failure: str | None,
    signal_name: str | None,
    cut_short: str | None = None,
    recording: str | None = None,
    *,
    failed_recording: str | None = None,
    failed_status: int = EXIT_FAILED,
) -> str:
    """What ends a ``--watch`` sweep that measured no count (a count cut short after
    counting steps is measured: :attr:`gpuscale.ui.live_sweep.LiveSweep.kept_cut_short`).
    ``q`` (no failure, no
    signal) is the user quitting: the sentence returned is said as a note, exit 0.
    ``failure``: a whole clause (``the 1-device run failed: ...``, ``the sweep failed:
    ...``), said as it is.
    A failed count is an error (exit 1); Ctrl-C or another stop signal, exit 130.
    ``cut_short``: the count the stop cut short and how far it got
    (:attr:`gpuscale.ui.live_sweep.LiveSweep.cut_short`), ``recording`` its file;
    ``failed_recording``: the file of the count that failed, ``failed_status`` the
    exit status it ends gpuscale with (a script's own, passed through)."""
    if failure:
        from gpuscale.commands.recommend_live import recorded_in

        # no report names the sweep: the line names the run's file
        why = failure + recorded_in(failed_recording)
    elif cut_short:
        why = f"the sweep stopped during {cut_short}: no step was counted, so nothing to judge"
        if recording:
            why += f"; recorded to {recording}"
    else:
        why = "the sweep stopped before its first count began: nothing ran"
    message = f"no recommendation: {why}"
    if failure is None and signal_name is None:
        return message
    raise GpuscaleError(message, exit_code=EXIT_INTERRUPTED if failure is None else failed_status)


@contextlib.contextmanager
def _stop_signals_ignored() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored inside (the main thread only): the
    screen is gone and its handlers with it, and a signal raised as
    KeyboardInterrupt there would end gpuscale with the count in progress
    unrecorded. What runs inside is bounded (a run stops within seconds)."""
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and threading.current_thread() is threading.main_thread():
            previous[signum] = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _SweepStop:
    """The sweep as :func:`gpuscale.ui.app.run_until_stop_signal` stops a live source
    on SIGINT, SIGTERM or SIGHUP: from its own thread, whatever the screen does.
    ``stop`` returns once the count in progress has stopped (its recording ended
    ``stopped``) and no other will begin; only then may a second signal end the
    process (``run.wait``: nothing more to wait for), so the counts measured are
    kept and the report printed."""

    def __init__(self, runner: Any, shared: Any) -> None:
        self.runner = runner
        self.shared = shared
        self.run = self

    def stop(self) -> None:
        self.runner.stop()  # the run in progress, at once; no other begins
        self._close_shared()

    @property
    def interrupt_grace_s(self) -> float:
        """How long :meth:`interrupt` may wait for a script after its Ctrl-C."""
        return self.runner.interrupt_grace_s

    def interrupt(self) -> None:
        """SIGINT (by hand): as :meth:`stop`, but a script in progress gets Ctrl-C
        first (:meth:`gpuscale.ui.live_sweep.LiveSweep.interrupt`)."""
        self.runner.interrupt()
        self._close_shared()

    def _close_shared(self) -> None:
        if self.shared is not None:
            self.shared.close()  # between two counts too: the process ends its count

    def wait(self, timeout: float | None = None) -> bool:
        return True  # stop() returned: the sweep's runs are over
