"""`gpuscale watch`: train and watch it live in the dashboard (recorded by default)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    parser = sub.add_parser(
        "watch",
        help="train with a live dashboard (same options as 'run')",
        description=(
            "Start the trainer (same options as 'gpuscale run') and watch it live: devices, "
            "step time, the compute / all-reduce breakdown and what it means. The run is "
            "recorded by default ('gpuscale replay FILE' shows it again). Keys: q stops the "
            "trainer cleanly and quits, p freezes the display, s saves an SVG screenshot, ? help."
        ),
    )
    from gpuscale.script import add_script_arguments
    from gpuscale.telemetry.sampler import INTERVAL_HELP
    from gpuscale.trainer.options import add_trainer_arguments

    add_trainer_arguments(parser)
    add_script_arguments(parser)
    rec = parser.add_argument_group("recording").add_mutually_exclusive_group()
    rec.add_argument(
        "--record", type=Path, metavar="PATH", help="record to PATH (default: the runs folder)"
    )
    rec.add_argument("--no-record", action="store_true", help="do not record this run")
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=0.5,
        metavar="S",
        help=INTERVAL_HELP,
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys

    from gpuscale.errors import EXIT_FAILED, EXIT_INTERRUPTED, GpuscaleError
    from gpuscale.script import script_run_from_args, wants_script_run
    from gpuscale.session import LiveRun
    from gpuscale.telemetry.sampler import validate_interval
    from gpuscale.trainer.options import config_from_args

    try:
        validate_interval(args.sample_interval)
    except GpuscaleError as exc:
        raise GpuscaleError(f"--sample-interval: {exc}") from None
    record: Path | str | None = "default"
    if args.no_record:
        record = None
    elif args.record is not None:
        if args.record.exists():  # never overwrite a recording
            raise GpuscaleError(f"--record {args.record}: the file exists; give a new path")
        record = args.record
    if wants_script_run(args):  # your own script (-- COMMAND) or several workers
        run = script_run_from_args(args, record, sample_interval_s=args.sample_interval)
    else:
        run = LiveRun(config_from_args(args), record=record, sample_interval_s=args.sample_interval)

    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import LiveSource

    source = LiveSource(run)
    app = build_app(source)
    received: list[str] = []

    def on_stop_signal(signum: int, frame: object) -> None:
        # SIGTERM/SIGHUP (kill, timeout, scancel, a closed terminal): quit the way
        # q does, from the app's own loop, so the terminal is restored and the
        # trainer is stopped cleanly, its recording ending with its end event.
        received.append(signal.Signals(signum).name)
        try:
            asyncio.get_running_loop().call_soon_threadsafe(app.action_quit_run)
        except RuntimeError:  # the app is not running (yet, or any more)
            raise KeyboardInterrupt(received[-1]) from None

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, on_stop_signal)
    try:
        app.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        source.stop()  # idempotent: a no-op when q already stopped it
    if run.recording_path:
        print(f"recorded to {run.recording_path}")
    if received:
        print(f"gpuscale: stopped ({received[0]})", file=sys.stderr)
        return EXIT_INTERRUPTED
    end = getattr(run, "end", None) or source.end
    if end is None or end.status in ("failed", "lost"):
        return EXIT_FAILED  # the run never started (trainer or sampler refused), or failed
    return 0
