"""The one event schema: a run is a stream of these typed records.

Every source (the trainer process, the NVML and host samplers, a user's Keras
callback, a remote worker, a recording on disk) produces these events, and every
consumer (the recorder, the analysis, the dashboard, the CLI) reads them without
asking where they came from.

Conventions
-----------
* ``t`` is wall-clock time in seconds since the Unix epoch (``time.time()``),
  the one clock every process and host shares. Durations are measured with
  ``time.perf_counter()`` and stored in fields ending in ``_s``.
* Units are in the field names: ``_s`` seconds, ``_bytes`` bytes,
  ``_bytes_s`` bytes per second, ``_pct`` percent (0-100), ``_w`` watts,
  ``_c`` degrees Celsius, ``_mhz`` megahertz.
* ``None`` means "not available" (unsupported by the device, not measured); the
  UI shows it as "n/a". It is never a guessed value.
* ``worker`` is the index of the machine (multi-worker runs); 0 on one machine.
* On the wire and on disk each event is one JSON object whose ``kind`` field
  names its type; fields equal to their default are omitted.

Versioning: :data:`SCHEMA_VERSION` is ``"MAJOR.MINOR"``. A minor bump only adds
optional fields, so a reader accepts any file with the same major version
(unknown fields are ignored); a different major version is refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gpuscale.events import limits

SCHEMA_VERSION = "1.8"
"""1.1: StartEvent.topology; 1.2: PhaseEvent.compute_allreduce_s and probe_cost_s (probe
budget), StartEvent.provisional and the ``source: "clock"`` log marker (write-ahead);
1.3: StartEvent.sweep (the runs of one ``gpuscale recommend`` sweep); 1.4:
SweepRef.available_devices (the devices the sweep's machine had); 1.5: PhaseEvent.setup_s
(compiling the probe's passes once); 1.6: StartEvent.cpu_cores (the machine's cores, for
CPU devices); 1.7: PhaseEvent.compute_first (the order of a probe's passes); 1.8:
StepEvent.total_steps (where the training is planned to end: progress out of a total)."""
SCHEMA_MAJOR = 1

# Plausible ranges (gpuscale.events.limits) for the fields the analysis divides by
# or counts with: a recording outside them is damaged and refused, naming the line.
_Time = Annotated[float, msgspec.Meta(ge=0, le=limits.MAX_TIMESTAMP_S)]
_Worker = Annotated[int, msgspec.Meta(ge=0, lt=limits.MAX_WORKERS)]
_Devices = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_DEVICES)]
_Workers = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_WORKERS)]
_Batch = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_BATCH)]
_StepTime = Annotated[float, msgspec.Meta(ge=limits.MIN_STEP_TIME_S, le=limits.MAX_STEP_TIME_S)]
_Duration = Annotated[float, msgspec.Meta(ge=0, le=limits.MAX_STEP_TIME_S)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_STEPS)]
_Bytes = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_PAYLOAD_BYTES)]


class _Event(msgspec.Struct, tag_field="kind", kw_only=True, omit_defaults=True):
    t: _Time
    """Wall-clock time, seconds since the Unix epoch."""
    worker: _Worker = 0
    """Index of the worker (machine) the event comes from; 0 on a single machine."""


class DeviceInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One device a run uses or a sampler sees."""

    index: int
    name: str
    kind: Literal["gpu", "cpu-logical", "cpu"] = "gpu"
    uuid: str | None = None
    memory_total_bytes: int | None = None
    pcie_gen: int | None = None
    """Current PCIe link generation (1-6)."""
    pcie_width: int | None = None
    """Current PCIe link width (lanes)."""
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    nvlink_links: int | None = None
    """Active NVLink links; 0 when the GPU has none."""
    mig: bool = False
    tf_name: str | None = None
    """The TensorFlow device name, e.g. ``/job:localhost/replica:0/task:0/device:GPU:0``."""


TopologyLevel = Literal["internal", "single", "multiple", "hostbridge", "node", "system"]
"""NVML's common PCIe ancestor of two GPUs (``nvmlDeviceGetTopologyCommonAncestor``),
nearest first, as ``nvidia-smi topo -m`` names them: ``internal`` one board
(dual-GPU card), ``single`` one PCIe switch (PIX), ``multiple`` several switches
without a host bridge (PXB), ``hostbridge`` one CPU host bridge (PHB), ``node``
host bridges of one NUMA node (NODE), ``system`` across sockets (SYS)."""


class NvLinkPeer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one active NVLink link of a GPU connects to."""

    link: int
    """The link's index on its GPU."""
    remote: Literal["gpu", "nvswitch", "ibmnpu", "unknown"] = "unknown"
    """``nvmlDeviceGetNvLinkRemoteDeviceType`` (a GPU whose bus id is another
    GPU's counts as ``gpu`` even when the type is not reported)."""
    remote_bus_id: str | None = None
    """PCI bus id of the far end (``nvmlDeviceGetNvLinkRemotePciInfo``), e.g. ``00000000:18:00.0``."""
    remote_gpu: int | None = None
    """NVML index of the far end when it is one of this machine's GPUs."""


class GpuLinks(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One GPU's links: its PCIe link and its NVLink links."""

    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    """``nvmlDeviceGetPciInfo().busId``, e.g. ``00000000:18:00.0``."""
    pcie_gen: int | None = None
    """Current PCIe generation (an idle GPU may train its link down)."""
    pcie_width: int | None = None
    pcie_max_gen: int | None = None
    """The most the GPU and its slot support."""
    pcie_max_width: int | None = None
    nvlink_links: int | None = None
    """Active NVLink links; 0 none; ``None`` not known."""
    nvlink_peers: list[NvLinkPeer] = []
    """One per active link whose far end NVML reports."""


class GpuPair(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How two GPUs reach each other."""

    a: int
    b: int
    """NVML indices, ``a < b``."""
    pcie: TopologyLevel | None = None
    """Their nearest common PCIe ancestor; ``None`` not reported."""
    nvlinks: int = 0
    """NVLink links between them directly (a bridge, a mesh)."""
    nvswitch: bool = False
    """Both have links to the same NVSwitch fabric."""


class Topology(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How the GPUs of one machine are connected, as NVML reports it.

    Read by :func:`gpuscale.telemetry.topology.read_topology`; judged by
    :mod:`gpuscale.analysis.topology`. Every pair of GPUs appears once in ``pairs``.
    """

    gpus: list[GpuLinks] = []
    pairs: list[GpuPair] = []


class SweepRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Which sweep a run belongs to: every run one ``gpuscale recommend`` sweep makes
    (the built-in trainer's or a script's, live or ``--watch``) carries the same
    ``id`` in its start event, and its own place in the sweep."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")]
    """The sweep's identity, e.g. ``sweep-20261123-125500-3f2a`` (local time the sweep
    began, 4 random hex digits): what ``gpuscale runs`` shows and ``gpuscale replay``
    and ``gpuscale recommend --from`` accept."""
    index: Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_DEVICES)] = 0
    """This run's place in ``planned`` (0 for the first count)."""
    planned: list[_Devices] = []
    """Every device count the sweep set out to measure, in order; the counts a
    stopped sweep never measured are the ones no recording of it has."""
    available_devices: _Devices | None = None
    """How many devices the sweep could use on its machine (its GPUs, or the CPU
    logical devices it would make): a re-judged sweep predicts no further, as the
    live one did not. ``None`` in recordings before format 1.4 (predictions then
    go as far as ``recommend``'s default). Since format 1.4."""


