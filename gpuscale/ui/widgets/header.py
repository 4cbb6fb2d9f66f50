"""The run header: what runs, where, how far along, and where it is recorded."""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Static

from gpuscale import formatting as fmt
from gpuscale.analysis.script_runs import (
    before_own_start,
    is_callbackless_start,
    scaling_of,
    steps_elsewhere,
)
from gpuscale.ui.model import Snapshot
from gpuscale.ui.sources import ReplayStatus, SourceInfo


def describe_run(snap: Snapshot, waiting: str | None = None, *, width: int | None = None) -> str:
    """Model · strategy (all-reduce) · devices · batch (scaling), in one line
    (``waiting``: what to say instead before the start, when the source knows more
    than nothing). ``width``: the cells it has; where the whole line does not fit,
    the all-reduce's name goes first, then "scaling" after strong/weak, then
    "logical" (the batch and how it scales are what a narrow screen keeps)."""
    start = snap.start
    if start is None:
        if snap.end is not None or snap.errors:
            return "the run ended before it started training (see the error and the log)"
        return waiting or "waiting for the run to start…"
    platform = {"gpu": "GPU", "cpu-logical": "logical CPU", "cpu": "CPU"}[start.platform]
    strategy = fmt.strategy_words(start.strategy)
    exchange = fmt.exchange_words(start.cross_device_ops, start.num_replicas, short=True)
    if not start.global_batch:  # a script without gpuscale's callback (yet): not known
        batch = "batch unknown"
    elif start.num_replicas > 1:
        batch = f"batch {start.num_replicas}x{start.per_replica_batch}={start.global_batch}"
    else:
        batch = f"batch {start.global_batch}"
    scaling = scaling_of(start) if start.global_batch else None  # a script's fit(): strong
    lines = []
    for level in range(4):
        shown = platform.replace("logical ", "") if level >= 3 else platform
        if start.num_workers > 1:  # the start's devices are the chief's; replicas are all
            per_worker = len(start.devices) or max(1, start.num_replicas // start.num_workers)
            device_text = (
                f"{fmt.plural(start.num_replicas, 'replica')} ({per_worker} {shown} per "
                f"worker, {start.num_workers} workers)"
                if level < 2
                else f"{start.num_workers} workers x {per_worker} {shown}"
            )
        else:
            device_text = f"{len(start.devices) or start.num_replicas}x {shown}"
        how = ""
        if scaling:
            how = f" ({scaling})" if level >= 2 else f" ({scaling} scaling)"
        # one replica keeps its words: "no all-reduce" is what the line is about
        words = exchange if level == 0 or start.num_replicas <= 1 else ""
        lines.append(f"{start.model or '?'} · {strategy}{words} · {device_text} · {batch}{how}")
        if width is None or cell_len(lines[-1]) <= width:
            break
    return lines[-1]


def elapsed_text(snap: Snapshot) -> str:
    """``elapsed 0:10``: the clock from the launch; once the run has ended, with the
    run's own duration beside it where the start-up made them differ by a second or
    more (``elapsed 0:10 · run 7.73 s``: the end line's and ``gpuscale runs``'
    figure, which leaves the start-up out), so the two never seem to disagree."""
    text = f"elapsed {fmt.format_clock_s(snap.elapsed_s)}"
    run = run_duration_text(snap)
    return f"{text} · {run}" if run else text


def run_duration_text(snap: Snapshot) -> str | None:
    """``run 7.73 s``, the run's own recorded duration, once it has ended and where
    the start-up before its own start made it a second or more shorter than the
    clock from the launch; else ``None``."""
    if snap.end is not None and snap.elapsed_s - snap.duration_s >= 1.0:
        return f"run {fmt.format_duration_s(snap.duration_s)}"
    return None


def replay_text(replay: ReplayStatus) -> str:
    """``replay 0:13/0:31 1x``: a replay's one clock, where it is in the recording
    (seconds from its first event, the launch, as a live run's ``elapsed``) out of
    the whole recording, then the speed or ``paused``."""
    mode = "paused" if replay.paused else f"{replay.speed:g}x"
    position = fmt.format_clock_s(replay.position_s)
    return f"replay {position}/{fmt.format_clock_s(replay.duration_s)} {mode}"


def path_tail(path: str, room: int) -> str:
    """``path`` in at most ``room`` cells, its end kept: the file name says which run
    (``…/20261126-144038_train.py_2xcpu.ndjson``); the folders go first, from the
    left, then the start of the name (``…_2xcpu.ndjson``)."""
    if cell_len(path) <= room:
        return path
    parts = path.split("/")
    for i in range(1, len(parts)):
        tail = "…/" + "/".join(parts[i:])
        if cell_len(tail) <= room:
            return tail
    name = parts[-1]
    keep = max(room - 1, 1)
    while keep > 1 and cell_len(name[-keep:]) > room - 1:
        keep -= 1
    return "…" + name[-keep:]


class RunHeader(Static):
    """Two lines: the run, then progress, state and the recording."""

    _shown: tuple | None = None

    def on_resize(self) -> None:
        """Laid out again for the new width (the path's tail is fitted to it)."""
        if self._shown is not None:
            args, kwargs = self._shown
            self.show(*args, **kwargs)

    def show(
        self,
        snap: Snapshot,
        source: SourceInfo,
        replay: ReplayStatus | None,
        display_paused: bool,
        *,
        ended_while_paused: bool = False,
        over: bool = False,
    ) -> None:
        """``display_paused``: frozen with ``p`` (a badge says so, and whether the run
        ended meanwhile: the rest of the screen waits for ``p``); ``over``: the source
        has nothing more (a run without an end event then reads as interrupted)."""
        self._shown = (
            (snap, source, replay, display_paused),
            {"ended_while_paused": ended_while_paused, "over": over},
        )
        state = "running"
        style = "$text-success"
        if snap.end is not None:
            state = snap.end.status
            style = "$text-success" if state == "completed" else "$text-error"
        elif snap.errors:
            state, style = "failed", "$text-error"
        elif over or (replay is not None and replay.at_end and not display_paused):
            # the word `gpuscale runs` and replay's summary use too, with its reason
            if source.still_running:  # recorded so far: its process is still writing
                state, style = "running (recorded so far)", "$text-warning"
            else:
                state, style = "interrupted (no end event)", "$text-error"
        elif snap.start is None:
            state, style = "starting", "$text-warning"
        # out of where the run's steps say it is planned to end
        progress = f"step {fmt.step_of(snap.steps_done, snap.steps_total)}"
        if snap.steps_done == 0 and is_callbackless_start(snap.start):
            progress = "no step times"  # a script without gpuscale's callback: none will come
        elif snap.steps_done == 0 and steps_elsewhere(snap.start):
            progress = "steps at the chief"  # a worker forwarding them: none come here
        elif (
            snap.steps_done == 0
            and state == "running"
            and before_own_start(snap.start, snap.gpus_sampled)
        ):
            progress = "no step times yet"  # telemetry only until the run's own start
        if replay is not None:
            # One clock: the replay's position is the run's elapsed time at the moment
            # shown (both count from the recording's first event, the launch); an
            # "elapsed" beside it, from the last event drawn, lagged it by up to the
            # gap between events (replay 0:13/0:31 ... elapsed 0:12)
            run = run_duration_text(snap)
            parts = [replay_text(replay), progress, *([run] if run else [])]
            what = "file"
        else:
            parts = [progress, elapsed_text(snap)]
            what = "recording"
        word, _, reason = state.partition(" ")
        head = word.upper() + (f" {reason}" if reason else "")
        middle = "  " + " · ".join(parts) + "  "
        # The path's end says which run: on a narrow screen its folders go, not its
        # name (then the word before it, then the name's start).
        room = (self.content_region.width or self.app.size.width - 2) - cell_len(head + middle)
        path = fmt.visible(source.label)
        tail = path_tail(path, room - len(what) - 1)
        whole_name = tail == path or tail.startswith("…/")
        label = f"{what} {tail}" if whole_name else path_tail(path, room)
        line2 = Content.assemble(
            (head, f"bold {style}"),
            middle,
            (label, "$text-muted"),
        )
        badge = ""
        if display_paused:  # first: a long description is cut at the right edge
            badge = (
                " DISPLAY PAUSED (p): THE RUN ENDED "
                if ended_while_paused
                else " DISPLAY PAUSED (p) "
            )
        width = (self.content_region.width or self.app.size.width - 2) - cell_len(
            "gpuscale  " + (badge + " " if badge else "")
        )
        line1 = Content.assemble(
            ("gpuscale", "bold"),
            "  " + fmt.visible(describe_run(snap, source.waiting, width=width)),
        )
        if badge:
            line1 = Content.assemble((badge, "reverse $text-warning"), " ") + line1
        self.update(Content("\n").join([line1, line2]))
