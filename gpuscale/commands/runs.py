"""`gpuscale runs` (being built)."""

from __future__ import annotations

from gpuscale.errors import GpuscaleError


def register(sub) -> None:
    parser = sub.add_parser("runs", help="(not built yet)")
    parser.set_defaults(func=main)


def main(args) -> int:
    raise GpuscaleError("'gpuscale runs' is not built yet")