class StartEvent(_Event, tag="start", kw_only=True):
    """First event of a run: what was run, where, with which versions."""

    schema: str = SCHEMA_VERSION
    gpuscale_version: str
    tensorflow_version: str | None = None
    host: str
    pid: int
    source: Literal["trainer", "script", "replay"] = "trainer"
    """Who produced the run: the built-in trainer, or the user's script."""
    provisional: bool = False
    """Written by gpuscale when the run begins, before the run's own start is known
    (a script whose callback has not announced itself yet), so the recording is on
    disk from its first event; one later start event without ``provisional``
    supersedes it. Since format 1.2."""
    config: dict[str, Any] = {}
    """The full run configuration as given (and as resolved)."""
    devices: list[DeviceInfo] = []
    platform: Literal["gpu", "cpu-logical", "cpu"] = "cpu-logical"
    model: str = ""
    strategy: str = ""
    """``mirrored``, ``central-storage``, ``one-device``, ``multi-worker``, or the user's."""
    cross_device_ops: str | None = None
    """All-reduce implementation: ``nccl``, ``hierarchical-copy``, ``reduce-to-one``,
    ``collective`` (multi-worker) or ``None`` when there is nothing to reduce."""
    num_replicas: _Devices = 1
    num_workers: _Workers = 1
    scaling: Literal["weak", "strong"] = "weak"
    """``weak``: fixed batch per replica (global batch grows with replicas);
    ``strong``: fixed global batch (split across replicas)."""
    global_batch: _Batch = 0
    per_replica_batch: _Batch = 0
    param_count: int | None = None
    """Trainable parameters."""
    payload_bytes: _Bytes | None = None
    """Gradient bytes all-reduced per step (trainable parameters x dtype size)."""
    mixed_precision: bool = False
    pids: list[int] = []
    """Processes of the run (for matching NVML's per-process memory)."""
    note: str | None = None
    """Why defaults were picked, e.g. the CPU-laptop auto-sizing."""
    topology: Topology | None = None
    """How the machine's GPUs are connected (all of them, not only the run's),
    read through NVML by the gpuscale process; ``None`` without NVML or from
    recordings older than schema 1.1."""
    sweep: SweepRef | None = None
    """The sweep this run is one count of; ``None`` for a run of its own, and in
    recordings older than schema 1.3. Since format 1.3."""
    cpu_cores: _Devices | None = None
    """How many CPU cores the run's machine has (``os.cpu_count()``), written where
    its devices are CPUs (``platform`` ``cpu-logical`` or ``cpu``): CPU logical
    devices share them, and ``gpuscale run`` makes no more of them than the larger
    of 2 and this, so a run of its own (no ``sweep`` to say its machine's devices)
    tells ``recommend --from`` where to stop predicting. ``None`` on GPUs and in
    recordings older than schema 1.6. Since format 1.6."""


