"""One run's events -> one :class:`RunSummary`.

What is measured and how (formulas in :mod:`gpuscale.analysis.metrics`):

* step time: median of the ``StepEvent.step_time_s`` of the steps that are not
  warm-up; spread ``(p90 - p10) / median``.
* throughput: ``median samples per step / median step time`` (samples/s), the
  rate at the median step: robust to a few slow steps, and what scaling compares.
* what the run got: the counted steps' samples over their summed times
  (``mean_step_throughput_samples_s``; the mean step ``mean_step_time_s``) and over
  the wall clock from the first counted step's start to the last one's end
  (``wall_throughput_samples_s``; ``counted_wall_s``), per worker, the workers'
  mean (an event that stands for several steps, ``steps_per_execution``, counts as
  that many). Where the wall-clock rate falls short of the median one, the wall
  clock splits into the steps at the median pace, ``slow_steps_share = (sum of the
  step times - steps x median step) / span`` (steps slower than the median: a
  skewed distribution; below 0 where the mean step is under the median),
  ``between_steps_share = 1 - sum of the step times / span`` (a Keras epoch's
  start, evaluation, checkpoints, a probe's passes) and ``small_batches_share =
  (steps - samples / median samples per step) x median step / span`` (steps with
  fewer samples than the median: a short last batch per epoch), the workers' spans
  and times pooled: ``wall rate = rate at the median step x (1 -
  small_batches_share - slow_steps_share - between_steps_share)`` (exactly with one
  worker; about, several workers' rates averaged).
* phases: medians over the non-warm-up ``PhaseEvent``s of compute, exposed
  all-reduce, apply and input wait (the input wait only from the probes that
  measure it: the Keras callback's, ``callback-probe``, cannot, and then it is
  ``None``, not 0). A ``PhaseEvent.step_time_s`` is the training
  part of the step (from holding the batch to the updated variables), without the
  input wait, so the whole probed step is ``step_time_s + input_s``
  (``phase_full_step_s``, its median). Both shares are over the *median step*
  of the run (the one whole every view splits, a typed-in sweep's too):
  ``comm_share = median allreduce_s / median step time``,
  ``input_share = median input_s / median step time``. The phases must add up to
  that step within their noise (``phase_consistent``,
  :func:`gpuscale.analysis.metrics.parts_fit_whole`); where they do not, none is
  shown as a number. Compute:communication is ``median compute_s / median allreduce_s``.
  Where the probes recorded T(compute + all-reduce) (schema 1.2), exposed
  all-reduce and apply are medians of the *unfloored* per-probe differences
  (clamped at 0 only after the median), so noise does not pile up at 0.
* uncertainty: every phase comes with the half-width of an approximate 95 %
  interval around its median (:func:`gpuscale.analysis.metrics.median_halfwidth`;
  ``None`` below 3 probes), and the exposed share likewise (``comm_share_err``).
  The samples are probed steps: the workers of a multi-worker run probe the same
  collective step together, so their breakdowns of it are pooled (their mean), not
  counted as independent samples.
  A phase no larger than its half-width is *not resolved*
  (:func:`gpuscale.analysis.metrics.resolved`): show it as ``< value + err``.
  A probe's passes and the steps' median come from different moments, so a
  phase can come out larger than the step, or the parts larger or smaller than
  it: ``phase_consistent`` is then ``False`` and the breakdown is said to be not
  resolved, never a number larger than the step.
* bandwidth: ``algbw = payload / exposed all-reduce`` and ``busbw = algbw x v(N)``
  with the exchange's own volume factor (``2(N-1)/N`` for a ring, ``N-1`` when
  gradients are gathered on one device, ``N`` for variables on the host: see
  :func:`gpuscale.analysis.metrics.link_volume_factor`).
  These are *effective* rates: what the step paid per byte exchanged. They are
  not the link's speed: overlap with the backward pass hides part of the
  exchange (the rate reads high), and waiting for a slow replica or launch
  overhead is counted in (it reads low). When the trainer also times the
  all-reduce alone (``allreduce_total_s``), the rates from that total time are
  reported beside them; those are the ones to compare with the link's peak.
* steps: each worker runs the same steps, so step counts are per worker (the
  worker that has run the most); the step-time statistics pool every worker's steps.
* imbalance: per GPU, the mean utilization (a time average); ``gpu_util_min_pct``
  against ``gpu_util_mean_pct`` shows a GPU that idles while the others work, and
  ``gpu_imbalance`` names the run's least busy GPU where it lags the median of the
  others markedly; ``gpus_held_down``, the GPUs whose clocks something held down in
  a meaningful share of their busy samples (both: :mod:`gpuscale.analysis.held_down`,
  the rule the dashboard's cards share). With
  several workers, the slowest worker's median step time over the median of the
  workers' medians (``worker_imbalance``, 1.0 = balanced).

* precision (``--precision``, from the start's config): the worse of the median
  step time's half-width over the median and the exposed share's half-width,
  and the counted steps more that would likely reach the precision asked
  (:func:`more_steps_for_precision`).

:class:`RunAccumulator` takes events one by one (a live dashboard calls
``add`` per event and ``summary()`` once a second: O(steps) per call);
:func:`summarize` is the one-shot form. Neither imports TensorFlow or Textual.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.exchange import exchange_of
from gpuscale.analysis.held_down import (
    GpuImbalance,
    GpuKey,
    GpuRow,
    GpuRows,
    HeldDownGpu,
    held_down_gpus,
    imbalance,
    run_gpus,
    slowdowns,
)
from gpuscale.analysis.interconnect import Interconnect, slowest_interconnect
from gpuscale.analysis.script_runs import is_callbackless_start, scaling_of
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    GpuSample,
    HostSample,
    PhaseEvent,
    StartEvent,
    StepEvent,
)

PROBE_RESERVE = 0.5
"""The part of a probe budget the probes leave for what gpuscale costs every step
(the probe scheduler's :data:`gpuscale.trainer.schedule.DEFAULT_RESERVE` is this
one): the probes aim at ``budget x (1 - PROBE_RESERVE)`` of the wall clock."""
USUAL_STEPS_WINDOW = 10
"""The last usual steps (counted, neither a probe's split step nor the step after a
probe) whose median a probe's excesses are taken against: the probe scheduler's
default ``window`` (:class:`gpuscale.trainer.schedule.ProbeScheduler`) is this one,
so a summary counts a probe's cost as the scheduler did at the time."""
DEFAULT_SHARE_PRECISION = 0.02
"""The half-width (a share of the step) the probes pin the exposed share down to
when no ``--precision`` is asked; the probe scheduler's default
(``gpuscale.trainer.schedule.DEFAULT_PRECISION``) is this one."""


APPLY_WITH_INPUT = "apply + input"
"""What every view calls apply where it holds the wait for the batch
(:attr:`RunSummary.input_in_apply`: a Keras ``fit`` timed by the callback)."""


class RunSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The analysis of one run. ``None`` means "not measured in this run"."""

    model: str = ""
    platform: str = "cpu-logical"
    devices: int = 1
    """Replicas (devices) across all workers."""
    workers: int = 1
    strategy: str = ""
    cross_device_ops: str | None = None
    exchange: str = "ring"
    """How gradients travel (:func:`gpuscale.analysis.exchange.exchange_of`): ``ring``,
    ``gather`` (reduce to one device) or ``host`` (variables on the CPU)."""
    scaling: str = "weak"
    """``weak``: fixed batch per replica; ``strong``: fixed global batch."""
    per_replica_batch: int = 0
    global_batch: int = 0
    status: str = "running"
    """``running`` until an EndEvent arrives, then its status."""
    steps_total: int = 0
    """Steps run, warm-up included, by the worker that has run the most (each
    worker of a multi-worker run runs the same steps; they are not added up)."""
    steps_counted: int = 0
    """Steps past the warm-up, by the worker that has run the most; the step-time
    statistics pool these steps of every worker."""
    step_time_s: float | None = None
    """Median step time of the counted steps."""
    step_time_p10_s: float | None = None
    step_time_p90_s: float | None = None
    spread: float | None = None
    """``(p90 - p10) / median`` of the counted step times."""
    throughput_samples_s: float | None = None
    """``median samples per step / median step time``: the rate at the median step
    (robust to a few slow steps; what scaling compares). Not what the run got where
    steps are skewed or much falls between them: see the fields below."""
    mean_step_time_s: float | None = None
    """The mean counted step (sum of the step times over the steps; an event that
    stands for several steps counts as that many; the workers pooled): above the
    median where a few steps are slow."""
    mean_step_throughput_samples_s: float | None = None
    """Samples of the counted steps over their summed step times (per worker; several
    workers: their mean): the rate in steps the run got, the mean step's."""
    wall_throughput_samples_s: float | None = None
    """Samples of the counted steps over the wall clock they span (from the first
    counted step's start to the last one's end, per worker; several workers: their
    mean): the rate the run got, what falls between the steps included."""
    between_steps_share: float | None = None
    """The share of that wall clock outside the counted steps' own times (a Keras
    epoch's start, evaluation, checkpoints, probes between steps): ``1 - sum of the
    step times / span``, the workers' spans and times pooled, never below 0 (step
    times that claim more than their span count as the span, here and in the shares
    below alike)."""
    slow_steps_share: float | None = None
    """The share of that wall clock the counted steps took over what as many steps at
    the median step would have: ``(sum of the step times - steps x median step) /
    span``, pooled as ``between_steps_share``; below 0 where the mean step is under
    the median."""
    mean_samples_per_step: float | None = None
    """The counted steps' samples over the steps (pooled as ``mean_step_time_s``):
    under the median samples per step where the last batch of each epoch is short."""
    small_batches_share: float | None = None
    """The share of that wall clock that as many steps at the median step would have
    taken over what the steps' samples take at the rate at the median step:
    ``(steps - samples / median samples per step) x median step / span``, pooled as
    ``between_steps_share``; above 0 where the steps carry fewer samples than the
    median on average (a short last batch per epoch), below 0 where more. The rate
    at the median step times ``1 - small_batches_share - slow_steps_share -
    between_steps_share`` is the wall-clock rate (exactly with one worker; about,
    several workers' rates averaged)."""
    phase_steps: int = 0
    """Phase breakdowns in the statistics (warm-up excluded): the samples the medians
    and their half-widths are of, one per probed step (the workers of a multi-worker
    run probe the same step together: their breakdowns of it are pooled, their mean
    one sample), so the same count as :attr:`probes`. (Recordings made before
    pooling counted each worker's breakdown here.)"""
    probes: int = 0
    """Probes run (warm-up excluded): the probed steps, each counted once however many
    workers probed it (several workers probe the same steps together)."""
    phase_full_step_s: float | None = None
    """Median whole probed step, ``step_time_s + input_s`` of the probes: the whole
    the phases split where no step was counted (else the median step). (Older
    recordings' summaries also carry ``phase_step_time_s``, the probes' median
    ``step_time_s`` alone, which nothing read: ignored when read.)"""
    compute_s: float | None = None
    allreduce_s: float | None = None
    """Median exposed all-reduce: the part of the step spent waiting for gradients
    (0 on one device, which exchanges nothing: see :attr:`lone_exchange_s`)."""
    lone_exchange_s: float | None = None
    """On one device, the exposed all-reduce the probes timed nonetheless (the
    median difference of their two passes, which do the same work there: probes of
    gpuscale before it stopped timing the second pass on one device, or another
    tool's): noise, not an exchange, so not counted (``allreduce_s`` is 0, as a
    sweep file's point of 1 device with an ``allreduce_s`` has it left out:
    :func:`gpuscale.analysis.sweep.lone_exchange_problem`), and said
    (:func:`lone_exchange_words`). ``None`` where none was timed."""
    allreduce_total_s: float | None = None
    """Median all-reduce timed alone, when the trainer measures it."""
    apply_s: float | None = None
    """The step less compute, the exposed all-reduce and the input wait: the
    optimizer update and the framework's own per-step work; for a Keras ``fit``
    timed by the callback also the wait for the batch (:attr:`input_in_apply`)."""
    input_s: float | None = None
    """Median input wait of the probes that measure it (the built-in trainer's);
    ``None`` where no probe did (the Keras callback's cannot: the batch is fetched
    inside the step it times, so in ``fit`` the wait is in :attr:`apply_s`), never
    a 0 that was not measured."""
    comm_share: float | None = None
    """Exposed all-reduce over the median step (``step_time_s``; where no step was
    counted, ``phase_full_step_s``): the one exposed share every view says (``recommend``'s, a sweep point's, the dashboard's)."""
    input_share: float | None = None
    """Input wait over the median step (``step_time_s``); ``None`` where not measured."""
    compute_err_s: float | None = None
    """95 % half-width of ``compute_s`` (``None``: fewer than 3 probes)."""
    allreduce_err_s: float | None = None
    """95 % half-width of ``allreduce_s``; ``allreduce_s <= allreduce_err_s``: not resolved."""
    apply_err_s: float | None = None
    """95 % half-width of ``apply_s``."""
    comm_share_err: float | None = None
    """95 % half-width of ``comm_share``: ``allreduce_err_s / step_time_s`` (else
    ``phase_full_step_s``, as the share) (a fraction of the step, like the share)."""
    phase_parts_s: float | None = None
    """The phases' medians added up: compute + exposed all-reduce + apply + input wait
    (each as shown, never below 0)."""
    phase_consistent: bool | None = None
    """Whether the phases add up to the median step (``step_time_s``), the whole they
    split, within their noise (:func:`gpuscale.analysis.metrics.parts_fit_whole`);
    ``False``: the probes' passes and the steps disagree (a pass longer than the
    step, a probe against an unusual step), and the breakdown is not resolved: no
    phase is shown as a number."""
    phase_contradiction: str | None = None
    """Where the probes' medians contradict each other beyond their noise (so
    ``phase_consistent`` is ``False``), what: ``compute alone 1316.0 ms is longer than
    compute + all-reduce 1133.0 ms`` or ``the exposed all-reduce 398.6 ms is over
    twice the whole exchange timed alone, 4.0 ms`` (see :func:`_contradiction`)."""
    probe_cost_s: float | None = None
    """What all the probes cost, as the probe scheduler counts it (schema 1.2): their
    passes and their split steps' excess (``PhaseEvent.probe_cost_s``) plus what the
    step after each took over the median of the usual steps before it
    (:data:`USUAL_STEPS_WINDOW`; summed unfloored, so noise cancels; a negative sum
    counts 0). Several workers probe together: the mean of the workers' costs."""
    counted_wall_s: float | None = None
    """Wall clock from the first counted step's start to the last step's end, the
    probes between them included (the part of the run the probes' share is of)."""
    probe_wall_share: float | None = None
    """``probe_cost_s / counted_wall_s``: the probes' share of the wall clock, as
    the scheduler counts it (``None`` before schema 1.2 or without a probe)."""
    probe_passes_s: float | None = None
    """The part of :attr:`probe_cost_s` that ran between the steps: the probes' own
    passes (``PhaseEvent.probe_cost_s`` less a split step's excess), without the
    excesses of split steps and of the steps after probes, which are in those steps'
    own times (under :attr:`slow_steps_share`). Several workers: the mean of the
    workers' sums. ``None`` where it cannot be told apart (a ``split-step`` probe
    recorded before ``split_excess_s``) or no probe was costed."""
    probe_passes_wall_share: float | None = None
    """``probe_passes_s / counted_wall_s``: the probes' part of
    :attr:`between_steps_share` (never the cost of the steps they slowed)."""
    probe_setup_s: float | None = None
    """Compiling the probes' passes once (schema 1.5, ``PhaseEvent.setup_s``), warm-up
    included: not in :attr:`probe_cost_s` (the budget pays for the recurring probes
    only) but in the wall clock, between steps. Several workers compile together:
    the mean of the workers' sums. ``None`` where no probe said it."""
    probe_setup_wall_share: float | None = None
    """The part of :attr:`probe_setup_s` that fell between counted steps (not in the
    warm-up), over :attr:`counted_wall_s`: the compiling's share of the wall clock
    :attr:`between_steps_share` is of. ``None`` where no probe said its compiling."""
    probe_budget: float | None = None
    """The probes' budget, a share of the wall clock (``--probe-budget``,
    ``ScalingMonitor(budget=)``); ``None`` when not said or a fixed period overrides it."""
    probe_every: int | None = None
    """A fixed probe period (``--phase-every K``, ``ScalingMonitor(every=K)``) that
    overrides the budget; 0: no probes."""
    probes_off: bool = False
    """The run asked for no probes (``--phase-every 0``, ``--probe-budget 0``,
    ``ScalingMonitor(phases=False)`` or ``budget=0``): it will have no phase
    breakdown, and nothing should wait for one."""
    share_target: float | None = None
    """The half-width the exposed share is to be known to: ``--precision`` when
    asked, else the probe scheduler's default (:data:`DEFAULT_SHARE_PRECISION`)."""
    compute_comm_ratio: float | None = None
    """Compute over exposed all-reduce; ``None`` when nothing was exchanged."""
    payload_bytes: int | None = None
    algbw_bytes_s: float | None = None
    """``payload / exposed all-reduce``: what the step effectively paid per byte."""
    busbw_bytes_s: float | None = None
    """``algbw x v(N)``, the exchange's volume factor (``2(N-1)/N`` for a ring), of
    the *exposed* all-reduce: what the step effectively paid, not the link's rate
    (overlap hides part of the exchange, so it reads high); views show
    ``busbw_total_bytes_s`` as the busbw."""
    algbw_total_bytes_s: float | None = None
    """``payload / all-reduce timed alone`` (when measured)."""
    busbw_total_bytes_s: float | None = None
    """``algbw_total x v(N)``: the bus bandwidth of the all-reduce timed alone, the
    one to compare with the link's peak (the dashboard's ``busbw``)."""
    interconnect: Interconnect | None = None
    """The slowest device link's peak, per direction (from the device information)."""
    gpu_util_mean_pct: float | None = None
    """Each GPU's mean utilization (NVML: the share of time any kernel ran; copies and
    NCCL's kernels count), a time average as the samples are evenly spaced; several
    GPUs: the median GPU's. Taken over the counted steps' span when there are counted
    steps, else over the whole run (:attr:`gpu_window` says which). What every view
    quotes as "busy" (older summaries have only ``gpu_util_median_pct``)."""
    gpu_util_median_pct: float | None = None
    """Each GPU's median utilization sample over the same span; several GPUs: the
    median GPU's. A run that idles a third of the time at 100 % otherwise reads
    mean 67 %, median 100 %. (Summaries written before ``gpu_util_mean_pct`` existed
    held the mean here for a while: readers prefer the mean field.)"""
    gpu_sm_activity_mean_pct: float | None = None
    """The time average for GPM's SM activity (Hopper and newer): the share of SM
    cycles with a warp resident, what the GPUs worked rather than were busy. ``None``
    without GPM."""
    gpu_sm_activity_median_pct: float | None = None
    """The median sample of GPM's SM activity (as ``gpu_util_median_pct``)."""
    gpu_tensor_activity_mean_pct: float | None = None
    """The time average for GPM's tensor-core activity (Hopper and newer)."""
    gpu_tensor_activity_median_pct: float | None = None
    """The median sample of GPM's tensor-core activity."""
    gpu_window: str | None = None
    """Over which samples the GPU fields above are taken: ``counted steps`` (the
    counted steps' span, start-up and the end's idle left out) or ``whole run`` (no
    counted step, or no sample inside their span: every sample from the launch on,
    start-up included); ``None`` without GPU samples (and in summaries written
    before this field, which took the counted steps' span where they had one)."""
    gpu_window_s: float | None = None
    """How long that window is, in seconds: the counted steps' span, or from the
    first GPU sample to the last."""
    no_step_times: bool = False
    """The run is a script without gpuscale's callback: no step times will come,
    only telemetry."""
    custom_loop: bool = False
    """The script's own training loop (``ScalingMonitor.start``/``step``; the start's
    ``config.custom_loop``), not Keras ``fit``: no epochs, evaluation or checkpoints
    of Keras between its steps; what the views name as the time between steps."""
    source: str = "trainer"
    """Who ran the steps (the start's ``source``): ``trainer``, gpuscale's built-in
    trainer (its options: ``--steps``, ``--probe-budget``, ``--phase-every``,
    ``--precision``); ``script``, a user's script (through
    ``gpuscale.keras.ScalingMonitor``: ``ScalingMonitor(budget=..., every=...)``,
    and it runs as long as its ``fit`` or loop); ``replay``. What the views' advice
    names."""
    gpu_util_min_pct: float | None = None
    """The least busy GPU's mean utilization."""
    gpu_util_min_index: int | None = None
    """The least busy GPU's index (as NVML counts on its worker's machine)."""
    gpu_util_min_worker: int | None = None
    """The worker the least busy GPU belongs to."""
    gpu_imbalance: GpuImbalance | None = None
    """The run's least busy GPU where it lags the median of the run's other GPUs
    by :data:`~gpuscale.analysis.held_down.IMBALANCE_POINTS` or more (time averages
    over ``gpu_window``): ``{"index": 6, "util_pct": 0.0, "others_pct": 93.0}``
    (``worker`` too, where not 0). Every replica waits for it, so the run's pace may
    be its input or its placement, not communication. ``None``: none, one GPU, or
    the run's GPUs not known among those sampled
    (:func:`~gpuscale.analysis.held_down.run_gpus`); absent in summaries written
    before it."""
    gpus_held_down: list[HeldDownGpu] | None = None
    """The run's GPUs whose clocks something held down in at least
    :data:`~gpuscale.analysis.held_down.HELD_DOWN_SHARE` of their busy samples in
    ``gpu_window`` (the dashboard's cards' rule,
    :func:`~gpuscale.analysis.held_down.held_down_reasons`: a power cap only below
    the peers' power limit), the most held down first: ``[{"index": 3, "share":
    1.0, "busy_samples": 38, "reasons": ["hw_slowdown", "sw_power_cap"],
    "power_limit_w": 400.0, "peer_power_limit_w": 700.0}]``. ``None``: none (or
    summaries written before it)."""
    worker_step_time_s: dict[int, float] | None = None
    """Median counted step time per worker (multi-worker runs)."""
    worker_imbalance: float | None = None
    """Slowest worker's median step time / median of the workers' medians."""
    host_cpu_pct: float | None = None
    """Median host CPU use, all cores (0-100)."""
    proc_cpu_pct: float | None = None
    """Median CPU use of the run's own processes while its counted steps ran, in
    percent of one core (200: two cores busy): of the host samples whose whole
    period lies between the first counted step's start and the last one's end
    (start-up and compiling left out), one worker only; ``None`` below
    :data:`~gpuscale.analysis.metrics.MIN_SAMPLES_FOR_UNCERTAINTY` such samples
    (a short run: its number would be a sample or two of noise). How many of the
    machine's cores CPU logical devices put to work (``recommend`` says it)."""
    step_time_rel_err: float | None = None
    """With ``precision_asked``: the median step time's 95 % half-width over the
    median (``None`` below 3 steps)."""
    precision_asked: float | None = None
    """The run's ``--precision`` (a 95 % half-width, a fraction of the step), if asked."""
    precision_reached: float | None = None
    """With ``precision_asked``: how well the run pinned its numbers down, the worse
    of the median step time's half-width over the median and, when it probed
    several replicas, the exposed share's half-width (``comm_share_err``); ``None``
    while either is unknown (fewer than 3 steps or probes), and where the probes'
    phases do not split the step while their share's spread is within the precision
    (:func:`unsplit_within`: the share is not resolved, that spread no precision)."""
    precision_more_steps: int | None = None
    """With ``precision_asked``: counted steps more that would likely reach it (0:
    reached), from half-widths shrinking as ``1/sqrt(n)`` and the run's own probe
    rate: see :func:`more_steps_for_precision`; ``None`` where the probes' phases do
    not split the step although their share's spread is within the precision
    (:func:`unsplit_within`: no count of steps is known to mend that)."""
    share_more_steps: int | None = None
    """Counted steps more that would likely pin the exposed share down to
    ``share_target`` at the run's probe pace (several devices, probes running, the
    share not known to it yet); ``None`` otherwise."""

    @property
    def probes_run(self) -> int:
        """The probes as every view counts them, once per probed step
        (:attr:`probes`); a summary made before ``probes`` existed (one worker
        then): its phase breakdowns."""
        return self.probes or self.phase_steps

    @property
    def input_in_apply(self) -> bool:
        """The input wait is inside :attr:`apply_s`: a script's Keras ``fit``, timed by
        ``gpuscale.keras.ScalingMonitor``, fetches each batch within the step it
        times (Keras's train function takes the next batch from the iterator), and
        the callback's probe, on a synthetic batch, cannot split that wait out, so
        what is left of the step after compute and the exposed exchange is the
        optimizer update, Keras's own per-step work *and* the wait for the batch.
        Every view names that part ``apply + input``. Not for a script's own loop
        (:attr:`custom_loop`), which gets its batches outside the timed step (its
        wait falls between steps), nor where a probe measured the wait (the built-in
        trainer's, :attr:`input_s`)."""
        return (
            self.source == "script"
            and not self.custom_loop
            and self.phase_steps > 0
            and self.input_s is None
        )

    @property
    def compute_fills_step(self) -> bool:
        """The compute pass alone is no shorter than the step the phases split (the
        median step, else the probes' whole step): a probe's pass and the steps'
        median come from different moments, so nothing is left of the step to split
        and the exposed exchange, apply and the compute itself are not resolved as
        numbers (:func:`gpuscale.formatting.format_phase_in_step_s` says ``≈ the
        whole step``; a sweep point keeps no phase, like a ``phase_consistent``
        ``False`` one, except on one device: see :attr:`phases_split_step`)."""
        return _compute_fills(self.compute_s, self.step_time_s or self.phase_full_step_s)

    @property
    def phases_split_step(self) -> bool:
        """Whether the phases are numbers that split the step: they add up to it
        (:attr:`phase_consistent` not ``False``) and compute alone does not fill it
        (:attr:`compute_fills_step`), except on one device, where compute is the step
        less apply and a pass a little over the median is noise: no exposed exchange
        is derived from it, so its phases stay numbers (its chart bar is not greyed).
        What a sweep point takes its phases from."""
        return (
            unsplit_reason(
                consistent=self.phase_consistent,
                compute_s=self.compute_s,
                whole_s=self.step_time_s or self.phase_full_step_s,
                devices=self.devices,
            )
            is None
        )

    @property
    def unsplit_why(self) -> str | None:
        """Why the probes' phases are not numbers that split the step
        (:attr:`phases_split_step` ``False``), in the words every view says it in:
        ``the phases do not add up to the step`` or ``compute alone fills the step``;
        ``None`` where they split it or no probe ran. The summaries call the exposed
        share "not resolved" then, and a ``--precision`` run does not reach its
        precision on it (the probe scheduler's stop rule asks the same:
        :meth:`gpuscale.trainer.schedule.ProbeScheduler.known_to`)."""
        if not self.phase_steps:
            return None
        return unsplit_reason(
            consistent=self.phase_consistent,
            compute_s=self.compute_s,
            whole_s=self.step_time_s or self.phase_full_step_s,
            devices=self.devices,
        )


