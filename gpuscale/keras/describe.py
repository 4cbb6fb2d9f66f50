"""What the user's strategy and model look like, as gpuscale's events name them."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from gpuscale.events.schema import DeviceInfo

_STRATEGY_NAMES = {
    "MirroredStrategy": "mirrored",
    "MultiWorkerMirroredStrategy": "multi-worker",
    "CollectiveAllReduceStrategy": "multi-worker",
    "CentralStorageStrategy": "central-storage",
    "OneDeviceStrategy": "one-device",
    "_DefaultDistributionStrategy": "none",
}
_CROSS_DEVICE_OPS_NAMES = {
    "NcclAllReduce": "nccl",
    "HierarchicalCopyAllReduce": "hierarchical-copy",
    "ReductionToOneDevice": "reduce-to-one",
    "CollectiveAllReduce": "collective",
}


def strategy_of(model: Any) -> tf.distribute.Strategy:
    """The model's strategy, else the current one."""
    strategy = getattr(model, "distribute_strategy", None)
    return strategy if strategy is not None else tf.distribute.get_strategy()


def describe_strategy(strategy: tf.distribute.Strategy) -> dict[str, Any]:
    """Strategy name, cross-device ops, replicas, workers and devices, as gpuscale names them."""
    class_name = type(strategy).__name__
    name = _STRATEGY_NAMES.get(class_name, class_name)
    cross_ops = None
    extended = strategy.extended
    ops = getattr(extended, "_cross_device_ops", None) or getattr(extended, "_collective_ops", None)
    if name == "multi-worker":
        cross_ops = "collective"
    elif ops is not None:
        ops_name = type(ops).__name__
        cross_ops = _CROSS_DEVICE_OPS_NAMES.get(ops_name, ops_name)
    num_workers = 1
    if name == "multi-worker":
        resolver = getattr(strategy, "cluster_resolver", None)
        try:
            spec = resolver.cluster_spec().as_dict() if resolver else {}
            num_workers = sum(len(v) for k, v in spec.items() if k in ("chief", "worker")) or 1
        except Exception:
            num_workers = 1
    devices: list[DeviceInfo] = []
    try:
        worker_devices = tuple(extended.worker_devices)
    except (RuntimeError, AttributeError, NotImplementedError):  # the default strategy
        worker_devices = ()
    # MultiWorkerMirroredStrategy without GPUs: each worker's one CPU, not CPU logical
    # devices carved out of it (the built-in trainer's multi-worker runs say "cpu", and
    # recommend treats CPU workers on one host as sharing its cores from that)
    cpu_kind = "cpu" if name == "multi-worker" else "cpu-logical"
    for index, tf_name in enumerate(worker_devices):
        is_gpu = "GPU" in tf_name.upper()
        devices.append(
            DeviceInfo(
                index=index,
                name=tf_name.rsplit("/", 1)[-1],
                kind="gpu" if is_gpu else cpu_kind,
                tf_name=tf_name,
            )
        )
    if not devices:
        gpus = tf.config.list_logical_devices("GPU")
        devices = [
            DeviceInfo(index=0, name="GPU:0" if gpus else "CPU:0", kind="gpu" if gpus else "cpu")
        ]
    if any(d.kind == "gpu" for d in devices):
        platform = "gpu"
    elif worker_devices:
        # a strategy's CPU devices, one or several: as the built-in trainer says them
        # (a script's 1-device run said "cpu", its 2 "cpu-logical": two configurations)
        platform = cpu_kind
    else:
        platform = "cpu"
    return {
        "strategy": name,
        "cross_device_ops": cross_ops,
        "num_replicas": int(strategy.num_replicas_in_sync),
        "num_workers": num_workers,
        "devices": devices,
        "platform": platform,
    }


def trainable_bytes(model: Any) -> tuple[int, int]:
    """(trainable parameters, their bytes): the gradient payload of a step."""
    params = 0
    payload = 0
    for variable in model.trainable_variables:
        count = 1
        for dim in variable.shape:
            count *= int(dim)
        params += count
        payload += count * tf.as_dtype(variable.dtype).size
    return params, payload


def input_spec_from_model(model: Any) -> Any:
    """The model's declared input spec (from ``keras.Input``), or None."""
    inputs = getattr(model, "inputs", None)
    if not inputs:
        return None
    specs = [tf.TensorSpec(tuple(i.shape), tf.as_dtype(i.dtype)) for i in inputs]
    return specs[0] if len(specs) == 1 else specs
