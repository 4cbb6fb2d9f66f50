"""``gpuscale run``: a headless training run with a progress bar and a summary.

The trainer runs in a child process (TensorFlow is never imported here); its
events are recorded (unless ``--no-record``) and summarised at the end.
``--json`` prints only the summary, as JSON, on stdout.
Exit status: 0 completed, 1 the trainer failed, 2 bad options, 130 interrupted
(Ctrl-C, or SIGTERM/SIGHUP: the trainer is stopped and the recording ends the same way;
Ctrl-C reaches your script as Ctrl-C first, :meth:`~gpuscale.live.script_run.ScriptRun.interrupt`)
or stopped without gpuscale (a worker, or the trainer, killed on its own: the run
ends ``stopped`` all the same), or stopped by the script itself (its custom loop's
``close("stopped")``, say from its own SIGTERM handler, then exit 0: 130 too, with a
line that says so; a stopped run must not look completed to a shell). Your script
(``-- COMMAND``) that fails passes its own status through, as ``time`` and
``nohup`` do (:func:`failed_status`): ``sys.exit(3)`` exits 3, a script killed by a
signal 128 + its number; a status of 2 is then the script's, said by the error
line after the summary, not gpuscale's bad input (refused before anything runs).
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from gpuscale.analysis.gpu_activity import (
    busy_not_working,
    gpu_activity_text,
    held_down_text,
    imbalance_text,
)
from gpuscale.analysis.phase_report import (
    input_in_apply_note,
    parts_note,
    phase_items,
    phases_heading,
    precision_text,
    probes_text,
    throughput_text,
    wall_clock_text,
)
from gpuscale.analysis.script_runs import count_chosen, note_of, scaling_of
from gpuscale.analysis.summary import RunSummary
from gpuscale.commands.paths import path_arg
from gpuscale.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from gpuscale.events.schema import ErrorEvent, Event, LogEvent, StartEvent, StepEvent
from gpuscale.formatting import (
    exchange_words,
    format_bytes,
    format_duration_s,
    format_samples_s,
    plural,
    strategy_words,
    visible,
)
from gpuscale.live.base import passed_on_note
from gpuscale.live.terminal import settle_visible
from gpuscale.trainer.options import add_trainer_arguments, config_from_args
from gpuscale.ui.model import MAX_DISPLAY_LINE


def register(sub) -> None:
    parser = sub.add_parser(
        "run",
        help="train a model on N devices in a background process and summarise where the step time goes",
        description="Train a model data-parallel on N devices (GPUs, or logical CPU devices without "
        "a GPU) in a background process; show live step time and throughput, then a summary: "
        "step time, throughput, and the split into compute, exposed all-reduce, optimizer "
        "apply and input wait.",
    )
    add_trainer_arguments(parser)
    from gpuscale.live.script_run import add_script_arguments  # no TensorFlow

    add_script_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print only the summary, as JSON")
    rec = out.add_mutually_exclusive_group()
    rec.add_argument(
        "--record",
        type=path_arg,
        metavar="PATH",
        help="record the run's events to PATH (default: the runs folder)",
    )
    rec.add_argument("--no-record", action="store_true", help="do not record the run")
    add_sample_interval_argument(parser)
    parser.set_defaults(func=main)


def add_sample_interval_argument(parser: argparse.ArgumentParser) -> None:
    """``--sample-interval S`` (run, watch): seconds between telemetry samples."""
    from gpuscale.telemetry.sampler import INTERVAL_HELP

    parser.add_argument(
        "--sample-interval", type=float, default=0.5, metavar="S", help=INTERVAL_HELP
    )


def check_sample_interval(args: argparse.Namespace) -> None:
    """Refuse a ``--sample-interval`` outside what the sampler takes, in one line."""
    from gpuscale.errors import GpuscaleError
    from gpuscale.telemetry.sampler import validate_interval

    if "sample_interval" not in args:  # a caller without the option
        return
    try:
        validate_interval(args.sample_interval)
    except GpuscaleError as exc:
        raise GpuscaleError(f"--sample-interval: {exc}") from None


def check_record_path(path: Path | None) -> None:
    """Refuse a ``--record`` path that is a folder, an existing file (a
    recording is never overwritten) or in a folder that does not exist (a typo
    would otherwise make it), in one line that says what to give."""
    if path is None:
        return
    from gpuscale.errors import GpuscaleError

    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise GpuscaleError(f"--record {path}: {parent} is a file, not a folder")
    if not parent.is_dir():
        raise GpuscaleError(
            f"--record {path}: the folder {parent} does not exist; create it first, or leave "
            "out --record to record to the runs folder"
        )
    if not path.exists():
        return
    if path.is_dir():  # a file is what is written: say where one could go
        raise GpuscaleError(
            f"--record {path}: is a folder; give a file path, e.g. "
            f"{path / 'run.ndjson'} (without --record: the runs folder)"
        )
    raise GpuscaleError(f"--record {path}: the file exists; give a new path")


def main(args: argparse.Namespace) -> int:
    from gpuscale.live.trainer_run import LiveRun
    from gpuscale.trainer.preflight import check_config

    check_sample_interval(args)

    config = config_from_args(args)
    record: Any = None if args.no_record else (args.record or "default")
    check_record_path(args.record)
    from gpuscale.live.script_run import script_run_from_args, split_command, wants_script_run

    steps: int | None = config.steps
    # run samples at the default; watch off a terminal comes here with its own
    sampling = {"sample_interval_s": args.sample_interval} if "sample_interval" in args else {}
    if wants_script_run(args):  # your own script (-- COMMAND) or several workers
        # no samples shown here: the script's start is printed once, not a provisional one first
        run = script_run_from_args(args, record, early_telemetry=False, **sampling)
        steps = None if split_command(args.command) else config.steps
    else:
        from gpuscale.commands.gpu_choice import with_best_gpus

        check_config(config)  # what the trainer would find only after loading TensorFlow
        run = LiveRun(with_best_gpus(config), record=record, **sampling)
    interrupted = False
    view = _JsonView() if args.json else _ProgressView(steps)
    try:
        run.start()
        with view:
            events = run.events(timeout=None)
            if not args.json and split_command(args.command):  # its output waits for its start
                events = events_saying_the_wait(run, lambda: view.say(held_output_note(run)))
            for event in events:
                view.on_event(event)
    except KeyboardInterrupt as exc:
        interrupted = True
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):  # a second one must not cut the stop short
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_IGN)
        # Ctrl-C (a KeyboardInterrupt without a signal's name) is passed on to a script as
        # Ctrl-C: its own `except KeyboardInterrupt` runs; SIGTERM, SIGHUP stop it as before
        by_hand = not exc.args
        if not args.json:
            why = exc.args[0] if exc.args else "Ctrl-C"
            what = stopped_program(args)
            how = passed_on_note(run, by_hand)
            print(f"gpuscale: stopping the {what} ({why}){how}...", file=sys.stderr)
        if by_hand:
            run.interrupt()
        else:
            run.stop()
        for event in run.drain():
            view.on_event(event, live=False)
    finally:
        if not run.done:
            run.stop()
    say_recording_if_stdout_fails(run)  # named on stdout only, below
    end = run.end
    if args.json:
        import json

        from gpuscale.analysis.summary import with_defaults

        # every field said, defaults included: `"scaling": "weak"` as well as "strong"
        summary = with_defaults(end.summary) if end and end.summary else {}
        summary["recording"] = str(run.recording_path) if run.recording_path else None
        summary["note"] = run.start_event.note if run.start_event else None
        if getattr(run, "forwarding_to", None):
            summary["events_sent_to"] = run.forwarding_to
        if run.error is not None:
            summary["error"] = run.error.message
        print(json.dumps(summary, indent=2))
    else:
        # the same block as watch's and replay's; a start note already printed above the
        # progress bar is not printed twice (watch's screen is gone, so it prints it here)
        print_run_summary(run, shown_notes=getattr(view, "notes_shown", ()))
    stopped = end is not None and end.status == "stopped"
    if stopped and run.stopped_by_script and not interrupted:
        # the script said its run stopped (its custom loop's close("stopped"), e.g. from
        # its own SIGTERM handler) and exited 0: to a shell, still not a completed run
        print(SCRIPT_STOPPED_NOTE, file=sys.stderr)
    if interrupted or stopped:
        # stopped, through gpuscale or not (a worker or the trainer killed alone, the
        # script's own close("stopped")): cut short, not completed
        return EXIT_INTERRUPTED
    if run.error is not None or (end is not None and end.status in ("failed", "lost")):
        print_run_error(run)
        return failed_status(run, args)
    return 0


HELD_OUTPUT_NOTE_AFTER_S = 3.0
"""How long ``run -- COMMAND`` shows nothing of the script before it says why
(:func:`held_output_note`)."""


def held_output_note(run: Any) -> str:
    """Why a script's output has not shown yet: it waits for the run's start, the
    callback's with its first step, or after ``start_timeout_s`` the one gpuscale
    makes up (:mod:`gpuscale.live.script_run`), so that the run's header comes first.
    Said on the screen only, never recorded: the recording has every line as it came."""
    return (
        f"gpuscale: {run.name} is running; its output shows from the run's start: its "
        "ScalingMonitor's first training step (a script that does not import gpuscale.keras: "
        f"{run.start_timeout_s:g} s after its launch)"
    )


def events_saying_the_wait(
    run: Any, say: Callable[[], None], after_s: float | None = None
) -> Iterator[Event]:
    """``run.events()``, and ``say()`` once where no start came ``after_s`` seconds
    (default :data:`HELD_OUTPUT_NOTE_AFTER_S`) from now and the run is not over."""
    after_s = HELD_OUTPUT_NOTE_AFTER_S if after_s is None else after_s
    deadline = time.monotonic() + after_s
    while True:
        left = deadline - time.monotonic()
        event = next(run.events(timeout=left), None) if left > 0 else None
        if event is None:  # quiet until the deadline, or the run is over
            if not run.done:
                say()
            break
        yield event
        if isinstance(event, StartEvent):
            break
    yield from run.events(timeout=None)


SCRIPT_STOPPED_NOTE = (
    "gpuscale: the script closed its run 'stopped' and exited 0; exit 130, as for any "
    "stopped run (close() records one that ended early as completed)"
)
"""Said on stderr when ``gpuscale run`` exits 130 for a run that the script itself
ended ``stopped`` (:attr:`~gpuscale.live.base.RunBase.stopped_by_script`): its own
status was 0, so the exit status would otherwise surprise."""


def failed_status(run: Any, args: argparse.Namespace) -> int:
    """The exit status of a run that failed. Your script (``-- COMMAND``): its own
    status passed through, as ``time`` and ``nohup`` do (``sys.exit(3)``: 3; killed
    by a signal: 128 + its number, as a shell says it; no status of its own, e.g.
    a remote worker lost: 1). The built-in trainer: 2 for a configuration it
    refused (:func:`~gpuscale.live.trainer_run.is_configuration_error`), else 1."""
    from gpuscale.live.script_run import split_command
    from gpuscale.live.trainer_run import is_configuration_error

    if split_command(getattr(args, "command", None)):
        return script_status(getattr(run, "returncode", None))
    return EXIT_USAGE if is_configuration_error(run) else EXIT_FAILED


def script_status(returncode: int | None) -> int:
    """Your script's exit status as gpuscale passes it through (``run``, ``watch``,
    and ``recommend -- COMMAND``'s count that failed): its own (``sys.exit(3)``: 3),
    128 + the signal's number for a script killed by one (a Popen returncode of
    ``-9``: 137), and 1 where it has none to pass (0, or not known)."""
    code = returncode or 0
    if code < 0:
        return 128 + min(-code, 127)
    return min(code, 255) if code > 0 else EXIT_FAILED


def stopped_program(args: argparse.Namespace) -> str:
    """What Ctrl-C stops: ``script`` (your command after ``--``), else ``trainer``
    (the built-in one, several workers of it included)."""
    from gpuscale.live.script_run import split_command

    return "script" if split_command(getattr(args, "command", None)) else "trainer"


def say_recording_if_stdout_fails(run: Any) -> None:
    """The run's recording, which the summary names on stdout (``recorded to``, the
    JSON's ``recording``), is said on stderr with the error line should stdout fail
    (:mod:`gpuscale.commands.stdout_fallback`): the user still learns where the run is.
    Called once the run is over, before anything is printed."""
    from gpuscale.commands.stdout_fallback import say_if_stdout_fails

    if run.recording_path:
        say_if_stdout_fails(f"the run is recorded in {visible(str(run.recording_path))}")


def print_run_error(run: Any) -> None:
    """The run's error as one ``gpuscale: error:`` line on stderr (nothing without one):
    what `run` says after its summary, and `watch` after its screen closes."""
    error = getattr(run, "error", None)
    if error is not None:
        print(f"gpuscale: error: {visible(error.message, keep_newlines=True)}", file=sys.stderr)


class _JsonView:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def on_event(self, event, live: bool = True) -> None:
        pass


def _for_display(message: str) -> str:
    """A log line cut to MAX_DISPLAY_LINE characters: printing megabytes of one line
    takes minutes."""
    if len(message) <= MAX_DISPLAY_LINE:
        return message
    cut = len(message) - MAX_DISPLAY_LINE
    return f"{message[:MAX_DISPLAY_LINE]} [... {cut} more characters not shown]"


class _ProgressView:
    """A rich progress bar with the live step time and throughput; the start
    note and the trainer's warnings printed above it."""

    def __init__(self, steps: int | None):
        """``steps``: the total until a step says its own (``StepEvent.total_steps``):
        the built-in trainer's ``--steps``; None (``N/?``) for a script, whose steps
        say where their ``fit`` is planned to end where Keras knows it."""
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from gpuscale.commands.console import text_console

        self.console = text_console(stderr=True, highlight=False)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[step]}"),
            TextColumn("{task.fields[throughput]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self.task = self.progress.add_task(
            "starting TensorFlow", total=steps, step="", throughput=""
        )
        self.steps = steps
        self.recent: deque[float] = deque(maxlen=10)
        self.notes_shown: set[str] = set()
        """Start notes printed above the bar (not again for a later start with the same note)."""

    def _set_total(self, total: int | None) -> None:
        """The bar's total, ``None`` unknown (``N/?``): a script's later ``fit`` on data
        of unknown length after one of known length (rich's ``update(total=None)``
        leaves the total as it was)."""
        if total is not None:
            self.progress.update(self.task, total=total)
            return
        for task in self.progress.tasks:
            if task.id == self.task and task.total is not None:
                task.total = None

    def say(self, note: str) -> None:
        """A line of gpuscale's own above the bar (dim)."""
        self.console.print(f"[dim]{_escape(note)}[/]")

    def __enter__(self):
        if self.console.is_terminal:  # elsewhere it draws nothing but a blank line at the end
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.console.is_terminal:
            self.progress.stop()
        return False

    def on_event(self, event, live: bool = True) -> None:
        if isinstance(event, StartEvent) and event.provisional and not live:
            return  # stopped before the run's own start: the summary says what was asked
        if isinstance(event, StartEvent):
            devices = _devices(event)
            self.console.print(
                f"[bold]{_escape(event.model)}[/] on {_escape(devices)}, {_escape(_strategy(event))}, "
                f"{_scaling(event)}",
            )
            if event.note and event.note not in self.notes_shown:
                self.console.print(f"[dim]{_escape(event.note)}[/]")
                self.notes_shown.add(event.note)
            # the elapsed column counts from the start event, as every run duration
            # does (gpuscale.events.schema.run_duration_s): start-up is not the run
            self.progress.reset(self.task, description="training")
        elif isinstance(event, StepEvent):
            if not event.warmup:
                self.recent.append(event.step_time_s)
            times = self.recent or [event.step_time_s]
            median = statistics.median(times)
            total = event.total_steps if event.total_steps is not None else self.steps
            # a step past its plan (Keras overrunning an epoch) is no "31/30"
            self._set_total(max(total, event.step + 1) if total is not None else None)
            self.progress.update(
                self.task,
                completed=event.step + 1,
                description="warm-up" if event.warmup else "training",
                step=f"{_ms(median)}/step",
                throughput=format_samples_s(event.samples / median) if median > 0 else "",
            )
        elif isinstance(event, LogEvent) and event.source == "script" and event.level == "info":
            from rich.text import Text  # your script's output: its colours kept, no other control

            self.console.print(
                Text.from_ansi(settle_visible(_for_display(event.message))), highlight=False
            )
        elif isinstance(event, LogEvent) and event.level in ("warning", "error"):
            if event.source == "gpuscale" and event.message in self.notes_shown:
                return  # the start's note, just printed (the missing-callback advice)
            self.console.print(
                f"[yellow]{_escape(event.source)}: {_escape(_for_display(event.message))}[/]"
            )
        elif isinstance(event, ErrorEvent):
            self.progress.update(self.task, description="failed")


