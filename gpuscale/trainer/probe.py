"""The phase probe: where a step's time goes, measured by timing compiled parts
of a step, each synchronised (a value of every replica is fetched on the host)
(imports TensorFlow). One implementation, used by the built-in trainer
(:mod:`gpuscale.trainer.loop`, on the real batch and loss) and by the Keras
callback (:mod:`gpuscale.keras`, on a synthesised batch of the real shape).

The passes
----------
* *compute*: forward + backward on every replica, no gradient exchange; it
  returns a value read from every gradient so nothing is pruned.
* *compute + all-reduce*: the same plus ``get_replica_context().all_reduce(SUM,
  grads)``, the call the optimizer makes (Keras 3 sums the gradients across
  replicas inside ``optimizer.apply``).
* *all-reduce alone*: an all-reduce of buffers shaped like the gradients, with
  nothing to overlap with: the full cost of the exchange. It costs only
  communication, so it is cheap beside the passes above.

Two methods
-----------
* ``"split-step"`` (:meth:`PhaseProbe.measure_split`, the built-in trainer,
  which owns its step): the probed step itself trains split in two
  (:mod:`gpuscale.trainer.split_step`): *compute + all-reduce* returning the
  summed gradients, then ``optimizer.apply`` of them without a second sum. So
  T(compute + all-reduce) and T(apply) come from a step that trains; the only
  extra pass is *compute* (and the all-reduce alone). The compute pass runs just
  before the split step in one probe and just after it in the next, so what the
  first pass after a usual step pays (cold caches, a switch of compiled
  function) falls on each alike: the summaries take each order's median and
  average the two (:func:`gpuscale.analysis.metrics.balanced_median`; pooled, the
  two orders' values form two clusters whose median lands on either by chance).
  The split step
  costs a little more than the usual fused one (a host synchronisation between
  the halves, no overlap of the update with the exchange): that excess shows in
  its own step time and the scheduler counts it into the probe's cost.
  With one replica nothing extra runs at all: T(compute) is the split step's
  first half (its all-reduce of one replica is no exchange).
* ``"differenced"`` (:meth:`PhaseProbe.measure`: the Keras callback, which
  cannot split ``fit``'s step; the trainer where the split cannot run): between
  two training steps, *compute* and *compute + all-reduce* as stand-ins of the
  step, their order alternating between probes, then the all-reduce alone; with
  one replica only *compute*. About twice the split method's extra work.

:func:`phase_event` turns the timings and the probed step's time into a
:class:`~gpuscale.events.schema.PhaseEvent`: ``allreduce_s`` = T(compute +
all-reduce) - T(compute) and ``apply_s`` = step - T(compute + all-reduce), with
"step" the usual step's training part (the scheduler's reference, for both
methods; with the split method both measured halves are first scaled to it,
:func:`split_to_usual`, since the split step's own time also holds what
splitting costs, so apply is T(apply) x usual / split step), each floored at 0 in
the event, with the raw T(compute +
all-reduce) kept (``compute_allreduce_s``) so the summary can take unfloored
medians and say how well each phase is known. ``probe_cost_s`` is what the
probe cost: the wall clock of its extra passes and, with the split method, what
the split step took over the usual step when that was more (the trainer adds
it: only the scheduler knows the usual step).

When probes run is :class:`gpuscale.trainer.schedule.ProbeScheduler`'s decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import tensorflow as tf

from gpuscale.events.schema import PhaseEvent


class ProbeTimes(msgspec.Struct, frozen=True, kw_only=True):
    """One probe's timings, in seconds (``None``: not run, e.g. one replica)."""

    compute_s: float
    compute_allreduce_s: float | None
    allreduce_alone_s: float | None
    cost_s: float
    """Wall clock of all the probe's passes (what the run paid for it)."""
    compute_first: bool | None = None
    """The compute pass ran before the compute + all-reduce pass (None: one pass)."""


def touch(tensors: Sequence[Any]) -> tf.Tensor:
    """A cheap scalar that depends on every tensor (first element of each), so
    nothing is pruned and fetching it waits for all of them."""
    parts = []
    for t in tensors:
        if isinstance(t, tf.IndexedSlices):
            t = t.values
        parts.append(tf.cast(tf.reshape(t, [-1])[0], tf.float32))
    return tf.add_n(parts)


