"""A new user's trial (finding 4): impossible sweep values refused with
one line naming the field, and damaged inputs said in the same user words by
``recommend --from``, ``replay`` and ``runs``. TF-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale import cli
from gpuscale.analysis.sweep import read_sweep_file
from gpuscale.errors import GpuscaleError

BASE = {"model": "m", "scaling": "weak", "per_replica_batch": 64}


def _cli(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _sweep(tmp_path: Path, second: dict, defaults: dict | None = None) -> Path:
    path = tmp_path / "sweep.json"
    doc = {
        "defaults": {**BASE, **(defaults or {})},
        "points": [{"devices": 1, "step_time_s": 0.1}, {"devices": 2, **second}],
    }
    path.write_text(json.dumps(doc))
    return path


# -- (4) phases that cannot fit in their step -------------------------------------


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        (
            {"step_time_s": 0.12, "compute_s": 0.5, "allreduce_s": 0.3, "apply_s": 0.01},
            "points[1].compute_s (0.5 s) is longer than its step_time_s (0.12 s)",
        ),
        (
            {"step_time_s": 0.1, "input_s": 0.5},
            "points[1].input_s (0.5 s) is longer than its step_time_s (0.1 s)",
        ),
        (
            {"step_time_s": 0.1, "allreduce_s": 0.2},
            "points[1].allreduce_s (0.2 s) is longer than its step_time_s (0.1 s)",
        ),
        (
            {"throughput": 1280, "apply_s": 0.3},  # the step from its timing: 0.1 s
            "points[1].apply_s (0.3 s) is longer than its step (0.1 s, from its timing)",
        ),
        (
            {"step_time_s": 0.1, "compute_s": 0.1, "allreduce_s": 0.06, "input_s": 0.05},
            "points[1]: its phases (compute_s + allreduce_s + input_s = 0.21 s) add up to "
            "more than 2 times its step_time_s (0.1 s)",
        ),
    ],
)
def test_phases_that_cannot_fit_in_the_step_are_one_line(tmp_path, capsys, second, expected):
    """Trial 4: compute 0.5 s in a 0.12 s step gave "exposed comm 250%"."""
    path = _sweep(tmp_path, second)
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and output == f"gpuscale: error: {path}: {expected}\n", output


def test_a_phase_from_the_defaults_names_the_defaults(tmp_path):
    path = _sweep(tmp_path, {"step_time_s": 0.1}, defaults={"compute_s": 0.3})
    with pytest.raises(GpuscaleError) as info:
        read_sweep_file(path)
    assert (
        str(info.value)
        == f"{path}: defaults.compute_s (0.3 s) is longer than points[0]'s step (0.1 s)"
    )


@pytest.mark.parametrize(
    "second",
    [
        {"step_time_s": 0.1, "compute_s": 0.08, "allreduce_s": 0.04, "apply_s": 0.01},  # 1.3x
        {"step_time_s": 0.1, "compute_s": 0.15},  # one phase at the limit
        {"step_time_s": 0.1, "compute_s": 0.12, "allreduce_s": 0.07},  # sum 1.9x
    ],
)
def test_phases_somewhat_over_the_step_are_noise_and_accepted(tmp_path, second):
    (point,) = [p for p in read_sweep_file(_sweep(tmp_path, second)).points if p.devices == 2]
    assert point.compute_s == second["compute_s"]


def test_the_rule_is_documented():
    text = (Path(__file__).resolve().parent.parent / "docs" / "sweep-format.md").read_text()
    text = " ".join(text.split())
    assert "more than 1.5 times the step" in text and "more than 2 times it" in text
    assert "points[1].compute_s (0.5 s) is longer than its step_time_s (0.12 s)" in text