def _escape(text: str) -> str:
    """Text from data shown as it is: not read as rich markup (``callbacks=[...]``,
    TF's ``[...]``), control characters visible (:func:`gpuscale.formatting.markup_literal`)."""
    from gpuscale.formatting import markup_literal

    return markup_literal(text)


def _platform(platform: str, count: int = 1) -> str:
    """``GPU``, ``CPU logical device(s)`` (plural for ``count`` above 1), ``CPU``."""
    if platform == "cpu-logical":
        return "CPU logical device" + ("s" if count != 1 else "")
    return {"gpu": "GPU", "cpu": "CPU"}.get(platform, platform)


_PLACEHOLDER_GPU_NAME = re.compile(r"(/?(job:.*/)?device:)?gpu([: ]?\d+)?", re.IGNORECASE)
"""A GPU's name that names no model: TensorFlow's ``GPU:0``, ``device:GPU:0``, ``GPU``
(the Keras callback's and a multi-worker trainer's start say no more)."""


def gpu_names(start) -> list[str]:
    """The models of the start's GPUs, one per GPU it lists (``NVIDIA H200``): their
    names, where every one is a model's; else, where NVML's view of the machine
    (``start.topology``) has GPUs of one model only, that model for each; else none."""
    gpus = [d for d in getattr(start, "devices", ()) or () if d.kind == "gpu"]
    names = [(d.name or "").strip() for d in gpus]
    if names and all(n and not _PLACEHOLDER_GPU_NAME.fullmatch(n) for n in names):
        return names
    topology = getattr(start, "topology", None)
    models = {(g.name or "").strip() for g in topology.gpus} if topology is not None else set()
    if len(models) == 1 and "" not in models and gpus:
        return [models.pop()] * len(gpus)
    return []


