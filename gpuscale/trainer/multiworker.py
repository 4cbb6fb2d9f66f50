"""``--strategy multi-worker``: TensorFlow's MultiWorkerMirroredStrategy (imports TensorFlow).

The cluster comes from ``TF_CONFIG`` (``TFConfigClusterResolver``) or, under
Slurm without ``TF_CONFIG``, from ``SlurmClusterResolver``; gpuscale's own reading
of the same variables (:mod:`gpuscale.cluster`) only decides where events go.
Every worker runs the same trainer; the replicas are all local devices of all
workers (one CPU device per worker without a GPU), and the gradient all-reduce
is TensorFlow's collective: NCCL between GPUs, a ring over gRPC between CPUs.
MultiWorkerMirroredStrategy must be made before TensorFlow runs any op, which
is why the trainer makes its strategy right after choosing the devices.
"""

from __future__ import annotations

import tensorflow as tf

from gpuscale import cluster


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
    note = (
        f"multi-worker: {info.num_workers} workers from {info.source}, this is worker "
        f"{info.index}; collective all-reduce ({'NCCL' if on_gpu else 'ring over gRPC'})."
    )
    return strategy, "collective", note
