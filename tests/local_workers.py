"""Run one Python program as a local multi-worker cluster (real processes, CPU only):
for tests of MultiWorkerMirroredStrategy that need every worker's own output."""

from __future__ import annotations

import os
import subprocess
import sys

from gpuscale.live.cluster import local_tf_configs


def run_workers(code: str, workers: int = 2, timeout: float = 300) -> list[tuple[int, str, str]]:
    """``python -c code`` once per worker of a loopback cluster (its own ``TF_CONFIG``,
    no GPU, no gpuscale event address); ``(returncode, stdout, stderr)`` per worker,
    worker 0 first. Workers still running at ``timeout`` are killed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**env, "TF_CONFIG": tf_config},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tf_config in local_tf_configs(workers)
    ]
    try:
        results = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, results, strict=True)]
