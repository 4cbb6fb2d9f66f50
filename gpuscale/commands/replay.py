"""`gpuscale replay FILE`: the dashboard fed from a recording (no TensorFlow)."""

from __future__ import annotations

import argparse
from pathlib import Path


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


def main(args: argparse.Namespace) -> int:
    from gpuscale.errors import GpuscaleError
    from gpuscale.ui.sources import ReplaySource

    if not args.speed > 0:
        raise GpuscaleError(f"--speed must be a positive number, got {args.speed:g}")
    if args.file.is_dir():
        raise GpuscaleError(f"{args.file} is a directory, not a recording")
    # Read (and validate) the whole file before the screen opens: an unusable
    # file is one line and exit 2; a forgivable problem (a cut last line, no
    # end event) is shown inside the dashboard.
    source = ReplaySource(args.file, speed=args.speed, end=args.end)

    from gpuscale.ui.app import build_app

    app = build_app(source)
    app.run()
    return 0
