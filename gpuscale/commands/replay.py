"""`gpuscale replay FILE`: the dashboard fed from a recording (no TensorFlow).
`gpuscale replay FILE FILE...`, or `gpuscale replay SWEEP` (a sweep's name as
`gpuscale runs` shows it, :mod:`gpuscale.recording.sweeps`): the recordings of a
sweep (one run per device count) in the scaling view, also without TensorFlow."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuscale.commands.paths import name_arg

MAX_SPEED = 1e6
"""Fastest --speed (run seconds per wall second): a day of run in a tenth of a second."""


def register(sub) -> None:
    parser = sub.add_parser(
        "replay",
        help="show a recorded run in the dashboard, or a recorded sweep (sweep-..., or one "
        "run per device count) in the scaling view",
        description=(
            "Replay a recording (.ndjson or .ndjson.gz) in the same dashboard as "
            "'gpuscale watch'. Keys: space pause, left/right seek 10 s, +/- speed, "
            "end jump to the end, ? help, q quit. Given several recordings (the runs of a "
            "sweep, one per device count), or a recorded sweep by the name 'gpuscale runs' "
            "shows (sweep-...), shows them as a scaling view: throughput against "
            "devices, where the step time goes, and the recommendation. Needs no GPU and "
            "no TensorFlow. A sweep file (recommend --json, a typed-in table) is shown "
            "the same way."
        ),
    )
    parser.add_argument(
        "files",
        type=name_arg,  # as typed: './NAME' is a file here, 'NAME' may be in the runs folder
        nargs="+",
        metavar="FILE",
        help="a recording made by gpuscale (a path, or its file name or the file name's "
        "beginning as 'gpuscale runs' lists it); several, or a sweep's name as 'gpuscale "
        "runs' shows it (sweep-..., DIR/sweep-...): the scaling view of a sweep",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=None,
        metavar="X",
        help="run seconds per wall second, above 0 and at most 1e6 (default 1; +/- step "
        "through 0.25x to 100x while playing); one recording only",
    )
    parser.add_argument(
        "--end",
        action="store_true",
        help="start at the final state (the run's summary); one recording only",
    )
    parser.set_defaults(func=main)


def _is_sweep_file(path: Path) -> bool:
    """Not a recording, by the test ``recommend --from`` makes
    (:func:`gpuscale.analysis.sweep.looks_like_recording`): a damaged file is then
    read by the same reader, and said the same words of, by both commands. A pipe
    is never one (its bytes are gone once read: nothing to sniff)."""
    from gpuscale.analysis.sweep import looks_like_recording
    from gpuscale.errors import GpuscaleError

    try:
        return not looks_like_recording(path)
    except (GpuscaleError, OSError):
        return False


def main(args: argparse.Namespace) -> int:
    from gpuscale.errors import GpuscaleError, folder_given
    from gpuscale.ui.sources import ReplaySource

    timeline = [
        flag for flag, given in (("--speed", args.speed is not None), ("--end", args.end)) if given
    ]
    if args.speed is None:
        args.speed = 1.0
    if not 0 < args.speed <= MAX_SPEED:
        raise GpuscaleError(
            f"--speed must be above 0 and at most {MAX_SPEED:g}, got {args.speed:g}"
        )
    from gpuscale.recording.sweeps import resolve_inputs

    resolved = resolve_inputs(args.files)  # a sweep's name: its measured recordings
    if resolved.sweeps or len(resolved.paths) > 1:
        _refuse_timeline(timeline)
        try:
            view = _sweep_view(resolved.paths, resolved.sweeps, resolved.cut_short)
        except GpuscaleError as exc:
            exc.warnings = [*resolved.warnings, *exc.warnings]
            raise
        view.warnings[:0] = resolved.warnings  # a count's recording unreadable
        return _show_sweep(view, args.files)
    args.file = resolved.paths[0]  # a run named by its file name: its path
    if args.file.is_dir():
        raise GpuscaleError(folder_given(args.file))
    # Read (and validate) the whole file before the screen opens: an unusable
    # file is one line and exit 2; a forgivable problem (a cut last line, no
    # end event) is shown inside the dashboard.
    try:
        source = ReplaySource(args.file, speed=args.speed, end=args.end)
    except GpuscaleError:
        if not _is_sweep_file(args.file):
            raise
    else:
        import sys

        if (
            not sys.stdout.isatty()
        ):  # piped or redirected: a dashboard would write escape codes forever
            from gpuscale.commands.recommend import print_warnings

            print_summary(source.events, args.file)
            print(
                "gpuscale: replay shows the dashboard in a terminal; stdout is not one, so this "
                "is the recording's summary",
                file=sys.stderr,
            )
            # What the reader forgave (a cut last line, no end event), as recommend --from
            # says it; the dashboard shows the same lines in its log.
            print_warnings(source.info.warnings)
            return 0
        from gpuscale.errors import EXIT_INTERRUPTED
        from gpuscale.ui.app import build_app, run_until_stop_signal

        if run_until_stop_signal(build_app(source)):
            return EXIT_INTERRUPTED
        return 0
    _refuse_timeline(timeline)
    from gpuscale.analysis.sweep import load_inputs

    sweep = load_inputs([args.file])  # read once; a damaged one: the line recommend --from says
    try:  # a sweep file (`recommend --json`, a typed-in table): its scaling view
        view = _sweep_view([args.file], sweep=sweep)
    except GpuscaleError as exc:
        raise GpuscaleError(
            f"{args.file} is a sweep file (device counts and their throughput) that cannot be "
            f"shown ({exc}); 'gpuscale recommend --from {args.file}' reads sweep files"
        ) from None
    return _show_sweep(view, [args.file], sweep)


def _refuse_timeline(flags: list[str]) -> None:
    """``--speed`` and ``--end`` play one recording through; a sweep's scaling view
    has no timeline, so they are refused there rather than ignored."""
    if flags:
        from gpuscale.errors import GpuscaleError

        names = " and ".join(flags)
        raise GpuscaleError(
            f"{names} {'apply' if len(flags) > 1 else 'applies'} to replaying one recording; "
            "a sweep's scaling view has no timeline: leave "
            f"{'them' if len(flags) > 1 else 'it'} out"
        )


def _sweep_view(
    files: list[Path],
    groups: list | None = None,
    cut_short: list | None = None,
    *,
    sweep=None,
):
    """The scaling view's content for ``files``; one GpuscaleError line for
    files that cannot make one. ``groups``: the recorded sweeps (one sweep's
    planned counts are shown, those it did not measure as missing, those measured
    by a run cut short said so); ``cut_short``: their runs cut short, left out
    when they counted no step (:func:`~gpuscale.analysis.sweep.load_inputs`);
    ``sweep``: ``files`` already read (not read again)."""
    from gpuscale.analysis.recommend import recommend
    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.errors import GpuscaleError

    if sweep is None:
        sweep = load_inputs(files, cut_short=cut_short or ())
    if not sweep.points:
        raise GpuscaleError("no measured device counts in " + ", ".join(map(str, files)))
    # Refused here, with one line, rather than as an empty screen.
    recommend(sweep.points, min_efficiency=0.6, available_devices=sweep.available_devices)

    from gpuscale.ui.sweep_app import SweepView, sweep_heading

    heading = sweep_heading(sweep.points, len(files))
    planned: list[int] = []
    state, missing_line = "complete", None
    if groups and len(groups) == 1:
        (group,) = groups
        guess = "" if group.exact else " (grouped by a guess)"
        heading = f"{group.name}{guess}: {sweep_heading(sweep.points)}"
        measured = {p.devices for p in sweep.points}
        planned = [*group.planned, *sorted(measured - set(group.planned))]
        said = []
        if group.cut_short:
            said.append("cut short: " + group.measured_text(group.cut_short))
        if group.missing:
            said.append("not measured: " + ", ".join(group.why_missing()))
        if said:
            state = "stopped"
            missing_line = "; ".join(said)
    return SweepView(
        points=sweep.points,
        heading=heading,
        planned=planned,
        state=state,
        status_line=missing_line,
        available_devices=sweep.available_devices,
        sources=list(sweep.sources),
        warnings=list(sweep.warnings),
        topology=sweep.topology,
    )


def _show_sweep(view, files: list[Path], sweep=None) -> int:
    """The scaling view, or off a terminal ``recommend --from``'s text (of ``sweep``
    where ``files`` were read already: one sweep file)."""
    import sys

    from gpuscale.errors import EXIT_INTERRUPTED

    if not sys.stdout.isatty():  # a screen off a terminal would write escape codes forever
        from gpuscale.commands.recommend import print_from

        code = print_from(list(files), sweep)  # the same result as text
        listed = " ".join(map(str, files))
        print(
            "gpuscale: replay shows the scaling view in a terminal; stdout is not one, so "
            f"this is the text of 'gpuscale recommend --from {listed}'",
            file=sys.stderr,
        )
        return code
    from gpuscale.ui.app import run_until_stop_signal
    from gpuscale.ui.sweep_app import SweepApp

    return EXIT_INTERRUPTED if run_until_stop_signal(SweepApp(view)) else 0


def print_summary(events: list, path: Path) -> None:
    """The summary `gpuscale run` prints at the end, for a recording."""
    from types import SimpleNamespace

    from gpuscale.analysis.summary import summarize, summary_document
    from gpuscale.commands.run import print_run_summary
    from gpuscale.events.schema import EndEvent, ErrorEvent, StartEvent, run_duration_s
    from gpuscale.recording.liveness import writer_alive

    start = next(e for e in reversed(events) if isinstance(e, StartEvent))  # the run's own
    end = events[-1] if isinstance(events[-1], EndEvent) else None
    summary = summary_document(summarize(events))
    status = end.status if end is not None else "interrupted (no end event)"
    if end is None and writer_alive(e for e in events if isinstance(e, StartEvent)):
        status = "running (no end event yet: what was recorded so far)"
    shown_end = SimpleNamespace(
        status=status,
        summary=summary,
        # the one duration (events/schema.py), from the run's own start to its last event
        duration_s=run_duration_s(start.t, max(e.t for e in events)),
    )
    print_run_summary(
        SimpleNamespace(
            start_event=start,
            end=shown_end,
            error=next((e for e in events if isinstance(e, ErrorEvent)), None),
            recording_path=None,
            recording_problem=None,
        )
    )
