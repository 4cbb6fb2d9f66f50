"""One helper says "1 step" and "2 steps": every count gpuscale prints goes through
:func:`gpuscale.formatting.plural` (no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.cli import main
from gpuscale.formatting import plural

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


@pytest.mark.parametrize(
    ("count", "noun", "said"),
    [
        (1, "step", "1 step"),
        (0, "step", "0 steps"),
        (2, "device", "2 devices"),
        ([1], "device", "1 device"),
        ([1, 2, 4], "device", "1, 2, 4 devices"),
        ([2], "device", "2 devices"),
        (1, "replica", "1 replica"),
        (3, "index", "3 indices"),
    ],
)
def test_plural_only_when_the_count_is_not_one(count, noun, said):
    many = "indices" if noun == "index" else None
    assert plural(count, noun, many) == said


def test_a_one_step_recording_says_1_step(tmp_path, capsys):
    kept, steps = [], 0
    for line in (SAMPLES / "mnist-cnn_1xcpu.ndjson").read_text().splitlines():
        if json.loads(line).get("kind") == "step":
            steps += 1
            if steps > 1:
                continue
        kept.append(line)
    one = tmp_path / "one.ndjson"
    one.write_text("\n".join(kept) + "\n")
    assert main(["replay", str(one)]) == 0
    out = capsys.readouterr().out
    assert "1 step (" in out and "1 steps" not in out, out
