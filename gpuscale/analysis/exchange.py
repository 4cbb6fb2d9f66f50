"""How gradients travel between devices: the one vocabulary the sweep file, the
run summary and the model share (its own module so that :mod:`.summary` and
:mod:`.sweep` need not import each other)."""

from __future__ import annotations

from typing import Literal

Exchange = Literal["ring", "gather", "host"]
"""How gradients travel. ``ring``: all-reduce between the devices (NCCL, collective,
hierarchical copy); ``gather``: gradients gathered on one device (reduce-to-one,
tower-style gathering on gpu:0, variables kept on one GPU); ``host``: variables
on the CPU (central storage), every device exchanges with the host."""


def exchange_of(strategy: str | None, all_reduce: str | None) -> Exchange:
    """The exchange pattern of a run from its strategy and all-reduce choice."""
    if strategy == "central-storage":
        return "host"
    if all_reduce == "reduce-to-one":
        return "gather"
    return "ring"
