"""Several workers on one machine's CPUs (``--local-workers N``) share its cores:
they are modelled as CPU logical devices are (more of them add no compute), not as
separate machines (trial 2: 1 and 2 local workers on a 2-core machine were
predicted 2.15x at 8). Workers on several hosts, and GPU workers, are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.analysis.confidence import LOCAL_WORKERS_CAVEAT
from gpuscale.analysis.predict import interconnect_class
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import SweepPoint, load_inputs, normalize, points_from_recordings
from gpuscale.cli import main
from gpuscale.events.schema import StartEvent, encode
from tests.recording_samples import steady_steps

CONFIG = "mlp, multi-worker, batch 64/replica, CPU"


def _record(path: Path, workers: int, step_s: float, allreduce_s: float, hosts: list[str]) -> Path:
    """A built-in multi-worker run on CPUs (one replica per worker), shaped like the
    trial's: a 1-worker run lists no ``config.workers``."""
    t = 1_800_000_000.0
    cfg: dict = {"strategy": "multi-worker", "all_reduce": "auto", "model": "mlp"}
    if workers > 1:
        cfg["workers"] = [
            {"worker": i, "host": hosts[i], "pid": 10 + i, "num_replicas": workers}
            for i in range(workers)
        ]
    events: list = [
        StartEvent(
            t=t,
            gpuscale_version="0",
            host=hosts[0],
            pid=10,
            config=cfg,
            model="mlp",
            strategy="multi-worker",
            cross_device_ops="collective",
            num_replicas=workers,
            num_workers=workers,
            scaling="weak",
            per_replica_batch=64,
            global_batch=64 * workers,
            payload_bytes=11_653_160,
            platform="cpu",
        )
    ]
    events += steady_steps(
        events[0], 30, step_s, allreduce_s, probe_every=10 if workers > 1 else None
    )
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path


def _trial(tmp_path: Path, hosts: list[str]) -> list[Path]:
    """The trial's numbers: 27.2 ms at 1 worker, 69.3 ms at 2 (60 % exposed exchange)."""
    return [
        _record(tmp_path / "w1.ndjson", 1, 0.0272, 0.0, hosts[:1]),
        _record(tmp_path / "w2.ndjson", 2, 0.0693, 0.0416, hosts),
    ]


def test_the_recording_says_its_workers_ran_on_one_host(tmp_path):
    one, two = points_from_recordings(_trial(tmp_path, ["vm", "vm"]))
    assert (one.workers, one.hosts, one.local_cpu_workers) == (1, None, False)
    assert (two.workers, two.hosts, two.local_cpu_workers) == (2, 1, True)
    assert interconnect_class(two) == "local"  # no network range is borrowed for it
    _, apart = points_from_recordings(_trial(tmp_path, ["vm", "vm2"]))
    assert (apart.hosts, apart.local_cpu_workers) == (2, False)
    assert interconnect_class(apart) == "network"


def test_more_local_workers_are_not_predicted_to_pay(tmp_path):
    rec = recommend(points_from_recordings(_trial(tmp_path, ["vm", "vm"])))
    (model,) = rec.models
    assert model.shared_cores and model.local_workers
    measured_best = max(r.throughput or 0 for r in rec.table if not r.predicted)
    at_two = next(r for r in rec.table if r.devices == 2)
    predicted = [r for r in rec.table if r.predicted]
    assert [r.devices for r in predicted] == [4, 8]
    for r in predicted:  # nothing beyond what the measured counts show, range included
        assert (r.throughput or 0) < at_two.throughput <= measured_best
        assert (r.throughput_high or 0) < at_two.throughput
        assert r.workers == r.devices and r.hosts == 1
    assert rec.platform_note == LOCAL_WORKERS_CAVEAT
    assert "not what separate machines would do" in rec.platform_note
    text = " ".join(rec.reasons)
    assert "all ran on one machine's CPUs, sharing its cores" in text
    assert "Across machines" not in text  # no two-level (network) model for them


def test_workers_on_separate_hosts_are_still_machines(tmp_path):
    rec = recommend(points_from_recordings(_trial(tmp_path, ["vm", "vm2"])))
    (model,) = rec.models
    assert not model.shared_cores and not model.local_workers
    assert rec.platform_note is None
    assert any(r.startswith("Across machines") for r in rec.reasons)
    at_eight = next(r for r in rec.table if r.devices == 8)
    assert at_eight.throughput > next(r for r in rec.table if r.devices == 2).throughput


def _gpu_point(workers: int, step_s: float, hosts: int | None) -> SweepPoint:
    return normalize(
        SweepPoint(
            config="gpu workers",
            scaling="weak",
            devices=workers,
            workers=workers,
            hosts=hosts,
            per_replica_batch=64,
            step_time_s=step_s,
            platform="gpu",
        )
    )


def test_gpu_workers_on_one_host_are_unchanged():
    same = [_gpu_point(1, 0.0272, None), _gpu_point(2, 0.0693, 1)]
    unknown = [_gpu_point(1, 0.0272, None), _gpu_point(2, 0.0693, None)]
    rows = [[(r.devices, r.throughput) for r in recommend(ps).table] for ps in (same, unknown)]
    assert rows[0] == rows[1]
    assert not recommend(same).models[0].shared_cores
    assert interconnect_class(same[1]) == "network"


def test_hosts_round_trips_through_json_and_older_files_read(tmp_path, capsys):
    paths = _trial(tmp_path, ["vm", "vm"])
    assert main(["recommend", "--json", "--from", *map(str, paths)]) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = [p for p in doc["points"] if not p.get("predicted")]
    assert [p.get("hosts") for p in measured] == [None, 1]
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(doc))
    again = recommend(load_inputs([saved]).points)
    first = recommend(points_from_recordings(paths))
    assert [(r.devices, r.throughput) for r in again.table] == pytest.approx(
        [(r.devices, r.throughput) for r in first.table]
    )
    # a file without "hosts" (written before it existed): separate machines, as before
    for p in doc["points"]:
        p.pop("hosts", None)
    saved.write_text(json.dumps(doc))
    older = recommend(load_inputs([saved]).points)
    assert not older.models[0].shared_cores