class RunAccumulator:
    """Collects one run's events; :meth:`summary` computes the summary from what
    arrived so far. Keeps only the numbers it needs (a few floats per step)."""

    def __init__(self) -> None:
        self.start: StartEvent | None = None
        self.end: EndEvent | None = None
        self.failed = False
        self._step_times: list[float] = []
        self._samples: list[int] = []
        self._steps_seen: dict[int, int] = defaultdict(int)
        """Steps seen per worker, warm-up included."""
        self._warmup_steps: set[tuple[int, int]] = set()
        self._phases: list[PhaseEvent] = []
        self._worker_times: dict[int, list[float]] = defaultdict(list)
        self._gpu_util: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
        """(t, utilization) samples per (worker, GPU index)."""
        self._gpm: dict[str, dict[tuple[int, int], list[tuple[float, float]]]] = {
            "sm": defaultdict(list),
            "tensor": defaultdict(list),
        }
        """(t, GPM activity) samples per (worker, GPU index), SM and tensor."""
        self._gpu_rows: dict[GpuKey, GpuRows] = defaultdict(GpuRows)
        """What :mod:`gpuscale.analysis.held_down` reads of each GPU sample."""
        self._reasons: dict[tuple[str, ...], tuple[str, ...]] = {}
        """One tuple per set of slowdowns seen (a sample keeps it, not a copy)."""
        self._held_down_cache: tuple | None = None
        """(what it was read under, samples then, the run's GPUs, the GPUs held
        down): :meth:`_summarize_held_down`."""
        self._gpu_names: dict[GpuKey, str] = {}
        """Each GPU's model, as the first start that lists it names it (a script's
        callback names its devices as TensorFlow does, after gpuscale's start)."""
        self._host_cpu: list[float] = []
        self._proc_cpu: list[tuple[float, float, float]] = []
        """(period start, period end, proc CPU %) of worker 0's host samples."""
        self._last_host_t: float | None = None
        self._counted_from_t: float | None = None
        """When the first counted step began (its event's ``t`` less its step time)."""
        self._last_step_t: float | None = None
        self._step_at: dict[tuple[int, int], float] = {}
        """Counted steps' times by (worker, step): the step after a probe is the probe's."""
        self._last_index: dict[int, int] = {}
        """Each worker's last step index seen, warm-up included (an event after a gap
        of indices stands for that many steps: ``steps_per_execution``)."""
        self._stepping: dict[int, list[float]] = {}
        """Per worker: [time in counted steps, their samples, first start, last end,
        the counted steps]."""
        self._last_end: dict[int, tuple[int, float, bool]] = {}
        """Per worker: the last step's (index, end, counted)."""
        self._gaps: dict[int, list[tuple[int, float]]] = defaultdict(list)
        """Per worker: (counted step, wall clock from its end to the next counted
        step's start), the time between counted steps."""

    def add(self, event: object) -> None:
        """Take one event of the run (unknown kinds are ignored)."""
        if isinstance(event, StepEvent):
            # the steps, not the events (several steps a call: one event each call)
            seen = self._steps_seen[event.worker]
            self._steps_seen[event.worker] = max(seen + 1, event.step + 1)
            before = self._last_index.get(event.worker)
            self._last_index[event.worker] = event.step
            previous = self._last_end.get(event.worker)
            self._last_end[event.worker] = (event.step, event.t, not event.warmup)
            if event.warmup:
                self._warmup_steps.add((event.worker, event.step))
                return
            # an event stands for the steps since the one before; the first, for the
            # steps from 0 (several steps a call: the first call's 5 steps, index 4)
            steps = max(1, event.step - before if before is not None else event.step + 1)
            if previous is not None and previous[2]:
                began = event.t - event.step_time_s * steps
                self._gaps[event.worker].append((previous[0], began - previous[1]))
            self._add_stepping(event, steps)
            self._step_times.append(event.step_time_s)
            self._step_at[(event.worker, event.step)] = event.step_time_s
            began = event.t - event.step_time_s
            if self._counted_from_t is None or began < self._counted_from_t:
                self._counted_from_t = began
            if self._last_step_t is None or event.t > self._last_step_t:
                self._last_step_t = event.t
            self._samples.append(event.samples)
            self._worker_times[event.worker].append(event.step_time_s)
        elif isinstance(event, PhaseEvent):
            self._phases.append(event)
        elif isinstance(event, GpuSample):
            key = (event.worker, event.index)
            if event.util_gpu_pct is not None and not event.lost:
                self._gpu_util[key].append((event.t, event.util_gpu_pct))
            if not event.lost:
                held = tuple(slowdowns(event.throttle_reasons))
                held = self._reasons.setdefault(held, held)
                row = GpuRow(
                    event.t, event.util_gpu_pct, held, event.power_limit_w, event.proc_mem_bytes
                )
                self._gpu_rows[key].append(row)
            if event.gpm_sm_activity_pct is not None:
                self._gpm["sm"][key].append((event.t, event.gpm_sm_activity_pct))
            if event.gpm_tensor_activity_pct is not None:
                self._gpm["tensor"][key].append((event.t, event.gpm_tensor_activity_pct))
        elif isinstance(event, HostSample):
            self._host_cpu.append(event.cpu_pct)
            if event.worker == 0:
                began, self._last_host_t = self._last_host_t, event.t
                if began is not None and event.proc_cpu_pct is not None:
                    self._proc_cpu.append((began, event.t, event.proc_cpu_pct))
        elif isinstance(event, StartEvent):
            self.start = event
            for info in event.devices:
                if info.kind == "gpu":
                    self._gpu_names.setdefault((event.worker, info.index), info.name)
        elif isinstance(event, EndEvent):
            self.end = event
        elif isinstance(event, ErrorEvent):
            self.failed = True

    def _add_stepping(self, event: StepEvent, steps: int) -> None:
        """Count a counted step event, standing for ``steps`` steps (its time is
        their mean), into its worker's time in steps and the span they cover."""
        steps = max(1, steps)
        began = event.t - event.step_time_s * steps
        row = self._stepping.setdefault(event.worker, [0.0, 0.0, began, event.t, 0.0])
        row[0] += event.step_time_s * steps
        row[1] += event.samples * steps
        row[4] += steps
        row[2], row[3] = min(row[2], began), max(row[3], event.t)

    def extend(self, events: Iterable[object]) -> None:
        for event in events:
            self.add(event)

    def summary(self, live: bool = False) -> RunSummary:
        """The summary of the events so far. ``live``: asked again and again while
        the run goes on (the dashboard, every second), so the slowest part may be
        read again only as the samples grow (:meth:`_summarize_held_down`); a final
        summary, and every other, is exact."""
        s = RunSummary()
        start = self.start
        if start is not None:
            s.model = start.model
            s.platform = start.platform
            s.devices = max(1, start.num_replicas)
            s.workers = max(1, start.num_workers)
            s.strategy = start.strategy
            s.cross_device_ops = start.cross_device_ops
            cfg = start.config or {}
            s.exchange = exchange_of(cfg.get("strategy") or start.strategy, cfg.get("all_reduce"))
            s.scaling = scaling_of(start)
            s.per_replica_batch = start.per_replica_batch
            s.global_batch = start.global_batch
            s.payload_bytes = start.payload_bytes
            s.no_step_times = is_callbackless_start(start)
            s.source = start.source
            s.custom_loop = (start.config or {}).get("custom_loop") is True
            if start.devices:
                s.interconnect = slowest_interconnect(start.devices)
        if self.end is not None:
            s.status = self.end.status
        elif self.failed:
            s.status = "failed"
        s.steps_total = max(self._steps_seen.values(), default=0)
        s.steps_counted = max((int(row[4]) for row in self._stepping.values()), default=0)
        if self._step_times:
            times = self._step_times
            s.step_time_s = metrics.median(times)
            s.step_time_p10_s = metrics.percentile(times, 10.0)
            s.step_time_p90_s = metrics.percentile(times, 90.0)
            s.spread = metrics.spread(times)
            samples = metrics.median(self._samples)
            if s.step_time_s > 0 and samples > 0:
                s.throughput_samples_s = metrics.throughput(samples, s.step_time_s)
            if not s.global_batch:
                s.global_batch = int(samples)
            self._summarize_wall(s)
        self._summarize_phases(s, self._step_halfwidth())
        self._summarize_probing(s)
        self._summarize_share_steps(s)
        self._summarize_imbalance(s, live)
        if self._host_cpu:
            s.host_cpu_pct = metrics.median(self._host_cpu)
        s.proc_cpu_pct = self._proc_cpu_in_steps() if s.workers == 1 else None
        asked = (start.config or {}).get("precision") if start is not None else None
        if isinstance(asked, (int, float)) and 0 < asked < 1:
            self._summarize_precision(s, float(asked))
        return s

    def _proc_cpu_in_steps(self) -> float | None:
        """:attr:`RunSummary.proc_cpu_pct`: the median of the samples whose period
        lies within the counted steps."""
        first, last = self._counted_from_t, self._last_step_t
        if first is None or last is None:
            return None
        inside = [pct for began, ended, pct in self._proc_cpu if began >= first and ended <= last]
        if len(inside) < metrics.MIN_SAMPLES_FOR_UNCERTAINTY:
            return None
        return metrics.median(inside)

    def _summarize_wall(self, s: RunSummary) -> None:
        """The mean step, the rates over the steps' summed times and over the wall
        clock the counted steps span, and that wall clock's shares in smaller
        batches, slow steps and between the steps (module docstring), all over the
        same workers' rows (those whose steps span some wall clock)."""
        rows = [row for row in self._stepping.values() if row[4] > 0 and row[3] > row[2]]
        if not rows:
            return
        steps = sum(row[4] for row in rows)
        inside = sum(row[0] for row in rows)
        s.mean_step_time_s = inside / steps
        samples = sum(row[1] for row in rows)
        s.mean_samples_per_step = samples / steps
        in_steps = [row[1] / row[0] for row in rows if row[0] > 0]
        if any(in_steps):
            s.mean_step_throughput_samples_s = sum(in_steps) / len(in_steps)
        wall = sum(row[3] - row[2] for row in rows)
        rates = [row[1] / (row[3] - row[2]) for row in rows]
        if any(rates):
            s.wall_throughput_samples_s = sum(rates) / len(rates)
        # step times that claim more than the span they fall in count as the span,
        # in every share alike, so that the shares still add up
        inside = min(inside, wall)
        s.between_steps_share = 1.0 - inside / wall
        if s.step_time_s is None:
            return
        at_median = steps * s.step_time_s
        s.slow_steps_share = (inside - at_median) / wall
        median_samples = metrics.median(self._samples) if self._samples else 0.0
        if median_samples <= 0:
            return
        # the time the steps' samples would take at the median step's rate, against
        # as many steps at the median step: what batches under the median cost
        s.small_batches_share = (at_median - samples / median_samples * s.step_time_s) / wall

    def _summarize_precision(self, s: RunSummary, asked: float) -> None:
        """How close the run came to ``--precision`` (only then: it sorts the steps again)."""
        s.precision_asked = asked
        width = metrics.median_halfwidth(self._step_times)
        step_rel = width / s.step_time_s if width is not None and s.step_time_s else None
        s.step_time_rel_err = step_rel
        probing = s.devices > 1 and (s.phase_steps > 0 or not s.probes_off)
        if probing and unsplit_within(s, asked):
            # a spread within the precision is no precision where the phases do not
            # split the step (not resolved, :attr:`RunSummary.unsplit_why`): not
            # reached, and more steps at the same pace are not known to resolve it
            s.precision_reached = s.precision_more_steps = None
            return
        share_err = s.comm_share_err if probing else 0.0
        if step_rel is not None and share_err is not None:
            s.precision_reached = max(step_rel, share_err)
        s.precision_more_steps = more_steps_for_precision(
            asked,
            steps=s.steps_counted,
            step_rel=step_rel,
            probes=s.probes_run if probing else None,
            share_err=share_err if probing else None,
            per_probe=self._steps_per_probe(s) if probing else None,
        )

    def _summarize_share_steps(self, s: RunSummary) -> None:
        """How many more steps would tell the exposed share to its target: what a
        short run says instead of only "not known yet"."""
        known = s.comm_share_err is not None and s.comm_share_err <= (s.share_target or 0)
        if s.devices <= 1 or not s.phase_steps or s.share_target is None or known:
            return
        more = more_steps_for_precision(
            s.share_target,
            steps=s.steps_counted,
            step_rel=0.0,  # the step time is not what is asked here
            probes=s.probes_run,
            share_err=s.comm_share_err,
            per_probe=self._steps_per_probe(s),
        )
        s.share_more_steps = more or None

    def _steps_per_probe(self, s: RunSummary) -> float | None:
        """Counted steps per probe at the run's own pace: its fixed period, or what
        its budget pays for a probe at what its probes cost (a budgeted run spends
        early, so its probes so far say little about the rate later); ``None``: the
        run's own steps per probe."""
        if s.probe_every:
            return float(s.probe_every)
        if s.probe_budget and s.probe_cost_s and s.probes and s.step_time_s:
            return metrics.steps_per_probe(
                s.probe_cost_s / s.probes,
                s.step_time_s,
                s.probe_budget * (1.0 - PROBE_RESERVE),
            )
        return None

    def _summarize_probing(self, s: RunSummary) -> None:
        """What the probes cost against the wall clock, the budget they had and the
        precision the exposed share is to be known to (from the start's config)."""
        cfg = (self.start.config or {}) if self.start is not None else {}
        every = cfg.get("phase_every", cfg.get("every"))
        if isinstance(every, int) and not isinstance(every, bool) and every >= 0:
            s.probe_every = every
        budget = cfg.get("probe_budget")
        if s.probe_every is None and isinstance(budget, (int, float)) and 0 <= budget < 1:
            s.probe_budget = float(budget)
        s.probes_off = s.probe_every == 0 or s.probe_budget == 0 or cfg.get("phases") is False
        asked = cfg.get("precision")
        s.share_target = (
            float(asked)
            if isinstance(asked, (int, float)) and 0 < asked < 1
            else DEFAULT_SHARE_PRECISION
        )
        if self._counted_from_t is not None and self._last_step_t is not None:
            wall = self._last_step_t - self._counted_from_t
            if wall > 0:
                s.counted_wall_s = wall
                if s.probe_cost_s is not None:
                    s.probe_wall_share = s.probe_cost_s / wall
                if s.probe_passes_s is not None:
                    s.probe_passes_wall_share = s.probe_passes_s / wall
                if s.probe_setup_s is not None:
                    s.probe_setup_wall_share = self._setup_between_counted_s() / wall

    def _summarize_phases(self, s: RunSummary, step_halfwidth_s: float | None) -> None:
        """The phase fields of ``s`` from the probes so far, against its median step
        ``s.step_time_s`` (95 % half-width ``step_halfwidth_s``) on ``s.devices``."""
        probed = [p for p in self._phases if (p.worker, p.step) not in self._warmup_steps]
        # several workers time the same collective step: one sample per probed step
        phases = _per_probed_step(probed)
        s.phase_steps = len(phases)
        s.probes = len(phases)
        if not phases:
            return
        # each phase's median balanced over the order of the probe's passes (1.7): the
        # first pass after a step runs slower, whichever it is
        orders = [p.compute_first for p in phases]
        computes = [p.compute_s for p in phases]
        s.compute_s, s.compute_err_s, _ = metrics.balanced_median(computes, orders)
        # unfloored differences where the probe kept T(compute + all-reduce) (1.2)
        exchanges = [_exposed(p) for p in phases]
        applies = [_apply(p) for p in phases]
        if self.start is not None and s.devices <= 1 and any(exchanges):
            # one device exchanges nothing: two passes of the same work differ by noise
            # (a start must say so: without one the devices are unknown, not one); the
            # step less its compute is the apply, as the probes time it there now
            s.lone_exchange_s = metrics.balanced_median(exchanges, orders).median
            applies = [a + e for a, e in zip(applies, exchanges, strict=True)]
            exchanges = [0.0] * len(exchanges)
        exposed = metrics.balanced_median(exchanges, orders)
        s.allreduce_s, s.allreduce_err_s = max(0.0, exposed.median), exposed.halfwidth
        apply = metrics.balanced_median(applies, orders)
        s.apply_s, s.apply_err_s = max(0.0, apply.median), apply.halfwidth
        # the Keras callback's probe cannot see the input wait: not measured, not 0
        waits = [p.input_s for p in phases if p.method != "callback-probe"]
        s.input_s = metrics.median(waits) if waits else None
        totals = [t for p in phases if (t := getattr(p, "allreduce_total_s", None)) is not None]
        if totals:
            s.allreduce_total_s = metrics.median(totals)
        costed = [p for p in probed if p.probe_cost_s is not None]
        if costed:
            by_worker: dict[int, list[PhaseEvent]] = defaultdict(list)
            for p in costed:
                by_worker[p.worker].append(p)
            # the workers probe the same steps at once: the run paid one worker's cost
            costs = [self._probes_cost_s(w, ps) for w, ps in by_worker.items()]
            s.probe_cost_s = sum(c for _, c in costs) / len(costs)
            # the passes alone ran between the steps; unknown where a split step's
            # excess is not told apart (recorded before split_excess_s)
            if not any(p.method == "split-step" and p.split_excess_s is None for p in costed):
                s.probe_passes_s = sum(passes for passes, _ in costs) / len(costs)
        setups: dict[int, float] = defaultdict(float)
        for p in self._phases:  # warm-up included: the compiling happened all the same
            if p.setup_s is not None:
                setups[p.worker] += p.setup_s
        if setups:  # the workers compile at once: the run paid one worker's
            s.probe_setup_s = sum(setups.values()) / len(setups)
        payloads = [p.payload_bytes for p in probed if p.payload_bytes]
        if payloads and not s.payload_bytes:
            s.payload_bytes = int(metrics.median(payloads))
        s.phase_full_step_s = metrics.median([p.step_time_s + p.input_s for p in phases])
        whole = s.step_time_s or s.phase_full_step_s
        judged = judge_phases(
            compute_s=s.compute_s,
            exposed_s=exposed.median,  # unfloored, balanced as allreduce_s is
            apply_s=s.apply_s,
            input_s=s.input_s,
            whole_s=whole,
            devices=s.devices,
            halfwidths=[s.compute_err_s, s.allreduce_err_s, s.apply_err_s, step_halfwidth_s],
            exposed_err_s=s.allreduce_err_s,
            alone_s=s.allreduce_total_s,
            phases=phases,
        )
        s.phase_parts_s = judged.parts_s
        s.phase_consistent = judged.consistent
        s.phase_contradiction = judged.contradiction
        s.comm_share = metrics.share(s.allreduce_s, whole)
        if s.allreduce_err_s is not None and whole:
            s.comm_share_err = s.allreduce_err_s / whole
        if s.input_s is not None:
            s.input_share = metrics.share(s.input_s, whole)
        if s.allreduce_s > 0:
            s.compute_comm_ratio = s.compute_s / s.allreduce_s
        if s.payload_bytes and s.devices > 1:
            if s.allreduce_s > 0:
                s.algbw_bytes_s = metrics.algbw_bytes_s(s.payload_bytes, s.allreduce_s)
                s.busbw_bytes_s = metrics.busbw_bytes_s(s.algbw_bytes_s, s.devices, s.exchange)
            if s.allreduce_total_s:
                s.algbw_total_bytes_s = metrics.algbw_bytes_s(s.payload_bytes, s.allreduce_total_s)
                s.busbw_total_bytes_s = metrics.busbw_bytes_s(
                    s.algbw_total_bytes_s, s.devices, s.exchange
                )

    def _setup_between_counted_s(self) -> float:
        """The probes' compiling (``setup_s``) that fell between counted steps, the
        mean of the workers' sums. A probe's compiling ran between two steps at or
        before its own (the Keras callback's right before it, the trainer's after the
        first step, often a warm-up one): it is counted where a gap between counted
        steps at or before the probe's step is long enough to hold it."""
        inside: dict[int, float] = defaultdict(float)
        for p in self._phases:
            if not p.setup_s:
                continue
            gaps = self._gaps.get(p.worker, [])
            if any(step <= p.step and gap >= 0.9 * p.setup_s for step, gap in gaps):
                inside[p.worker] += p.setup_s
            else:
                inside[p.worker] += 0.0
        return sum(inside.values()) / len(inside) if inside else 0.0

    def _probes_cost_s(self, worker: int, phases: list[PhaseEvent]) -> tuple[float, float]:
        """Their passes alone (between the steps) and what one worker's probes
        (``phases``) cost, as its probe scheduler counted it: their passes plus the excesses of their split steps (``split_excess_s``,
        the scheduler's own) and of the steps right after them (cold caches after the
        probe's own compiled functions), each over the median of the last
        :data:`USUAL_STEPS_WINDOW` usual steps before it (not the run's final median:
        the step time drifts), the excesses summed unfloored (noise cancels) and then
        floored at 0. Recordings without ``split_excess_s`` hold the split step's
        excess floored in ``probe_cost_s``."""
        passes = excess = 0.0
        split_steps = {p.step for p in phases if p.split_excess_s is not None}
        probed = {p.step for p in phases}
        for p in phases:
            cost = p.probe_cost_s or 0.0
            if p.split_excess_s is not None:
                cost -= max(0.0, p.split_excess_s)
                excess += p.split_excess_s
            passes += max(0.0, cost)
        usual: deque[float] = deque(maxlen=USUAL_STEPS_WINDOW)
        after_probe = False
        steps = sorted((n, t) for (w, n), t in self._step_at.items() if w == worker)
        for step, took in steps:
            if step in split_steps:
                after_probe = False  # a split step right after: its excess is that probe's
            elif after_probe:
                after_probe = False
                if usual:
                    excess += took - metrics.median(list(usual))
            else:
                usual.append(took)
            if step in probed:
                after_probe = True
        return passes, passes + max(0.0, excess)

    def _step_halfwidth(self) -> float | None:
        """The median step time's 95 % half-width (``None`` below 3 steps)."""
        return metrics.median_halfwidth(self._step_times) if self._step_times else None

    def _gpu_window(self) -> tuple[str, float, float] | None:
        """``(name, from, to)``: the samples every GPU field is taken over, the
        counted steps' span where some GPU sample falls inside it (``counted steps``),
        else every sample (``whole run``: first to last); ``None`` without samples."""
        times = [t for rows in self._gpu_util.values() for t, _ in rows]
        times += [t for series in self._gpm.values() for rows in series.values() for t, _ in rows]
        if not times:
            return None
        lo, hi = self._counted_from_t, self._last_step_t
        if lo is not None and hi is not None and any(lo <= t <= hi for t in times):
            return "counted steps", lo, hi
        return "whole run", min(times), max(times)

    def _per_gpu(
        self,
        samples: dict[tuple[int, int], list[tuple[float, float]]],
        window: tuple[str, float, float],
    ) -> dict[tuple[int, int], tuple[float, float]]:
        """Each GPU's (mean, median sample) over the ``window``
        (:meth:`_gpu_window`: the counted steps' span, start-up and the end's idle left
        out, else the whole run); a GPU without a sample in it (lost before the counted
        steps) is left out. The mean is a time average (samples are evenly spaced)."""
        _, lo, hi = window
        out: dict[tuple[int, int], tuple[float, float]] = {}
        for key, rows in samples.items():
            values = [v for t, v in rows if lo <= t <= hi]
            if values:
                out[key] = (sum(values) / len(values), metrics.median(values))
        return out

    def _summarize_imbalance(self, s: RunSummary, live: bool = False) -> None:
        window = self._gpu_window()
        if window is not None:
            s.gpu_window, s.gpu_window_s = window[0], max(0.0, window[2] - window[1])
        util: dict[tuple[int, int], tuple[float, float]] = {}
        for samples, field in (
            (self._gpm["sm"], "gpu_sm_activity"),
            (self._gpm["tensor"], "gpu_tensor_activity"),
            (self._gpu_util, "gpu_util"),
        ):
            per_gpu = self._per_gpu(samples, window) if window is not None else {}
            if not per_gpu:  # several GPUs: the median GPU's, below
                continue
            for at, stat in enumerate(("mean", "median")):
                values = [both[at] for both in per_gpu.values()]
                setattr(s, f"{field}_{stat}_pct", metrics.median(values))
            if field == "gpu_util":  # the least busy GPU, by its time average
                util = per_gpu
                key = min(per_gpu, key=lambda k: per_gpu[k][0])
                s.gpu_util_min_pct = per_gpu[key][0]
                s.gpu_util_min_worker, s.gpu_util_min_index = key
        if window is not None:
            self._summarize_held_down(s, window, util, live)
        if len(self._worker_times) > 1:
            per_worker = {w: metrics.median(v) for w, v in self._worker_times.items() if v}
            s.worker_step_time_s = per_worker
            mid = metrics.median(list(per_worker.values()))
            if mid > 0:
                s.worker_imbalance = max(per_worker.values()) / mid

    def _summarize_held_down(
        self,
        s: RunSummary,
        window: tuple[str, float, float],
        util: dict[tuple[int, int], tuple[float, float]],
        live: bool = False,
    ) -> None:
        """The GPUs held down and the imbalance (:mod:`gpuscale.analysis.held_down`)
        over the ``window`` the other GPU fields are taken over (``util``: each GPU's
        mean and median utilization there), of the run's GPUs only (where they are
        not known among those sampled, no GPU is named: a script's run samples every
        GPU of the machine). ``live``: the rows are read again only once the samples
        have grown by a tenth since (or the window's start, the run's end or its
        devices changed): a live view asks for a summary every second, and a day's
        run has over a million samples."""
        _, lo, hi = window
        total = sum(len(r) for r in self._gpu_rows.values())
        state = (lo, self.end is not None, s.devices, s.platform)
        cached = self._held_down_cache
        if not live or cached is None or cached[0] != state or total >= cached[1] * 1.1 + 8:
            rows = {
                key: inside
                for key, all_rows in self._gpu_rows.items()
                if (inside := all_rows.within(lo, hi))
            }
            gpus = run_gpus(rows, s.devices) if s.platform == "gpu" else None
            held = (held_down_gpus(rows, self._gpu_names, gpus) or None) if gpus else None
            cached = self._held_down_cache = (state, total, gpus, held)
        _, _, gpus, s.gpus_held_down = cached
        if gpus is not None:
            s.gpu_imbalance = imbalance({k: util[k][0] for k in gpus if k in util})


