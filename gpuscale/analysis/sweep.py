"""The sweep file: step times (or throughputs) at several device counts, one or
more configurations. ``gpuscale recommend --json`` writes it and ``gpuscale
recommend --from`` reads it back; a user can also type in a published table.
The format is documented in ``docs/sweep-format.md``.

A file is one JSON object::

    {"format": "gpuscale-sweep", "version": 1,
     "source": "...", "note": "...",
     "defaults": {"scaling": "strong", "global_batch": 1024},
     "points": [{"devices": 1, "step_time_s": 0.1365, "config": "nccl"}, ...]}

``defaults`` fill in any field a point leaves out. Each point needs ``devices``,
``scaling`` (``weak``: fixed batch per replica; ``strong``: fixed global batch),
a batch size (``per_replica_batch`` or ``global_batch``) and one timing:
``step_time_s``, ``throughput`` (samples per second), or ``wall_time_s`` over
``wall_steps`` steps. Points written by gpuscale with ``"predicted": true`` and
the output-only keys (``models``, ``recommendation``) are ignored on reading:
predictions are always made afresh from the measured points.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from gpuscale.analysis.exchange import Exchange, exchange_of
from gpuscale.analysis.held_down import held_down_said
from gpuscale.analysis.metrics import resolved
from gpuscale.analysis.script_runs import scaling_of
from gpuscale.analysis.topology import gpus_of_run, link_of_run, machine_topology
from gpuscale.errors import GpuscaleError, folder_given
from gpuscale.events import limits
from gpuscale.events.bounded import (
    DECODE_ERRORS,
    JsonInputError,
    decode_json,
    open_untrusted,
    plain_validation_message,
    read_bounded,
    strip_bom,
    validation_key,
)
from gpuscale.events.schema import Topology
from gpuscale.formatting import plural

FORMAT_NAME = "gpuscale-sweep"
CORPUS_FORMAT_NAME = "published-scaling-tables"
"""The published corpus (``../shared/corpus/published-scaling.json``): tables, not a sweep."""
FORMAT_VERSION = 1

MAX_SWEEP_BYTES = 64 * 1024 * 1024
"""Largest sweep file read: 100,000 points take about 20 MB; a measured sweep is
a few dozen. Checked before anything is decoded (docs/sweep-format.md)."""

# Plausible ranges (gpuscale.events.limits): a value outside is refused on reading,
# so the arithmetic on it (throughput = batch / step time) stays finite.
_StepTime = Annotated[float, msgspec.Meta(ge=limits.MIN_STEP_TIME_S, le=limits.MAX_STEP_TIME_S)]
_Duration = Annotated[float, msgspec.Meta(ge=0, le=limits.MAX_STEP_TIME_S)]
_Throughput = Annotated[float, msgspec.Meta(ge=limits.MIN_THROUGHPUT, le=limits.MAX_THROUGHPUT)]
_Spread = Annotated[float, msgspec.Meta(ge=0, le=1e6)]
_Devices = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_DEVICES)]
_Batch = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_BATCH)]
_Steps = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_STEPS)]
_Payload = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_PAYLOAD_BYTES)]
_LinkRate = Annotated[float, msgspec.Meta(ge=1, le=limits.MAX_BYTES_S)]
_Version = Annotated[int, msgspec.Meta(ge=1)]
_Price = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
_Fraction = Annotated[float, msgspec.Meta(gt=0, lt=1)]
_Share = Annotated[float, msgspec.Meta(ge=0, le=1e6)]
_MoreSteps = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_STEPS)]
_CpuPct = Annotated[float, msgspec.Meta(ge=0, le=100 * limits.MAX_DEVICES)]
_GpuList = Annotated[
    list[Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_DEVICES)]],
    msgspec.Meta(min_length=1, max_length=limits.MAX_DEVICES),
]


class SweepPoint(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One measured (or predicted) device count of one configuration."""

    devices: _Devices
    """Devices (replicas) in all, across workers."""
    scaling: Literal["weak", "strong"]
    model: str | None = None
    """What is trained (e.g. ``mnist-cnn``); only points of one model (and one
    scaling mode and batch) are compared."""
    config: str = ""
    """Label of the configuration, e.g. ``nccl``, ``variables on CPU``; points with
    the same label (and scaling) form one scaling curve."""
    per_replica_batch: _Batch | None = None
    global_batch: _Batch | None = None
    step_time_s: _StepTime | None = None
    """Median (or mean) seconds per training step."""
    throughput: _Throughput | None = None
    """Samples per second, all devices together."""
    wall_time_s: _StepTime | None = None
    """Seconds taken by ``wall_steps`` steps (a published "100 steps took 28.5 s")."""
    wall_steps: _Steps | None = None
    steps: _Steps | None = None
    """Steps the timing is a median or mean of (for the confidence statement);
    from a recording, the counted steps of one worker (workers are not added up)."""
    spread: _Spread | None = None
    """``(p90 - p10) / median`` of the step times, when known."""
    compute_s: _Duration | None = None
    allreduce_s: _Duration | None = None
    """Exposed all-reduce per step."""
    allreduce_err_s: _Duration | None = None
    """95 % half-width of ``allreduce_s`` over the probes (from a recording); an
    ``allreduce_s`` no larger than it is *not resolved*: within the probes' noise."""
    compute_err_s: _Duration | None = None
    """95 % half-width of ``compute_s`` over the probes (from a recording): with
    ``allreduce_err_s`` and ``apply_err_s``, the noise within which the phases must
    add up to the step (:func:`phases_unsplit_why`)."""
    apply_err_s: _Duration | None = None
    """95 % half-width of ``apply_s`` over the probes (from a recording)."""
    probes: _Steps | None = None
    """Phase probes behind ``allreduce_s`` (from a recording): the probed steps, each
    counted once however many workers probed it."""
    comm_share_err: _Share | None = None
    """95 % half-width of the measured exposed share over the probes (a fraction of
    the step, like ``comm_share``; from a recording, 3 probes or more)."""
    share_step_s: _StepTime | None = None
    """The step the exposed share (``allreduce_s`` over the step, ``comm_share_err``)
    was measured against, where it is not ``step_time_s``: a row combining several
    runs whose probes came from runs of another step (the median of all of them is
    ``step_time_s``; the phases are laid over it, the share kept)."""
    step_time_err: _Share | None = None
    """95 % half-width of ``step_time_s`` over it (a fraction; from a recording
    made with ``--precision``)."""
    precision_asked: _Fraction | None = None
    """The run's ``--precision`` (a 95 % half-width, a fraction of the step)."""
    precision_reached: _Share | None = None
    """With ``precision_asked``: the worse of ``step_time_err`` and, with several
    devices, ``comm_share_err`` (``None`` while either is unknown)."""
    precision_more_steps: _MoreSteps | None = None
    """With ``precision_asked``: 0 when reached, else about how many more counted
    steps would likely reach it (``None``: no probe to tell)."""
    allreduce_total_s: _Duration | None = None
    apply_s: _Duration | None = None
    input_s: _Duration | None = None
    input_in_apply: bool = False
    """``apply_s`` also holds the wait for the batch, which was not measured apart
    (``input_s`` not given): a Keras ``fit`` timed by gpuscale's callback fetches each
    batch within the step it times (from a recording:
    :attr:`~gpuscale.analysis.summary.RunSummary.input_in_apply`). ``recommend``
    then calls that part ``apply + input``, and says so where it is the largest."""
    payload_bytes: _Payload | None = None
    """Gradient bytes exchanged per step."""
    exchange: Exchange | None = None
    """Default ``ring``."""
    workers: _Devices = 1
    hosts: _Devices | None = None
    """Machines (host names) the workers ran on, when known (from a recording's
    start event, ``config.workers[*].host``; written for several workers only).
    Several workers on CPUs (``platform: cpu``) and one host share that host's
    cores (``--local-workers N``): the model treats them as it treats CPU logical
    devices (:attr:`local_cpu_workers`). ``None``: not known (older files), taken
    as separate machines."""
    platform: Literal["gpu", "cpu-logical", "cpu"] = "gpu"
    proc_cpu_pct: _CpuPct | None = None
    """CPU use of the run's processes while its steps ran, percent of one core (200:
    two cores busy), from a recording's host samples
    (:attr:`~gpuscale.analysis.summary.RunSummary.proc_cpu_pct`): on CPU logical
    devices, how many of the machine's cores the count put to work."""
    held_down: str | None = None
    """A GPU of the run held down, in words, from a recording's summary
    (:attr:`~gpuscale.analysis.summary.RunSummary.gpus_held_down`: ``GPU 3 was held
    down in 100% of its 38 busy samples (thermal)``): every replica waits for the
    slowest GPU, so the count's throughput is a lower figure than the machine can
    do; ``recommend`` says so under Confidence. ``None``: none said."""
    gpus: _GpuList | None = None
    """The GPUs the run used, as NVML numbers them (what ``--gpus`` takes), from a
    recording that says them for sure
    (:func:`gpuscale.analysis.topology.gpus_of_run`: the built-in trainer's runs);
    runs of one count combined keep them where they all used the same.
    ``recommend --from`` on recordings compares them with the best-connected GPUs
    of the recordings' topology (:mod:`gpuscale.analysis.placement`); a sweep file
    carries no topology, so there they only say which GPUs were used."""
    device_name: str | None = None
    interconnect: str | None = None
    """Free text, e.g. ``PCIe 3.0 x16``."""
    interconnect_bytes_s: _LinkRate | None = None
    """The link's peak per direction."""
    mixed_precision: bool = False
    price_per_device_hour: _Price | None = None
    """What one device of this configuration costs per hour (any currency, e.g. a
    cloud instance's price over its GPUs): adds the cost per million samples.
    Every point of one configuration gives the same price (or none);
    ``--price-per-device-hour`` overrides it for all configurations."""
    source: str | None = None
    """Where the number comes from (a recording's path, a publication)."""
    note: str | None = None
    predicted: bool = False
    """Written by gpuscale for model predictions; such points are ignored on reading."""
    speedup: float | None = None
    """Output only: throughput over the configuration's throughput at its base
    count (1 device when measured, else its smallest count)."""
    efficiency: float | None = None
    """Output only: ``speedup / (devices / base count)`` (1.0: linear scaling)."""
    comm_share: float | None = None
    """Exposed all-reduce over the step time (measured, or from the model when predicted)."""
    throughput_low: float | None = None
    """Output only, predicted points: low end of the prediction range for ``throughput``
    (samples/s); the range holds with probability ``coverage`` on data it was calibrated on."""
    throughput_high: float | None = None
    """Output only, predicted points: high end of the range for ``throughput``."""
    throughput_safe: float | None = None
    """Output only, predicted points: the bet bound, at or below ``throughput_low``:
    held-out predictions of this kind reached it 95 % of the time
    (:data:`gpuscale.analysis.predict.BET_RISK`); a predicted count is recommended
    only when its throughput there still passes the marginal-efficiency floor."""
    speedup_low: float | None = None
    speedup_high: float | None = None
    efficiency_low: float | None = None
    efficiency_high: float | None = None
    coverage: float | None = None
    """Output only, predicted points: the stated coverage of the ``*_low``/``*_high``
    ranges (e.g. 0.8: the range held for 80 % of held-out predictions); ``None``
    with a range: the range is a guess (:attr:`coverage_basis` says why)."""
    coverage_basis: str | None = None
    """Output only, predicted points with a range: what the range was calibrated
    on, in words (published ring tables, or a guess from a few seed tables for an
    exchange the published tables do not cover, :mod:`gpuscale.analysis.predict`)."""

    @property
    def exchange_kind(self) -> str:
        return self.exchange or "ring"

    @property
    def local_cpu_workers(self) -> bool:
        """Several workers on CPUs that all ran on one machine (``--local-workers N``
        on a machine without GPUs): they share its cores, so more of them add no
        compute, like CPU logical devices. GPU workers and workers on several hosts
        are not."""
        return self.workers > 1 and self.hosts == 1 and self.platform == "cpu"


