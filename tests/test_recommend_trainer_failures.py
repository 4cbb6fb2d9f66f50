"""`gpuscale recommend`'s sweep of the built-in trainer where a later count fails:
the sweep stops there, the counts measured before it are printed as the report
(its heading saying which count failed), then one `gpuscale: error: the N-device
run failed: ...` line, and exit 1 (a trainer that fails), as a script sweep ends
with its script's status (tests/test_recommend_script_failures.py). It exited 0
after a yellow "recommending from the 1 run(s) that worked". The plain sweep runs
the stand-in trainer (tests/fake_sweep_trainer.py), `--watch` stand-in runs
(tests/test_ui_sweep_live.py); no TensorFlow."""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path

import pytest

from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.errors import EXIT_FAILED
from gpuscale.events.schema import ErrorEvent
from gpuscale.live.trainer_sweep import TrainerSweep
from tests.test_ui_sweep_live import StandInRun

FAKE = Path(__file__).with_name("fake_sweep_trainer.py")
ARGV = ["recommend", "--sweep", "1,2", "--steps", "6", "--warmup-steps", "1"]
ARGV += ["--global-batch", "16", "--no-chart"]


@pytest.fixture
def stand_in(tmp_path, monkeypatch, _isolated_data_dir):
    """`recommend`'s sweep of 1 and 2 devices, run by the stand-in trainer in the
    scenario it is given."""
    monkeypatch.setenv("COLUMNS", "250")

    def use(scenario: str) -> None:
        python = tmp_path / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        python.chmod(python.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep on CPU", None, 2))
        monkeypatch.setattr(
            recommend_live,
            "shared_process",
            lambda configs, record, no_reuse=False: TrainerSweep(
                configs,
                record=record,
                sampler=False,
                python=str(python),
                env={"FAKE_SWEEP": scenario},
            ),
        )

    return use


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gpuscale: error:")]


@pytest.mark.parametrize(
    ("scenario", "why"),
    [
        ("fail-second", "the trainer ran out of device memory"),
        ("crash-second", "exited with status 3"),
    ],
)
def test_a_later_count_failing_prints_the_counts_measured_then_exits_1(
    stand_in, capsys, scenario, why
):
    stand_in(scenario)
    assert main([*ARGV, "--no-record"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert "Recommendation: NONE yet: measured at 1 device only" in out
    assert "the 2-device run failed: recommending from 1 device" in out
    (error,) = _errors(err)
    assert error.startswith("gpuscale: error: the 2-device run failed: ") and why in error
    assert err.rstrip().endswith(error)  # after the report, the last line
    assert "run(s) that worked" not in err


def test_json_keeps_the_counts_measured_then_the_error_and_exit_1(stand_in, capsys):
    stand_in("fail-second")
    assert main(["recommend", "--json", *ARGV[1:], "--no-record"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [p["devices"] for p in doc["points"] if not p.get("predicted")] == [1]
    (error,) = _errors(err)
    assert error.startswith("gpuscale: error: the 2-device run failed: the trainer ran out")


def test_a_recorded_sweep_that_failed_still_says_its_name(stand_in, capsys):
    stand_in("fail-second")
    assert main(ARGV) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Recorded as sweep-" in err and "re-judges it" in err
    assert err.rstrip().splitlines()[-1].startswith("gpuscale: error: the 2-device run failed")


def test_a_recorded_first_count_that_failed_names_its_recording(stand_in, capsys):
    """No report names the sweep when its first count fails: the error line said
    nothing of where the run was written."""
    stand_in("fail-first")
    assert main(ARGV) == EXIT_FAILED
    (error,) = _errors(capsys.readouterr().err)
    assert error.startswith("gpuscale: error: the 1-device run failed: the trainer ran out")
    recorded = re.search(r" \(recorded in (.+\.ndjson)\)$", error)
    assert recorded, error
    assert Path(recorded[1]).is_file()


def test_a_sweep_that_works_still_exits_0(stand_in, capsys):
    stand_in("complete")
    assert main([*ARGV, "--no-record"]) == 0
    assert not _errors(capsys.readouterr().err)


class FailingRun(StandInRun):
    """A stand-in run whose trainer fails before its first step."""

    def start(self) -> FailingRun:
        self.error = ErrorEvent(t=0.0, message="the trainer ran out of device memory")
        self._finish()
        self.started.set()
        return self


@pytest.mark.parametrize("closed_by", [None, "Ctrl-C", "SIGTERM"])
def test_watch_prints_the_counts_measured_then_the_failure_and_exits_1(
    monkeypatch, capsys, closed_by
):
    """`recommend --watch`: the sweep's 2-device run fails; the view is closed (q,
    the Ctrl-C key or a signal, once the sweep is over); the report of the count
    measured, then the failure's line, exit 1 (was 0, or 130 after Ctrl-C)."""
    import gpuscale.ui.app as ui_app

    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(
        recommend_live, "plan", lambda args: ([1, 2, 4], "Sweep on stand-in GPUs", None, 4)
    )
    monkeypatch.setattr(recommend_live, "sweep_configs", lambda *a: ([1, 2, 4], []))
    monkeypatch.setattr(recommend_live, "shared_process", lambda *a, **k: None)

    def fake_run(app):
        runner = app.runner
        runner.run_factory = lambda n, record: FailingRun(n) if n == 2 else StandInRun(n)
        runner.run(lambda v: None, lambda v: None)
        return closed_by

    monkeypatch.setattr(ui_app, "run_until_stop_signal", fake_run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # the screen: in a terminal
    assert main(["recommend", "--watch", "--no-chart", "--no-record"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    flat = " ".join(out.split())
    assert "The 2-device run failed: recommending from what was measured (1 device)." in flat
    assert "Recommendation: NONE yet: measured at 1 device only" in out
    assert "device memory" not in out  # said once, in the error line
    (error,) = _errors(err)
    assert error == "gpuscale: error: the 2-device run failed: the trainer ran out of device memory"
    assert err.rstrip().endswith(error)


def test_watch_first_count_failing_names_its_recording(monkeypatch, capsys, tmp_path):
    import gpuscale.ui.app as ui_app

    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep", None, 2))
    monkeypatch.setattr(recommend_live, "sweep_configs", lambda *a: ([1, 2], []))
    monkeypatch.setattr(recommend_live, "shared_process", lambda *a, **k: None)
    recording = tmp_path / "20261128-000000_fake_1xcpu.ndjson"
    recording.write_text("")

    def recorded(n):
        run = FailingRun(n)
        run.recording_path = recording
        return run

    def fake_run(app):
        app.runner.run_factory = lambda n, record: recorded(n)
        app.runner.run(lambda v: None, lambda v: None)
        return None

    monkeypatch.setattr(ui_app, "run_until_stop_signal", fake_run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["recommend", "--watch", "--no-chart"]) == EXIT_FAILED
    assert _errors(capsys.readouterr().err) == [
        "gpuscale: error: no recommendation: the 1-device run failed: the trainer ran out of "
        f"device memory (recorded in {recording})"
    ]


def test_watch_first_count_failing_is_its_line_and_exit_1(monkeypatch, capsys):
    import gpuscale.ui.app as ui_app

    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep", None, 2))
    monkeypatch.setattr(recommend_live, "sweep_configs", lambda *a: ([1, 2], []))
    monkeypatch.setattr(recommend_live, "shared_process", lambda *a, **k: None)

    def fake_run(app):
        app.runner.run_factory = lambda n, record: FailingRun(n)
        app.runner.run(lambda v: None, lambda v: None)
        return None

    monkeypatch.setattr(ui_app, "run_until_stop_signal", fake_run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["recommend", "--watch", "--no-chart", "--no-record"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out == ""
    assert _errors(err) == [
        "gpuscale: error: no recommendation: the 1-device run failed: the trainer ran out of "
        "device memory"
    ]
