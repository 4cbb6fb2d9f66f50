"""Text output off a terminal (a pipe, a file): lines are whole, never hard-wrapped
at 80 columns mid-phrase; tables keep their columns."""

from __future__ import annotations

import io
from pathlib import Path

from rich.table import Table

from gpuscale.cli import main
from gpuscale.commands.console import text_console

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def test_a_long_line_off_a_terminal_stays_one_line_and_a_table_keeps_its_width():
    console = text_console(file=io.StringIO(), width=40)
    console.print("against the probed steps' median 477.1 ms: " * 3)
    table = Table()
    table.add_column("N")
    table.add_column("what")
    table.add_row("1", "a cell long enough to wrap inside its column at forty")
    console.print(table)
    lines = console.file.getvalue().splitlines()
    assert lines[0].count("477.1 ms") == 3
    assert all(len(line) <= 40 for line in lines[1:])


def test_recommend_piped_prints_each_reason_on_one_line(capsys):
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json")]) == 0
    out = capsys.readouterr().out
    why = [line for line in out.splitlines() if line.startswith("  - ")]
    assert why and all(line.rstrip().endswith((".", ")")) for line in why)
    assert any(len(line) > 100 for line in why)