class PhaseJudgement(NamedTuple):
    """What :func:`judge_phases` makes of a breakdown."""

    parts_s: float
    """The phases given added up (each as shown, the exposed part floored at 0)."""
    consistent: bool | None
    """Whether they add up to the step within their noise
    (:func:`gpuscale.analysis.metrics.parts_fit_whole`) and nothing in them
    contradicts (``contradiction``); ``None``: not known (no step, or only some
    phases given and together under the step)."""
    contradiction: str | None
    """What contradicts (:func:`_contradiction`), where something does."""


def lone_exchange_words(s: RunSummary) -> str | None:
    """What is said of a one-device run whose probes timed an exposed all-reduce
    (:attr:`RunSummary.lone_exchange_s`): ``the probes timed an exposed all-reduce of
    6.0 ms on 1 device, which exchanges nothing: noise, counted as 0``; ``None``
    where they did not."""
    if s.lone_exchange_s is None:
        return None
    return (
        f"the probes timed an exposed all-reduce of {s.lone_exchange_s * 1000:.1f} ms on "
        "1 device, which exchanges nothing: noise, counted as 0"
    )


def judge_phases(
    *,
    compute_s: float | None,
    exposed_s: float | None,
    apply_s: float | None,
    input_s: float | None,
    whole_s: float | None,
    devices: int,
    halfwidths: Sequence[float | None] = (),
    exposed_err_s: float | None = None,
    alone_s: float | None = None,
    phases: Sequence[PhaseEvent] = (),
) -> PhaseJudgement:
    """Whether a breakdown splits the step ``whole_s`` it is of: the one judgement of
    a run's summary (:attr:`RunSummary.phase_consistent`,
    :attr:`RunSummary.phase_contradiction`) and of a sweep file's point
    (:func:`gpuscale.analysis.sweep.phases_unsplit_why`). The phases must add up to
    the step within their noise (``halfwidths``: each part's and the step's 95 %
    half-widths, at least :data:`~gpuscale.analysis.metrics.PARTS_TOLERANCE` of the
    step), and on several devices nothing in them may contradict
    (:func:`_contradiction`: the exposed all-reduce over twice the whole exchange
    timed alone, ``alone_s``, beyond its noise ``exposed_err_s``; compute alone
    longer than compute + all-reduce, from the ``phases`` probes' timings).
    ``exposed_s`` is the exposed all-reduce unfloored (a median of differences can
    be below 0; counted as 0 in the parts). A phase ``None`` is not given (a sweep
    file may give some only; on one device the exposed exchange is 0): then the
    parts can only miss the step by exceeding it. Which phases are numbers that
    split the step also asks whether compute alone fills it: :func:`unsplit_reason`."""
    exposed = exposed_s if exposed_s is not None else (0.0 if devices <= 1 else None)
    given = [v for v in (compute_s, apply_s, input_s) if v is not None]
    parts = sum(given) + max(0.0, exposed or 0.0)
    complete = compute_s is not None and apply_s is not None and exposed is not None
    consistent = metrics.parts_fit_whole(parts, whole_s, halfwidths)
    if consistent is False and not complete and whole_s and parts < whole_s:
        consistent = None  # short of the step: the phases not given may fill it
    contradiction = None
    if devices > 1 and whole_s and exposed is not None:
        # the parts miss the step only because a negative exposed part was floored
        # at 0: that negative part (compute alone longer) is the reason, not the sum
        floored_apart = (
            exposed < 0
            and consistent is False
            and metrics.parts_fit_whole(parts + exposed, whole_s) is True
        )
        contradiction = _contradiction(
            list(phases), exposed, exposed_err_s, alone_s, whole_s, floored_apart=floored_apart
        )
        if contradiction is not None:
            consistent = False  # noise, not a breakdown: no figure comes from it
    return PhaseJudgement(parts, consistent, contradiction)


