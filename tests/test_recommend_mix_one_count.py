"""A configuration measured at one count only has nothing to compare with: in a
mix of configurations it gets "NONE yet", as it does alone."""

from __future__ import annotations

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import SweepPoint, normalize


def _point(config: str, devices: int, step: float) -> SweepPoint:
    return normalize(
        SweepPoint(
            devices=devices,
            scaling="weak",
            per_replica_batch=64,
            step_time_s=step,
            steps=60,
            config=config,
        )
    )


def test_a_config_measured_at_one_count_gets_none_yet_in_a_mix():
    alone = recommend([_point("multi-worker", 2, 0.130)])
    assert alone.verdict == "none"
    rec = recommend(
        [
            _point("mirrored", 1, 0.054),
            _point("mirrored", 2, 0.124),
            _point("multi-worker", 2, 0.130),
        ]
    )
    (line,) = [r for r in rec.reasons if r.startswith("Each configuration on its own")]
    assert "'multi-worker' -> NONE yet (measured at 2 devices only)" in line, line
    assert "'mirrored' -> 1 device" in line, line


def test_what_to_measure_next_is_said_once(capsys, tmp_path):
    """One measured count (a stopped sweep): "Measure 2 devices next" under the
    verdict, not again under Why; the dashboard's text says it too."""
    import json

    from gpuscale.cli import main
    from gpuscale.ui.widgets.scaling import recommendation_text

    f = tmp_path / "one.json"
    f.write_text(
        json.dumps(
            {
                "format": "gpuscale-sweep",
                "version": 1,
                "defaults": {"scaling": "weak", "per_replica_batch": 64},
                "points": [{"devices": 1, "step_time_s": 0.05}],
            }
        )
    )
    assert main(["recommend", "--from", str(f), "--no-chart"]) == 0
    out = capsys.readouterr().out
    assert out.count("nothing to compare with") == 1, out
    assert out.lower().count("measure 2 devices next") == 1, out
    rec = recommend([_point("c", 1, 0.05)])
    text = recommendation_text(rec).plain
    assert text.lower().count("measure 2 devices next") == 1, text
