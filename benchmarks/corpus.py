"""The published scaling corpus (``published-scaling.json``, not shipped with the
repository) as sweep points, and the cases the prediction benchmark and the
calibration share.

Where the corpus comes from (:func:`find_corpus`), first found wins:

1. ``GPUSCALE_CORPUS``, when set: that file, used as given (a path that does not
   exist is one error line when the corpus is loaded, never another file);
2. ``shared/corpus/published-scaling.json`` beside the checkout (``../shared/...``,
   as in ``/work/main`` beside ``/work/shared``), else beside a folder above it
   (a git worktree one level deeper, ``/work/wt/NAME``).

Without either, the benchmarks that need it stop with one line saying so, and the
tests that need it are skipped.

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

CORPUS_ENV = "GPUSCALE_CORPUS"
"""The variable that names the corpus file explicitly."""
SHARED_CORPUS = Path("shared") / "corpus" / "published-scaling.json"
"""Where the corpus sits relative to a folder beside the checkout."""


def find_corpus() -> Path | None:
    """The corpus file by the lookup order in this module's docstring: the
    ``GPUSCALE_CORPUS`` path as given, existing or not; else the first existing
    ``shared/corpus/published-scaling.json`` beside the checkout or a folder above
    it; ``None`` when there is none."""
    explicit = os.environ.get(CORPUS_ENV, "")
    if explicit:
        return Path(explicit).expanduser()
    for folder in ROOT.parents:
        candidate = folder / SHARED_CORPUS
        if candidate.is_file():
            return candidate
    return None


DEFAULT_CORPUS: Path = find_corpus() or ROOT.parent / SHARED_CORPUS
"""The corpus the benchmarks read by default (:func:`find_corpus`; where none is
found, the first place looked, which does not exist)."""

FIT_SETS: tuple[tuple[int, ...], ...] = ((1, 2), (1, 2, 4))
"""What each table is fitted on; every larger published count is predicted."""


def load_tables(path: str | Path = DEFAULT_CORPUS) -> list[dict]:
    """The corpus' tables; one line and exit 1 (``SystemExit``) when ``path`` is
    missing or is not a corpus file."""
    path = Path(path)
    if not path.is_file():
        named = os.environ.get(CORPUS_ENV, "")
        if named and Path(named).expanduser() == path:
            why = f"{CORPUS_ENV} names it; set it to the corpus file or unset it"
        else:
            why = (
                f"it is not shipped with gpuscale: put it at ../{SHARED_CORPUS} beside the "
                f"checkout or set {CORPUS_ENV}=FILE"
            )
        raise SystemExit(f"{path}: no published corpus there ({why})")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: cannot read the published corpus ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != "published-scaling-tables":
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
