"""`gpuscale watch` (being built)."""

from __future__ import annotations

from gpuscale.errors import GpuscaleError


def register(sub) -> None:
    parser = sub.add_parser("watch", help="(not built yet)")
    parser.set_defaults(func=main)


def main(args) -> int:
    raise GpuscaleError("'gpuscale watch' is not built yet")