class StepEvent(_Event, tag="step", kw_only=True):
    """One training step, timed on the host after the step's results were
    fetched (synchronised: the device work of the step is finished)."""

    step: _Count
    step_time_s: _StepTime
    """The whole step, input wait included: built-in trainer, from asking the
    input pipeline for the batch until a value of every replica's updated
    variables is on the host; Keras callback, from ``on_train_batch_begin`` to
    ``on_train_batch_end`` (``fit`` fetches the batch inside that span), and with
    ``steps_per_execution=N`` the execution's time divided by the steps it ran (N,
    fewer in an epoch's last call); custom loop
    (``ScalingMonitor.step()``), the ``with`` block up to ``step.sync``."""
    samples: _Batch
    """Samples processed by the step across all replicas (the global batch)."""
    warmup: bool = False
    """Warm-up steps are recorded but excluded from statistics."""
    total_steps: _Count | None = None
    """Where the training this step belongs to is planned to end, in ``step``
    numbering (its last planned step's ``step`` + 1), so that ``step + 1`` of
    ``total_steps`` is the progress: the built-in trainer's ``--steps`` (the most,
    with ``--precision``); the Keras callback's current ``fit``, Keras's ``steps``
    (per epoch) x the epochs it runs, plus the steps before that ``fit`` (steps
    continue from one ``fit`` to the next, so a later ``fit`` raises the total).
    None where it is not known (a ``fit`` on data of unknown length without
    ``steps_per_epoch``, a custom loop) and in recordings before format 1.8. A
    ``fit`` stopped early (``EarlyStopping``) ends below it; Keras overrunning an
    epoch (``steps_per_execution`` on repeated data) may go past it. Since format 1.8."""


