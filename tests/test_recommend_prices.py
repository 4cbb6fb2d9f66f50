"""A price per device-hour per configuration in the sweep file (issue 12 item 4):
``recommend --from`` uses it, ``--price-per-device-hour`` overrides it, and the
cost line is told per configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

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


# The trial's A6000 sweep: VGG16 (Lambda's table) typed in at 1 and 2 GPUs of 8;
# the answer, 8 devices, is predicted.
A6000 = {
    "available_devices": 8,
    "defaults": {
        "model": "vgg16",
        "scaling": "weak",
        "per_replica_batch": 512,
        "payload_bytes": 276715088,
    },
    "points": [{"devices": 1, "throughput": 728}, {"devices": 2, "throughput": 1447}],
}


def _a6000(tmp_path):
    f = tmp_path / "a6000.json"
    f.write_text(json.dumps(A6000))
    return str(f)


def test_a_predicted_answer_gives_its_speedup_and_cost_with_their_ranges(capsys, tmp_path):
    assert main(["recommend", "--from", _a6000(tmp_path), "--price-per-device-hour", "1.2"]) == 0
    out = capsys.readouterr().out
    assert "Recommendation: MULTI: 8 devices (predicted)" in out
    # the line under the verdict: the table's range, and that it is predicted
    assert "Expected speedup 7.88x (6.61–8.00x) over 1 device, predicted (80% range)." in out
    # the table's cost cell: the relative cost's range (its low end from the high throughput)
    assert "0.47 (1.02x, 1.00–1.21x)" in out
    # the measured rows stay as they were
    assert "0.46 (1.01x) │ measured" in out
    (why,) = [line for line in out.splitlines() if "Cost:" in line]
    assert (
        "Cost: 8 devices (predicted): 7.88x (6.61–8.00x) faster than 1, 1.02x (1.00–1.21x) "
        "the cost per million samples (0.47 per million, range 0.46–0.55, at 1.2 per "
        "device-hour)." in why
    )
    assert "7.88x (6.61–8.00x) over 1 device" in out.split("Why", 1)[1]


def test_the_scaling_view_gives_a_predicted_answers_speedup_with_its_range(tmp_path):
    from gpuscale.analysis.recommend import recommend
    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.ui.widgets.scaling import recommendation_text

    sweep = load_inputs([_a6000(tmp_path)])
    rec = recommend(sweep.points, available_devices=sweep.available_devices)
    text = recommendation_text(rec).plain
    assert "expected speedup 7.88x (6.61–8.00x) over 1 device, predicted (80% range)" in text


def test_an_answer_of_one_device_says_what_the_next_count_would_cost(capsys, tmp_path):
    points = [{"devices": 1, "throughput": 1000.0}, {"devices": 2, "throughput": 1100.0}]
    rec = _json(capsys, "--from", _sweep(tmp_path, points), "--price-per-device-hour", "3.6")
    assert rec["devices"] == 1
    (line,) = [r for r in rec["reasons"] if r.startswith("Cost")]
    # never "1 device: 1.00x faster than 1, 1.00x the cost"
    assert "faster than 1," not in line
    assert line == (
        "Cost: 1 device: 1.00 per million samples at 3.6 per device-hour; "
        "2 devices would cost 1.82x that (1.10x faster)."
    )


def test_the_price_options_help_quotes_what_seed002_prints(capsys):
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    (example,) = re.findall(
        r"a line such as '([^']+)' \(sample_runs/seed002_mnist\.json\)", helptext
    )
    seed002 = str(Path(__file__).resolve().parent.parent / "sample_runs" / "seed002_mnist.json")
    assert main(["recommend", "--from", seed002, "--price-per-device-hour", "2.5"]) == 0
    assert example in capsys.readouterr().out


def test_small_costs_keep_two_significant_figures(capsys, tmp_path):
    # trial 9: "0.02 (1.00x)" beside "0.06 (3.38x)": two decimals made 3.38x read 3x
    points = [
        {"devices": 1, "throughput": 1000.0},
        {"devices": 2, "throughput": 1200.0},
    ]
    path = _sweep(tmp_path, points, {"price_per_device_hour": 0.0648})
    assert main(["recommend", "--max-devices", "2", "--from", path]) == 0
    out = capsys.readouterr().out
    # 0.0648 per hour: 0.018 per million at 1 device, 2 x 0.018 / 1.2 = 0.030 at 2
    assert "0.018 (1.00x)" in out and "0.030 (1.67x)" in out
    assert "0.02 (1.00x)" not in out and "0.03 (1.67x)" not in out
    assert "(0.030 per million at 0.0648 per device-hour)" in out


def test_costs_print_with_two_decimals_or_two_significant_figures():
    from gpuscale.formatting import format_cost, format_cost_range

    assert [format_cost(v) for v in (0.468, 2.31, 0.0178, 0.0602, 0.00996, 1234.5)] == [
        "0.47",
        "2.31",
        "0.018",
        "0.060",
        "0.010",
        "1,234.50",
    ]
    assert format_cost_range(0.0165, 0.0199) == "0.017\u20130.020"
    assert format_cost_range(0.46, 0.55) == "0.46\u20130.55"
    assert format_cost_range(None, 0.5) == ""


def test_a_json_output_read_back_keeps_the_price_and_the_title(capsys, tmp_path):
    """The trial's round trip: ``--price-per-device-hour 3.06 --json > out.json``, then
    ``--from out.json`` without the flag gives the same table (cost column included)
    and answer, and the file's title is written back."""
    f = tmp_path / "r50.json"
    f.write_text(json.dumps({"title": "ResNet-50 on 8x V100", **A6000}))
    assert main(["recommend", "--from", str(f), "--price-per-device-hour", "3.06"]) == 0
    direct = capsys.readouterr().out
    assert main(["recommend", "--from", str(f), "--price-per-device-hour", "3.06", "--json"]) == 0
    written = capsys.readouterr().out
    doc = json.loads(written)
    assert doc["title"] == "ResNet-50 on 8x V100"
    assert {p["price_per_device_hour"] for p in doc["points"]} == {3.06}
    out = tmp_path / "out.json"
    out.write_text(written)
    assert main(["recommend", "--from", str(out)]) == 0
    read_back = capsys.readouterr().out
    assert "cost/M" in read_back
    # the same table and answer (the file wrote its source back: the same "from" line)
    assert read_back == direct
    assert main(["recommend", "--from", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["title"] == doc["title"]
    assert again["recommendation"] == doc["recommendation"]


def test_a_next_count_that_is_slower_is_not_called_faster(capsys, tmp_path):
    """Found by a docs trial: '(0.51x faster)' where 2 devices ran at half the speed."""
    points = [{"devices": 1, "throughput": 1000.0}, {"devices": 2, "throughput": 510.0}]
    rec = _json(capsys, "--from", _sweep(tmp_path, points), "--price-per-device-hour", "3.6")
    assert rec["devices"] == 1
    (line,) = [r for r in rec["reasons"] if r.startswith("Cost")]
    assert "faster" not in line
    assert line.endswith("2 devices would cost 3.92x that (0.51x the speed, slower).")


def test_a_chosen_count_below_its_base_speed_is_not_called_faster():
    from gpuscale.analysis.cost import Cost, cost_line

    cost = Cost(config="c", devices=2, predicted=False, per_million_samples=2.0, relative=3.9)
    line = cost_line(0.51, "0.51x", 1, cost, "2.00 per million")
    assert line.startswith("2 devices: 0.51x the speed of 1, slower, 3.90x the cost")


def test_a_speedup_that_reads_one_is_neither_faster_nor_slower():
    from gpuscale.analysis.cost import pace_words

    assert pace_words(0.996, "1.00x", " than 1") == "1.00x the speed of 1"
    assert pace_words(1.004, "1.00x") == "1.00x the speed"
    assert pace_words(1.006, "1.01x") == "1.01x faster"
