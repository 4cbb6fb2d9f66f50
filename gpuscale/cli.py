"""The ``gpuscale`` command line. Imports neither TensorFlow nor Textual: each
command module imports what it needs inside its ``main``."""

from __future__ import annotations

import argparse
import importlib
import sys

from gpuscale import __version__
from gpuscale.errors import EXIT_INTERRUPTED, EXIT_USAGE, GpuscaleError

COMMANDS = ("run", "watch", "recommend", "replay", "runs", "devices")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other bad input
        self.exit(EXIT_USAGE, f"gpuscale: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpuscale",
        description=(
            "Will this TensorFlow training job run faster on several GPUs, "
            "or am I paying for communication?"
        ),
    )
    parser.add_argument("--version", action="version", version=f"gpuscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"gpuscale.commands.{name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:  # no COMMAND (a command may define its own "command")
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except GpuscaleError as exc:
        print(f"gpuscale: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuscale: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
