"""A stand-in for ``python -m gpuscale.trainer --sweep JSON`` without TensorFlow:
reports each device count as the real trainer does (start, steps, end, one count
after the other on one event stream). ``FAKE_SWEEP`` picks what happens:
``complete``; ``fail-second`` (the second count fails, exit 1); ``crash-second``
(the process dies during the second count, exit 3); ``slow`` (steps take 0.1 s
and SIGTERM stops after the current one)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

from gpuscale.events.schema import EndEvent, ErrorEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient

STEPS = 6


def main() -> int:
    configs = json.loads(sys.argv[sys.argv.index("--sweep") + 1])
    scenario = os.environ.get("FAKE_SWEEP", "complete")
    client = EventClient.from_env()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("fake trainer: loading", flush=True)
    code = 0
    for index, config in enumerate(configs):
        n = config["devices"]
        began = time.time()
        if scenario == "fail-second" and index == 1:
            client.send(ErrorEvent(t=time.time(), message="the trainer ran out of device memory"))
            client.send(EndEvent(t=time.time(), status="failed", steps=0, duration_s=0.1))
            code = 1
            break
        client.send(
            StartEvent(
                t=time.time(),
                gpuscale_version="test",
                host=socket.gethostname(),
                pid=os.getpid(),
                config={**config, "resolved": {"shared_process": {"run": index + 1}}},
                model="fake",
                num_replicas=n,
                global_batch=16,
                per_replica_batch=16 // n,
                scaling="strong",
                pids=[os.getpid()],
            )
        )
        steps = 0
        for step in range(STEPS):
            if stopping:
                break
            if scenario == "crash-second" and index == 1 and step == 2:
                client.close()
                os._exit(3)
            time.sleep(0.1 if scenario == "slow" else 0.001)
            client.send(
                StepEvent(
                    t=time.time(),
                    step=step,
                    step_time_s=0.01 * (1 + index),
                    samples=16,
                    warmup=step < 1,
                )
            )
            steps += 1
        status = "stopped" if stopping else "completed"
        client.send(
            EndEvent(t=time.time(), status=status, steps=steps, duration_s=time.time() - began)
        )
        if stopping:
            break
    client.close()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