class PhaseEvent(_Event, tag="phase", kw_only=True):
    """The breakdown of one step into phases, measured by a probe between steps
    (when: :mod:`gpuscale.trainer.schedule`; how: :mod:`gpuscale.trainer.probe`).

    Two compiled stand-ins run on the probed step's batch, each timed alone and
    synchronised: *compute* (forward + backward on every replica, no exchange)
    and *compute + all-reduce* (the same plus the replica-context all-reduce of
    the gradients). The terms are differences of those timings, each floored at
    0 per probe, so ``compute_s + allreduce_s + apply_s`` approximates
    ``step_time_s`` (it exceeds it when a difference was floored). What
    ``step_time_s`` is depends on ``method``:

    * ``"split-step"`` (built-in trainer, :mod:`gpuscale.trainer.loop`): the
      probed step itself trained in two timed halves, forward + backward +
      all-reduce (``compute_allreduce_s``) then the optimizer update, and only
      *compute* ran as an extra pass; ``step_time_s`` is the usual step's training
      part (the median of the last steps that followed no probe, **without** the
      input wait, ``input_s``), and both halves are scaled to it (each times
      ``step_time_s`` / their sum, since splitting adds a synchronisation), so
      ``compute_allreduce_s`` is the first half scaled and ``apply_s`` the update
      as timed, scaled. (Recordings before 2026-11-23 held the two halves unscaled,
      or apply as the usual step less the first half, floored at 0.)
    * ``"differenced"`` (built-in trainer where the split cannot run, and
      recordings before it):
      ``step_time_s`` is the training part of the probed step itself, from
      holding the batch to the updated variables on the host, **without** the
      input wait, which is ``input_s``; the whole step is
      ``step_time_s + input_s`` (``StepEvent.step_time_s`` of the same step).
    * ``"callback-probe"`` (Keras callback, :mod:`gpuscale.keras`): the probe runs
      on a synthesised batch of the real per-replica shape; ``step_time_s`` is the
      ``StepEvent.step_time_s`` of the step just before the probe, ``step``
      (input fetch included, as ``fit`` fetches inside the step); ``input_s`` is
      not measured and stays 0. (Recordings before schema 1.2 held the median of the
      steps since the previous probe.)

    With one replica nothing is exchanged: ``allreduce_s`` is 0 and
    ``compute_allreduce_s`` and ``allreduce_total_s`` are None.
    """

    step: _Count
    step_time_s: _StepTime
    """The step the terms are measured against (see ``method`` above)."""
    compute_s: _Duration
    """T(compute): forward + backward on every replica, no gradient exchange."""
    allreduce_s: _Duration
    """Exposed all-reduce: T(compute + all-reduce) - T(compute), floored at 0;
    what the step waits for the gradient exchange."""
    apply_s: _Duration
    """``step_time_s`` - T(compute + all-reduce), floored at 0: the optimizer
    update (for ``callback-probe`` also Keras's own per-step work, e.g. metrics)."""
    input_s: _Duration = 0.0
    """Wait for the next batch from the input pipeline (``differenced`` only;
    0 for ``callback-probe``, which cannot see it)."""
    payload_bytes: _Bytes | None = None
    """Gradient bytes all-reduced per step (trainable variables in the gradient dtype)."""
    num_tensors: int | None = None
    """Gradient tensors all-reduced per step."""
    method: str = "differenced"
    """How the terms were measured: ``split-step`` or ``differenced`` (built-in
    trainer) or ``callback-probe`` (Keras callback); see the class docstring."""
    allreduce_total_s: _Duration | None = None
    """The all-reduce of a gradient-sized payload timed alone (nothing to overlap
    with): its full cost, of which ``allreduce_s`` is the part the step waits for.
    More than one replica only (before schema 1.2: built-in trainer only); None otherwise."""
    compute_allreduce_s: float | None = None
    """T(compute + all-reduce) as timed, so readers can take unfloored differences
    (``allreduce_s`` and ``apply_s`` are floored at 0 per probe). None with one
    replica, and in recordings before schema 1.2."""
    probe_cost_s: float | None = None
    """What the run paid for this breakdown: the wall clock of the probe's extra
    passes (in no step time) and, with ``split-step``, what the split step took
    over the usual step when that was more (it is in the split step's own step
    time). None in recordings before schema 1.2."""
    split_excess_s: float | None = None
    """``split-step`` only: what the split step took over the usual step, unfloored
    (noise makes it negative at times; ``probe_cost_s`` holds it floored at 0), so
    a summary can add the probes' excesses up as the scheduler does, letting noise
    cancel. None otherwise and in older recordings."""
    setup_s: float | None = None
    """One-time: compiling the probe's passes (and, ``split-step``, the split
    step's two halves) before this probe, seconds; not part of ``probe_cost_s``
    (the probe budget pays for recurring probes only), but in the run's wall
    clock, between steps. On the first probe after the compile: the Keras
    callback's compiles right before it; the built-in trainer's right after the
    run's first step. None where nothing was compiled, and before schema 1.5."""
    compute_first: bool | None = None
    """Whether the probe's compute pass ran before its compute + all-reduce pass (the
    probed split step's first half, ``split-step``); probes alternate the order, and
    the first pass after a training step runs slower (cold caches), so summaries
    take each order's median and average the two
    (:func:`gpuscale.analysis.metrics.balanced_median`). None with one replica (one
    pass) and in recordings before format 1.7."""