UNSPLIT_APART = "the phases do not add up to the step"
UNSPLIT_FILLS = "compute alone fills the step"


def _compute_fills(compute_s: float | None, whole_s: float | None) -> bool:
    return compute_s is not None and bool(whole_s) and compute_s >= (whole_s or 0.0)


def unsplit_reason(
    *, consistent: bool | None, compute_s: float | None, whole_s: float | None, devices: int
) -> str | None:
    """Why a breakdown's phases are not numbers that split the step ``whole_s``, in
    the words every view says it in (:attr:`RunSummary.unsplit_why`): they do not
    add up to it or contradict each other (``consistent`` ``False``, from
    :func:`judge_phases`), or, on several devices, compute alone fills it (a
    probe's pass and the steps' median come from different moments: nothing is
    left of the step to split; on one device compute is the step less apply, and a
    pass a little over the median is noise). ``None``: they split it."""
    if consistent is False:
        return UNSPLIT_APART
    if devices > 1 and _compute_fills(compute_s, whole_s):
        return UNSPLIT_FILLS
    return None


def _apart_ms(longer_s: float, shorter_s: float) -> tuple[str, str]:
    """Two times in ms with the decimals (1 to 3) that show them apart: a sub-ms step's
    0.74 and 0.66 ms are not "0.7 ms is longer than 0.7 ms"."""
    for digits in (1, 2, 3):
        pair = (f"{longer_s * 1000:.{digits}f}", f"{shorter_s * 1000:.{digits}f}")
        if pair[0] != pair[1]:
            break
    return pair


