"""The published scaling corpus (``../shared/corpus/published-scaling.json``) as
sweep points, and the cases the prediction benchmark and the calibration share.

A *case* is one table, one set of fitted counts (``{1, 2}`` or ``{1, 2, 4}``) and
the larger published counts it predicts. Cases are grouped into folds by source
(one snapshot of one repository: its fp16 and fp32 files are one group, because
they are the same machines), so that cross-validation never lets a table, or its
siblings from the same machines, calibrate its own prediction.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuscale.analysis.sweep import SweepPoint  # noqa: E402

DEFAULT_CORPUS = Path(
    os.environ.get(
        "GPUSCALE_CORPUS", ROOT.parent.parent / "shared" / "corpus" / "published-scaling.json"
    )
)
if not DEFAULT_CORPUS.exists():
    DEFAULT_CORPUS = Path("/work/shared/corpus/published-scaling.json")

FIT_SETS: tuple[tuple[int, ...], ...] = ((1, 2), (1, 2, 4))
"""What each table is fitted on; every larger published count is predicted."""


def load_tables(path: str | Path = DEFAULT_CORPUS) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format") != "published-scaling-tables":
        raise SystemExit(f"{path}: not a published-scaling-tables file")
    return doc["tables"]


def fold_of(table: dict) -> str:
    """The cross-validation group: the source with its precision taken out."""
    return re.sub(r"fp16|fp32|tf32|amp", "fp", table["source"])


def machine_of(table: dict) -> str:
    """The machine type (its description without the parenthesised host, and its
    GPU): the stricter grouping ``benchmarks/prediction.py --folds machine`` checks,
    since one machine appears in several snapshots of a source."""
    name = re.sub(r"\s*\(.*?\)", "", table["machine"]).strip().lower()
    return f"{name} | {table['gpu']}"


def throughputs(table: dict) -> dict[int, float]:
    return {int(n): float(x) for n, x in table["throughput"].items()}


def points(table: dict, counts: tuple[int, ...] | None = None) -> list[SweepPoint]:
    """The table's rows at ``counts`` (all when ``None``) as measured weak-scaling
    points of one configuration (the corpus gives a batch per GPU for every table)."""
    rows = throughputs(table)
    return [
        SweepPoint(
            devices=n,
            scaling="weak",
            model=table["model"],
            per_replica_batch=max(1, int(table["batch_per_replica"])),
            throughput=x,
            step_time_s=max(1, int(table["batch_per_replica"])) * n / x,
            platform="gpu",
            device_name=table["gpu"],
            interconnect=table["interconnect"],
            mixed_precision=table["precision"] == "amp",
            source=table["id"],
        )
        for n, x in sorted(rows.items())
        if counts is None or n in counts
    ]


def cases(table: dict) -> list[tuple[tuple[int, ...], list[int]]]:
    """``(fitted counts, predicted counts)`` for this table."""
    rows = throughputs(table)
    out = []
    for fit_on in FIT_SETS:
        if not all(n in rows for n in fit_on):
            continue
        targets = sorted(n for n in rows if n > max(fit_on) and n in (4, 8, 16))
        if targets:
            out.append((fit_on, targets))
    return out
