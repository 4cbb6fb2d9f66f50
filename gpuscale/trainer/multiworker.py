"""``--strategy multi-worker``: TensorFlow's MultiWorkerMirroredStrategy (imports TensorFlow).

The cluster comes from ``TF_CONFIG`` (``TFConfigClusterResolver``) or, under
Slurm without ``TF_CONFIG``, from ``SlurmClusterResolver``; gpuscale's own reading
of the same variables (:mod:`gpuscale.live.cluster`) only decides where events go.
Every worker runs the same trainer; the replicas are all local devices of all
workers (one CPU device per worker without a GPU), and the gradient all-reduce
is TensorFlow's collective: NCCL between GPUs, a ring over gRPC between CPUs.
MultiWorkerMirroredStrategy must be made before TensorFlow runs any op, which
is why the trainer makes its strategy right after choosing the devices.
"""

from __future__ import annotations

import tensorflow as tf

from gpuscale.events.schema import DeviceInfo
from gpuscale.live import cluster
from gpuscale.trainer.plan import DevicePlan
from gpuscale.trainer.preflight import check_multi_worker_devices


def num_workers() -> int:
    """Workers in this process's cluster (1 without one)."""
    info = cluster.resolve()
    return info.num_workers if info else 1


def make_strategy(on_gpu: bool) -> tuple[tf.distribute.Strategy, str, str]:
    """``(strategy, cross_device_ops name, note)`` for this worker of the cluster.
    Raises :class:`gpuscale.errors.GpuscaleError` when there is no cluster."""
    info = cluster.require()
    if info.source == "slurm":
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver()
    else:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    implementation = (
        tf.distribute.experimental.CommunicationImplementation.NCCL
        if on_gpu
        else tf.distribute.experimental.CommunicationImplementation.RING
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=resolver,
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=implementation
        ),
    )
    note = cluster.strategy_note(info, on_gpu)
    return strategy, "collective", note


_made: tuple[tf.distribute.Strategy, str, str] | None = None


def setup(config) -> tuple[object, tf.distribute.Strategy, str, str]:
    """Devices and strategy of a multi-worker run, in the order TensorFlow needs:
    GPU memory growth, then the strategy (which configures the collectives before
    the runtime starts), then the devices it chose. Returns ``(DevicePlan,
    strategy, cross_device_ops, note)``; the strategy is kept for
    :func:`strategy_for` (the trainer asks for it once more when it builds)."""
    global _made
    gpus = tf.config.list_physical_devices("GPU")
    check_multi_worker_devices(config.devices, len(gpus))
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    _made = make_strategy(bool(gpus))
    strategy = _made[0]
    names = list(strategy.extended.worker_devices)
    infos = []
    for index, name in enumerate(names):
        is_gpu = "GPU" in name.upper()
        infos.append(
            DeviceInfo(
                index=index,
                name=name.rsplit("/", 1)[-1] if is_gpu else "CPU",
                kind="gpu" if is_gpu else "cpu",
                tf_name=name,
            )
        )
    plan = DevicePlan("gpu" if gpus else "cpu", names, infos)
    return plan, strategy, _made[1], _made[2]


def strategy_for() -> tuple[tf.distribute.Strategy, str, str]:
    """The strategy :func:`setup` made (there can be only one per process)."""
    if _made is None:
        raise RuntimeError("multiworker.setup() must run before the trainer is built")
    return _made
