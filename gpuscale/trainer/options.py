"""The trainer's options: command-line flags -> a validated :class:`TrainConfig`.

Imports no TensorFlow: ``run``, ``watch`` and ``recommend`` parse these in the
parent process and hand the config (as JSON) to the trainer child process.
Values left as ``None`` are decided by the trainer once it knows the devices
(see :mod:`gpuscale.trainer.sizing`), and it says what it picked.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import Literal

import msgspec

from gpuscale.errors import GpuscaleError
from gpuscale.events import limits
from gpuscale.formatting import plural

BUILTIN_MODELS = ("mnist-cnn", "resnet50", "mlp", "transformer")
STRATEGIES = ("mirrored", "central-storage", "one-device", "multi-worker")
ALL_REDUCE = ("auto", "collective", "nccl", "hierarchical-copy", "reduce-to-one")
CPU_ALL_REDUCE_HINT = "on CPU logical devices use collective, reduce-to-one or auto"
"""What a GPU-only ``--all-reduce`` (nccl, hierarchical-copy) is refused with on CPU:
every choice that runs there."""
DATA = ("synthetic", "host")
_USER_MODEL = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


class TrainConfig(msgspec.Struct, kw_only=True, frozen=True):
    """One training run, as asked for. ``None`` means "let the trainer pick"."""

    devices: int | None = None
    """How many devices (GPUs, or logical CPU devices without a GPU)."""
    gpus: list[int] | None = None
    """Which GPUs (indices as nvidia-smi counts them, like CUDA_VISIBLE_DEVICES)."""
    strategy: Literal["mirrored", "central-storage", "one-device", "multi-worker"] = "mirrored"
    all_reduce: Literal["auto", "collective", "nccl", "hierarchical-copy", "reduce-to-one"] = "auto"
    model: str = "mnist-cnn"
    width: int | None = None
    """mnist-cnn channels per convolution (seed 002: 128)."""
    image_size: int = 224
    """resnet50 input height and width."""
    batch_per_replica: int | None = None
    """Weak scaling: fixed batch per replica."""
    global_batch: int | None = None
    """Strong scaling: fixed global batch, split across replicas."""
    data: Literal["synthetic", "host"] = "synthetic"
    steps: int = 100
    """Steps to run, warm-up included."""
    warmup_steps: int = 5
    phase_every: int | None = None
    """Measure the phase breakdown every K-th step (0: never); ``None``: when the
    probe budget allows (:mod:`gpuscale.trainer.schedule`)."""
    probe_budget: float = 0.02
    """The phase probes' share of the wall clock (a fraction: 0.02 is 2 %)."""
    precision: float | None = None
    """Stop once the median step time and the exposed all-reduce share are known to
    this precision (95 % half-width, a fraction of the step), ``steps`` at most."""
    mixed_precision: bool = False
    seed: int = 0

    @property
    def num_devices(self) -> int | None:
        return len(self.gpus) if self.gpus is not None else self.devices


MAX_WIDTH = 65_536
"""Most mnist-cnn channels per convolution (seed 002 uses 128)."""
MAX_IMAGE_SIZE = 8_192
"""Largest resnet50 image side in pixels (one such image is already 200 MB as float32)."""


def _gpu_list(text: str) -> list[int]:
    try:
        gpus = [int(part) for part in text.split(",") if part.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected GPU indices like 0,2 but got {text!r}"
        ) from None
    if not gpus or any(g < 0 for g in gpus):
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,2 but got {text!r}")
    return gpus


def _share(text: str, what: str) -> float:
    """``"2%"`` or ``"0.02"`` -> 0.02; ``what`` names the share in the error."""
    raw = text.strip()
    try:
        return float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what} like 2% or 0.02, not {text!r}") from None


def parse_budget(text: str) -> float:
    """``--probe-budget``: ``"2%"`` or ``"0.02"`` -> 0.02 (a share of the wall
    clock, 0 included, below 100 %)."""
    value = _share(text, "a share of the wall clock")
    if not 0 <= value < 1:
        hint = (
            f"; for {value:g} percent write {value:g}%"
            if 1 <= value < 100 and not text.strip().endswith("%")
            else ""
        )
        raise argparse.ArgumentTypeError(
            f"the probe budget must be in [0%, 100%), not {text!r}{hint}"
        )
    return value


def parse_precision(text: str) -> float:
    """``--precision``: ``"3%"`` or ``"0.03"`` -> 0.03 (a share of the step, above
    0 and below 100 %)."""
    value = _share(text, "a precision (a share of the step)")
    if not 0 < value < 1:
        hint = (
            f"; for {value:g} percent write {value:g}%"
            if 1 <= value < 100 and not text.strip().endswith("%")
            else ""
        )
        raise argparse.ArgumentTypeError(f"the precision must be in (0%, 100%), not {text!r}{hint}")
    return value


