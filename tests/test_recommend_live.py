"""`gpuscale recommend` live: a real (tiny) sweep of the trainer on 1 and 2 CPU
logical devices, recorded; the recordings read back through --from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def _gpuscale(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_live_sweep_records_each_run_and_recommends(_isolated_data_dir: Path):
    env = {**os.environ, "GPUSCALE_DATA_DIR": str(_isolated_data_dir)}
    tiny = ["--width", "4", "--global-batch", "16", "--steps", "12", "--warmup-steps", "2"]
    result = _gpuscale(
        "recommend", "--sweep", "1,2", *tiny, "--phase-every", "4", "--json", env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    measured = [p for p in doc["points"] if not p.get("predicted")]
    assert [p["devices"] for p in measured] == [1, 2]
    assert all(p["platform"] == "cpu-logical" and p["scaling"] == "strong" for p in measured)
    assert {p["global_batch"] for p in measured} == {16}
    assert doc["recommendation"]["verdict"] in ("single", "multi")
    assert doc["sweep_wall_s"] > 0  # how long the whole sweep took
    assert all("precision_asked" not in p for p in measured)  # none asked
    recordings = [Path(p["source"]) for p in measured]
    assert all(r.exists() for r in recordings), recordings

    # One trainer process ran both counts (the default), each its own run and recording.
    from gpuscale.events.schema import EndEvent, StartEvent
    from gpuscale.recording.reader import load_run

    runs = [load_run(r) for r in recordings]
    for n, run in enumerate(runs, start=1):
        assert not run.start.provisional and run.start.num_replicas == n
        assert len(run.start.devices) == n and run.start.config["devices"] == n
        resolved = run.start.config["resolved"]
        assert resolved["shared_process"] == {"counts": [1, 2], "run": n}
        assert run.end is not None and run.end.status == "completed" and run.end.steps == 12
        assert run.end.summary["steps_counted"] == 10
        starts = [e for e in run.events if isinstance(e, StartEvent) and not e.provisional]
        assert len(starts) == 1 and sum(isinstance(e, EndEvent) for e in run.events) == 1
    assert runs[0].start.pid == runs[1].start.pid
    assert runs[0].end.t <= runs[1].start.t

    # The recordings alone give the same measured points (no TensorFlow needed).
    again = _gpuscale("recommend", "--json", "--from", *map(str, recordings), env=env)
    assert again.returncode == 0, again.stderr
    points = [p for p in json.loads(again.stdout)["points"] if not p.get("predicted")]
    assert [p["step_time_s"] for p in points] == [p["step_time_s"] for p in measured]

    # Both runs carry one sweep id, each its place; the sweep is found again by it.
    from gpuscale.recording.reader import load_run

    refs = [load_run(r).start.sweep for r in recordings]
    assert refs[0] is not None and refs[0].id == refs[1].id
    assert [(r.index, r.planned) for r in refs] == [(0, [1, 2]), (1, [1, 2])]
    assert f"Recorded as {refs[0].id}" not in result.stderr  # --json: quiet
    listed = json.loads(_gpuscale("runs", "--json", env=env).stdout)
    (group,) = listed["sweeps"]
    assert group["id"] == refs[0].id and not group["guessed"]
    assert [Path(r["path"]) for r in group["recordings"]] == recordings
    by_id = _gpuscale("recommend", "--json", "--from", refs[0].id, env=env)
    assert by_id.returncode == 0, by_id.stderr
    points = [p for p in json.loads(by_id.stdout)["points"] if not p.get("predicted")]
    assert [p["step_time_s"] for p in points] == [p["step_time_s"] for p in measured]


def _width_s(summary: dict) -> float:
    """The run's spread in seconds: its p10-p90 range of step times."""
    return summary["step_time_p90_s"] - summary["step_time_p10_s"]


def _sweep_disagreements(env: dict[str, str]) -> list[str]:
    """One sweep of 1, 2 devices, then a standalone `gpuscale run` of each count:
    the counts whose medians differ by more than the two runs' spreads together."""
    from gpuscale.recording.reader import load_run

    tiny = ["--width", "4", "--global-batch", "16", "--steps", "60", "--warmup-steps", "10"]
    result = _gpuscale("recommend", "--sweep", "1,2", *tiny, "--json", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    measured = [p for p in json.loads(result.stdout)["points"] if not p.get("predicted")]
    assert [p["devices"] for p in measured] == [1, 2]
    disagreements = []
    for point in measured:
        n = point["devices"]
        swept = load_run(Path(point["source"])).end.summary
        alone = _gpuscale("run", "--devices", str(n), *tiny, "--no-record", "--json", env=env)
        assert alone.returncode == 0, alone.stderr[-2000:]
        standalone = json.loads(alone.stdout)
        difference_s = abs(swept["step_time_s"] - standalone["step_time_s"])
        if difference_s > _width_s(swept) + _width_s(standalone):
            disagreements.append(
                f"{n} device(s): sweep {swept['step_time_s']:.4f} s "
                f"(spread {_width_s(swept):.4f}), standalone {standalone['step_time_s']:.4f} s "
                f"(spread {_width_s(standalone):.4f})"
            )
    return disagreements


def test_live_sweep_step_times_agree_with_standalone_runs(_isolated_data_dir: Path):
    """Each device count of a live sweep measures what `gpuscale run` measures
    for the same configuration on its own: the two medians differ by no more
    than the two runs' spreads (p10-p90 ranges) together. (A sweep whose earlier
    runs left threads spinning measured its 2-device point 1.7x slower than a
    standalone run, issue 19.) Spreads, not a fixed ratio: a machine busy with
    other work widens them. The sweep and the standalone runs are not side by
    side, so a burst of other work during one of them can still split them
    once (seen: 17.7 against 11.3 ms at a load average of 5); a second attempt
    is taken, and a sweep that is slower for a reason of its own fails both."""
    env = {**os.environ, "GPUSCALE_DATA_DIR": str(_isolated_data_dir)}
    first = _sweep_disagreements(env)
    if not first:
        return
    second = _sweep_disagreements(env)
    assert not second, f"twice: {first} then {second}"
