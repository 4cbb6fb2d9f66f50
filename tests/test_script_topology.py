"""A one-worker script run records this machine's GPU topology in its start event."""

from __future__ import annotations

import sys

from fake_nvml import FakeNvml

from gpuscale.live.script_run import ScriptRun
from gpuscale.recording.reader import load_run


def test_a_plain_script_run_records_the_topology(tmp_path):
    path = tmp_path / "plain.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", "print('hello')"],
        record=path,
        nvml=FakeNvml.scenario("pcie-one-switch"),
        sample_interval_s=0.1,
    ).start()
    run.wait(60)
    assert run.done
    start = load_run(path).start
    assert start.topology is not None
    assert [g.index for g in start.topology.gpus] == [0, 1, 2, 3]
    assert {p.pcie for p in start.topology.pairs} == {"single"}
