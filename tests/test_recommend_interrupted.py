"""Ctrl-C during a plain `gpuscale recommend` sweep: the count in progress is
stopped, what ran is printed (as `recommend --watch` does), then exit 130. No
TensorFlow: the stand-in sweep trainer (tests/fake_sweep_trainer.py)."""

from __future__ import annotations

import json
import re
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


def _stand_in_sweep(tmp_path, monkeypatch, env: dict[str, str] | None = None) -> None:
    """`recommend`'s live sweep of 1 and 2 devices, run by the stand-in trainer."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "CPU", None, 2))
    monkeypatch.setattr(
        recommend_live,
        "shared_process",
        lambda configs, record, no_reuse=False: TrainerSweep(
            configs, record=record, sampler=False, python=str(python), env=env
        ),
    )


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    _stand_in_sweep(tmp_path, monkeypatch, {"FAKE_SWEEP": "slow"})
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


def test_ctrl_c_after_steps_of_the_first_count_keeps_them_and_names_the_sweep(
    tmp_path, monkeypatch, capsys, _isolated_data_dir
):
    """Ctrl-C in the first count after it counted steps: they are the result (a
    table, exit 130), not "interrupted" alone; the sweep's name is said, `runs`
    lists the count as measured (stopped), and `recommend --from` of the name
    reads the same steps."""
    _stand_in_sweep(tmp_path, monkeypatch, {"FAKE_SWEEP": "slow"})
    monkeypatch.setattr(recommend_live, "ignore_stop_signals", lambda: None, raising=False)
    real = recommend_live._follow

    def follow(run, acc, n, *args):
        if n == 1:  # Ctrl-C once the first count has counted 2 steps
            for event in run.events(timeout=None):
                acc.add(event)
                if acc.summary().steps_counted >= 2:
                    raise KeyboardInterrupt("Ctrl-C")
        return real(run, acc, n, *args)

    monkeypatch.setattr(recommend_live, "_follow", follow)
    argv = [a for a in ARGV if a != "--no-record"]
    assert main(argv) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    flat = " ".join(out.split())
    match = re.search(
        r"stopped \(Ctrl-C\) during the 1-device run, kept with the (\d+) steps", flat
    )
    assert match and "recommending from 1 device" in flat, out
    counted = int(match.group(1))
    assert counted >= 2 and "Nothing is recommended" in out
    assert "gpuscale: interrupted" not in err
    (name,) = re.findall(r"Recorded as (sweep-\S+):", err)
    assert f"'gpuscale recommend --from {name}'" in err
    assert main(["runs"]) == 0
    listing = " ".join(capsys.readouterr().out.split())
    assert f"measured on 1 (stopped, {counted} steps counted); not measured: 2 (not run)" in listing
    assert main(["recommend", "--from", name, "--json"]) == 0
    out, err = capsys.readouterr()
    (point,) = [p for p in json.loads(out)["points"] if not p.get("predicted")]
    assert point["devices"] == 1 and point["steps"] == counted
    assert f"judged from the {counted} steps it counted" in err


def test_ctrl_c_before_any_count_is_measured_is_just_interrupted(
    fake_sweep, monkeypatch, capsys, _isolated_data_dir
):
    _ctrl_c_at(monkeypatch, 1)
    assert main(ARGV) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines()[-1] == "gpuscale: interrupted"


class _FakeScriptRun:
    """A script's run that reports a start and ten steps on the devices it was given."""

    def __init__(self, command, *, record=None, env=None):
        self.devices = int(env.get("GPUSCALE_DEVICES", "1")) if env else 1
        self.done, self.error, self.recording_path, self.sweep_ref = False, None, None, None

    def start(self):
        return self

    def events(self, timeout=None):
        from gpuscale.events.schema import EndEvent, StartEvent, StepEvent

        n = self.devices
        yield StartEvent(t=1.0, gpuscale_version="0", host="h", pid=1, model="m", num_replicas=n)
        for step in range(10):
            yield StepEvent(t=2.0 + step, step=step, step_time_s=0.1, samples=8 * n)
        yield EndEvent(t=20.0, status="completed", steps=10, duration_s=19.0)
        self.done = True

    def stop(self):
        self.done = True

    def drain(self):
        return []


def test_ctrl_c_in_a_script_sweep_prints_what_ran_then_exits_130(monkeypatch, capsys):
    from gpuscale.commands import recommend_script

    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "CPU", None, 2))
    monkeypatch.setattr(recommend_live, "ignore_stop_signals", lambda: None, raising=False)
    monkeypatch.setattr("gpuscale.live.script_run.ScriptRun", _FakeScriptRun)
    real = recommend_script._follow

    def follow(run, acc, n, *args):
        if n == 2:
            raise KeyboardInterrupt("SIGTERM")
        return real(run, acc, n, *args)

    monkeypatch.setattr(recommend_script, "_follow", follow)
    argv = ["recommend", "--sweep", "1,2", "--no-record", "--no-chart", "--", "python", "x.py"]
    assert main(argv) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    assert "stopped (SIGTERM) after 1 device: recommending from those" in out, out
    assert "gpuscale: stopping the 2-device run (SIGTERM)..." in err


