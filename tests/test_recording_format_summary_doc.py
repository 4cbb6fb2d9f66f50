"""docs/recording-format.md lists every field of the end event's summary: a converter's
author reads it there (18 fields were missing, found by a trial)."""

from __future__ import annotations

import re
from pathlib import Path

from gpuscale.analysis.summary import RunSummary

DOC = Path(__file__).resolve().parent.parent / "docs" / "recording-format.md"


def test_every_summary_field_has_its_row() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("#### The end summary, field by field", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))
    missing = [name for name in RunSummary.__struct_fields__ if name not in rows]
    assert not missing, f"add a row to docs/recording-format.md for: {missing}"
    extra = rows - set(RunSummary.__struct_fields__) - {"raw_phases"}
    assert not extra, f"rows for fields the summary does not have: {sorted(extra)}"
