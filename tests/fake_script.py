"""A stand-in for a user's script under ``gpuscale recommend -- python train.py``
without TensorFlow: it reports a start, 12 steps and an end at the device count
``GPUSCALE_DEVICES`` gives it, as ``gpuscale.keras.ScalingMonitor`` does. At the
count ``FAKE_FAIL_AT`` it fails before its first step instead: it prints a line
on stderr and exits with ``FAKE_FAIL_STATUS`` (default 3), or kills itself with
that signal when the status is negative (``-9``: SIGKILL). At ``FAKE_FAIL_LATE_AT``
it fails after its steps: no end, the line on stderr, status 3."""

from __future__ import annotations

import os
import socket
import sys
import time

from gpuscale.events.schema import EndEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient


def main() -> int:
    n = int(os.environ.get("GPUSCALE_DEVICES", "1"))
    if str(n) == os.environ.get("FAKE_FAIL_AT"):
        print("RuntimeError: out of memory", file=sys.stderr, flush=True)
        status = int(os.environ.get("FAKE_FAIL_STATUS", "3"))
        if status < 0:
            os.kill(os.getpid(), -status)
        return status
    client = EventClient.from_env()
    client.send(
        StartEvent(
            t=time.time(),
            gpuscale_version="test",
            host=socket.gethostname(),
            pid=os.getpid(),
            source="script",
            config={"script": "fake_script.py"},
            model="fake_script.py",
            strategy="mirrored",
            num_replicas=n,
            platform="cpu-logical",
            global_batch=64,
            per_replica_batch=64 // n,
            scaling="strong",
            pids=[os.getpid()],
        )
    )
    for step in range(12):
        step_s = 0.01 * (1 + 0.2 * n)
        client.send(
            StepEvent(t=time.time(), step=step, step_time_s=step_s, samples=64, warmup=step < 2)
        )
    if str(n) == os.environ.get("FAKE_FAIL_LATE_AT"):  # after its steps, without an end
        client.close()
        print("RuntimeError: lost a worker", file=sys.stderr, flush=True)
        return 3
    client.send(EndEvent(t=time.time(), status="completed", steps=12))
    client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
