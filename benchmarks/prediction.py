"""How well the communication model predicts device counts it has not seen.

Two sets of cases, each predicted from the smaller counts only
(:func:`gpuscale.analysis.model.fit` on them, then ``step_time_s`` at the larger):

* here: a sweep of the real trainer (``gpuscale.live.trainer_run.LiveRun``, one child
  process per count) on 1, 2, 3, 4 CPU logical devices, fitted on 1 and 2,
  predicting 3 and 4; once with weak scaling (fixed batch per replica) and once
  with strong scaling (fixed global batch). The devices share this machine's
  cores, and the model is told so by the recordings' platform (``cpu-logical``:
  see "CPU logical devices" in :mod:`gpuscale.analysis.model`), so what is
  predicted is these logical devices, not GPUs;
* seed 002's published table (gather on gpu:0 and NCCL): fitted on the 1- and 2-GPU
  rows, predicting 4 and 8 GPUs.

Error = predicted step time / measured - 1. Seed 000 (4 GPUs from 1 and 2) is
printed too, on its own line, because the issue did not ask for it and it is the
hardest case (its exchange grows far less than linearly from 2 to 4 GPUs); it is
not in the last line. Last line: ``prediction error: median X%, max Y%`` over
the cases the issue names (here + seed 002).

Run: ``python benchmarks/prediction.py [--steps N] [--no-live]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuscale.analysis.model import fit  # noqa: E402
from gpuscale.analysis.sweep import SweepPoint, read_sweep_file  # noqa: E402

Case = tuple[str, int, float, float]
"""(label, devices, measured step time, predicted step time)"""


def predict_cases(label: str, points: list[SweepPoint], fit_on: set[int]) -> list[Case]:
    known = [p for p in points if p.devices in fit_on]
    model = fit(known)
    return [
        (label, p.devices, p.step_time_s or 0.0, model.step_time_s(p.devices))
        for p in sorted(points, key=lambda q: q.devices)
        if p.devices not in fit_on
    ]


def table_cases(file: str, fit_on: set[int]) -> list[Case]:
    sweep = read_sweep_file(ROOT / "sample_runs" / file)
    by_config: dict[str, list[SweepPoint]] = {}
    for p in sweep.points:
        by_config.setdefault(p.config, []).append(p)
    cases = []
    for config, pts in by_config.items():
        cases += predict_cases(f"{file}: {config}", pts, fit_on)
    return cases


def live_points(counts: list[int], steps: int, scaling: str) -> list[SweepPoint]:
    from gpuscale.analysis.summary import RunAccumulator
    from gpuscale.analysis.sweep import point_from_summary
    from gpuscale.live.trainer_run import LiveRun
    from gpuscale.trainer.options import TrainConfig

    points = []
    for n in counts:
        batch = {"batch_per_replica": 32} if scaling == "weak" else {"global_batch": 96}
        config = TrainConfig(devices=n, width=32, steps=steps, warmup_steps=5, **batch)
        run = LiveRun(config, record=None)
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
        summary = acc.summary()
        point = point_from_summary(summary, acc.start, f"live {scaling} {n}")
        print(
            f"  measured {scaling:6s} N={n}: {summary.step_time_s * 1000:7.1f} ms/step "
            f"(spread {summary.spread or 0:.0%}, {summary.steps_counted} steps, "
            f"run {time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        points.append(point)
    return points


def show(cases: list[Case]) -> list[float]:
    errors = []
    for label, n, measured, predicted in cases:
        error = predicted / measured - 1
        errors.append(abs(error))
        print(
            f"  {label:48s} N={n:<2d} measured {measured * 1000:8.1f} ms  "
            f"predicted {predicted * 1000:8.1f} ms  error {error:+6.1%}"
        )
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per live run (5 warm-up)")
    parser.add_argument("--no-live", action="store_true", help="skip the live sweep here")
    args = parser.parse_args()

    headline: list[float] = []
    if not args.no_live:
        cores = os.cpu_count() or 2
        print(f"here: trainer on 1-4 CPU logical devices sharing {cores} cores, fitted on 1 and 2")
        for scaling in ("weak", "strong"):
            points = live_points([1, 2, 3, 4], args.steps, scaling)
            headline += show(predict_cases(f"here, {scaling} scaling", points, {1, 2}))
    print("seed 002 (published), fitted on 1 and 2 GPUs:")
    seed002 = show(table_cases("seed002_mnist.json", {1, 2}))
    headline += seed002
    print("seed 000 (published, not in the last line), fitted on 1 and 2 GPUs:")
    extra = show(table_cases("seed000_m60.json", {1, 2}) + table_cases("seed000_v100.json", {1, 2}))
    print(f"seed 002 alone: median {statistics.median(seed002):.1%}, max {max(seed002):.1%}")
    print(
        f"seed 000 alone: median {statistics.median(extra):.1%}, max {max(extra):.1%}; "
        f"all cases together: median {statistics.median(headline + extra):.1%}"
    )
    print(f"prediction error: median {statistics.median(headline):.1%}, max {max(headline):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
