"""A price per device-hour per configuration in the sweep file (issue 12 item 4):
``recommend --from`` uses it, ``--price-per-device-hour`` overrides it, and the
cost line is told per configuration."""

from __future__ import annotations

import json

import pytest

from gpuscale.cli import main


def _sweep(tmp_path, points, defaults=None):
    f = tmp_path / "priced.json"
    f.write_text(
        json.dumps(
            {
                "format": "gpuscale-sweep",
                "version": 1,
                "defaults": {"scaling": "weak", "per_replica_batch": 64, "model": "m"}
                | (defaults or {}),
                "points": points,
            }
        )
    )
    return str(f)


TWO_CLOUDS = [
    {"config": "a100", "devices": 1, "throughput": 1000.0, "price_per_device_hour": 3.6},
    {"config": "a100", "devices": 2, "throughput": 1900.0, "price_per_device_hour": 3.6},
    {"config": "v100", "devices": 1, "throughput": 500.0, "price_per_device_hour": 1.8},
    {"config": "v100", "devices": 2, "throughput": 800.0, "price_per_device_hour": 1.8},
]


def _json(capsys, *args):
    assert main(["recommend", "--json", "--max-devices", "2", *args]) == 0
    return json.loads(capsys.readouterr().out)["recommendation"]


def test_each_configuration_is_costed_at_its_own_price(capsys, tmp_path):
    rec = _json(capsys, "--from", _sweep(tmp_path, TWO_CLOUDS))
    costs = {(c["config"], c["devices"]): c for c in rec["costs"]}
    # 3.6 per hour = 0.001 per second: 1000 samples/s -> 1.00 per million samples
    assert costs[("a100", 1)]["per_million_samples"] == pytest.approx(1.0)
    assert costs[("a100", 2)]["per_million_samples"] == pytest.approx(2 * 1.0 / 1.9)
    assert costs[("v100", 1)]["per_million_samples"] == pytest.approx(1.0)
    assert costs[("v100", 2)]["per_million_samples"] == pytest.approx(2 * 0.0005 / 800 * 1e6)
    assert costs[("v100", 2)]["price_per_device_hour"] == pytest.approx(1.8)
    assert rec["price_per_device_hour"] is None  # they differ
    lines = [r for r in rec["reasons"] if r.startswith("Cost (")]
    assert len(lines) == 2 and lines[0].startswith("Cost ('a100'): 2 devices: 1.90x faster")
    assert "at 1.8 per device-hour" in lines[1]


def test_the_flag_overrides_the_files_prices(capsys, tmp_path):
    rec = _json(capsys, "--from", _sweep(tmp_path, TWO_CLOUDS), "--price-per-device-hour", "7.2")
    assert {c["price_per_device_hour"] for c in rec["costs"]} == {7.2}
    assert rec["price_per_device_hour"] == 7.2
    a100_1 = next(c for c in rec["costs"] if c["config"] == "a100" and c["devices"] == 1)
    assert a100_1["per_million_samples"] == pytest.approx(2.0)


def test_a_price_in_defaults_prices_every_configuration_and_shows_in_the_table(capsys, tmp_path):
    points = [{k: v for k, v in p.items() if k != "price_per_device_hour"} for p in TWO_CLOUDS]
    path = _sweep(tmp_path, points, {"price_per_device_hour": 3.6})
    assert main(["recommend", "--max-devices", "2", "--from", path]) == 0
    out = capsys.readouterr().out
    assert "cost/M" in out and "per million at 3.6 per device-hour" in out


def test_no_price_no_costs(capsys, tmp_path):
    points = [{k: v for k, v in p.items() if k != "price_per_device_hour"} for p in TWO_CLOUDS]
    rec = _json(capsys, "--from", _sweep(tmp_path, points))
    assert rec["costs"] == [] and not any(r.startswith("Cost") for r in rec["reasons"])


@pytest.mark.parametrize("bad", [[3.6, 2.0], [0, 0], [-1, -1], ["x", "x"]])
def test_bad_prices_are_one_line_errors(capsys, tmp_path, bad):
    points = [dict(p) for p in TWO_CLOUDS[:2]]
    for p, price in zip(points, bad, strict=True):
        p["price_per_device_hour"] = price
    assert main(["recommend", "--from", _sweep(tmp_path, points)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuscale: error: ")
