"""`gpuscale watch`: train and watch it live in the dashboard (recorded by default)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuscale.commands.paths import path_arg


def register(sub) -> None:
    parser = sub.add_parser(
        "watch",
        help="train with a live dashboard (the options of 'run' but --json)",
        description=(
            "Start the trainer (the options of 'gpuscale run' but --json) and watch it live: devices, "
            "step time, the compute / all-reduce breakdown and what it means. The run is "
            "recorded by default ('gpuscale replay FILE' shows it again). Keys: q stops the "
            "trainer cleanly and quits, Ctrl-C does too and exits 130, p freezes the display, "
            "s saves an SVG screenshot, ? help. Off a terminal (piped, redirected) it runs as "
            "'gpuscale run' would."
        ),
    )
    from gpuscale.commands.run import add_sample_interval_argument
    from gpuscale.live.script_run import add_script_arguments
    from gpuscale.trainer.options import add_trainer_arguments

    add_trainer_arguments(parser)
    add_script_arguments(parser)
    rec = parser.add_argument_group("recording").add_mutually_exclusive_group()
    rec.add_argument(
        "--record", type=path_arg, metavar="PATH", help="record to PATH (default: the runs folder)"
    )
    rec.add_argument("--no-record", action="store_true", help="do not record this run")
    add_sample_interval_argument(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import sys

    from gpuscale.commands.run import check_sample_interval
    from gpuscale.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, GpuscaleError
    from gpuscale.live.script_run import script_run_from_args, wants_script_run
    from gpuscale.live.trainer_run import LiveRun, is_configuration_error
    from gpuscale.trainer.options import config_from_args
    from gpuscale.trainer.preflight import check_config

    check_sample_interval(args)
    if not sys.stdout.isatty():  # a screen off a terminal would write escape codes for ever
        from gpuscale.commands import run as run_command

        args.json = False
        code = run_command.main(args)  # the same run and recording, as plain text
        # said after the run, so that a refused configuration stays one line
        kept = "not recorded: --no-record" if args.no_record else "recorded as watch would"
        print(
            "gpuscale: watch shows the run in a terminal; stdout is not one, "
            f"so this was 'gpuscale run' (plain text, {kept})",
            file=sys.stderr,
        )
        return code
    record: Path | str | None = "default"
    if args.no_record:
        record = None
    elif args.record is not None:
        from gpuscale.commands.run import check_record_path

        check_record_path(args.record)  # never overwrite a recording
        record = args.record
    if wants_script_run(args):  # your own script (-- COMMAND) or several workers
        from gpuscale.trainer.options import TrainConfig, check_cpu_devices

        check_cpu_devices(TrainConfig(devices=args.devices))  # GPUSCALE_DEVICES=99 on 2 cores
        run = script_run_from_args(args, record, sample_interval_s=args.sample_interval)
    else:
        from gpuscale.commands.gpu_choice import with_best_gpus

        config = config_from_args(args)
        check_config(config)  # what the trainer would find only after loading TensorFlow
        config = with_best_gpus(config)
        run = LiveRun(config, record=record, sample_interval_s=args.sample_interval)

    from gpuscale.ui.app import build_app, run_until_stop_signal
    from gpuscale.ui.sources import LiveSource

    source = LiveSource(run)
    app = build_app(source)
    try:
        stopped_by = run_until_stop_signal(app)
    finally:
        source.stop()  # idempotent: a no-op when q already stopped it
    if isinstance(source.start_error, GpuscaleError):
        # the run never began (a script that cannot start): `run`'s one error line and
        # exit status, not "The trainer ended before training began."
        raise source.start_error
    from gpuscale.commands.run import say_recording_if_stdout_fails

    say_recording_if_stdout_fails(run)  # named on stdout only, below
    if stopped_by:  # as `gpuscale run` does: the trainer stopped, then what ran
        from gpuscale.commands.run import print_run_summary

        print_run_summary(run)  # with the recording's path
        print(f"gpuscale: stopped ({stopped_by})", file=sys.stderr)
        return EXIT_INTERRUPTED
    end = getattr(run, "end", None) or source.end
    from gpuscale.commands.run import failed_status, print_run_error, print_run_summary
    from gpuscale.live.script_run import split_command

    if is_configuration_error(run) and not split_command(getattr(args, "command", None)):
        # the dashboard said why; say it where it stays, too
        if run.recording_path:
            print(f"recorded to {run.recording_path}")
        print_run_error(run)
        return EXIT_USAGE

    # the dashboard is gone from the screen with q: what ran stays, as `run` prints it,
    # and so does why it failed (`run`'s error line)
    print_run_summary(run)  # with the recording's path
    print_run_error(run)
    if end is None or end.status in ("failed", "lost"):
        # the run never started (trainer or sampler refused), or failed: as `run` exits
        # (your script's own status passed through)
        return failed_status(run, args) if end is not None else EXIT_FAILED
    return 0