def _contradiction(
    phases: list[PhaseEvent],
    exposed_s: float,
    err_s: float | None,
    alone_s: float | None,
    whole_s: float,
    *,
    floored_apart: bool = False,
) -> str | None:
    """What in the probes' medians cannot be a breakdown, beyond their noise (the
    exposed all-reduce's half-width, at least :data:`~gpuscale.analysis.metrics.PARTS_TOLERANCE`
    of the step ``whole_s``: below 3 probes no noise is known): compute alone longer
    than compute + all-reduce (the exposed part, unfloored, below 0), or the exposed
    all-reduce over twice the all-reduce timed alone, ``alone_s`` (the compute pass
    waits for every replica too, so a slow replica cannot explain it; inside a step
    the exchange competes with the compute for cores or SMs, which can slow it, but
    not to several times its cost alone). ``floored_apart``: the exposed part is
    below 0 and flooring it is what keeps the parts from adding up to the step (they
    add up unfloored), so that negative part is the contradiction even within the
    noise. ``None``: nothing contradicts."""
    noise = max(metrics.PARTS_TOLERANCE * whole_s, err_s or 0.0)
    if exposed_s < -noise or (floored_apart and exposed_s < 0):
        kept = [p for p in phases if p.compute_allreduce_s is not None]
        if kept:
            orders = [p.compute_first for p in kept]
            compute = metrics.balanced_median([p.compute_s for p in kept], orders).median
            fused = metrics.balanced_median([p.compute_allreduce_s for p in kept], orders).median
            why = (
                ", beyond their noise"
                if exposed_s < -noise
                else f" (the exposed all-reduce, {exposed_s * 1000:.1f} ms, counted as 0, is "
                "why the phases miss the median step)"
            )
            compute_ms, fused_ms = _apart_ms(compute, fused)
            return (
                f"compute alone {compute_ms} ms is longer than compute + all-reduce "
                f"{fused_ms} ms{why}"
            )
    if alone_s is not None and exposed_s > 2 * alone_s + noise:
        return (
            f"the exposed all-reduce {exposed_s * 1000:.1f} ms is over twice the whole "
            f"exchange timed alone, {alone_s * 1000:.1f} ms, beyond their noise"
        )
    return None


