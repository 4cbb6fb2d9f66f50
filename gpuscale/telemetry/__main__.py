"""``python -m gpuscale.telemetry``: run the sampler for a while, print its events.

One JSON object per line (the recording format), for checking what the sampler
sees on a machine: ``python -m gpuscale.telemetry --seconds 3 --interval 0.5``.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import sys
import time

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import encode
from gpuscale.telemetry.sampler import DEFAULT_INTERVAL_S, INTERVAL_HELP, Sampler

MAX_SECONDS = 7 * 24 * 3600.0
"""Longest --seconds (a week): longer is a typo, and far beyond it the deadline
arithmetic of the sampling loop overflows."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected seconds above 0 and at most {MAX_SECONDS:g} (a week), got {text!r}"
        )
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpuscale.telemetry", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--seconds", type=_seconds, default=3.0, help="how long to sample (at most a week)"
    )
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, help=INTERVAL_HELP)
    parser.add_argument(
        "--pid", type=int, action="append", default=None, help="a PID to follow (repeatable)"
    )
    args = parser.parse_args(argv)
    pids = args.pid or [os.getpid()]
    events: queue.Queue = queue.Queue()
    try:
        sampler = Sampler(events.put, interval_s=args.interval, pids=lambda: pids)
    except GpuscaleError as exc:
        print(f"gpuscale: error: {exc}", file=sys.stderr)
        return exc.exit_code
    end = time.monotonic() + args.seconds
    with sampler:
        try:
            while time.monotonic() < end:
                try:
                    event = events.get(timeout=max(0.0, end - time.monotonic()))
                except queue.Empty:
                    break
                sys.stdout.write(encode(event).decode() + "\n")
                sys.stdout.flush()
        except (KeyboardInterrupt, BrokenPipeError):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
