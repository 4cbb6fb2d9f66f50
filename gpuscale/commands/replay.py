"""`gpuscale replay` (being built)."""

from __future__ import annotations

from gpuscale.errors import GpuscaleError


def register(sub) -> None:
    parser = sub.add_parser("replay", help="(not built yet)")
    parser.set_defaults(func=main)


def main(args) -> int:
    raise GpuscaleError("'gpuscale replay' is not built yet")
