"""What the Keras callback costs a user's ``model.fit``, side by side in one process.

Same model (a small CNN), same MirroredStrategy on 2 logical CPU devices, same
data; epochs alternate between ``fit`` without callbacks and ``fit`` with
``ScalingMonitor`` (events to an in-process EventServer, as under
``gpuscale run``). The callback makes Keras synchronise every step (it reads the
step's loss) and adds a per-step sample count; with ``--every K`` it also runs
the phase probe every K steps (two extra forward+backward passes, between steps).

Prints the median epoch wall time of each and, as its last line,
``overhead: X%`` = median epoch time with the callback / without - 1.

Run: ``python benchmarks/callback_overhead.py [--rounds R] [--steps N] [--every K]``
(``--every 0``: step times only, no phase probe).
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="alternations of the two fits")
    parser.add_argument("--steps", type=int, default=40, help="steps per epoch")
    parser.add_argument("--every", type=int, default=0, help="phase probe every K steps (0: off)")
    parser.add_argument("--batch", type=int, default=64, help="global batch")
    parser.add_argument(
        "--state-batch",
        action="store_true",
        help="pass batch_size= to the callback (no per-step read of its sample counter)",
    )
    args = parser.parse_args()

    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    from gpuscale.events.transport import EventServer

    received: queue.SimpleQueue = queue.SimpleQueue()
    server = EventServer(received.put)
    os.environ.update(server.env(0))

    import keras

    from gpuscale.keras import ScalingMonitor

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((28, 28, 1)),
                keras.layers.Conv2D(16, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Conv2D(16, 3, activation="relu"),
                keras.layers.Flatten(),
                keras.layers.Dense(10),
            ]
        )
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    n = args.batch * args.steps
    x = tf.random.normal((n, 28, 28, 1), seed=0)
    y = tf.random.uniform((n,), 0, 10, tf.int32, seed=0)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).cache()

    monitor = ScalingMonitor(
        every=args.every or 10**9,
        phases=args.every > 0,
        warmup_steps=0,
        batch_size=args.batch if args.state_batch else None,
    )
    times: dict[str, list[float]] = {"plain": [], "callback": []}
    model.fit(dataset, epochs=1, verbose=0)  # trace and warm up both paths, untimed
    model.fit(dataset, epochs=1, verbose=0, callbacks=[monitor])
    for _ in range(args.rounds):
        for name, callbacks in (("plain", []), ("callback", [monitor])):
            start = time.perf_counter()
            model.fit(dataset, epochs=1, verbose=0, callbacks=callbacks)
            times[name].append(time.perf_counter() - start)
    server.close()
    if os.environ.get("GPUSCALE_BENCH_VERBOSE"):
        print({k: [round(t * 1000) for t in v] for k, v in times.items()})
    plain = statistics.median(times["plain"])
    with_cb = statistics.median(times["callback"])
    print(
        f"model: small CNN, global batch {args.batch}, {args.steps} steps per epoch, 2 CPU replicas"
    )
    print(f"phase probe: every {args.every} steps" if args.every else "phase probe: off")
    print(f"plain fit:      median epoch {plain * 1000:.1f} ms over {args.rounds} epochs")
    print(f"with callback:  median epoch {with_cb * 1000:.1f} ms over {args.rounds} epochs")
    print(f"overhead: {(with_cb / plain - 1) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
