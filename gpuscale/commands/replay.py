"""`gpuscale replay FILE`: the dashboard fed from a recording (no TensorFlow)."""

from __future__ import annotations

import argparse
from pathlib import Path

MAX_SPEED = 1e6
"""Fastest --speed (run seconds per wall second): a day of run in a tenth of a second."""


def register(sub) -> None:
    parser = sub.add_parser(
        "replay",
        help="show a recorded run in the dashboard",
        description=(
            "Replay a recording (.ndjson or .ndjson.gz) in the same dashboard as "
            "'gpuscale watch'. Keys: space pause, left/right seek 10 s, +/- speed, "
            "end jump to the end, ? help, q quit. Needs no GPU and no TensorFlow."
        ),
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="a recording made by gpuscale")
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="run seconds per wall second (default 1; +/- change it while playing)",
    )
    parser.add_argument(
        "--end", action="store_true", help="start at the final state (the run's summary)"
    )
    parser.set_defaults(func=main)


def _is_sweep_file(path: Path) -> bool:
    """A whole-file JSON document (what ``gpuscale recommend --json`` writes)
    rather than one event per line."""
    from gpuscale.events.bounded import JsonInputError, decode_json, open_untrusted, read_bounded

    try:
        f, regular = open_untrusted(path)
        f.close()
        if not regular:  # a pipe's bytes are gone once read: nothing to sniff
            return False
        document = decode_json(read_bounded(path, 10 * 2**20))
    except JsonInputError:
        return False
    return isinstance(document, dict) and "kind" not in document


def main(args: argparse.Namespace) -> int:
    from gpuscale.errors import GpuscaleError
    from gpuscale.ui.sources import ReplaySource

    if not 0 < args.speed <= MAX_SPEED:
        raise GpuscaleError(
            f"--speed must be above 0 and at most {MAX_SPEED:g}, got {args.speed:g}"
        )
    if args.file.is_dir():
        raise GpuscaleError(f"{args.file} is a directory, not a recording")
    # Read (and validate) the whole file before the screen opens: an unusable
    # file is one line and exit 2; a forgivable problem (a cut last line, no
    # end event) is shown inside the dashboard.
    try:
        source = ReplaySource(args.file, speed=args.speed, end=args.end)
    except GpuscaleError:
        if _is_sweep_file(args.file):
            raise GpuscaleError(
                f"{args.file} is a sweep file (device counts and their throughput), not a run "
                f"recording; read it with 'gpuscale recommend --from {args.file}'"
            ) from None
        raise

    from gpuscale.errors import EXIT_INTERRUPTED
    from gpuscale.ui.app import build_app, run_until_stop_signal

    if run_until_stop_signal(build_app(source)):
        return EXIT_INTERRUPTED
    return 0