def add_trainer_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the trainer's flags (shared by ``run``, ``watch`` and ``recommend``)."""
    g = parser.add_argument_group("devices and strategy")
    g.add_argument(
        "--devices",
        type=int,
        metavar="N",
        help="use N devices: N GPUs (run and watch pick the best-connected N, see 'gpuscale devices'), or N logical CPU devices without a GPU (default: all GPUs, or 2 CPU devices; a script given with -- COMMAND picks its own unless given --devices)",
    )
    g.add_argument(
        "--gpus",
        type=_gpu_list,
        metavar="LIST",
        help="which GPUs, e.g. 0,2 (like CUDA_VISIBLE_DEVICES)",
    )
    g.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=None,  # not given: mirrored, or what --local-workers implies (strategy_of)
        help="mirrored: a replica per device, all-reduce; central-storage: variables on the CPU; "
        "one-device: the single-device baseline; multi-worker: MultiWorkerMirroredStrategy "
        "across machines (TF_CONFIG or Slurm; run and watch --local-workers N try it on this "
        "machine) (default: mirrored; multi-worker with --local-workers N of 2 or more)",
    )
    g.add_argument(
        "--all-reduce",
        choices=ALL_REDUCE,
        default="auto",
        help="MirroredStrategy's gradient exchange (default auto: what TensorFlow picks, "
        "CollectiveAllReduce; NCCL inside it on GPUs, ring on CPU)",
    )
    g = parser.add_argument_group("model and data")
    g.add_argument(
        "--model",
        default="mnist-cnn",
        metavar="NAME",
        help="mnist-cnn, resnet50, mlp, transformer, or package.module:function returning a "
        "Keras model or (model, dataset) (default: mnist-cnn)",
    )
    g.add_argument(
        "--width", type=int, metavar="C", help="mnist-cnn channels per convolution (seed 002: 128)"
    )
    g.add_argument(
        "--image-size",
        type=int,
        default=224,
        metavar="PX",
        help="resnet50 image size (default 224)",
    )
    batch = g.add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-per-replica",
        type=int,
        metavar="N",
        help="weak scaling: N samples per replica per step",
    )
    batch.add_argument(
        "--global-batch",
        type=int,
        metavar="N",
        help="strong scaling: N samples per step, split across replicas",
    )
    g.add_argument(
        "--data",
        choices=DATA,
        default="synthetic",
        help="synthetic: made once on each device (no input cost); host: a tf.data pipeline on the "
        "host, to see an input-bound run (default: synthetic)",
    )
    g = parser.add_argument_group("steps and measurement")
    g.add_argument(
        "--steps",
        type=int,
        default=100,
        metavar="N",
        help="steps to run, warm-up included (default 100)",
    )
    g.add_argument(
        "--warmup-steps",
        type=int,
        default=5,
        metavar="N",
        help="first steps left out of the statistics (default 5)",
    )
    g.add_argument(
        "--probe-budget",
        type=parse_budget,
        default=0.02,
        metavar="SHARE",
        help="the phase probes' share of the wall clock, e.g. 2%% (default 2%%): dense at the "
        "start until the breakdown is known, then spaced out, again after the step time shifts",
    )
    g.add_argument(
        "--phase-every",
        type=int,
        default=None,
        metavar="K",
        help="measure the compute / all-reduce / apply breakdown every K-th step whatever it "
        "costs (overrides --probe-budget), 0 for never",
    )
    g.add_argument(
        "--precision",
        type=parse_precision,
        default=None,
        metavar="SHARE",
        help="stop once the step time and the exposed all-reduce share are known to this "
        "precision, e.g. 3%% (95%% range; --steps is then the most it runs)",
    )
    g.add_argument(
        "--mixed-precision", action="store_true", help="float16 on GPUs, bfloat16 on CPU"
    )
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


IMPLIED_BY_LOCAL_WORKERS = 2
"""``--local-workers N`` with N at least this, without ``--strategy`` or a command,
asks for ``--strategy multi-worker`` (:func:`strategy_of`)."""