_POOLED_FIELDS = (
    "step_time_s",
    "compute_s",
    "allreduce_s",
    "apply_s",
    "input_s",
    "allreduce_total_s",
    "compute_allreduce_s",
)
"""A probed step's timings that :func:`_per_probed_step` averages over its workers."""


def _per_probed_step(phases: list[PhaseEvent]) -> list[PhaseEvent]:
    """One breakdown per probed step: the workers of a multi-worker run probe the same
    collective step together, so their breakdowns of it are one sample, not several
    (counting each would narrow every 95 % range by about sqrt(workers)). A step
    several workers probed becomes the mean of their timings (a timing some lack: the
    mean of those that have it, else none); a step one worker probed is kept as it is."""
    by_step: dict[int, list[PhaseEvent]] = defaultdict(list)
    for p in phases:
        by_step[p.step].append(p)
    pooled = []
    for step in sorted(by_step):
        group = by_step[step]
        if len(group) == 1:
            pooled.append(group[0])
            continue
        means: dict[str, float | None] = {}
        for field in _POOLED_FIELDS:
            known = [v for p in group if (v := getattr(p, field)) is not None]
            means[field] = sum(known) / len(known) if known else None
        if any(p.compute_allreduce_s is None for p in group):
            means["compute_allreduce_s"] = None  # differences only where all kept the timing
        pooled.append(msgspec.structs.replace(group[0], **means))
    return pooled


def _exposed(p: PhaseEvent) -> float:
    """One probe's exposed all-reduce, unfloored when the probe kept its timing."""
    if p.compute_allreduce_s is None:
        return p.allreduce_s
    return p.compute_allreduce_s - p.compute_s


def _apply(p: PhaseEvent) -> float:
    """One probe's apply, unfloored when the probe kept its timing."""
    if p.compute_allreduce_s is None:
        return p.apply_s if p.probe_cost_s is None else p.step_time_s - p.compute_s
    return p.step_time_s - p.compute_allreduce_s


