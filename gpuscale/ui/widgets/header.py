"""The run header: what runs, where, how far along, and where it is recorded."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from gpuscale import formatting as fmt
from gpuscale.analysis.script_runs import before_own_start, is_callbackless_start, scaling_of
from gpuscale.ui.model import Snapshot
from gpuscale.ui.sources import ReplayStatus, SourceInfo


def describe_run(snap: Snapshot, waiting: str | None = None) -> str:
    """Model · strategy (all-reduce) · devices · batch, in one line (``waiting``: what
    to say instead before the start, when the source knows more than nothing)."""
    start = snap.start
    if start is None:
        if snap.end is not None or snap.errors:
            return "the run ended before it started training (see the error and the log)"
        return waiting or "waiting for the run to start…"
    platform = {"gpu": "GPU", "cpu-logical": "logical CPU", "cpu": "CPU"}[start.platform]
    if start.num_workers > 1:  # the start's devices are the chief's; replicas are all
        per_worker = len(start.devices) or max(1, start.num_replicas // start.num_workers)
        device_text = (
            f"{fmt.plural(start.num_replicas, 'replica')} ({per_worker} {platform} per worker, "
            f"{start.num_workers} workers)"
        )
    else:
        device_text = f"{len(start.devices) or start.num_replicas}x {platform}"
    strategy = start.strategy or "?"
    if strategy == "unknown":  # a script without gpuscale's callback (yet)
        strategy = "strategy unknown"
    strategy += fmt.exchange_words(start.cross_device_ops, start.num_replicas, short=True)
    if not start.global_batch:  # a script without gpuscale's callback (yet): not known
        batch = "batch unknown"
    elif start.num_replicas > 1:
        batch = f"batch {start.num_replicas}x{start.per_replica_batch}={start.global_batch}"
    else:
        batch = f"batch {start.global_batch}"
    if start.global_batch:
        batch += f" ({scaling_of(start)} scaling)"  # a script's fit() batch: strong
    return f"{start.model or '?'} · {strategy} · {device_text} · {batch}"


class RunHeader(Static):
    """Two lines: the run, then progress, state and the recording."""

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
        progress = f"step {snap.steps_done}"
        if snap.steps_done == 0 and is_callbackless_start(snap.start):
            progress = "no step times"  # a script without gpuscale's callback: none will come
        elif (
            snap.steps_done == 0
            and state == "running"
            and before_own_start(snap.start, snap.gpus_sampled)
        ):
            progress = "no step times yet"  # telemetry only until the run's own start
        parts = [
            progress,
            f"elapsed {fmt.format_clock_s(snap.elapsed_s)}",
        ]
        if replay is not None:
            mode = "paused" if replay.paused else f"{replay.speed:g}x"
            parts.insert(
                0,
                f"replay {fmt.format_clock_s(replay.position_s)}/{fmt.format_clock_s(replay.duration_s)} {mode}",
            )
            label = f"file {fmt.visible(source.label)}"
        else:
            label = f"recording {fmt.visible(source.label)}"
        word, _, reason = state.partition(" ")
        line2 = Content.assemble(
            (word.upper() + (f" {reason}" if reason else ""), f"bold {style}"),
            "  " + " · ".join(parts) + "  ",
            (label, "$text-muted"),
        )
        line1 = Content.assemble(
            ("gpuscale", "bold"), "  " + fmt.visible(describe_run(snap, source.waiting))
        )
        if display_paused:  # first: a long description is cut at the right edge
            badge = (
                " DISPLAY PAUSED (p): THE RUN ENDED "
                if ended_while_paused
                else " DISPLAY PAUSED (p) "
            )
            line1 = Content.assemble((badge, "reverse $text-warning"), " ") + line1
        self.update(Content("\n").join([line1, line2]))