def _gpus_named(start) -> str | None:
    """``1 x NVIDIA H200``; GPUs of several models, ``3 x GPU (mixed: 2 x NVIDIA
    H100 80GB HBM3, 1 x NVIDIA A100-SXM4-40GB)``; ``None`` where the start does not say
    its GPUs' models (or lists another number of them than it has replicas)."""
    names = gpu_names(start)
    count = start.num_replicas
    if not names or len(names) != count:
        return None
    models = dict.fromkeys(names)  # in order of first appearance
    if len(models) == 1:
        return f"{count} x {names[0]}"
    mixed = ", ".join(f"{names.count(m)} x {m}" for m in models)
    return f"{count} x GPU (mixed: {mixed})"


def _devices(start) -> str:
    """``2 x GPU``, naming the model where the start does (``1 x NVIDIA H200``, see
    :func:`_gpus_named`); with several workers, ``2 x CPU (2 workers, 1 each)``, and
    for GPUs the models of the start's own worker where it names them (the other
    workers' are not in it): ``4 x GPU (2 workers, 2 each; worker 0's: NVIDIA H100)``."""
    text = f"{start.num_replicas} x {_platform(start.platform, start.num_replicas)}"
    workers = getattr(start, "num_workers", 1) or 1
    if workers > 1:
        each = len(getattr(start, "devices", ())) or max(1, start.num_replicas // workers)
        own = ", ".join(dict.fromkeys(gpu_names(start))) if start.platform == "gpu" else ""
        mine = f"; worker {getattr(start, 'worker', 0)}'s: {own}" if own else ""
        return text + f" ({workers} workers, {each} each{mine})"
    if start.platform == "gpu":
        return _gpus_named(start) or text
    return text


def status_word(end) -> str:
    """The end's status (``stopped``, ``completed``...), or ``ended`` without one."""
    return getattr(end, "status", None) or "ended"


def gpu_activity_lines(summary: RunSummary | None) -> list[str]:
    """``  GPUs: busy ... · working ...`` and, where they apply, the warnings: a GPU
    held down, one GPU markedly less busy than the others, busy is not working
    (console markup)."""
    if summary is None:
        return []
    text = gpu_activity_text(summary)
    if text is None:
        return []
    lines = [f"  GPUs: {text}"]
    for warning in (held_down_text(summary), imbalance_text(summary), busy_not_working(summary)):
        if warning:
            lines.append(f"  [yellow]{_escape(warning)}[/]")
    return lines


def _strategy(start) -> str:
    if start.strategy in ("unknown", "none"):
        return strategy_words(start.strategy)
    return start.strategy + exchange_words(start.cross_device_ops, start.num_replicas)


def _scaling(start) -> str:
    if not start.global_batch:  # a script without gpuscale's callback says nothing of it
        return "batch unknown"
    if scaling_of(start) == "strong":
        return f"strong scaling (global batch {start.global_batch} = {start.per_replica_batch} per replica)"
    return (
        f"weak scaling ({start.per_replica_batch} per replica, global batch {start.global_batch})"
    )


_ms = format_duration_s


def run_summary_of(s: dict[str, Any], replicas: int) -> RunSummary:
    """An end event's summary (a dict) as a :class:`RunSummary` over ``replicas``
    devices; what does not read as one (a damaged summary) is left out."""
    import msgspec

    from gpuscale.analysis.summary import summary_from_document

    try:  # the values kept as measured (not resolved) back in their fields, for the words
        summary = msgspec.convert(summary_from_document(s), RunSummary, str_keys=True)
    except msgspec.ValidationError:
        summary = RunSummary()
    summary.devices = max(1, replicas)
    return summary


def phase_lines(s: dict[str, Any], replicas: int) -> list[str]:
    """The phase breakdown of a summary (as a dict), in the dashboard's words
    (:mod:`gpuscale.analysis.phase_report`): each phase with its uncertainty (95 %
    half-width over the probes) or "not resolved" where it is within its noise,
    then the probes: how many, their share of the wall clock against the budget,
    and whether the exposed share is known to the target precision."""
    summary = run_summary_of(s, replicas)
    lines = [
        f"  phases ({phases_heading(summary)}):",
        "    " + ", ".join(f"{item.label} {item.value}" for item in phase_items(summary)),
    ]
    apart = parts_note(summary)
    if apart:
        lines.append(f"  [yellow]{_escape(apart)}[/]")
    waits = input_in_apply_note(summary)
    if waits:
        lines.append(f"  [yellow]{_escape(waits)}[/]")
    lines.append(f"  probes: {probes_text(summary)}")
    return lines


def precision_line(s: dict[str, Any], replicas: int = 1) -> str | None:
    """With ``--precision``: whether the run reached it, and if not, how far it got
    and about how many more steps would likely reach it (``None``: not asked)."""
    said = precision_text(run_summary_of(s, replicas))
    if said is None:
        return None
    text, reached = said
    return f"  {text}" if reached else f"  [yellow]{text}[/]"


def print_run_summary(run: Any, shown_notes: Collection[str] = ()) -> None:
    """What a run measured, in a few lines (its `start_event`, `end`, `error`,
    `recording_path`, `recording_problem`); `gpuscale replay` off a terminal too.
    A start note in ``shown_notes`` (printed when the run began) is not repeated."""
    from gpuscale.commands.console import text_console

    console = text_console(highlight=False)
    start, end = run.start_event, run.end
    s = (end.summary or {}) if end else {}
    chief = getattr(run, "forwarding_to", None)
    if chief:  # a non-chief worker: the chief has the run's events and summary
        status = end.status if end else "over"
        console.print(
            f"worker {run.worker}: {status}. Its events went to the chief at {chief}; "
            "the chief's gpuscale shows and records the whole run's summary."
        )
        return
    if start is None:
        if run.error is None:
            stopped = end is not None and end.status == "stopped"
            console.print(
                "Stopped before training began (the trainer was still starting)."
                if stopped
                else "The trainer ended before training began."
            )
        return
    if getattr(
        start, "provisional", False
    ):  # the trainer never said what runs where: what was asked
        console.print(
            f"[bold]{_escape(start.model)}[/] on {start.num_replicas} x "
            f"{_escape(_platform(start.platform, start.num_replicas))} ({count_chosen(start)}): {_escape(strategy_words(start.strategy))}"
        )
        steps = s.get("steps_total", 0)
        duration = getattr(end, "duration_s", None)
        if start.source == "script" and not steps:
            # a script's run lasts from its launch: what it ran is what telemetry saw
            took = f" after {format_duration_s(duration)}" if duration else ""
            from gpuscale.live.script_run import builtin_trainer_model

            argv = (start.config or {}).get("argv") or []
            builtin = isinstance(argv, list) and builtin_trainer_model(argv) is not None
            before = (
                "before the trainer started training"
                if builtin
                else "before any start from gpuscale's callback"
            )
            console.print(f"  {status_word(end)}{took}, {before}: no step times (telemetry only)")
            for line in gpu_activity_lines(run_summary_of(s, start.num_replicas)):
                console.print(line)
        elif steps:
            console.print(
                f"  the trainer never described the run ({plural(steps, 'step')} recorded)"
            )
        elif status_word(end) == "stopped":
            console.print(
                "  stopped before it started: TensorFlow was still starting and nothing was measured"
            )
        else:  # failed, lost, interrupted: said as it ended, never as "stopped"
            console.print(
                f"  {_escape(status_word(end))} before its first step: nothing was measured"
            )
        _print_recording(console, run)
        return
    console.print(
        f"[bold]{_escape(start.model)}[/] on {_escape(_devices(start))}: {_escape(_strategy(start))}"
    )
    console.print(f"  {_scaling(start)}")
    status = end.status if end else "unknown"
    counted = s.get("steps_counted", 0)
    total = s.get("steps_total", 0)
    duration = getattr(end, "duration_s", None)
    took = f" in {format_duration_s(duration)}" if duration else ""
    console.print(
        f"  status: {status}{took}, {plural(total, 'step')} ({counted} counted, {total - counted} warm-up)"
    )
    if s.get("step_time_s") is not None:
        spread = f" (p10 {_ms(s.get('step_time_p10_s'))}, p90 {_ms(s.get('step_time_p90_s'))})"
        console.print(f"  step time:  {_ms(s['step_time_s'])} median{spread}")
    summary = run_summary_of(s, start.num_replicas)
    if summary.throughput_samples_s is not None:
        wall = wall_clock_text(summary)
        over = f"; {wall}" if wall else ""  # what the run got, where it differs
        console.print(f"  throughput: {throughput_text(summary)}{over}")
    gpus = gpu_activity_lines(summary)
    for line in gpus:
        console.print(line)
    if s.get("phase_steps"):
        for line in phase_lines(s, start.num_replicas):
            console.print(line)
        if s.get("allreduce_total_s") is not None:
            console.print(
                f"  all-reduce alone: {_ms(s['allreduce_total_s'])} for {format_bytes(s.get('payload_bytes'))} of gradients"
            )
            exposed, alone = s.get("allreduce_s"), s["allreduce_total_s"]
            shown = next(
                i.value for i in phase_items(summary) if i.label == "exposed all-reduce"
            )  # a figure not printed (not resolved) is not compared either
            if exposed is not None and exposed > 2 * alone + 0.001 and "not resolved" not in shown:
                console.print(
                    "  [yellow]the exposed all-reduce is over twice the all-reduce timed alone: the "
                    f"probes may be noisy ({s['phase_steps']} of them; a busy machine?) or replicas "
                    "wait for each other; more --steps give steadier medians[/]"
                )
        if start.platform == "cpu-logical":
            console.print(
                "  [dim](CPU logical devices: the all-reduce is a memory copy, not a GPU link)[/]"
            )
    elif counted and start.strategy == "none":
        console.print(
            "  phases: not measured (no tf.distribute strategy: the model exchanges nothing)"
        )
    elif counted:
        why = no_probe_why(start.config or {}, script=start.source == "script")
        console.print(f"  phases: not measured ({why})")
    line = precision_line(s, start.num_replicas)
    if line:
        console.print(line)
    note = note_of(start)
    if note and note not in shown_notes and start.note not in shown_notes:
        console.print(f"  [dim]note: {_escape(note)}[/]")
    _print_recording(console, run)


def no_probe_why(config: dict, *, script: bool = False) -> str:
    """Why a run that counted steps has no phases: probes turned off by the option
    that did it (``--phase-every 0``, ``--probe-budget 0``; a ``script``'s
    ``ScalingMonitor(phases=False)`` or ``ScalingMonitor(budget=0)``), else none came
    after the warm-up."""
    if script:  # the callback's options, not the trainer's
        if config.get("phases") is False:
            return "probes turned off: ScalingMonitor(phases=False)"
        if config.get("every") is None and config.get("probe_budget") == 0:
            return "probes turned off: ScalingMonitor(budget=0)"
        return "no probe after the warm-up; see ScalingMonitor(budget=..., every=...)"
    if config.get("phase_every") == 0:
        return "probes turned off: --phase-every 0"
    if config.get("phase_every") is None and config.get("probe_budget") == 0:
        return "probes turned off: --probe-budget 0"
    return "no probe after the warm-up; see --probe-budget, --phase-every"


def _print_recording(console, run: Any) -> None:
    if run.recording_path:
        console.print(f"  recorded to {_escape(str(run.recording_path))}")
    if run.recording_problem:
        console.print(f"  [yellow]recording problem: {_escape(run.recording_problem)}[/]")
