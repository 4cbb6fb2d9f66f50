"""Exchanges the published corpus does not cover (gather, host; issue 12): their
ranges come from the seed tables, learned without the table's own document,
say how thin they are, and are never bet on without a calibrated bound."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest

from gpuscale.analysis.predict import (
    MIN_FOR_BET,
    MIN_FOR_COVERAGE,
    Calibration,
    SeedRange,
    Stratum,
    default_calibration,
    predict_rows,
)
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import SweepPoint, normalize
from gpuscale.cli import main

calibrate = pytest.importorskip("benchmarks.calibrate")

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def _points(exchange: str, throughputs: dict[int, float]) -> list[SweepPoint]:
    return [
        normalize(
            SweepPoint(
                devices=n,
                throughput=x,
                scaling="weak",
                per_replica_batch=64,
                exchange=exchange,
                config=exchange,
            )
        )
        for n, x in throughputs.items()
    ]


def _narrow(seeds: SeedRange | None) -> Calibration:
    """Corpus strata and a seed range both +-1 %: only the bet bound differs."""
    strata = [
        Stratum(
            interconnect="*", top=2, devices=n, tables=100, factor=1.0, q_low=-0.01, q_high=0.01
        )
        for n in (4, 8)
    ]
    return Calibration(coverage=0.8, source="test", strata=strata, seeds=seeds)


def _seeds(bet: float | None) -> SeedRange:
    return SeedRange(
        exchanges=["gather", "host"],
        series=5,
        documents=2,
        predictions=7,
        low_per_doubling=-0.01,
        high_per_doubling=0.01,
        bet_per_doubling=bet,
        coverage=None if bet is None else 0.8,
    )


SCALES_WELL = {1: 1000.0, 2: 1990.0}


def test_a_gather_prediction_with_a_guessed_range_is_never_a_bet():
    rec = recommend(_points("gather", SCALES_WELL), calibration=_narrow(_seeds(None)))
    assert (rec.devices, rec.predicted) == (2, False)
    assert rec.measure_next and rec.measure_next.startswith("measure 4 next: predicted")
    step = next(s for s in rec.walk if s.devices_to == 4)
    assert step.uncalibrated and step.uncertain and not step.accepted
    assert step.marginal_efficiency >= 0.6
    assert any(
        "its range a guess for a gather exchange (floor 60%): not a safe bet" in r
        for r in rec.reasons
    )
    assert not any("such predictions of published tables" in r for r in rec.reasons)
    assert any(
        "whether 2 -> 4 pays is not known: the published tables have no gather exchange" in r
        for r in rec.reasons
    )


def test_the_same_table_as_a_ring_or_with_a_calibrated_bound_is_bet_on():
    ring = recommend(_points("ring", SCALES_WELL), calibration=_narrow(_seeds(None)))
    assert ring.predicted and ring.devices == 8
    bound = recommend(_points("gather", SCALES_WELL), calibration=_narrow(_seeds(-0.02)))
    assert bound.predicted and bound.devices > 2


def test_gather_and_host_predictions_take_no_corpus_factor_or_stratum():
    """The corpus' factor and strata were learned on rings: a factor of 0.5 moves a
    ring's prediction and leaves a gather's alone; its range is the seed one."""
    halved = Calibration(
        coverage=0.8,
        source="test",
        strata=[
            Stratum(
                interconnect="*", top=2, devices=4, tables=100, factor=0.5, q_low=-0.1, q_high=0.1
            )
        ],
        seeds=_seeds(None),
    )
    bare = predict_rows(_points("host", SCALES_WELL), [4], calibration=_narrow(None))[0]
    got = predict_rows(_points("host", SCALES_WELL), [4], calibration=halved)[0]
    assert got.throughput == pytest.approx(bare.throughput)
    assert got.throughput_low == pytest.approx(got.throughput * math.exp(-0.01))
    # the high end stops at the weak floor: 100 % of the fastest measured step (1 device's)
    assert got.throughput_high == pytest.approx(min(got.throughput * math.exp(0.01), 1000.0 * 4))
    assert got.throughput_safe is None and got.coverage is None
    assert got.coverage_basis and got.coverage_basis.startswith("a guess")
    ring = predict_rows(_points("ring", SCALES_WELL), [4], calibration=halved)[0]
    assert ring.coverage == 0.8 and ring.throughput_safe is not None


def test_the_seed_range_widens_with_the_doublings():
    got = {
        p.devices: p
        for p in predict_rows(
            _points("gather", SCALES_WELL), [4, 8], calibration=_narrow(_seeds(None))
        )
    }
    assert got[8].throughput_low / got[8].throughput == pytest.approx(math.exp(-0.02))
    assert got[4].throughput_low / got[4].throughput == pytest.approx(math.exp(-0.01))
    for n in (4, 8):  # the high ends stop at the weak floor: the fastest step, 1 device's
        assert got[n].throughput_high == pytest.approx(
            min(got[n].throughput * math.exp(0.01 * (n // 4)), 1000.0 * n)
        )


def test_a_seed_range_states_coverage_and_a_bound_only_with_enough_predictions():
    few = [("a", 2, 4, x) for x in (0.3, -0.1, 0.05, 0.2, 0.0, 0.1, 0.4)]
    guess = calibrate.seed_range(few)
    assert len(few) < MIN_FOR_COVERAGE
    assert guess.coverage is None and guess.bet_per_doubling is None
    assert (guess.low_per_doubling, guess.high_per_doubling) == (-0.1, 0.4)  # the full spread
    nine = few + [("b", 2, 4, 0.15), ("b", 2, 4, -0.05)]
    stated = calibrate.seed_range(nine[:MIN_FOR_COVERAGE])
    assert stated.coverage == pytest.approx(0.8) and stated.bet_per_doubling is None
    many = [("c", 2, 4, i / 100) for i in range(-10, MIN_FOR_BET - 10)]
    assert calibrate.seed_range(many).bet_per_doubling == pytest.approx(-0.1)


def test_leave_one_document_out_never_lets_a_table_calibrate_itself():
    series = calibrate.seed_series()
    assert {d for d, _, _ in series} == {"000", "002"}
    assert all(p.exchange_kind in ("gather", "host") for _, _, pts in series for p in pts)
    without_000 = calibrate.learn_seeds(leave_out="000")
    without_002 = calibrate.learn_seeds(leave_out="002")
    assert (without_000.documents, without_000.series) == (1, 1)  # seed 002's gather alone
    assert (without_002.documents, without_002.series) == (1, 4)  # seed 000's four
    assert without_000.predictions + without_002.predictions == calibrate.learn_seeds().predictions
    # the same numbers from the series themselves, the left-out document never among them
    kept = [s for s in series if s[0] != "000"]
    assert msgspec.structs.replace(without_000, series=0) == calibrate.seed_range(
        calibrate.seed_samples(kept)
    )


def test_the_shipped_seed_range_is_what_the_script_learns():
    shipped = default_calibration().seeds
    assert shipped is not None and shipped == calibrate.learn_seeds()
    assert shipped.coverage is None and shipped.bet_per_doubling is None  # 7 < 9: a guess
    assert shipped.documents == 2 and "when learned without their document" in shipped.held_out


def test_the_benchmarks_seed_line_learns_each_documents_range_without_it():
    prediction = pytest.importorskip("benchmarks.prediction")
    results = prediction.seed_cases(baseline=False)
    guessed = [r for r in results if r.guess]
    assert {r.table.split(":")[0] for r in guessed} >= {"seed000_m60.json", "seed002_mnist.json"}
    for r in guessed:
        document = r.table[len("seed") :].split("_", 1)[0]
        seeds = calibrate.learn_seeds(leave_out=document)
        d = math.log2(r.n / 2)
        assert r.high == pytest.approx(r.predicted * math.exp(d * seeds.high_per_doubling))


def test_the_recommend_footer_says_the_range_is_a_guess(capsys):
    source = str(SAMPLES / "seed000_m60.json")
    assert main(["recommend", "--max-devices", "8", "--from", source]) == 0
    out = capsys.readouterr().out
    assert out.count("a guess, not a calibrated range (no host exchange") == 1
    assert out.count("a guess, not a calibrated range (no gather exchange") == 1
    assert "80% ranges" not in out
    assert "MULTI: 4 devices with 'variables on CPU'" in out and "(predicted)" not in out
    assert "Measure 8 with " in out


def test_the_chart_states_80_percent_only_when_no_drawn_range_is_a_guess():
    from gpuscale.plots.scaling import build_scaling_chart

    ring = recommend(_points("ring", SCALES_WELL), calibration=_narrow(_seeds(None)))
    both = recommend(
        _points("ring", SCALES_WELL) + _points("gather", SCALES_WELL),
        calibration=_narrow(_seeds(None)),
    )
    assert build_scaling_chart(ring).coverage == pytest.approx(0.8)
    assert build_scaling_chart(both).coverage is None  # the legend says "range", not "80%"