class GpuSample(_Event, tag="gpu", kw_only=True):
    """One NVML sample of one GPU. ``None`` fields are unsupported or unavailable."""

    index: int
    util_gpu_pct: float | None = None
    """Percent of the last sample period (1/6 s to 1 s) in which any kernel ran
    (NCCL kernels count: busy is not working)."""
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    proc_mem_bytes: int | None = None
    """Memory used by the run's own processes; ``None`` when NVML's PIDs cannot
    be matched (e.g. containers reporting host PIDs)."""
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: list[str] | None = None
    pcie_rx_bytes_s: float | None = None
    pcie_tx_bytes_s: float | None = None
    nvlink_rx_bytes_s: float | None = None
    nvlink_tx_bytes_s: float | None = None
    gpm_sm_activity_pct: float | None = None
    """Hopper+ GPM: share of SM cycles with a resident warp (working, not just busy)."""
    gpm_tensor_activity_pct: float | None = None
    gpm_dram_bw_pct: float | None = None
    lost: bool = False
    """The GPU fell off the bus (NVML GpuIsLost); no further samples follow."""


class HostSample(_Event, tag="host", kw_only=True):
    """One sample of the host: always present, the only samples without a GPU."""

    cpu_pct: float
    """All cores, 0-100."""
    mem_used_bytes: int
    mem_total_bytes: int
    proc_cpu_pct: float | None = None
    """The run's processes, percent of one core (can exceed 100)."""
    proc_rss_bytes: int | None = None


class LogEvent(_Event, tag="log", kw_only=True):
    """A line of text: the trainer's output, a telemetry status, a gpuscale notice."""

    message: str
    source: str = "trainer"
    """``trainer`` (its stdout/stderr), ``telemetry``, ``recorder``, ``gpuscale``,
    ``precision`` (the trainer's early word that ``--precision`` is out of reach
    within ``--steps`` at the probe budget)."""
    level: Literal["debug", "info", "warning", "error"] = "info"


class ErrorEvent(_Event, tag="error", kw_only=True):
    """The run failed: a one-paragraph message and, where there is one, the traceback."""

    message: str
    traceback: str | None = None
    source: str = "trainer"


class EndEvent(_Event, tag="end", kw_only=True):
    """Last event of a run."""

    status: Literal["completed", "stopped", "failed", "lost"]
    """``stopped``: the user stopped it; ``lost``: the process died without a word."""
    steps: _Count = 0
    duration_s: Annotated[float, msgspec.Meta(ge=0, le=limits.MAX_TIMESTAMP_S)] = 0.0
    """The run's duration, :func:`run_duration_s`, as gpuscale records it (the same
    number every view shows). Older recordings hold the producer's wall time here,
    its start-up included; views recompute :func:`run_duration_s` from the events
    whatever this says."""
    summary: dict[str, Any] | None = None
    """The analysis of the run (``gpuscale.analysis``), for readers that want it
    without recomputing."""


def run_duration_s(start_t: float, last_t: float) -> float:
    """A run's duration, the one definition every view uses (``gpuscale runs``,
    replay, and the EndEvent's ``duration_s`` that gpuscale records): seconds from
    the StartEvent (the trainer has loaded TensorFlow and built the model; that
    start-up is NOT included) to the latest event so far, up to and including the
    EndEvent (events that arrive after the end are not the run's), warm-up steps
    included. ``start_t`` is the start event's ``t``, ``last_t`` the latest ``t``
    among those events: the elapsed time never goes back, and stops where the run
    ended. The dashboard's elapsed time passes its earliest start (the launch,
    gpuscale's provisional start) as ``start_t``: it goes on, never back, when the
    run's own start replaces the provisional one."""
    return max(0.0, last_t - start_t)


Event = (
    StartEvent | StepEvent | PhaseEvent | GpuSample | HostSample | LogEvent | ErrorEvent | EndEvent
)
"""Any event (a tagged union: the ``kind`` field names the type)."""
EVENT_TYPES: tuple[type, ...] = (
    StartEvent,
    StepEvent,
    PhaseEvent,
    GpuSample,
    HostSample,
    LogEvent,
    ErrorEvent,
    EndEvent,
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)


def encode(event: Event) -> bytes:
    """One event as one line of JSON, without the newline."""
    return _encoder.encode(event)


def decode(data: bytes | str) -> Event:
    """Decode and validate one event. Raises ``msgspec.ValidationError`` or
    ``msgspec.DecodeError`` on bad input; callers wrap those in their own error."""
    return _decoder.decode(data)


def to_builtins(event: Event) -> dict[str, Any]:
    """The event as plain Python data (what its JSON holds)."""
    return msgspec.to_builtins(event)
