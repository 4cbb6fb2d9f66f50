"""README's table of the sample sweeps quotes what `gpuscale recommend --from`
says for each, word for word (no TensorFlow)."""

from __future__ import annotations

import re
from pathlib import Path

from gpuscale.cli import main

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `(sample_runs/[^`]+\.json)` \| `([^`]+)` \|", re.MULTILINE)


def test_the_readme_table_quotes_each_recommendation(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    rows = ROW.findall((ROOT / "README.md").read_text())
    assert len(rows) == 4, rows
    for path, said in rows:
        assert main(["recommend", "--from", path, "--no-chart"]) == 0
        out = capsys.readouterr().out
        assert f"Recommendation: {said}\n" in out, (path, said)
