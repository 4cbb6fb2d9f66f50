"""How well gpuscale predicts device counts nobody measured, checked on the
published scaling corpus (not shipped: ``GPUSCALE_CORPUS``, else
``../shared/corpus/published-scaling.json`` beside the checkout; :mod:`benchmarks.corpus`).

For every GPU table of the corpus: fit on its 1- and 2-GPU rows and predict 4, 8
(and 16 where published); fit on 1, 2, 4 and predict 8 (and 16). Cross-validated
grouped by source (:func:`benchmarks.corpus.fold_of`): the learned coefficients
and the range calibration used for a table are learned (by
:mod:`benchmarks.calibrate`'s code) on the other sources only, so no table
predicts itself or its siblings from the same machines.

Printed: per ``source_group``, per interconnect, per exchange load (the
calibration's strata, :func:`gpuscale.analysis.predict.load_of`) the error of the predicted throughput
(``|predicted / published - 1|``), how often the 80 % range held, its median
half-width, and the *wrong bets*: recommendations of a predicted count (``recommend``
with the table's largest count as ``--max-devices``) for more devices than the
published table supports under the same marginal-efficiency rule; then per
corpus flag (its README: ``withdrawn-later``, rows the source later removed;
``non-monotonic``, throughput that drops as GPUs are added; ...; ``unflagged``,
none), every table still predicted and judged: the flags say where the tail comes
from, not what to leave out. The worst tables follow, then the seed tables of ``sample_runs/`` (fitted on their 1- and
2-GPU rows; the ranges of their gather and host series, which the corpus lacks,
learned without the table's own origin document) and, with ``--live``, CPU
logical devices of this machine (separately: they are not GPUs). Last line::

    prediction error: median X%, p90 Y%, max Z%; 80% ranges hold for C% (median half-width W%); wrong bets K of M

``--baseline`` evaluates the bare model as it was before calibration (no learned
terms, no ranges, deciding on the point prediction).

``--folds machine`` groups the cross-validation by machine type instead (28
folds; one machine appears in several snapshots of a source).

Run: ``python benchmarks/prediction.py [--baseline] [--live] [--folds machine] [--corpus PATH]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus  # noqa: E402
from gpuscale.analysis import metrics  # noqa: E402
from gpuscale.analysis.predict import Calibration  # noqa: E402
from gpuscale.analysis.sweep import SweepPoint, read_sweep_file  # noqa: E402

FLOOR = 0.6

NO_RANGES = Calibration(coverage=0.8, source="none: the bare model", strata=[])
"""``--baseline``: no factors, no ranges, so ``recommend`` decides on the point value."""


class Result:
    def __init__(
        self,
        group: str,
        table: str,
        n: int,
        fitted: tuple[int, ...],
        published: float,
        predicted: float,
        low: float | None,
        high: float | None,
    ) -> None:
        self.group, self.table, self.n, self.fitted = group, table, n, fitted
        self.interconnect = ""
        self.load = ""
        """The exchange load at the largest fitted count (a calibration stratum)."""
        self.guess = False
        """The range is a guess (no stated coverage: an exchange the corpus lacks)."""
        self.flags: tuple[str, ...] = ()
        """The corpus' flags on the table (``withdrawn-later``, ``non-monotonic``, ...)."""
        self.published, self.predicted, self.low, self.high = published, predicted, low, high

    @property
    def error(self) -> float:
        return abs(self.predicted / self.published - 1)

    @property
    def held(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.published <= self.high

    @property
    def half_width(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2 / self.predicted


def published_choice(rows: dict[int, float], floor: float = FLOOR) -> int:
    """The count the published table supports: the same walk as ``recommend``."""
    counts = sorted(rows)
    current = counts[0]
    for n in counts[1:]:
        if metrics.marginal_efficiency(rows[current], current, rows[n], n) < floor:
            break
        current = n
    return current


class Verdicts:
    """What ``recommend`` answered over all cases, against the published tables."""

    def __init__(self) -> None:
        self.wrong: list[tuple[str, int, int]] = []
        """Wrong bets: ``(case, recommended predicted count, count the table supports)``."""
        self.bets = 0
        """Recommendations of a predicted count."""
        self.cases = 0
        self.cautious = 0
        """Recommendations of fewer devices than the table supports (the price of
        not betting: "measure N next" where the bet would have paid)."""


def evaluate(
    tables: list[dict], baseline: bool, fold_of: Callable[[dict], str] = corpus.fold_of
) -> tuple[list[Result], Verdicts]:
    """Results and the verdicts (wrong bets, bets, cautious answers); ``fold_of``
    groups the tables for cross-validation (by source unless told)."""
    from gpuscale.analysis.model import fit
    from gpuscale.analysis.predict import fit_calibrated, load_of
    from gpuscale.analysis.recommend import recommend

    calibrations: dict[str, object] = {}
    if not baseline:
        from benchmarks.calibrate import learn

        for fold in sorted({fold_of(t) for t in tables}):
            calibrations[fold] = learn([t for t in tables if fold_of(t) != fold])
    results: list[Result] = []
    verdicts = Verdicts()
    for t in tables:
        rows = corpus.throughputs(t)
        calibration = calibrations.get(fold_of(t))
        for fitted, targets in corpus.cases(t):
            pts = corpus.points(t, fitted)
            if baseline:
                model = fit(pts)
                for n in targets:
                    results.append(
                        Result(
                            t["source_group"],
                            t["id"],
                            n,
                            fitted,
                            rows[n],
                            model.throughput(n),
                            None,
                            None,
                        )
                    )
                rec = recommend(
                    pts, max_devices=max(rows), min_efficiency=FLOOR, calibration=NO_RANGES
                )
            else:
                from gpuscale.analysis.predict import predict_rows

                got = {p.devices: p for p in predict_rows(pts, targets, calibration=calibration)}
                for n in targets:
                    p = got[n]
                    results.append(
                        Result(
                            t["source_group"],
                            t["id"],
                            n,
                            fitted,
                            rows[n],
                            p.throughput or 0.0,
                            p.throughput_low,
                            p.throughput_high,
                        )
                    )
                rec = recommend(
                    pts, max_devices=max(rows), min_efficiency=FLOOR, calibration=calibration
                )
            load = load_of(fit(pts) if baseline else fit_calibrated(pts, calibration), max(fitted))
            for r in results[-len(targets) :]:
                r.load = f"{load} exchange"
            supported = published_choice(rows)
            verdicts.cases += 1
            verdicts.cautious += rec.devices < supported
            if rec.predicted:
                verdicts.bets += 1
                if rec.devices > supported:
                    verdicts.wrong.append(
                        (f"{t['id']} from {','.join(map(str, fitted))}", rec.devices, supported)
                    )
    klass = {t["id"]: t["interconnect"] for t in tables}
    flags = {t["id"]: tuple(t.get("flags") or ()) for t in tables}
    for r in results:
        r.interconnect = klass[r.table]
        r.flags = flags[r.table]
    return results, verdicts


def pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def summary_line(results: list[Result], ranges: str = "80% ranges") -> str:
    errors = sorted(r.error for r in results)
    line = (
        f"median {pct(statistics.median(errors))}, p90 {pct(metrics.percentile(errors, 90))}, "
        f"max {pct(max(errors))}"
    )
    held = [r.held for r in results if r.held is not None]
    if held:
        widths = [r.half_width or 0.0 for r in results if r.half_width is not None]
        line += (
            f"; {ranges} hold for {pct(sum(held) / len(held))} "
            f"(median half-width {pct(statistics.median(widths))})"
        )
    else:
        line += "; no ranges"
    return line


def seed_cases(baseline: bool) -> list[Result]:
    """The seed tables' larger counts from their 1 and 2; the ranges of their
    gather and host series (which the corpus does not cover) learned without the
    table's own origin document (:func:`benchmarks.calibrate.learn_seeds`), so no
    table predicts itself; their rings get the corpus strata as shipped."""
    import msgspec

    from benchmarks.calibrate import learn_seeds
    from gpuscale.analysis.model import fit
    from gpuscale.analysis.predict import default_calibration

    root = Path(__file__).resolve().parent.parent / "sample_runs"
    out = []
    for name in ("seed000_m60.json", "seed000_v100.json", "seed002_mnist.json"):
        document = name[len("seed") :].split("_", 1)[0]
        held_out = msgspec.structs.replace(
            default_calibration(), seeds=learn_seeds(leave_out=document)
        )
        sweep = read_sweep_file(root / name)
        by_config: dict[str, list[SweepPoint]] = defaultdict(list)
        for p in sweep.points:
            by_config[p.config].append(p)
        for config, pts in by_config.items():
            known = [p for p in pts if p.devices in (1, 2)]
            targets = sorted({p.devices for p in pts if p.devices > 2})
            if baseline:
                model = fit(known)
                got = {n: (model.throughput(n), None, None) for n in targets}
            else:
                from gpuscale.analysis.predict import predict_rows

                got = {
                    p.devices: (p.throughput or 0.0, p.throughput_low, p.throughput_high)
                    for p in predict_rows(known, targets, calibration=held_out)
                }
                guess = {
                    p.devices
                    for p in predict_rows(known, targets, calibration=held_out)
                    if p.coverage is None and p.throughput_low is not None
                }
            for p in pts:
                if p.devices in got:
                    x, lo, hi = got[p.devices]
                    out.append(
                        Result(
                            "seed",
                            f"{name}: {config}",
                            p.devices,
                            (1, 2),
                            p.throughput or 0.0,
                            x,
                            lo,
                            hi,
                        )
                    )
                    out[-1].guess = not baseline and p.devices in guess
    return out


def live_cases() -> list[Result]:
    """CPU logical devices of this machine: the real trainer at 1-4 devices, fitted on 1 and 2."""
    import time

    from gpuscale.analysis.summary import RunAccumulator
    from gpuscale.analysis.sweep import point_from_summary
    from gpuscale.live.trainer_run import LiveRun
    from gpuscale.trainer.options import TrainConfig

    out = []
    for scaling in ("weak", "strong"):
        pts = []
        for n in (1, 2, 3, 4):
            batch = {"batch_per_replica": 32} if scaling == "weak" else {"global_batch": 96}
            run = LiveRun(
                TrainConfig(devices=n, width=32, steps=60, warmup_steps=5, **batch), record=None
            )
            acc = RunAccumulator()
            t0 = time.perf_counter()
            try:
                run.start()
                for event in run.events(timeout=None):
                    acc.add(event)
            finally:
                if not run.done:
                    run.stop()
            if run.error is not None:
                raise SystemExit(f"the {n}-device {scaling} run failed: {run.error.message}")
            pts.append(point_from_summary(acc.summary(), acc.start, f"live {scaling} {n}"))
            print(f"  measured {scaling} N={n} in {time.perf_counter() - t0:.0f} s", flush=True)
        from gpuscale.analysis.predict import predict_rows

        got = {p.devices: p for p in predict_rows([p for p in pts if p.devices <= 2], [3, 4])}
        for p in pts:
            if p.devices in got:
                q = got[p.devices]
                out.append(
                    Result(
                        "cpu-logical",
                        f"here {scaling}",
                        p.devices,
                        (1, 2),
                        p.throughput or 0.0,
                        q.throughput or 0.0,
                        q.throughput_low,
                        q.throughput_high,
                    )
                )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(corpus.DEFAULT_CORPUS))
    parser.add_argument("--baseline", action="store_true", help="the bare model, no calibration")
    parser.add_argument("--live", action="store_true", help="also CPU logical devices here (slow)")
    parser.add_argument("--worst", type=int, default=8, help="worst predictions shown")
    parser.add_argument(
        "--folds",
        choices=("source", "machine"),
        default="source",
        help="cross-validation groups: by source (default) or by machine type",
    )
    args = parser.parse_args()

    tables = corpus.load_tables(args.corpus)
    folds = corpus.machine_of if args.folds == "machine" else corpus.fold_of
    results, verdicts = evaluate(tables, args.baseline, folds)
    wrong = verdicts.wrong
    for attr in ("group", "interconnect", "load"):
        by_key: dict[str, list[Result]] = defaultdict(list)
        for r in results:
            by_key[getattr(r, attr)].append(r)
        for key, rs in sorted(by_key.items()):
            cases = {f"{r.table} from {','.join(map(str, r.fitted))}" for r in rs}
            k = sum(1 for w in wrong if w[0] in cases)
            print(f"{key:18s} {len(rs):5d} points: {summary_line(rs)}; wrong bets {k}")
    by_flag: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        for flag in r.flags or ("unflagged",):
            by_flag[flag].append(r)
    for flag, rs in sorted(by_flag.items()):
        print(f"flag {flag:13s} {len(rs):5d} points: {summary_line(rs)}")
    for fitted in corpus.FIT_SETS:
        rs = [r for r in results if r.fitted == fitted]
        print(f"from {','.join(map(str, fitted)):7s}       {len(rs):5d} points: {summary_line(rs)}")
    print("worst predictions:")
    for r in sorted(results, key=lambda r: -r.error)[: args.worst]:
        rng = (
            f" range {r.low:,.0f}-{r.high:,.0f}" if r.low is not None and r.high is not None else ""
        )
        print(
            f"  {r.table} N={r.n} from {','.join(map(str, r.fitted))}: published {r.published:,.0f}, "
            f"predicted {r.predicted:,.0f}{rng} ({r.predicted / r.published - 1:+.0%})"
        )
    print(f"wrong bets ({len(wrong)}):")
    for name, got, supported in wrong[: args.worst]:
        print(f"  {name}: recommended {got}, the table supports {supported}")
    seeds = seed_cases(args.baseline)
    guessed = [r for r in seeds if r.guess and r.held is not None]
    print(
        f"seed tables (sample_runs, from 1,2; {len(seeds)} points): "
        + summary_line(seeds, "ranges" if guessed else "80% ranges")
        + (
            f"; of which gather/host (ranges a guess, learned without their document) "
            f"{sum(bool(r.held) for r in guessed)} of {len(guessed)} held"
            if guessed
            else ""
        )
    )
    if args.live:
        live = live_cases()
        print(f"CPU logical devices here ({len(live)} points): {summary_line(live)}")
    print(
        f"cautious: {verdicts.cautious} of {verdicts.cases} cases recommend fewer devices than "
        "the published table supports (the price of not betting)"
    )
    print(f"prediction error: {summary_line(results)}; wrong bets {len(wrong)} of {verdicts.bets}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