def strategy_of(args: argparse.Namespace) -> str:
    """The strategy the parsed flags ask for: ``--strategy`` as given; without it
    ``multi-worker`` where ``--local-workers N`` (N >= 2; ``run``, ``watch``) starts
    N workers of the built-in trainer (no command after ``--``: a script picks its
    own strategy), else ``mirrored``. A ``--strategy`` other than ``multi-worker``
    with ``--local-workers`` is refused where the run is set up
    (:func:`gpuscale.live.script_run.script_run_from_args`)."""
    given = getattr(args, "strategy", None)
    if given is not None:
        return given
    workers = getattr(args, "local_workers", None)
    command = list(getattr(args, "command", None) or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if workers is not None and workers >= IMPLIED_BY_LOCAL_WORKERS and not command:
        return "multi-worker"
    return "mirrored"


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Validate the parsed flags; raises :class:`GpuscaleError` with one line."""
    config = TrainConfig(
        devices=args.devices,
        gpus=args.gpus,
        strategy=strategy_of(args),
        all_reduce=args.all_reduce,
        model=args.model,
        width=args.width,
        image_size=args.image_size,
        batch_per_replica=args.batch_per_replica,
        global_batch=args.global_batch,
        data=args.data,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        phase_every=args.phase_every,
        probe_budget=getattr(args, "probe_budget", 0.02),
        precision=getattr(args, "precision", None),
        mixed_precision=args.mixed_precision,
        seed=args.seed,
    )
    validate(config)
    check_cpu_devices(config, getattr(args, "sweep", None))
    return config


def gpu_indices(
    probe: Callable[[], object] | None = None, driver_loaded: Callable[[], bool] | None = None
) -> list[int] | None:
    """The GPUs' indices as NVML sees them (no TensorFlow); ``[]`` when there is
    surely no GPU (NVML finds none and no NVIDIA driver is loaded); ``None`` when
    it cannot be told. ``probe`` and ``driver_loaded``: stand-ins for tests."""
    if probe is None:
        from gpuscale.telemetry import nvml

        probe = nvml.probe
    found = probe()
    if getattr(found, "ok", False):
        return sorted(d.index for d in found.devices)  # type: ignore[attr-defined]
    if (driver_loaded or _nvidia_driver_loaded)():
        return None
    return []


def _nvidia_driver_loaded() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


DEFAULT_CPU_DEVICES = 2
"""Logical CPU devices a run has without a GPU when ``--devices`` is not given."""


def asked_devices(config: TrainConfig, gpus_found: list[int] | None) -> tuple[str, int]:
    """The platform and the number of devices ``config`` asks for on a machine
    with ``gpus_found`` (see :func:`gpu_indices`), known before TensorFlow starts:
    what a run stopped before its start event is recorded as."""
    if config.gpus is not None:
        return "gpu", len(config.gpus)
    one = 1 if config.strategy == "one-device" else None
    if gpus_found:
        return "gpu", config.devices or one or len(gpus_found)
    if gpus_found == []:
        return "cpu-logical", config.devices or one or DEFAULT_CPU_DEVICES
    return ("gpu" if config.devices else "cpu-logical"), config.devices or one or 1


def cpu_devices_refusal(counts: list[int], cores: int, flag: str) -> str | None:
    """Why ``counts`` CPU logical devices make no sense on ``cores`` CPU cores, or
    ``None`` when they do. Logical devices share the cores: past the cores (and
    the default 2) each replica waits for a core, and 99 of them on 2 cores start
    TensorFlow for minutes and make no step."""
    limit = limits.cpu_devices_allowed(cores)
    too_many = [n for n in counts if n > limit]
    if not too_many:
        return None
    return (
        f"{flag} asks for {max(too_many)} CPU logical devices but this machine has no GPU "
        f"and {plural(cores, 'CPU core')}: devices beyond the cores only wait for one; "
        f"use at most {limit}"
    )


def check_cpu_devices(
    config: TrainConfig,
    sweep: list[int] | None = None,
    *,
    cores: int | None = None,
    gpus_found: Callable[[], list[int] | None] | None = None,
) -> None:
    """Refuse, before TensorFlow starts, more CPU logical devices than this machine
    has cores, for ``--devices`` (``run``, ``watch``, ``recommend``) and
    ``recommend --sweep`` alike. Asks NVML (``gpus_found``; tests give a stand-in)
    only when a count is past the cores: with a GPU (or when it cannot be told)
    ``--devices`` counts GPUs and this check does not apply."""
    if config.gpus is not None:
        return
    cores = cores or os.cpu_count() or 1
    asked = [(n, "--devices") for n in [config.devices] if n is not None]
    asked += [(n, "--sweep") for n in sweep or []]
    over = [(n, flag) for n, flag in asked if n > limits.cpu_devices_allowed(cores)]
    if not over:
        return
    if gpus_found is None:
        gpus_found = gpu_indices
    if gpus_found() != []:  # GPUs, or cannot tell: the trainer will say
        return
    flag = over[0][1]
    why = cpu_devices_refusal([n for n, f in over if f == flag], cores, flag)
    if why is not None:
        raise GpuscaleError(why)


def device_count_refusal(devices: int, name: str = "--devices") -> str | None:
    """Why ``devices`` is no device count (below 1, or past what gpuscale
    supports), said of ``name`` (``--devices``, or ``GPUSCALE_DEVICES`` in a
    script); ``None`` when it is one."""
    if devices < 1:
        return f"{name} must be at least 1, not {devices}"
    if devices > limits.MAX_DEVICES:
        return f"{name} {devices} is more than gpuscale supports ({limits.MAX_DEVICES:,})"
    return None


def validate(config: TrainConfig) -> None:
    """Raise :class:`GpuscaleError` for the first thing wrong with ``config``."""
    if config.devices is not None and config.gpus is not None:
        raise GpuscaleError("give --devices or --gpus, not both")
    if config.devices is not None and (why := device_count_refusal(config.devices)):
        raise GpuscaleError(why)
    if config.gpus is not None and max(config.gpus) >= limits.MAX_DEVICES:
        raise GpuscaleError(
            f"--gpus index {max(config.gpus)} is beyond any machine "
            f"(at most {limits.MAX_DEVICES - 1:,})"
        )
    if config.gpus is not None and len(set(config.gpus)) != len(config.gpus):
        raise GpuscaleError(f"--gpus lists a GPU twice: {','.join(map(str, config.gpus))}")
    n = config.num_devices
    if config.strategy == "one-device" and n is not None and n != 1:
        raise GpuscaleError(f"--strategy one-device uses one device, but {n} were asked for")
    if config.all_reduce != "auto" and config.strategy != "mirrored":
        raise GpuscaleError(f"--all-reduce applies to --strategy mirrored, not {config.strategy}")
    if config.model not in BUILTIN_MODELS and not _USER_MODEL.match(config.model):
        raise GpuscaleError(
            f"--model {config.model!r}: expected one of {', '.join(BUILTIN_MODELS)} "
            "or package.module:function"
        )
    if config.width is not None:
        if config.model != "mnist-cnn":
            raise GpuscaleError("--width applies to --model mnist-cnn only")
        if not 1 <= config.width <= MAX_WIDTH:
            raise GpuscaleError(f"--width must be 1 to {MAX_WIDTH:,}, not {config.width}")
    if config.image_size != 224 and config.model != "resnet50":
        raise GpuscaleError("--image-size applies to --model resnet50 only")
    if not 32 <= config.image_size <= MAX_IMAGE_SIZE:
        raise GpuscaleError(
            f"--image-size must be 32 (ResNet-50's minimum) to {MAX_IMAGE_SIZE:,}, "
            f"not {config.image_size}"
        )
    for flag, value in (
        ("--batch-per-replica", config.batch_per_replica),
        ("--global-batch", config.global_batch),
    ):
        if value is not None and not 1 <= value <= limits.MAX_BATCH:
            raise GpuscaleError(
                f"{flag} must be 1 to {limits.MAX_BATCH:,} (TensorFlow's int32), not {value}"
            )
    if (
        config.batch_per_replica is not None
        and n is not None
        and config.batch_per_replica * n > limits.MAX_BATCH
    ):
        raise GpuscaleError(
            f"--batch-per-replica {config.batch_per_replica} on {plural(n, 'device')} is a global batch "
            f"over {limits.MAX_BATCH:,} (TensorFlow's int32)"
        )
    if config.global_batch is not None and n is not None and config.global_batch % n:
        raise GpuscaleError(
            f"--global-batch {config.global_batch} does not split evenly across {plural(n, 'device')}"
        )
    if not 1 <= config.steps <= limits.MAX_STEPS:
        raise GpuscaleError(f"--steps must be 1 to {limits.MAX_STEPS:,}, not {config.steps}")
    if config.warmup_steps < 0:
        raise GpuscaleError(f"--warmup-steps cannot be negative ({config.warmup_steps})")
    if config.warmup_steps >= config.steps:
        raise GpuscaleError(
            f"--warmup-steps {config.warmup_steps} leaves no measured step out of --steps {config.steps}"
        )
    if config.phase_every is not None and not 0 <= config.phase_every <= limits.MAX_STEPS:
        raise GpuscaleError(
            f"--phase-every must be 0 to {limits.MAX_STEPS:,}, not {config.phase_every}"
        )
    if not limits.MIN_SEED <= config.seed <= limits.MAX_SEED:
        raise GpuscaleError(
            f"--seed must be {limits.MIN_SEED} to {limits.MAX_SEED:,} (TensorFlow's seed range), "
            f"not {config.seed}"
        )
    if config.precision is not None and not 0 < config.precision < 1:
        raise GpuscaleError(f"--precision must be in (0%, 100%), not {config.precision:.0%}")
    if config.precision is not None and config.strategy == "multi-worker":
        raise GpuscaleError(
            "--precision stops each worker when its own numbers are known, but workers must "
            "stop together: give a multi-worker run (--strategy multi-worker, --local-workers "
            "N) --steps instead"
        )
    if not 0 <= config.probe_budget < 1:
        raise GpuscaleError(f"--probe-budget must be in [0%, 100%), not {config.probe_budget:.0%}")


def to_json(config: TrainConfig) -> str:
    return msgspec.json.encode(config).decode()


def from_json(text: str) -> TrainConfig:
    """Decode and validate a config handed to the trainer process."""
    try:
        config = msgspec.json.decode(text, type=TrainConfig)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise GpuscaleError(f"bad trainer configuration: {exc}") from exc
    validate(config)
    return config


def shared_process_refusal(configs: list[TrainConfig]) -> str | None:
    """Why these runs (one per device count) cannot share one trainer process,
    or ``None`` when they can.

    One process sets its devices up once, for the widest run, and then builds a
    strategy per run over a subset of them; that is sound when the runs differ
    only in their devices (``devices`` or ``gpus``), all on one machine with a
    strategy over explicit devices (``mirrored`` or ``central-storage``).
    Multi-worker runs need their own cluster per count; a mix of GPU lists and
    logical-device counts has no one set-up."""
    if len(configs) < 2:
        return "one device count"
    first = configs[0]
    if first.strategy not in ("mirrored", "central-storage"):
        return f"--strategy {first.strategy}"
    on_gpus = first.gpus is not None
    for config in configs:
        if (config.gpus is not None) != on_gpus or (not on_gpus and config.devices is None):
            return "the runs do not all name their devices the same way"
        if msgspec.structs.replace(config, devices=None, gpus=None) != msgspec.structs.replace(
            first, devices=None, gpus=None
        ):
            return "the runs differ in more than their devices"
    return None


def widest(configs: list[TrainConfig]) -> TrainConfig:
    """The configuration whose devices hold every run's: the most logical CPU
    devices, or every GPU any run uses (the largest run's first, in its order)."""
    largest = max(configs, key=lambda c: c.num_devices or 0)
    if largest.gpus is None:
        return largest
    union = list(largest.gpus)
    for config in configs:
        union += [g for g in config.gpus or [] if g not in union]
    return msgspec.structs.replace(largest, gpus=union)


def device_positions(wide: TrainConfig, config: TrainConfig) -> list[int]:
    """Where ``config``'s devices are among ``wide``'s (see :func:`widest`)."""
    if config.gpus is not None and wide.gpus is not None:
        return [wide.gpus.index(g) for g in config.gpus]
    return list(range(config.devices or 1))


COUNT_OVER_PREFIX = "gpuscale-sweep: end of the output of count "
"""What a sweep's trainer process (``--sweep``) prints on stdout and on stderr
after each count's end event, with the count's index: every line before it on
that stream is that count's. The events' socket and the two pipes are not ordered
with each other, so only this tells gpuscale which count printed a late line."""


def count_over_line(index: int) -> str:
    """The line that closes count ``index``'s output (see :data:`COUNT_OVER_PREFIX`)."""
    return f"{COUNT_OVER_PREFIX}{index}"


def count_over(line: str) -> int | None:
    """The count whose output ``line`` closes, or ``None`` for any other line."""
    if not line.startswith(COUNT_OVER_PREFIX):
        return None
    rest = line[len(COUNT_OVER_PREFIX) :].strip()
    return int(rest) if rest.isdigit() else None


def sweep_to_json(configs: list[TrainConfig]) -> str:
    return msgspec.json.encode(configs).decode()


def sweep_from_json(text: str) -> list[TrainConfig]:
    """Decode and validate the runs handed to one trainer process (``--sweep``)."""
    try:
        configs = msgspec.json.decode(text, type=list[TrainConfig])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise GpuscaleError(f"bad trainer sweep: {exc}") from exc
    for config in configs:
        validate(config)
    if (why := shared_process_refusal(configs)) is not None:
        raise GpuscaleError(f"these runs cannot share one trainer process: {why}")
    return configs
