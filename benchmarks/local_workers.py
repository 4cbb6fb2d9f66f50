"""Start a benchmark script again as each worker of a local multi-worker cluster."""

from __future__ import annotations

import os
import subprocess
import sys


def run_as_workers(script: str, argv: list[str], workers: int) -> int:
    """``python script --worker argv`` once per worker of a loopback cluster (its own
    ``TF_CONFIG``, no GPU, no gpuscale event address); the largest exit status."""
    from gpuscale.live.cluster import local_tf_configs

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env["CUDA_VISIBLE_DEVICES"] = ""
    procs = [
        subprocess.Popen(
            [sys.executable, script, "--worker", *argv],
            env={**env, "TF_CONFIG": tf_config},
        )
        for tf_config in local_tf_configs(workers)
    ]
    return max(p.wait() for p in procs)
