"""The Why at a measured count quotes the table (the review of rep.json: two
probed runs and one unprobed at 2 devices): the exposed share of the combined row,
not the median of the raw runs, and one bandwidth measure, the footnote's busbw."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuscale.analysis.predict import Superlinear, noise_widened, superlinear_guessed
from gpuscale.analysis.sweep import SweepPoint

REP = Path(__file__).parent / "fixtures" / "rep_two_runs.json"


def _recommend(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "gpuscale", "recommend", "--from", str(REP), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "250", "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    return done.stdout


def _why_exchange(out: str) -> str:
    return next(line for line in out.splitlines() if "Gradient exchange takes" in line)


def test_the_why_at_a_measured_count_quotes_the_tables_combined_row():
    out = _recommend("--max-devices", "2")
    assert "11% ±2 (33 probes)" in out  # the table's row
    why = _why_exchange(out)
    # it said "15% of each step" (the median of the raw runs: 8 ms over 55 ms)
    assert "takes 11% of each step at 2 devices" in why
    assert "measured (±2 points, 33 probes)" in why


def test_the_why_quotes_busbw_of_the_tables_exposed_time():
    out = _recommend("--max-devices", "2")
    why = _why_exchange(out)
    # the table's 11% of 60.0 ms: 6.46 ms for 100 MB, busbw = algbw x 2(2-1)/2,
    # named as the footnote names its figure
    assert "(100.0 MB per step; exposed exchange ≈ 15.5 GB/s effective, busbw)" in why
    assert "at an effective" not in why


def test_the_why_at_more_than_two_devices_quotes_busbw_not_algbw(tmp_path):
    # 8 devices measured: busbw = algbw x 2(8-1)/8 = 1.75 algbw (it said the algbw)
    doc = (
        '{"defaults": {"scaling": "strong", "global_batch": 256, "config": "nccl", '
        '"payload_bytes": 100000000}, "points": ['
        '{"devices": 1, "step_time_s": 0.100},'
        '{"devices": 8, "step_time_s": 0.020, "compute_s": 0.0125, "allreduce_s": 0.005, '
        '"allreduce_err_s": 0.0005, "apply_s": 0.0025, "probes": 30}]}'
    )
    from gpuscale.analysis.recommend import recommend
    from gpuscale.analysis.sweep import read_sweep_file

    path = tmp_path / "eight.json"
    path.write_text(doc)
    rec = recommend(read_sweep_file(path).points, max_devices=8)
    why = next(r for r in rec.reasons if r.startswith("Gradient exchange takes"))
    assert "25% of each step at 8 devices" in why
    assert "exposed exchange ≈ 35.0 GB/s effective, busbw" in why  # 20 GB/s x 1.75
    assert "20.0 GB/s" not in why


def _borrowed_prediction() -> SweepPoint:
    return SweepPoint(
        devices=8,
        scaling="strong",
        throughput=1000.0,
        throughput_low=900.0,
        throughput_high=1100.0,
        throughput_safe=850.0,
        coverage=0.8,
        coverage_basis="80% of predictions ...; borrowed: no published table has CPU "
        "logical devices, so the range of every GPU link",
        platform="cpu-logical",
        predicted=True,
    )


def test_a_superlinear_guess_keeps_that_its_range_was_borrowed():
    guessed = superlinear_guessed(_borrowed_prediction(), Superlinear(1, 2, 1.2))
    basis = guessed.coverage_basis or ""
    assert basis.startswith("a guess, not a calibrated range: the measurements scale")
    assert "borrowed (none has CPU logical devices)" in basis  # it was overwritten
    # and noise after it joins a third reason, "a guess" said once
    both = noise_widened(guessed, 0.4).coverage_basis or ""
    assert both.count("a guess") == 1 and "superlinear" in both and "noisy" in both
    assert "CPU logical devices" in both