class PhaseProbe:
    """The probe's compiled passes for one model on one strategy.

    ``replica_gradients(*batch)`` runs forward + backward on one replica and
    returns the (dense) gradients; ``variables`` are the trainable variables
    (their shapes and dtypes give the all-reduce-alone buffers). ``batch`` is
    what ``strategy.run`` gets as ``args``: a tuple of distributed values, or of
    plain tensors every replica receives alike."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        variables: Sequence[Any],
        replica_gradients: Callable[..., list],
    ):
        self.strategy = strategy
        self.replicas = int(strategy.num_replicas_in_sync)
        self.num_tensors = len(variables)
        sum_op = tf.distribute.ReduceOp.SUM

        def compute_replica(*batch: Any) -> tf.Tensor:
            return touch(replica_gradients(*batch))

        def grads_replica(*batch: Any) -> tf.Tensor:
            grads = replica_gradients(*batch)
            return touch(tf.distribute.get_replica_context().all_reduce(sum_op, grads))

        def allreduce_replica(buffers: list) -> tf.Tensor:
            # identity: placed on the replica's device (MultiWorkerMirroredStrategy
            # with one local device passes plain tensors, which have no device)
            buffers = [tf.identity(b) for b in buffers]
            return touch(tf.distribute.get_replica_context().all_reduce(sum_op, buffers))

        def make_buffers() -> list:
            rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
            return [tf.fill(v.shape, tf.cast(rid + 1.0, v.dtype)) for v in variables]

        self.compute_fn = tf.function(lambda batch: strategy.run(compute_replica, args=batch))
        self.grads_fn = tf.function(lambda batch: strategy.run(grads_replica, args=batch))
        self.allreduce_fn = tf.function(
            lambda buffers: strategy.run(allreduce_replica, args=(buffers,))
        )
        self._buffers = (
            tf.function(lambda: strategy.run(make_buffers))() if self.replicas > 1 else None
        )
        self._ready = False
        self._grads_ready = False
        """The two-pass probe's compute + all-reduce pass is compiled (a split-step
        probe never runs it: :meth:`prepare` with ``split``)."""
        self.probes = 0
        """Probes measured so far (the passes' order alternates between probes)."""

    def sync(self, out: Any) -> None:
        """Wait until every replica's part of ``out`` is on the host."""
        for value in self.strategy.experimental_local_results(out):
            value.numpy()

    def _timed(self, fn: Callable, arg: Any) -> float:
        start = time.perf_counter()
        self.sync(fn(arg))
        return time.perf_counter() - start

    @property
    def ready(self) -> bool:
        """Whether every pass is compiled (:meth:`prepare` has nothing left to do)."""
        return self._ready and (self._grads_ready or self.replicas == 1)

    def ready_for(self, *, split: bool) -> bool:
        """Whether the passes a probe of this kind runs are compiled."""
        return self._ready if split else self.ready

    def prepare(self, batch: tuple, *, split: bool = False) -> None:
        """Trace and run each pass once, not counted in a probe's cost (compilation
        is not a probe: callers time it apart, ``PhaseEvent.setup_s``). ``split``:
        only the passes a split-step probe runs (compute, the all-reduce alone), not
        the two-pass probe's compute + all-reduce pass, which it never runs."""
        if not self._ready:
            self.sync(self.compute_fn(batch))
            if self.replicas > 1:
                self.sync(self.allreduce_fn(self._buffers))
            self._ready = True
        if not split and not self._grads_ready and self.replicas > 1:
            self.sync(self.grads_fn(batch))
            self._grads_ready = True

    def measure_split(
        self, batch: tuple, split_step: Callable[[tuple], tuple[float, float]]
    ) -> tuple[ProbeTimes, float]:
        """One probe on a training step run split (the built-in trainer's
        :class:`~gpuscale.trainer.split_step.SplitStep`): ``split_step(batch)``
        trains on ``batch`` and returns (T(compute + all-reduce), T(apply)); the
        compute pass runs before or after it, alternately, and the all-reduce
        alone after both. Returns the timings, whose ``cost_s`` holds only the
        extra passes, and the step's training time T(reduce) + T(apply). With one
        replica nothing extra runs: T(compute) is the split step's first half."""
        if self.replicas > 1:
            self.prepare(batch, split=True)
        start = time.perf_counter()
        compute_s = alone_s = None
        extra_s = 0.0
        compute_first = self.probes % 2 == 0  # the order alternates between probes
        if self.replicas > 1 and compute_first:
            compute_s = self._timed(self.compute_fn, batch)
        split_start = time.perf_counter()
        reduce_s, apply_s = split_step(batch)
        extra_s -= time.perf_counter() - split_start
        if self.replicas > 1:
            if compute_s is None:  # the other order: what follows a step, balanced in the summary
                compute_s = self._timed(self.compute_fn, batch)
            alone_s = self._timed(self.allreduce_fn, self._buffers)
        self.probes += 1
        extra_s += time.perf_counter() - start
        if compute_s is None:  # one replica
            return ProbeTimes(
                compute_s=reduce_s, compute_allreduce_s=None, allreduce_alone_s=None, cost_s=0.0
            ), reduce_s + apply_s
        return ProbeTimes(
            compute_s=compute_s,
            compute_allreduce_s=reduce_s,
            allreduce_alone_s=alone_s,
            cost_s=extra_s,
            compute_first=compute_first,
        ), reduce_s + apply_s

    def measure(self, batch: tuple) -> ProbeTimes:
        """One probe: each pass once, timed alone (a single probe is noisy; the
        summary takes medians over many)."""
        self.prepare(batch)
        start = time.perf_counter()
        grads_s = alone_s = None
        compute_first = None if self.replicas == 1 else self.probes % 2 == 0
        if self.replicas == 1:
            compute_s = self._timed(self.compute_fn, batch)
        elif compute_first:
            compute_s = self._timed(self.compute_fn, batch)
            grads_s = self._timed(self.grads_fn, batch)
        else:  # the other order: what the first pass after a step pays, balanced in the summary
            grads_s = self._timed(self.grads_fn, batch)
            compute_s = self._timed(self.compute_fn, batch)
        if self.replicas > 1:
            alone_s = self._timed(self.allreduce_fn, self._buffers)
        self.probes += 1
        return ProbeTimes(
            compute_s=compute_s,
            compute_allreduce_s=grads_s,
            allreduce_alone_s=alone_s,
            cost_s=time.perf_counter() - start,
            compute_first=compute_first,
        )


def phase_event(
    times: ProbeTimes,
    *,
    step: int,
    step_time_s: float,
    worker: int = 0,
    input_s: float = 0.0,
    payload_bytes: int | None = None,
    num_tensors: int | None = None,
    method: str = "differenced",
    split_excess_s: float | None = None,
    setup_s: float | None = None,
) -> PhaseEvent:
    """The PhaseEvent of one probe against the probed step's time (see the module
    docstring for the differences)."""
    fused_s = times.compute_allreduce_s
    exchanged_s = times.compute_s if fused_s is None else fused_s
    return PhaseEvent(
        t=time.time(),
        worker=worker,
        step=step,
        step_time_s=step_time_s,
        compute_s=times.compute_s,
        allreduce_s=0.0 if fused_s is None else max(0.0, fused_s - times.compute_s),
        apply_s=max(0.0, step_time_s - exchanged_s),
        input_s=input_s,
        payload_bytes=payload_bytes,
        num_tensors=num_tensors,
        method=method,
        allreduce_total_s=times.allreduce_alone_s,
        compute_allreduce_s=fused_s,
        probe_cost_s=times.cost_s,
        split_excess_s=split_excess_s,
        setup_s=setup_s,
        compute_first=times.compute_first,
    )


def split_to_usual(times: ProbeTimes, split_train_s: float, usual_s: float) -> ProbeTimes:
    """A split-step probe's two measured halves scaled to the usual step's training
    part ``usual_s``: T(reduce)' = T(reduce) x u / (T(reduce) + T(apply)) (the
    probe's ``compute_allreduce_s``; with one replica its ``compute_s``, the same
    half), so T(apply)' = u - T(reduce)' = T(apply) x u / (T(reduce) + T(apply)).
    The parts keep the split step's proportions and add up to the step a user pays
    (the split step runs a little longer: its halves synchronise); neither half is
    thrown away or forced to 0. The compute pass, timed on its own, is kept as
    measured. Unchanged where either time is not positive."""
    if split_train_s <= 0 or usual_s <= 0:
        return times
    scale = usual_s / split_train_s
    if times.compute_allreduce_s is None:  # one replica: compute is the split step's first half
        return msgspec.structs.replace(times, compute_s=times.compute_s * scale)
    return msgspec.structs.replace(times, compute_allreduce_s=times.compute_allreduce_s * scale)


def exposed_share(times: ProbeTimes, step_time_s: float) -> float:
    """What this probe says about the step, as one number the scheduler can pin
    down: the exposed all-reduce's share of the step (unfloored), or with one
    replica the compute's share."""
    if step_time_s <= 0:
        return 0.0
    if times.compute_allreduce_s is None:
        return times.compute_s / step_time_s
    return (times.compute_allreduce_s - times.compute_s) / step_time_s
