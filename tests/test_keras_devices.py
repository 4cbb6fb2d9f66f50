"""`--devices N -- python train.py`: the script gets N devices through GPUSCALE_DEVICES
(N CPU logical devices without a GPU), and `recommend -- python train.py` sweeps it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from fake_nvml import FakeNvml

from gpuscale.errors import GpuscaleError
from gpuscale.live.devices import ENV_DEVICES, device_env

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_readme.py"


def _gpuscale(*args: str, timeout: int = 300):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""})
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_no_request_leaves_the_script_alone():
    assert device_env(None, None, {}) == {}


def test_without_a_gpu_only_the_count_is_passed():
    assert device_env(2, None, {"CUDA_VISIBLE_DEVICES": ""}) == {ENV_DEVICES: "2"}
    no_gpus = FakeNvml.scenario("no-gpus")
    assert device_env(3, None, {}, nvml=no_gpus) == {ENV_DEVICES: "3"}


def test_gpus_are_chosen_through_cuda_visible_devices():
    box = FakeNvml.scenario("h100-box")
    assert device_env(2, None, {}, nvml=box) == {ENV_DEVICES: "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert device_env(1, None, {"CUDA_VISIBLE_DEVICES": "3,5"}) == {
        ENV_DEVICES: "1",
        "CUDA_VISIBLE_DEVICES": "3",
    }
    assert device_env(None, [0, 2], {}) == {ENV_DEVICES: "2", "CUDA_VISIBLE_DEVICES": "0,2"}


def test_more_gpus_than_there_are_is_refused():
    with pytest.raises(GpuscaleError, match="has 8 GPU"):
        device_env(9, None, {}, nvml=FakeNvml.scenario("h100-box"))
    with pytest.raises(GpuscaleError, match="lists only 2"):
        device_env(3, None, {"CUDA_VISIBLE_DEVICES": "0,1"})


def test_devices_with_local_workers_is_refused():
    proc = _gpuscale("run", "--devices", "2", "--local-workers", "2", "--", "python", "x.py")
    assert proc.returncode != 0 and "each worker of a cluster" in proc.stderr


def _readme_script(block: int = 0) -> str:
    """The README's own script: its first python block under "Your own training script"
    (``block=1``: the second, the custom loop's)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme[readme.index("## Your own training script") :]
    section = section[: section.index("\n## ", 1)]
    begin = -1
    for _ in range(block + 1):
        begin = section.index("```python\n", begin + 1) + len("```python\n")
    return section[begin : section.index("\n```", begin)]


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory) -> dict[str, Future]:
    """The module's two `gpuscale` runs of a script, started together (their checks are
    of device counts and batches, never of timings); each test waits for its own:
    ``sweep``, `recommend --sweep 1,2` of train_readme.py; ``readme``, `run --devices 2`
    of the README's script copied as a new user would (one epoch, not two); ``loop``,
    the same of the README's custom loop."""
    script = tmp_path_factory.mktemp("readme") / "train.py"
    script.write_text(_readme_script().replace("epochs=2", "epochs=1"))
    loop = script.parent / "loop.py"
    loop.write_text(_readme_script(1))
    with ThreadPoolExecutor(2) as pool:
        yield {
            "sweep": pool.submit(
                _gpuscale,
                *("recommend", "--json", "--no-record", "--sweep", "1,2", "--"),
                *(sys.executable, str(SCRIPT)),
            ),
            "readme": pool.submit(
                _gpuscale,
                *("run", "--json", "--no-record", "--devices", "2", "--"),
                *(sys.executable, str(script)),
            ),
            "loop": pool.submit(
                _gpuscale,
                *("run", "--json", "--no-record", "--devices", "2", "--"),
                *(sys.executable, str(loop)),
            ),
        }


@pytest.mark.tf
def test_recommend_sweeps_a_script_over_device_counts(script_runs):
    proc = script_runs["sweep"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    measured = [p for p in doc["points"] if not p.get("predicted")]
    assert sorted(p["devices"] for p in measured) == [1, 2]
    # the script's fit(batch_size=32) is one global batch split across the replicas
    assert {p["scaling"] for p in measured} == {"strong"}
    assert {p["global_batch"] for p in measured} == {32}
    assert len({p["config"] for p in measured}) == 1


@pytest.mark.tf
def test_the_readmes_script_runs_as_written_on_2_devices_without_a_gpu(script_runs):
    """The README's own script, copied as a new user would, run with ``--devices 2``
    and no GPU: 2 CPU logical devices, its fit batch split across the 2 replicas, a
    phase breakdown. (One run for what were two tests, of this script and of
    train_readme.py.)"""
    batch = int(re.search(r"batch_size=(\d+)", _readme_script()).group(1))
    proc = script_runs["readme"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["devices"] == 2 and summary["platform"] == "cpu-logical"
    assert summary["per_replica_batch"] == batch // 2 and summary["global_batch"] == batch
    assert summary["model"] == "train.py"
    assert summary["phase_steps"] > 0


@pytest.mark.tf
def test_the_readmes_custom_loop_runs_as_written_on_2_devices_without_a_gpu(script_runs):
    """The README's custom loop (ScalingMonitor's start/step/close), copied as a new user
    would, under `run --devices 2`: its steps counted with the batch it gave, strong
    scaling as it said, a probe of its phases."""
    code = _readme_script(1)
    assert "monitor.start(" in code and "monitor.step()" in code and "monitor.close()" in code
    batch = int(re.search(r"global_batch = (\d+)", code).group(1))
    proc = script_runs["loop"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["devices"] == 2 and summary["platform"] == "cpu-logical"
    assert summary["global_batch"] == batch and summary["per_replica_batch"] == batch // 2
    assert summary["scaling"] == "strong"
    assert summary["model"] == "loop.py"
    assert summary["phase_steps"] > 0