class SweepFile(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    format: Literal["gpuscale-sweep"] = FORMAT_NAME
    version: _Version = FORMAT_VERSION
    title: str | None = None
    source: str | None = None
    note: str | None = None
    available_devices: _Devices | None = None
    """Devices the machine has: predictions stop here."""
    defaults: dict[str, Any] | None = None
    points: list[dict[str, Any]] = []
    models: list[Any] | None = None
    """Output only: the fitted scaling models."""
    recommendation: Any | None = None
    """Output only: the recommendation."""
    sweep_wall_s: float | None = None
    """Output only: seconds a live sweep took, all its counts (TensorFlow's start
    included)."""
    sweep: str | None = None
    """Output only: the recorded sweep's name (``sweep-...``), which ``replay`` and
    ``recommend --from`` take."""


class Sweep(msgspec.Struct, kw_only=True):
    """What ``--from`` inputs add up to: measured points and what the files said."""

    points: list[SweepPoint]
    sources: list[str] = []
    titles: list[str] = []
    """The sweep files' ``title``s, written back by ``--json``."""
    notes: list[str] = []
    warnings: list[str] = []
    """One line each, already naming the file: what the readers forgave (a cut last
    line, a missing end event) and inputs counted once though given twice."""
    available_devices: int | None = None
    wall_s: float | None = None
    """Seconds a live sweep took, all its counts; ``None`` for ``--from``."""
    name: str | None = None
    """The recorded sweep's name (``sweep-...``): a live sweep's that was recorded, or
    the one sweep ``--from`` was given by name; ``None`` otherwise."""
    topology: Topology | None = None
    """The GPU topology of the machine the runs were recorded on, where every run's
    start event carries the same one (:func:`gpuscale.analysis.topology.machine_topology`)
    and no sweep file is among the inputs (its points may come from elsewhere):
    ``recommend`` names the GPUs to use by it and says where a measured count ran
    on worse-connected GPUs than the machine offers (:mod:`gpuscale.analysis.placement`).
    Not written to a sweep file."""


def normalize(point: SweepPoint, where: str = "") -> SweepPoint:
    """Fill in ``global_batch``, ``per_replica_batch``, ``step_time_s`` and
    ``throughput`` from whichever were given (``throughput = global_batch /
    step_time_s``; weak scaling: ``global_batch = per_replica_batch x devices``).
    Raises :class:`GpuscaleError` naming ``where`` when the point cannot be timed."""
    prefix = f"{where}: " if where else ""
    n = point.devices
    per_replica, global_batch = point.per_replica_batch, point.global_batch
    if global_batch is None and per_replica is not None:
        if point.scaling == "strong":
            raise GpuscaleError(
                f"{prefix}strong scaling needs global_batch (the batch split across devices)"
            )
        global_batch = per_replica * n
    if global_batch is None:
        raise GpuscaleError(f"{prefix}needs a batch size: per_replica_batch or global_batch")
    if per_replica is None:
        per_replica = max(1, round(global_batch / n))
    step = point.step_time_s
    if step is None and point.wall_time_s is not None:
        if point.wall_steps is None:
            raise GpuscaleError(f"{prefix}wall_time_s needs wall_steps (how many steps it took)")
        step = point.wall_time_s / point.wall_steps
    if step is None and point.throughput is not None:
        step = global_batch / point.throughput
    if step is None:
        raise GpuscaleError(
            f"{prefix}needs a timing: step_time_s, throughput (samples/s), or wall_time_s with wall_steps"
        )
    if not limits.MIN_STEP_TIME_S <= step <= limits.MAX_STEP_TIME_S:
        raise GpuscaleError(
            f"{prefix}its timing means a step of {step:.3g} s, outside the plausible "
            f"{limits.MIN_STEP_TIME_S:g} s to {limits.MAX_STEP_TIME_S:g} s; check the units"
        )
    rate = global_batch / step
    if point.throughput is not None and abs(point.throughput / rate - 1) > 0.02:
        raise GpuscaleError(
            f"{prefix}throughput {point.throughput:g} samples/s disagrees with "
            f"global_batch / step time = {rate:g}; give one of them"
        )
    return msgspec.structs.replace(
        point,
        per_replica_batch=per_replica,
        global_batch=global_batch,
        step_time_s=step,
        throughput=rate,
    )


class _KindProbe(msgspec.Struct):
    kind: object = None


_kind_probe = msgspec.json.Decoder(_KindProbe)
_EVENT_START = re.compile(rb'\{\s*"kind"\s*:')
"""How gpuscale writes an event (``kind`` first); a sweep file has no ``kind``."""


def looks_like_recording(path: Path) -> bool:
    """Whether ``path`` is a recording (gzip, or a first line that is an event,
    whole or cut off) rather than a sweep file: the one test ``recommend --from``
    and ``replay`` both use, so that both read a damaged file with the same reader
    and say the same words of it. Reads at most 64 KiB, never recursively; a pipe,
    FIFO or device is refused (sniffing would consume what the reader needs)."""
    try:
        f, regular = open_untrusted(path)
    except JsonInputError as exc:
        raise GpuscaleError(f"{path}: {exc}") from None
    with f:
        if not regular:
            raise GpuscaleError(
                f"{path}: is a pipe, not a file; save it to a file first, then give that to --from"
            )
        head = strip_bom(f.read(65536))
    if head[:2] == b"\x1f\x8b":
        return True
    first, newline, _ = head.lstrip().partition(b"\n")
    first = first.strip()
    if not first.startswith(b"{"):
        return False
    if not newline and len(head) == 65536:
        # A first line longer than what was read (a start event with a large
        # config): gpuscale writes "kind" first; a sweep file has no "kind".
        return _EVENT_START.match(first) is not None
    try:
        probe = _kind_probe.decode(first)  # typed: skips the rest without keeping it
    except DECODE_ERRORS:
        # a damaged or cut-off first line (the run was killed while writing it) is
        # a recording's when it starts as gpuscale writes events: "kind" first
        return _EVENT_START.match(first) is not None
    return probe.kind is not None


SWEEP_FILE_SHAPE = (
    'a sweep file is one JSON object, {"points": [...]}, with one point per measured '
    "device count (docs/sweep-format.md)"
)
"""What every refusal of a sweep file's shape says is expected (``{}``, ``[]``, no
points, only predicted ones)."""

_JSON_KINDS = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_KINDS[type(None)] = "null"


def read_sweep_file(path: str | Path) -> Sweep:
    """Read and validate one sweep file (measured points only, normalized)."""
    path = Path(path)
    try:  # too big, unreadable, a device: no data to look at
        data = read_bounded(path, MAX_SWEEP_BYTES)
    except JsonInputError as exc:
        raise GpuscaleError(f"{path}: {exc}") from None
    if not strip_bom(data).strip():  # e.g. what a failed `recommend --json > FILE` leaves
        raise GpuscaleError(f"{path}: empty file: neither a sweep file nor a recording")
    try:
        raw = decode_json(data)
    except JsonInputError as exc:
        if not strip_bom(data).lstrip().startswith((b"{", b"[")):  # not JSON at all
            raise GpuscaleError(f"{path}: neither a recording nor a sweep file: {exc}") from None
        raise GpuscaleError(f"{path}: {exc}") from None
    if not isinstance(raw, dict):
        kind = _JSON_KINDS.get(type(raw), "value")
        raise GpuscaleError(f"{path}: a JSON {kind}, not a sweep file: {SWEEP_FILE_SHAPE}")
    if raw.get("format") == CORPUS_FORMAT_NAME:
        raise GpuscaleError(f"{path}: {corpus_not_a_sweep(raw)}")
    fields = SweepFile.__struct_fields__
    if raw and not any(difflib.get_close_matches(str(k), fields, n=1) for k in raw):
        # another tool's JSON (a trace, a config), not a sweep file with a misspelt key
        # (that one is refused below by name, "did you mean points?")
        keys = ", ".join(f'"{k}"' for k in list(raw)[:3]) + (", ..." if len(raw) > 3 else "")
        raise GpuscaleError(
            f"{path}: neither a recording nor a sweep file: a JSON object with none of a "
            f"sweep file's keys ({keys}); {SWEEP_FILE_SHAPE}"
        )
    try:
        sweep = msgspec.convert(raw, SweepFile)
    except msgspec.ValidationError as exc:
        text = plain_validation_message(exc, raw, type=SweepFile)
        raise GpuscaleError(f"{path}: {text}") from None
    if sweep.version > FORMAT_VERSION:
        raise GpuscaleError(
            f"{path}: sweep format version {sweep.version} is newer than this gpuscale "
            f"reads ({FORMAT_VERSION}); upgrade gpuscale"
        )
    if "points" not in raw:  # {} (a misspelt key is refused above, by name)
        raise GpuscaleError(f"{path}: no 'points' list: {SWEEP_FILE_SHAPE}")
    points: list[SweepPoint] = []
    warnings: list[str] = []
    defaults = sweep.defaults or {}
    for i, item in enumerate(sweep.points):
        where = f"{path}: points[{i}]"
        merged = {**defaults, **item}
        try:
            point = msgspec.convert(merged, SweepPoint)
        except msgspec.ValidationError as exc:
            key = validation_key(exc)
            if key in defaults and key not in item:  # the file's defaults are at fault
                text = plain_validation_message(exc, defaults, at="defaults", type=SweepPoint)
            else:
                text = plain_validation_message(exc, merged, at=f"points[{i}]", type=SweepPoint)
            raise GpuscaleError(f"{path}: {text}") from None
        if point.predicted:
            continue
        # Output-only values are recomputed, never trusted from a file.
        point = msgspec.structs.replace(point, speedup=None, efficiency=None, comm_share=None)
        if point.source is None:
            point = msgspec.structs.replace(point, source=sweep.source or str(path))
        point = normalize(point, where)
        problem = lone_exchange_problem(point, f"points[{i}]", set(defaults) - set(item))
        if problem is not None:  # one device exchanges nothing: the rest is kept
            whose = "its" if problem.startswith(f"points[{i}]") else f"points[{i}]'s"
            warnings.append(f"{path}: {problem}: {whose} exposed all-reduce is left out")
            point = msgspec.structs.replace(
                point, allreduce_s=None, allreduce_err_s=None, comm_share_err=None
            )
        problem = phases_problem(point, f"points[{i}]", merged, set(defaults) - set(item))
        if problem is not None:  # its step time is a measurement still: kept, with a word
            whose = "its" if problem.startswith(f"points[{i}]") else f"points[{i}]'s"
            warnings.append(f"{path}: {problem}: {whose} phases are left out")
            point = without_phases(point)
        unsplit = phases_unsplit_why(point)
        if unsplit is not None:  # as a recording's: not resolved, no model fitted on them
            probes = f" ({plural(point.probes, 'probe')})" if point.probes else ""
            warnings.append(
                f"{path}: points[{i}]: {unsplit}: its phases are not resolved{probes}; "
                "left out, its step time kept"
            )
            point = without_phases(point)
        points.append(point)
    if not sweep.points:
        raise GpuscaleError(f"{path}: its 'points' list is empty: {SWEEP_FILE_SHAPE}")
    if not points:  # every one predicted: a recommendation's output, nothing measured
        n = len(sweep.points)
        which = "its one point is" if n == 1 else f"all {n} points are"
        raise GpuscaleError(
            f'{path}: no measured points: {which} predicted ("predicted": true), and a '
            "recommendation needs measured ones"
        )
    return Sweep(
        points=points,
        sources=[sweep.source or str(path)],
        titles=[sweep.title] if sweep.title else [],
        notes=[sweep.note] if sweep.note else [],
        warnings=warnings,
        available_devices=sweep.available_devices,
    )


PHASE_FIELDS = ("compute_s", "allreduce_s", "apply_s", "input_s")
"""The parts of a step a point may give (each a part of ``step_time_s``)."""

_PHASE_DEPENDENTS = (
    "allreduce_err_s",
    "compute_err_s",
    "apply_err_s",
    "comm_share",
    "comm_share_err",
    "share_step_s",
)
"""What only means something with the phases (their share of the step, its noise,
the step it is of)."""

PHASE_OVER_STEP = 1.5
"""Most a single phase may exceed its point's step by (a factor) before the point's
phases are left out (:func:`phases_problem`): a probe's pass and the step are timed
apart, so a phase a little over the step is noise (the summary then calls the
breakdown not resolved), but one 1.5 times the step cannot be part of it (a busy
machine's probes, seconds and milliseconds mixed up, a phase copied from another
point)."""

PHASES_OVER_STEP = 2.0
"""Most the phases together may exceed their point's step by (a factor)."""


def phases_unsplit_why(point: SweepPoint) -> str | None:
    """Why ``point``'s phases are not numbers that split its step, judged as a
    recording's summary judges its probes
    (:func:`gpuscale.analysis.summary.judge_phases`,
    :func:`~gpuscale.analysis.summary.unsplit_reason`), in one line with the values:
    ``the exposed all-reduce 50.0 ms is over twice the whole exchange timed alone,
    10.0 ms, beyond their noise``, ``its phases (compute_s + allreduce_s = 0.15 s) are
    125% of its step (0.12 s), beyond their noise`` or ``its compute_s (0.13 s) fills
    its step (0.12 s)``; ``None`` where they split it (or there are none). The noise
    is the half-widths the point gives (``compute_err_s``, ``allreduce_err_s``,
    ``apply_err_s``, ``step_time_err``), at least 10 % of the step. Phases a file
    leaves out are not held against it: only some given, they may fall short of the
    step, never exceed it. The reader leaves such phases out (a probed point then
    says "not resolved", as a recording's does, and the model is fitted on step
    times)."""
    from gpuscale.analysis.summary import judge_phases, unsplit_reason

    step = point.step_time_s
    given = {name: getattr(point, name) for name in PHASE_FIELDS}
    given = {name: value for name, value in given.items() if value is not None}
    if point.predicted or not step or not given:
        return None
    step_err = point.step_time_err * step if point.step_time_err is not None else None
    judged = judge_phases(
        compute_s=point.compute_s,
        exposed_s=point.allreduce_s,
        apply_s=point.apply_s,
        input_s=point.input_s,
        whole_s=step,
        devices=point.devices,
        halfwidths=[point.compute_err_s, point.allreduce_err_s, point.apply_err_s, step_err],
        exposed_err_s=point.allreduce_err_s,
        alone_s=point.allreduce_total_s,
    )
    if judged.contradiction is not None:
        return judged.contradiction
    why = unsplit_reason(
        consistent=judged.consistent,
        compute_s=point.compute_s,
        whole_s=step,
        devices=point.devices,
    )
    if why is None:
        return None
    if judged.consistent is False:
        return (
            f"its phases ({' + '.join(given)} = {judged.parts_s:.3g} s) are "
            f"{judged.parts_s / step:.0%} of its step ({step:.3g} s), beyond their noise"
        )
    return f"its compute_s ({point.compute_s:.3g} s) fills its step ({step:.3g} s)"


def without_phases(point: SweepPoint) -> SweepPoint:
    """``point`` with its step time, throughput and probe count but no phases (nor
    what only means something with them): what is kept of a point whose phases
    cannot fit its step (:func:`phases_problem`)."""
    return msgspec.structs.replace(
        point, **dict.fromkeys((*PHASE_FIELDS, *_PHASE_DEPENDENTS), None), input_in_apply=False
    )


def phases_fit(point: SweepPoint) -> SweepPoint:
    """``point``, or :func:`without_phases` of it when its phases cannot fit its
    step: what gpuscale writes (a recording's point, ``--json``), so that it never
    writes phases it would leave out on reading."""
    if point.predicted or phases_problem(point, "point") is None:
        return point
    return without_phases(point)


def lone_exchange_problem(
    point: SweepPoint, where: str, from_defaults: Iterable[str] = ()
) -> str | None:
    """Why ``point``'s exposed all-reduce cannot be, in one line naming the field and
    its value (``points[0].allreduce_s (0.05 s) on 1 device, which exchanges
    nothing``); ``None`` when it can. One device has no gradients to exchange, so an
    ``allreduce_s`` above zero at 1 device is a mistake (copied from another point,
    a probe of another run); taken at its word it would be the model's exchange at
    every count. The reader leaves it out, with a warning, and keeps the rest."""
    if point.devices != 1 or not point.allreduce_s:
        return None
    value = f"({point.allreduce_s:.3g} s)"
    if "allreduce_s" in set(from_defaults):
        return f"defaults.allreduce_s {value} on {where}'s 1 device, which exchanges nothing"
    return f"{where}.allreduce_s {value} on 1 device, which exchanges nothing"


def phases_problem(
    point: SweepPoint,
    where: str,
    keys: Iterable[str] = ("step_time_s",),
    from_defaults: Iterable[str] = (),
) -> str | None:
    """Why ``point``'s phases cannot be parts of its step, in one line naming the
    field and both values (``points[1].compute_s (0.5 s) is more than 1.5 times its
    step_time_s (0.12 s)``); ``None`` when they can. ``where`` names the point,
    ``keys`` the fields the file gave it (a step it did not give is said to come
    from its timing), ``from_defaults`` those the file's ``defaults`` gave it.
    Cannot: any phase over :data:`PHASE_OVER_STEP` times the step, or all of them
    together over :data:`PHASES_OVER_STEP` times it; the reader then leaves the
    point's phases out, with a warning. Phases less over the step are not impossible
    (noise between a probe and the steps): :func:`phases_unsplit_why` judges whether
    they split it."""
    step = point.step_time_s
    if not step:
        return None
    keys, from_defaults = set(keys), set(from_defaults)
    if "step_time_s" not in keys:
        step_text = f"its step ({step:.3g} s, from its timing)"
    elif "step_time_s" in from_defaults:
        step_text = f"its step_time_s ({step:.3g} s, from defaults)"
    else:
        step_text = f"its step_time_s ({step:.3g} s)"
    given = {name: getattr(point, name) for name in PHASE_FIELDS}
    given = {name: value for name, value in given.items() if value is not None}
    for name, value in given.items():
        if value > PHASE_OVER_STEP * step:
            over = f"is more than {PHASE_OVER_STEP:g} times"
            if name in from_defaults:
                return f"defaults.{name} ({value:.3g} s) {over} {where}'s step ({step:.3g} s)"
            return f"{where}.{name} ({value:.3g} s) {over} {step_text}"
    total = sum(given.values())
    if len(given) > 1 and total > PHASES_OVER_STEP * step:
        names = " + ".join(given)
        return (
            f"{where}: its phases ({names} = {total:.3g} s) add up to more than "
            f"{PHASES_OVER_STEP:g} times {step_text}"
        )
    return None


def corpus_not_a_sweep(raw: dict) -> str:
    """What to say of the published corpus given to ``--from`` (one line)."""
    tables = raw.get("tables")
    count = f"{len(tables):,} " if isinstance(tables, list) else ""
    return (
        f"the corpus of {count}published scaling tables ({CORPUS_FORMAT_NAME}), not a sweep "
        "file: benchmarks/prediction.py checks the predictions against it; to recommend from "
        "one table, type its throughputs into a sweep file (docs/sweep-format.md: a point per "
        "GPU count with devices, throughput, scaling and per_replica_batch)"
    )


def config_label(start: Any) -> str:
    """A label that is the same at every device count of one configuration: model,
    strategy and the all-reduce as asked for (not as resolved: one device has
    nothing to reduce), batch, precision and platform."""
    cfg = start.config or {}
    parts = [start.model or str(cfg.get("model", "")) or "model"]
    strategy = cfg.get("strategy") or start.strategy
    if strategy and strategy != "one-device":
        parts.append(str(strategy))
    all_reduce = cfg.get("all_reduce")
    if all_reduce and all_reduce != "auto":
        parts.append(str(all_reduce))
    scaling = scaling_of(start)
    if scaling == "weak" and start.per_replica_batch:
        parts.append(f"batch {start.per_replica_batch}/replica")
    elif scaling == "strong" and start.global_batch:
        parts.append(f"global batch {start.global_batch}")
    if start.mixed_precision:
        parts.append("mixed precision")
    if start.platform != "gpu":
        parts.append("CPU devices" if start.platform == "cpu-logical" else "CPU")
    return ", ".join(parts)


def _why_no_step_time(summary: Any) -> str:
    """Why a recording has no median step time, in words a user can act on."""
    if summary.no_step_times:
        return (
            "no step times: the script does not use gpuscale's callback, so only "
            "telemetry was recorded. Add it to model.fit: "
            "callbacks=[gpuscale.keras.ScalingMonitor()], and run it again"
        )
    if summary.steps_total == 0 and summary.status == "failed":
        return "no steps: the run failed before its first step"
    if summary.steps_total == 0:
        return (
            "no usable steps (the run ended before its first step, or its step lines are damaged)"
        )
    return "no counted steps (the run ended during warm-up)"


def point_from_summary(summary: Any, start: Any, source: str) -> SweepPoint:
    """One recording's :class:`~gpuscale.analysis.summary.RunSummary` as a sweep point.
    Its phases come along only where they split the step
    (:attr:`~gpuscale.analysis.summary.RunSummary.phases_split_step`: they add up
    to it, and compute alone does not fill it) and fit in it as a sweep file's must
    (:func:`phases_fit`: the summary forgives noisy probes that a file's reader
    would not): otherwise the point keeps its probe count and no phase, so every
    view says "not resolved" (the table), "not split" (the charts) and ``null``
    (``--json``)."""
    if summary.step_time_s is None:
        raise GpuscaleError(f"{source}: {_why_no_step_time(summary)}")
    cfg = start.config or {}
    device_name = start.devices[0].name if start.devices else None
    interconnect_text, interconnect_bytes_s = _interconnect_of(summary, start)
    split = summary.phases_split_step
    point = SweepPoint(
        devices=summary.devices,
        scaling=summary.scaling if summary.scaling in ("weak", "strong") else "weak",
        model=start.model or None,
        config=config_label(start),
        per_replica_batch=summary.per_replica_batch or None,
        global_batch=summary.global_batch or None,
        step_time_s=summary.step_time_s,
        steps=summary.steps_counted or None,
        spread=summary.spread,
        # phases that do not add up to the step are no measurement (not resolved)
        compute_s=summary.compute_s if split else None,
        allreduce_s=summary.allreduce_s if split else None,
        allreduce_err_s=summary.allreduce_err_s if split else None,
        compute_err_s=summary.compute_err_s if split else None,
        apply_err_s=summary.apply_err_s if split else None,
        probes=summary.probes_run or None,
        comm_share_err=summary.comm_share_err if summary.devices > 1 and split else None,
        step_time_err=summary.step_time_rel_err,
        precision_asked=summary.precision_asked,
        precision_reached=summary.precision_reached,
        precision_more_steps=summary.precision_more_steps,
        allreduce_total_s=summary.allreduce_total_s,
        apply_s=summary.apply_s if split else None,
        input_s=summary.input_s if split else None,
        input_in_apply=summary.input_in_apply and split,
        payload_bytes=summary.payload_bytes or None,
        exchange=exchange_of(cfg.get("strategy") or start.strategy, cfg.get("all_reduce")),
        workers=summary.workers,
        hosts=hosts_of(start) if summary.workers > 1 else None,
        platform=start.platform,
        proc_cpu_pct=summary.proc_cpu_pct,
        held_down=held_down_said(summary.gpus_held_down, summary.workers),
        gpus=gpus_of_run(start),
        device_name=device_name,
        interconnect=interconnect_text,
        interconnect_bytes_s=interconnect_bytes_s,
        mixed_precision=start.mixed_precision,
        source=source,
    )
    return phases_fit(normalize(point, source))


def hosts_of(start: Any) -> int | None:
    """How many machines a multi-worker run's workers ran on: the distinct host
    names of its start event's ``config.workers`` (each worker names its own
    host); ``None`` when the recording does not list them (older recordings, a
    user's script)."""
    listed = (start.config or {}).get("workers")
    if not isinstance(listed, list):
        return None
    names = {w.get("host") for w in listed if isinstance(w, dict)}
    if not names or None in names or "" in names:
        return None
    return len(names)


def _interconnect_of(summary: Any, start: Any) -> tuple[str | None, float | None]:
    """The link a recorded run exchanged over, as ``(interconnect, bytes/s)``.

    The measured topology of the GPUs it used (its start event's ``topology``,
    :func:`gpuscale.analysis.topology.link_of_run`) when it knows their slowest
    link's class: ``"<class>: <description>"`` (e.g. ``cross-socket: PCIe across
    CPU sockets, ...``) and that link's nominal peak; it sees NVLink and sockets,
    which each GPU's own PCIe link does not. Otherwise the slowest of the GPUs'
    own links (:attr:`RunSummary.interconnect`)."""
    link = link_of_run(start) if getattr(start, "topology", None) is not None else None
    if link is not None and link.link_class != "unknown":
        text = f"{link.link_class}: {link.description}" if link.description else link.link_class
        peak = link.peak_bytes_s
        return text, peak if peak is not None and peak >= 1 else None
    own = summary.interconnect
    if own is None:
        return None, None
    return own.description, own.peak_bytes_s


def points_from_recordings(paths: Iterable[str | Path]) -> list[SweepPoint]:
    """Each recording (``gpuscale run`` output) summarized into one sweep point
    (runs of one user script at several device counts settled into one workload:
    :func:`gpuscale.analysis.script_runs.settle_script_runs`)."""
    return _points_of([_read_recording(path)[0] for path in paths])


def _points_of(runs: list[tuple[Any, Any]]) -> list[SweepPoint]:
    """Sweep points of ``(summary, start, source)`` runs, one user script's runs at
    several device counts settled into one workload first
    (:func:`gpuscale.analysis.script_runs.settle_script_runs`)."""
    from gpuscale.analysis.script_runs import settle_script_runs

    return [point_from_summary(s, start, src) for s, start, src in settle_script_runs(runs)]


def _read_recording(path: str | Path) -> tuple[tuple[Any, Any, str], list[str], bytes]:
    """One recording as ``(summary, start, source)``, the reader's warnings, and a
    key that is the same for two copies of one run (its start event, which names
    the run and when it started)."""
    from gpuscale.analysis.summary import lone_exchange_words, summarize
    from gpuscale.recording.reader import load_run

    warnings: list[str] = []
    run = load_run(path, warnings.append)
    summary = summarize(run.events)
    lone = lone_exchange_words(summary)
    if lone is not None:  # as a sweep file's point of 1 device with an allreduce_s
        warnings.append(lone)
    if run.end is not None and run.end.status == "stopped" and summary.steps_counted:
        # as a sweep's name says it of its runs cut short (gpuscale runs, recommend --from)
        warnings.append(
            "the run was stopped before its end; judged from the "
            f"{plural(summary.steps_counted, 'step')} it counted"
        )
    return (
        (summary, run.start, str(path)),
        warnings,
        b"recording:" + msgspec.json.encode(run.start),
    )


def _same_file_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def _leave_out(
    unusable: list[tuple[str, str, list[str], Path]],
    warnings: list[str],
    *,
    anything_left: bool,
    cut_short: set[Path],
) -> None:
    """Recordings given to ``--from`` that have no step time (``(name as given,
    why, what their reader forgave, path)``: a failed run, one that ended before
    its first step or in its warm-up, a script without the callback, step lines all
    damaged). Each is left out with one warning, ``FILE: why; left out``, after
    what its reader forgave, when another input has steps, or when a sweep's name
    brought it in (``cut_short``: the user named the sweep, not that run). When no
    input has steps, the error is the reason of the one given (``FILE: why``, as
    before), or for several says that none has one, each warned of above it."""
    given = [entry for entry in unusable if entry[3] not in cut_short]
    for name, why, read_warnings, path in unusable:
        if path not in cut_short:  # (a sweep's run cut short: its name says it was)
            warnings += [w if w.startswith(f"{path}:") else f"{path}: {w}" for w in read_warnings]
        if anything_left or path in cut_short or len(given) > 1:
            warnings.append(f"{name}: {why}; left out")
    if anything_left or not given:
        return
    if len(given) == 1:
        name, why, _read, _path = given[0]
        raise GpuscaleError(f"{name}: {why}")
    raise GpuscaleError(
        f"none of the {len(given)} recordings given has a step time to recommend from "
        "(each is said above)"
    )


class _KeptRecording(msgspec.Struct, kw_only=True):
    """One run's recording read by :func:`load_inputs`, for a fuller copy to replace."""

    name: str
    """As the user gave it."""
    steps: int
    """Its counted steps: of two copies, the one with more is kept."""
    read_warnings: list[str]
    available: int | None
    cores_only: bool = False
    """``available`` is the CPU logical devices its machine's cores allow
    (:func:`machine_devices`), not a sweep's count."""
    index: int = 0
    source_index: int = 0


def machine_devices(start: Any) -> tuple[int | None, bool]:
    """How many devices a recording's machine could give its run, and whether only
    its cores say it: a sweep's ``available_devices`` (format 1.4); else, for a run
    of its own on one machine's CPUs whose start says the machine's cores (format
    1.6, :attr:`~gpuscale.events.schema.StartEvent.cpu_cores`), the CPU logical
    devices ``gpuscale run`` makes there at most (the larger of 2 and the cores:
    :func:`gpuscale.trainer.options.check_cpu_devices`); ``(None, False)`` when the
    recording does not say."""
    ref = getattr(start, "sweep", None)
    if ref is not None and ref.available_devices:
        return ref.available_devices, False
    cores = getattr(start, "cpu_cores", None)
    if cores and start.platform != "gpu" and start.num_workers == 1:
        return limits.cpu_devices_allowed(cores), True
    return None, False


def load_inputs(paths: Sequence[str | Path], *, cut_short: Iterable[str | Path] = ()) -> Sweep:
    """Read every ``--from`` input: sweep files and recordings, in any mix.

    An input given twice (the same file, another path to it, or a copy: the same
    run's recording, a sweep file with the same points) is counted once, with a
    warning: two copies of one measurement are not two runs. Of two copies of one
    run's recording the one with more counted steps is kept, whatever the order
    (a copy cut short while the run was still writing it is the same run, with
    fewer steps); the warning names the copy kept and why. What the reader forgave
    in the copy left out is not said: it is not read.

    The machine's device count (:attr:`Sweep.available_devices`, where predictions
    stop) is the largest any input says: a sweep file's ``available_devices``, a
    recording's sweep's (format 1.4 on), or for a run of its own on CPU devices its
    machine's cores (format 1.6 on, :func:`machine_devices`; not where an input is
    on GPUs, whose machine they do not tell); ``None`` when none says.

    What the readers forgave (damaged lines skipped, a cut last line, a run
    stopped before its end) is in the sweep's ``warnings``; when an input then
    cannot be used, on the error's ``warnings``, so that the user still hears about
    it (the damage is often why).

    ``cut_short``: recordings among ``paths`` that a sweep's name brought in though
    they were stopped or interrupted (:func:`gpuscale.recording.sweeps.resolve_inputs`):
    one that counted no step is left out with a warning, not refused (the user
    named the sweep, not that run)."""
    warnings: list[str] = []
    try:
        return _load_inputs(paths, warnings, {Path(p) for p in cut_short})
    except GpuscaleError as exc:
        exc.warnings = [*warnings, *exc.warnings]
        raise


def _load_inputs(paths: Sequence[str | Path], warnings: list[str], cut_short: set[Path]) -> Sweep:
    """:func:`load_inputs`, adding what the readers forgave to ``warnings`` as it reads."""
    points: list[SweepPoint] = []
    sources: list[str] = []
    titles: list[str] = []
    notes: list[str] = []
    available: list[int] = []
    seen_files: dict[tuple[int, int], str] = {}  # the names as given (./X and X apart)
    seen_content: dict[bytes, str] = {}
    recordings: list[tuple[Any, Any, str]] = []
    # per run (its content key): where it is in recordings and sources, what its
    # reader forgave (in warnings) and its sweep's machine, for a fuller copy to replace
    kept: dict[bytes, _KeptRecording] = {}
    unusable: list[tuple[str, str, list[str], Path]] = []  # recordings with no step time
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise GpuscaleError(f"{path}: no such file")
        if path.is_dir():
            raise GpuscaleError(folder_given(raw))
        file_key = _same_file_key(path)
        if file_key is not None and file_key in seen_files:
            first = seen_files[file_key]
            warnings.append(f"{raw}: given twice (the same file as {first}); counted once")
            continue
        try:
            is_recording = looks_like_recording(path)
        except OSError as exc:
            raise GpuscaleError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if is_recording:
            run, read_warnings, content_key = _read_recording(path)
            if run[0].step_time_s is None:  # nothing to measure: no step time (a failed run)
                if file_key is not None:
                    seen_files[file_key] = str(raw)
                unusable.append((str(raw), _why_no_step_time(run[0]), read_warnings, path))
                continue
        else:
            sweep = read_sweep_file(path)
            content_key = b"sweep:" + msgspec.json.encode(
                [[msgspec.structs.replace(p, source=None) for p in sweep.points], sweep.notes]
            )
        if file_key is not None:
            seen_files[file_key] = str(raw)
        if is_recording:
            # a sweep's run knows its machine (format 1.4), a CPU run its cores (1.6)
            machine, cores_only = machine_devices(run[1])
            entry = _KeptRecording(
                name=str(raw),
                steps=run[0].steps_counted,
                read_warnings=[
                    w if w.startswith(f"{path}:") else f"{path}: {w}" for w in read_warnings
                ],
                available=machine,
                cores_only=cores_only,
            )
            before = kept.get(content_key)
            if before is not None:
                if entry.steps > before.steps:  # the fuller copy replaces the first
                    warnings[:] = [w for w in warnings if w not in before.read_warnings]
                    warnings.append(
                        f"{before.name}: the same run as {raw}, which has more counted "
                        f"steps ({entry.steps:,} against {before.steps:,}); kept {raw}"
                    )
                    recordings[before.index] = run
                    sources[before.source_index] = str(path)
                    entry.index, entry.source_index = before.index, before.source_index
                    kept[content_key] = entry
                    seen_content[content_key] = str(raw)
                    warnings += entry.read_warnings
                elif entry.steps == before.steps:
                    warnings.append(f"{raw}: the same run as {before.name}; counted once")
                else:
                    warnings.append(
                        f"{raw}: the same run as {before.name}, which has more counted steps "
                        f"({before.steps:,} against {entry.steps:,}); kept {before.name}"
                    )
                continue
            seen_content[content_key] = str(raw)
            entry.index, entry.source_index = len(recordings), len(sources)
            kept[content_key] = entry
            recordings.append(run)
            sources.append(str(path))
            warnings += entry.read_warnings
            continue
        if content_key in seen_content:
            first = seen_content[content_key]
            warnings.append(f"{raw}: the same points as {first}; counted once")
            continue
        seen_content[content_key] = str(raw)
        warnings += sweep.warnings
        points += sweep.points
        sources += sweep.sources
        titles += sweep.titles
        notes += sweep.notes
        if sweep.available_devices:
            available.append(sweep.available_devices)
    if unusable:
        _leave_out(
            unusable, warnings, anything_left=bool(points or recordings), cut_short=cut_short
        )
    from_files = bool(points)  # a sweep file's points: no machine to choose GPUs on
    points += _points_of(recordings)  # together: one script's runs settle into one workload
    on_gpus = any(p.platform == "gpu" for p in points)  # CPU cores say nothing of GPUs
    available += [
        entry.available
        for entry in kept.values()
        if entry.available and not (entry.cores_only and on_gpus)
    ]
    return Sweep(
        points=points,
        sources=sources,
        titles=titles,
        notes=notes,
        warnings=warnings,
        # the largest any input could use: sweeps of one machine with --devices 2 and
        # --sweep 4,8 capped at 2 would put measured counts "above the limit"
        available_devices=max(available) if available else None,
        topology=None if from_files else runs_topology(start for _, start, _ in recordings),
    )


def runs_topology(starts: Iterable[Any]) -> Topology | None:
    """The machine's topology that the start events of a sweep's runs all carry
    (:func:`gpuscale.analysis.topology.machine_topology`); ``None`` without runs."""
    return machine_topology(getattr(start, "topology", None) for start in starts)


def exposed_unresolved(point: SweepPoint) -> bool:
    """A measured, probed count of several devices whose exposed share is not
    resolved: its phases did not split the step (no ``comm_share``), or its exposed
    all-reduce is within its own noise (or a 0 from fewer than 3 probes,
    :func:`gpuscale.analysis.metrics.resolved`). ``recommend``'s table says ``not
    resolved (N probes)`` for it and ``--json`` writes ``null`` (never a 0 % that is
    noise); a published point (no probes) and one device are never unresolved."""
    if point.predicted or not point.probes or point.devices <= 1:
        return False
    return point.comm_share is None or not resolved(point.allreduce_s, point.allreduce_err_s)


def phases_not_split(point: SweepPoint) -> bool:
    """A measured, probed count of several devices whose phases did not split the
    step (:attr:`~gpuscale.analysis.summary.RunSummary.phases_split_step`): it keeps
    its probes and no phase (:func:`point_from_summary`), and its exposed share is not
    resolved whatever the probes' spread, so its ``--precision`` is not reached."""
    return (
        not point.predicted
        and bool(point.probes)
        and point.devices > 1
        and point.compute_s is None
        and point.allreduce_s is None
    )


def phases_unresolved(points: Iterable[SweepPoint | None]) -> bool:
    """Every measured count of several devices among ``points`` was probed and its
    exposed share is not resolved (:func:`exposed_unresolved`): then the model has
    no exposed all-reduce to go on, and its predicted rows' exposed share is not
    resolved either (``recommend``'s table says so, ``--json`` writes ``null``),
    never a modelled number (a 0 % beside "not resolved" is false precision).
    ``None`` entries (rows a table does not show) are skipped."""
    several = [p for p in points if p is not None and not p.predicted and p.devices > 1]
    return bool(several) and all(exposed_unresolved(p) for p in several)


_UNRESOLVED_NULLS = ("compute_s", "allreduce_s", "apply_s", "input_s")
"""The phases a probed point keeps no number for when they did not split the step
(:func:`point_from_summary`): written as ``null`` so that the file says "probed,
not resolved" rather than leaving them out as if nothing was measured."""


def _point_document(point: SweepPoint, unresolved: bool = False) -> dict[str, Any]:
    """One point as ``--json`` writes it: ``null`` for what its table row calls not
    resolved (:func:`exposed_unresolved`): the exposed share, and the phases of a
    probed point that kept none; and a predicted point's exposed share where
    ``unresolved`` (:func:`phases_unresolved` for its configuration: the model had
    none to go on). All
    read back the same: ``comm_share`` is recomputed on reading, and a ``null``
    phase is one not given. Phases that cannot fit the step (:func:`phases_fit`)
    are never written: the reader would leave them out."""
    point = phases_fit(point)
    doc = msgspec.to_builtins(point)
    if unresolved and point.predicted and point.comm_share is None:
        doc["comm_share"] = None
    if exposed_unresolved(point):
        doc["comm_share"] = None
        if point.compute_s is None and point.allreduce_s is None:
            for name in _UNRESOLVED_NULLS:
                doc[name] = None
    return doc


def sweep_document(
    points: Sequence[SweepPoint],
    *,
    title: str | None = None,
    source: str | None = None,
    note: str | None = None,
    available_devices: int | None = None,
    models: list[Any] | None = None,
    recommendation: Any | None = None,
    sweep_wall_s: float | None = None,
    sweep_name: str | None = None,
) -> dict[str, Any]:
    """The sweep file as plain data (what ``--json`` prints and ``--from`` reads)."""
    configs = {p.config for p in points}
    unresolved = {c for c in configs if phases_unresolved(p for p in points if p.config == c)}
    doc = SweepFile(
        title=title,
        source=source,
        note=note,
        available_devices=available_devices,
        points=[_point_document(p, p.config in unresolved) for p in points],
        models=models,
        recommendation=recommendation,
        sweep_wall_s=sweep_wall_s,
        sweep=sweep_name,
    )
    return msgspec.to_builtins(doc)
