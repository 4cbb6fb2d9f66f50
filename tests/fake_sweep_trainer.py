"""A stand-in for ``python -m gpuscale.trainer --sweep JSON`` without TensorFlow:
reports each device count as the real trainer does (start, steps, end, one count
after the other on one event stream). ``FAKE_SWEEP`` picks what happens:
``complete``; ``fail-second`` (the second count fails, exit 1; ``fail-first``: the
first); ``crash-second``
(the process dies during the second count, exit 3); ``slow`` (steps take 0.1 s
and SIGTERM stops after the current one); ``FAKE_STEP_S`` sets how long a
step takes (default 0.001 s, 0.1 s when ``slow``). ``FAKE_LATE_LINES=1``: each
count's own output lines reach gpuscale after its end event (printed once the end
is sent and has had time to arrive, ``FAKE_LATE_S``: 0.5 s by default), as a pipe
that lags behind the events' socket. ``FAKE_START_S``: seconds the first count
takes to start (as TensorFlow's import does); SIGTERM then ends it at once,
``stopped`` with no step and no start event, as the real trainer's early stop does."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

from gpuscale.events.schema import EndEvent, ErrorEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient
from gpuscale.trainer.options import count_over_line

STEPS = 6


def main() -> int:
    configs = json.loads(sys.argv[sys.argv.index("--sweep") + 1])
    scenario = os.environ.get("FAKE_SWEEP", "complete")
    client = EventClient.from_env()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("fake trainer: loading", flush=True)
    loading = time.monotonic() + float(os.environ.get("FAKE_START_S", "0"))
    while time.monotonic() < loading:
        if stopping:  # stopped while "importing TensorFlow": nothing to finish
            client.send(EndEvent(t=time.time(), status="stopped", steps=0, duration_s=0.0))
            print(count_over_line(0), flush=True)
            print(count_over_line(0), file=sys.stderr, flush=True)
            client.close()
            return 0
        time.sleep(0.02)
    code = 0
    for index, config in enumerate(configs):
        n = config["devices"]
        began = time.time()
        if (scenario, index) in (("fail-second", 1), ("fail-first", 0)):
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
            time.sleep(float(os.environ.get("FAKE_STEP_S", 0.1 if scenario == "slow" else 0.001)))
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
        if os.environ.get("FAKE_LATE_LINES") == "1":
            # the end is routed first: the next count has begun there
            time.sleep(float(os.environ.get("FAKE_LATE_S", "0.5")))
            print(f"output of count {index}", flush=True)
            print(f"warning of count {index}", file=sys.stderr, flush=True)
        print(count_over_line(index), flush=True)  # as the real trainer does
        print(count_over_line(index), file=sys.stderr, flush=True)
        if stopping:
            break
    client.close()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