def test_q_in_watch_before_any_count_is_a_note_and_exit_0(monkeypatch, capsys):
    # q is the user quitting: the sentence as a note, not an error; Ctrl-C stays 130
    from gpuscale.commands import recommend_watch
    from gpuscale.errors import GpuscaleError

    said = recommend_watch.nothing_measured(None, None)
    assert said == "no recommendation: the sweep stopped before its first count began: nothing ran"
    # q during the first count's warm-up: what ran, not "nothing" (its steps, its file);
    # once it has counted steps they are kept (test_ui_sweep_live), this is not said
    cut = "the first count (1 device, 3 of 300 steps)"
    assert recommend_watch.nothing_measured(None, None, cut, "/r/1xcpu.ndjson") == (
        "no recommendation: the sweep stopped during the first count (1 device, 3 of 300 "
        "steps): no step was counted, so nothing to judge; recorded to /r/1xcpu.ndjson"
    )
    with pytest.raises(GpuscaleError) as ctrl_c:
        recommend_watch.nothing_measured(None, "SIGINT")
    assert ctrl_c.value.exit_code == EXIT_INTERRUPTED
    with pytest.raises(GpuscaleError) as failed:
        recommend_watch.nothing_measured("the 1-device run failed: boom", None)
    assert failed.value.exit_code == 1
    # the failure is its own clause ("the sweep the 1-device run failed: boom")
    assert str(failed.value) == "no recommendation: the 1-device run failed: boom"

    monkeypatch.setattr(
        recommend_watch, "watch_sweep", lambda args, floor, command=None: (None, said, None)
    )
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main([*ARGV, "--watch"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == f"gpuscale: {said}"


def test_a_live_sweep_and_its_recording_re_judged_stop_at_the_same_count(
    tmp_path, monkeypatch, capsys, _isolated_data_dir
):
    """The live sweep knows the machine has 2 devices and predicts nothing past them;
    its recordings say so (their sweep's available_devices), so `--from` of the sweep
    prints the same points, not predictions for 4 and 8."""
    _stand_in_sweep(tmp_path, monkeypatch)
    argv = [a for a in ARGV if a not in ("--no-record", "--no-chart")]
    assert main([*argv, "--json"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert live["available_devices"] == 2
    assert main(["recommend", "--from", "sweep", "--json"]) == 0
    judged = json.loads(capsys.readouterr().out)
    assert judged["available_devices"] == 2
    assert [p["devices"] for p in judged["points"]] == [p["devices"] for p in live["points"]]
    assert [p["devices"] for p in judged["points"]] == [1, 2]


class _StoppedRun:
    """A run stopped by Ctrl-C: its queued events come out of drain()."""

    def __init__(self, devices: int, steps: int, recording_path=None):
        from gpuscale.events.schema import StartEvent, StepEvent

        self.error, self.recording_path = None, recording_path
        self._events = [
            StartEvent(
                t=1.0, gpuscale_version="0", host="h", pid=1, model="m", num_replicas=devices
            ),
            *(
                StepEvent(t=2.0 + i, step=i, step_time_s=0.1, samples=8, warmup=i < 2)
                for i in range(steps)
            ),
        ]

    def drain(self):
        events, self._events = self._events, []
        return events


def test_what_a_stopped_count_keeps_is_one_rule_for_live_and_script_sweeps():
    """One helper decides what the count cut short keeps, for both sweeps: its
    counted steps, on the devices it was run on (the live sweep did not check them),
    named by its recording or, unrecorded, in the sweep's own words."""
    from gpuscale.analysis.summary import RunAccumulator

    kept = recommend_live.kept_when_stopped(_StoppedRun(2, 6), RunAccumulator(), 2, "unrecorded")
    assert kept is not None
    summary, start, source = kept
    assert summary.steps_counted == 4 and start.num_replicas == 2 and source == "unrecorded"
    run = _StoppedRun(2, 6, recording_path=Path("/r/x.ndjson"))
    assert recommend_live.kept_when_stopped(run, RunAccumulator(), 2, "-")[2] == "/r/x.ndjson"
    # trained on other than the count's devices; stopped in warm-up: nothing kept
    assert recommend_live.kept_when_stopped(_StoppedRun(1, 6), RunAccumulator(), 2, "-") is None
    assert recommend_live.kept_when_stopped(_StoppedRun(2, 2), RunAccumulator(), 2, "-") is None