def more_steps_for_precision(
    asked: float,
    *,
    steps: int,
    step_rel: float | None,
    probes: int | None = None,
    share_err: float | None = None,
    per_probe: float | None = None,
) -> int | None:
    """Counted steps more that would likely pin the numbers down to ``± asked``.

    A median's 95 % half-width shrinks as ``1/sqrt(n)``: ``n`` steps at relative
    half-width ``step_rel`` need ``n (step_rel / asked)^2`` in all; ``probes``
    probes at share half-width ``share_err`` need
    :func:`~gpuscale.analysis.metrics.probes_for_precision` in all (at least 3: below
    3 nothing is known yet and that is a lower bound), which come one every
    ``per_probe`` counted steps (what the budget pays for, or the fixed period;
    default the run's own ``steps / probes``): ``needed x per_probe`` steps in all.
    ``None``: no step counted or no probe. 0: reached."""
    if steps <= 0:
        return None
    more = 0.0
    if step_rel is None:
        more = max(more, metrics.MIN_SAMPLES_FOR_UNCERTAINTY - steps)
    elif step_rel > asked:
        more = max(more, steps * ((step_rel / asked) ** 2 - 1))
    if probes is not None:
        if probes <= 0:
            return None
        if share_err is None or share_err > asked:
            needed = metrics.probes_for_precision(probes, share_err, asked)
            rate = per_probe if per_probe else steps / probes
            total = needed * rate  # the budget pays for probes as the steps go by
            more = max(more, total - steps if total > steps else (needed - probes) * rate)
    return int(math.ceil(more))


def unsplit_within(s: RunSummary, target: float | None) -> bool:
    """The exposed share's spread is within ``target`` (``comm_share_err``) but the
    phases do not split the step (:attr:`RunSummary.unsplit_why`): the share is then
    said to be not resolved (``exposed share spread ±1.5 points across probes, but the
    phases do not add up to the step: not resolved``) rather than known, and a
    ``--precision`` of ``target`` is not reached on it."""
    return (
        s.devices > 1
        and s.unsplit_why is not None
        and s.comm_share_err is not None
        and target is not None
        and s.comm_share_err <= target
    )


def phase_breakdown(
    phases: Iterable[PhaseEvent],
    *,
    step_time_s: float | None,
    step_halfwidth_s: float | None,
    devices: int,
) -> RunSummary:
    """What a run's summary makes of these probes (one worker's, none in the warm-up)
    against the median counted step ``step_time_s`` (its 95 % half-width
    ``step_halfwidth_s``) on ``devices`` replicas: a :class:`RunSummary` with its
    phase fields alone (``phase_consistent``, :attr:`RunSummary.phases_split_step`,
    :attr:`RunSummary.unsplit_why`, ``comm_share_err``, ...). The probe scheduler
    asks it, so that a ``--precision`` run stops on a breakdown only where its
    summary will call that breakdown resolved."""
    acc = RunAccumulator()
    acc._phases = list(phases)
    s = RunSummary(devices=max(1, devices), step_time_s=step_time_s)
    acc._summarize_phases(s, step_halfwidth_s)
    return s


def summarize(events: Iterable[object]) -> RunSummary:
    """The summary of one run's events (a recording or a finished live run)."""
    acc = RunAccumulator()
    acc.extend(events)
    return acc.summary()


RAW_PHASES_KEY = "raw_phases"
"""Where :func:`summary_document` keeps, as measured, the probes' figures the views do
not say as numbers (not resolved), under their own names."""

_UNSPLIT_NULLS = ("compute_s", "compute_err_s", "apply_s", "apply_err_s")
"""The phases no view says as numbers where they do not split the step."""
_UNSPLIT_EXPOSED_NULLS = (
    "allreduce_s",
    "allreduce_err_s",
    "comm_share",
    "comm_share_err",
    "compute_comm_ratio",
    "algbw_bytes_s",
    "busbw_bytes_s",
)
"""The exposed exchange and what follows from it, on several devices, where the
phases do not split the step."""
_EXPOSED_NOISE_NULLS = ("comm_share", "compute_comm_ratio", "algbw_bytes_s", "busbw_bytes_s")
"""What follows from an exposed all-reduce within its own noise (the views say it as
``< X ms (not resolved)``, an upper bound, and no share)."""


def unresolved_fields(s: RunSummary) -> tuple[str, ...]:
    """The fields of ``s`` that the views (``run``, ``replay``, the dashboard) do not
    say as numbers: where the phases do not split the step (:attr:`RunSummary.unsplit_why`),
    compute and apply and, on several devices, the exposed all-reduce with its share,
    compute:communication and the effective bandwidths; where they split it but the
    exposed all-reduce is within its own noise (:func:`gpuscale.analysis.metrics.resolved`),
    its share, compute:communication and those bandwidths. ``recommend --json``
    writes ``null`` for the same (its count's exposed share "not resolved")."""
    if not s.phase_steps:
        return ()
    several = s.devices > 1
    if s.unsplit_why is not None:
        return _UNSPLIT_NULLS + (_UNSPLIT_EXPOSED_NULLS if several else ())
    if several and not metrics.resolved(s.allreduce_s, s.allreduce_err_s):
        return _EXPOSED_NOISE_NULLS
    return ()


def summary_document(s: RunSummary) -> dict:
    """``s`` as a recording's end event holds it and ``run --json`` prints it: its
    fields, with ``null`` for what the views call not resolved
    (:func:`unresolved_fields`), so that no reader takes them for figures; the values
    as measured are kept under :data:`RAW_PHASES_KEY` (``"raw_phases": {"compute_s":
    0.0925, ...}``), for reference, never a breakdown. :func:`summary_from_document`
    reads it back whole."""
    doc = msgspec.to_builtins(s)
    unsaid = unresolved_fields(s)
    raw = {name: value for name in unsaid if (value := getattr(s, name)) is not None}
    if unsaid:
        doc.update(dict.fromkeys(unsaid))
    if raw:
        doc[RAW_PHASES_KEY] = raw
    return doc


def summary_from_document(doc: dict) -> dict:
    """A summary as :func:`summary_document` wrote it, with the values it kept as
    measured under :data:`RAW_PHASES_KEY` back in their fields (what the views need
    to say them: ``≈ the whole step``, ``< X ms (not resolved)``). Any other dict
    (an older recording's summary) is returned as it is."""
    raw = doc.get(RAW_PHASES_KEY)
    if not isinstance(raw, dict):
        return doc
    out = {k: v for k, v in doc.items() if k != RAW_PHASES_KEY}
    out.update({k: v for k, v in raw.items() if k in _RAW_FIELDS})
    return out


_RAW_FIELDS = frozenset(_UNSPLIT_NULLS + _UNSPLIT_EXPOSED_NULLS)


def as_said(summary: dict) -> dict:
    """A recorded summary (a dict) in :func:`summary_document`'s form, whatever wrote
    it (an older gpuscale wrote every figure as a number): ``null`` for what the views
    call not resolved, the values under :data:`RAW_PHASES_KEY`. What does not read
    as a :class:`RunSummary` is returned as it is."""
    whole = summary_from_document(summary)
    try:
        s = msgspec.convert(whole, RunSummary, str_keys=True)
    except msgspec.ValidationError:
        return summary
    unsaid = unresolved_fields(s)
    raw = {name: whole[name] for name in unsaid if whole.get(name) is not None}
    out = {k: v for k, v in whole.items() if k != RAW_PHASES_KEY}
    out.update(dict.fromkeys(unsaid))
    if raw:
        out[RAW_PHASES_KEY] = raw
    return out


def with_defaults(summary: dict) -> dict:
    """A summary as recorded (``omit_defaults`` drops a field equal to its default:
    ``scaling`` when ``weak``, ``devices`` when 1) with every such field said, so a
    number read alone (``--json``) says what it is of; ``None`` fields ("not
    measured") stay out, except the input wait of a probed run (``null``: the
    probes ran but did not measure it), and keys the summary has are kept as they are,
    but for what the run does not know: ``exchange`` of a run whose strategy is
    ``unknown``, and ``scaling`` and the batches of a run that says no batch, are
    ``null``."""
    summary = as_said(summary)  # null for what the views call not resolved
    said = {
        f.name: f.default
        for f in msgspec.structs.fields(RunSummary)
        if f.default is not None and f.default is not msgspec.NODEFAULT
    }
    if summary.get("phase_steps"):  # probed, but the input wait not measured: null
        said.update(dict.fromkeys(_NULL_WHEN_PROBED))
    out = {**said, **summary}
    # What the run does not say is not said for it (a script without gpuscale's
    # callback, or one that failed before it: "strategy unknown, batch unknown"):
    # null, never the defaults "ring" and "weak" nor a batch of 0.
    if out["strategy"] == "unknown" and "exchange" not in summary:
        out["exchange"] = None
    if not out["global_batch"] and not out["per_replica_batch"]:
        out.update(dict.fromkeys(_NULL_WITHOUT_BATCH))
        if "scaling" in summary:  # said by the run itself: kept
            out["scaling"] = summary["scaling"]
    return out


_NULL_WITHOUT_BATCH = ("scaling", "per_replica_batch", "global_batch")
"""Fields :func:`with_defaults` says as ``None`` for a run that says no batch: its
scaling mode is not known either."""

_NULL_WHEN_PROBED = ("input_s", "input_share")
"""Fields :func:`with_defaults` says as ``None`` (JSON ``null``) where the run was
probed but left them out: the input wait the Keras callback's probe cannot see."""


NO_STEP_TIMES_IN_RUN = "no step times in this run (telemetry only)"
"""What the views say where step times would be, for a run :func:`without_step_times`."""


def without_step_times(summary: RunSummary | None) -> bool:
    """Whether the run has no step times and will have none: a script without
    gpuscale's callback, or a run that ended before its first step."""
    if summary is None or summary.steps_total:
        return False
    return summary.no_step_times or summary.status != "running"
