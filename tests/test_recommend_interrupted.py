"""Ctrl-C during a plain `gpuscale recommend` sweep: the count in progress is
stopped, what ran is printed (as `recommend --watch` does), then exit 130. No
TensorFlow: the stand-in sweep trainer (tests/fake_sweep_trainer.py)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.errors import EXIT_INTERRUPTED
from gpuscale.live.trainer_sweep import TrainerSweep

FAKE = Path(__file__).with_name("fake_sweep_trainer.py")
ARGV = ["recommend", "--sweep", "1,2", "--steps", "6", "--warmup-steps", "1"]
ARGV += ["--global-batch", "16", "--no-record", "--no-chart"]


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "CPU", None, 2))
    monkeypatch.setattr(
        recommend_live,
        "shared_process",
        lambda configs, record, no_reuse=False: TrainerSweep(
            configs, record=record, sampler=False, python=str(python), env={"FAKE_SWEEP": "slow"}
        ),
    )
    # pytest's own SIGINT handler stays
    monkeypatch.setattr(recommend_live, "ignore_stop_signals", lambda: None, raising=False)


def _ctrl_c_at(monkeypatch, count: int) -> None:
    real = recommend_live._follow

    def follow(run, acc, n, *args):
        if n == count:
            raise KeyboardInterrupt("Ctrl-C")
        return real(run, acc, n, *args)

    monkeypatch.setattr(recommend_live, "_follow", follow)


def test_ctrl_c_in_the_second_count_prints_the_first_then_exits_130(
    fake_sweep, monkeypatch, capsys, _isolated_data_dir
):
    _ctrl_c_at(monkeypatch, 2)
    assert main(ARGV) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    assert "stopped (Ctrl-C) after 1 device: recommending from those" in out
    assert "Recommendation:" in out or "Nothing is recommended" in out, out
    assert "gpuscale: stopping the 2-device run (Ctrl-C)..." in err
    assert "gpuscale: interrupted" not in err


def test_ctrl_c_before_any_count_is_measured_is_just_interrupted(
    fake_sweep, monkeypatch, capsys, _isolated_data_dir
):
    _ctrl_c_at(monkeypatch, 1)
    assert main(ARGV) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines()[-1] == "gpuscale: interrupted"
