"""benchmarks/processes.py: each figure's median over processes with its bootstrap
interval, and the pooling of saved runs."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.processes import median_interval, median_line, pool, process_figures

SAVED = """--- process 1 of 2
wall overhead: 9.9%
wall overhead: 1.0%
--- process 2 of 2
step-time-only overhead (callback without probes): 0.5%
wall overhead: -2.5%
wall overhead: 0.5% (median of 2 processes: 1.0%, -2.5%)
"""


def test_each_process_last_figure_not_the_summary() -> None:
    assert process_figures(SAVED, "wall overhead") == [1.0, -2.5]
    # a figure with words after it (benchmarks/overhead.py: "... 0.9% (split)") counts
    assert process_figures(
        "--- process 1 of 1\nstep-time-only overhead: 0.9% (split)\n", ("step-time-only overhead")
    ) == [0.9]
    assert process_figures(SAVED, "step-time-only overhead (callback without probes)") == [0.5]


def test_interval_holds_the_median_and_narrows_with_more_processes() -> None:
    few = [8.7, 1.4, -3.1, 3.4, 2.8]
    low, high = median_interval(few)
    assert low <= statistics.median(few) <= high
    assert median_interval(few) == (low, high)  # seeded: the same every time
    many = few * 8
    m_low, m_high = median_interval(many)
    assert m_high - m_low < high - low


def test_line_keeps_the_figure_first() -> None:
    line = median_line("wall overhead", [1.0, 2.0, 3.0])
    assert line.startswith("wall overhead: 2.0% (median of 3 processes: 1.0%, 2.0%, 3.0%; ")
    assert "95% bootstrap interval of the median" in line


def test_pool_reads_saved_runs(tmp_path, capsys) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(SAVED)
    b.write_text("--- process 1 of 1\nwall overhead: 3.0%\n")
    assert pool([str(a), str(b)]) == 0
    assert "wall overhead: 1.0% (median of 3 processes: 1.0%, -2.5%, 3.0%;" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("text", [None, "no figures here\n"])
def test_pool_says_what_is_wrong_in_one_line(tmp_path, capsys, text) -> None:
    path = tmp_path / "run.log"
    if text is not None:
        path.write_text(text)
    with pytest.raises(SystemExit) as exit_:
        pool([str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(path) in err and ("No such file" in err or "no process's" in err)
