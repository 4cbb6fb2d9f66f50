"""The data-parallel training loop and its phase measurement (imports TensorFlow).

How a step is measured
----------------------
Every step but a probed one runs ``train_fn``, the real step: on every replica
forward and backward pass, then ``optimizer.apply(grads)``. Keras 3's TensorFlow optimizer
sums the gradients across replicas itself when it is called in a replica
context (``keras/src/backend/tensorflow/optimizer.py``: ``_backend_update_step``
calls ``_all_reduce_sum_gradients``, i.e.
``get_replica_context().all_reduce(SUM, grads)``; Keras 3 has no switch to turn
that off, unlike Keras 2's ``skip_gradients_aggregation`` /
``experimental_aggregate_gradients``; the trainer's Adam has one, for the split
step alone: :class:`~gpuscale.trainer.split_step.SkippableSum`). So the optimizer gets the per-replica
gradients and does the one all-reduce, exactly as ``model.fit`` does; the loss
is averaged over the *global* batch so the sum is the mean gradient.
The step time (:class:`StepEvent`) is the host wall clock from asking the input
for the batch until the host holds, after the call returned, a small value from
every replica (the optimizer's step count): the whole step, the update included.
No edge from the update to that value is needed (nor built: reading every updated
variable cost 10 ops a replica, about 1 % of a small CPU step): a
``tf.function``'s stateful ops (the variable assignments) are its control
outputs, so on CPU devices the call returns only after every one of them ran (a
step whose update took 157 ms returned after 163 ms with a value that does not
depend on it; its cheap version in 2 ms), and on a GPU the call returns once
every kernel is queued and fetching a value from a device waits for everything
queued on that device's compute stream (the device-to-host copy waits for it),
the update included. So asynchronous dispatch cannot make a step look shorter
than it is, as long as the value is fetched from every replica's device after the
call (a value summed on the host inside the function would not wait on a GPU).

When :class:`gpuscale.trainer.schedule.ProbeScheduler` says so after a step
(within the probe budget, or after every K-th step with ``--phase-every K``),
the *next* step is probed (method ``split-step``, :mod:`gpuscale.trainer.probe`):
it trains split in two compiled functions (:mod:`gpuscale.trainer.split_step`),
*reduce* (forward + backward + ``all_reduce(SUM, grads)``, the summed gradients
fetched to the host's wait) and *apply* (``optimizer.apply`` of them, the
optimizer's own sum switched off, synchronised as ``train_fn`` is), and the same
batch goes through the compute-alone pass (just before or just after, in turn)
and an all-reduce of gradient-shaped buffers. The breakdown
(:class:`PhaseEvent`) is

* ``compute_s`` = T(compute)
* ``allreduce_s`` = T(reduce) - T(compute), floored at 0: the *exposed*
  all-reduce, what the step waits for the gradient exchange
* ``apply_s`` = T(apply) x T(train) / (T(reduce) + T(apply)): the optimizer
  update as the split step measured it, with T(train) the usual step's training
  part (``ProbeScheduler.reference_step_s`` less the input wait), the
  ``step_time_s`` of the event, as for the other method. Both halves are scaled
  by T(train) / (T(reduce) + T(apply)) (:func:`~gpuscale.trainer.probe.split_to_usual`;
  the event's ``compute_allreduce_s`` is T(reduce) scaled): the split step also
  holds what splitting costs (one more synchronisation and dispatch), so unscaled
  the parts would add up to the split step, a little longer than the steps a user
  runs; scaled they add up to the usual step, and apply is never a 0 that a noisy
  T(reduce) forced
* ``input_s``: the probed step's wait for its batch from the input pipeline
* ``allreduce_total_s``: the all-reduce of gradient-shaped buffers timed alone.

The split step's StepEvent is its input wait + T(reduce) + T(apply) (the compute
pass is no part of it): a little more than a fused step, which the scheduler
counts into the probe's cost. Where the split cannot run (CentralStorageStrategy,
an optimizer or a Keras that cannot skip its sum:
:attr:`SplitStep.problem`), the probe runs after the step instead, the two-pass
method ``differenced``: T(compute) and T(compute + all-reduce) as stand-ins,
``apply_s`` = T(train) - T(compute + all-reduce) with T(train) the usual step's
training part (``ProbeScheduler.reference_step_s`` less the input wait). If the scheduler asks after the last step, no step is
left to split and that probe does not run.

Several workers (``--strategy multi-worker``) probe after the same steps: by
budget, worker 0's schedule decides, its ballot summed with the gradients in
the step's own all-reduce (``voting_train_fn``: the same step, the optimizer's
sum done once, by the step, as the split step's *reduce* does), so every
worker learns after step k what worker 0 asked for after step k - 1 and splits
step k + 1 (:mod:`gpuscale.trainer.vote`; the split step carries no ballot, and
none is read after it). Every step but a split one of a multi-worker run
(``--phase-every K`` too) carries each worker's stop in the same sum, so a stop
asked of any worker ends every worker's run after the same step.

With one replica nothing is exchanged: the split step alone is the probe
(T(compute) = T(reduce)), the exposed all-reduce is 0 and ``allreduce_total_s``
is None.

``payload_bytes`` is the bytes of all trainable variables in the gradient dtype
(sparse embedding gradients are made dense, so that is what travels);
``num_tensors`` the gradient tensors handed to the all-reduce (TensorFlow may
pack them into fewer messages).

What it cannot see
------------------
* Overlap: where communication runs alongside computation (XLA or other
  schedulers), the difference only shows the part the step waits for; the
  hidden part shows in ``allreduce_total_s`` alone.
* On CPU logical devices the "all-reduce" is a memory copy within one process;
  its cost says nothing about PCIe or NVLink. Treat CPU runs as a demonstration.
* The functions are compiled separately; Grappler (or XLA) may fuse or
  schedule them slightly differently, so the terms are estimates that can be
  off by the noise of one step (the summary states each phase's uncertainty).
  In the split step the update cannot start before the whole exchange is done,
  as it may in the fused ``train_fn``: T(apply) is the update alone, not
  overlapped.
* One sample per probe: a single probe is noisy, the medians over many are not.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator

import keras
import msgspec
import numpy as np
import tensorflow as tf

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import DeviceInfo, LogEvent, PhaseEvent, StepEvent
from gpuscale.trainer.models import BuiltModel, build_model
from gpuscale.trainer.options import CPU_ALL_REDUCE_HINT, TrainConfig
from gpuscale.trainer.plan import DevicePlan
from gpuscale.trainer.probe import (
    PhaseProbe,
    ProbeTimes,
    exposed_share,
    phase_event,
    split_to_usual,
)
from gpuscale.trainer.schedule import (
    DEFAULT_PRECISION,
    FIRST_PROBE_STEPS,
    FIRST_SPLIT_PROBE_STEPS,
    ProbeScheduler,
)
from gpuscale.trainer.sizing import Sizing, resolve_sizing
from gpuscale.trainer.split_step import (
    SkippableSum,
    SplitStep,
    inner_optimizer,
    with_skippable_sum,
)
from gpuscale.trainer.vote import OTHER_REPLICAS_SHARE, StepVote, step_ballot, stop_agreed


def setup_devices(config: TrainConfig) -> DevicePlan:
    """Pick the devices; on a machine without a GPU split the CPU into N logical
    devices. Must run before TensorFlow initialises its devices. GPU selection by
    index (``--gpus``) is done earlier, through ``CUDA_VISIBLE_DEVICES``."""
    if config.strategy == "multi-worker":  # the strategy must come before the devices
        from gpuscale.trainer import multiworker

        return multiworker.setup(config)[0]
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        n = config.devices or (1 if config.strategy == "one-device" else len(gpus))
        if n > len(gpus):
            raise GpuscaleError(f"--devices {n}: TensorFlow sees only {len(gpus)} GPU(s)")
        chosen = gpus[:n]
        tf.config.set_visible_devices(chosen, "GPU")
        for gpu in chosen:
            tf.config.experimental.set_memory_growth(gpu, True)
        logical = tf.config.list_logical_devices("GPU")
        infos = []
        for i, dev in enumerate(logical):
            details = tf.config.experimental.get_device_details(chosen[i]) or {}
            index = config.gpus[i] if config.gpus else i
            infos.append(
                DeviceInfo(
                    index=index,
                    name=details.get("device_name", "GPU"),
                    kind="gpu",
                    tf_name=dev.name,
                )
            )
        return DevicePlan("gpu", [d.name for d in logical], infos)
    hint = ""
    if _nvidia_driver_present():
        hint = (
            " although an NVIDIA driver is loaded: this TensorFlow has no CUDA support "
            "(pip install 'tensorflow[and-cuda]', or gpuscale's [cuda] extra)"
        )
    if config.gpus is not None:
        raise GpuscaleError(
            f"--gpus: TensorFlow sees no GPU{hint or ' on this machine'}; "
            "use --devices N for N logical CPU devices"
        )
    n = config.devices or (1 if config.strategy == "one-device" else 2)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
    )
    logical = tf.config.list_logical_devices("CPU")
    infos = [
        DeviceInfo(index=i, name=f"CPU logical device {i}", kind="cpu-logical", tf_name=d.name)
        for i, d in enumerate(logical)
    ]
    return DevicePlan(
        "cpu-logical",
        [d.name for d in logical],
        infos,
        f"TensorFlow sees no GPU{hint}." if hint else "",
    )


def _nvidia_driver_present() -> bool:
    """The NVIDIA kernel driver is loaded (so GPUs exist even if TensorFlow cannot use them)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def build_strategy(
    config: TrainConfig, plan: DevicePlan
) -> tuple[tf.distribute.Strategy, str | None, str]:
    """The tf.distribute strategy for ``config`` on ``plan``'s devices.

    Returns ``(strategy, cross_device_ops, note)``: the all-reduce's name as the
    StartEvent reports it and a sentence on what was picked automatically.
    The one place strategies are made (a multi-worker one is made first, in
    setup_devices, as TensorFlow requires, and handed out here)."""
    if config.strategy == "one-device":
        return tf.distribute.OneDeviceStrategy(plan.names[0]), None, ""
    if config.strategy == "multi-worker":
        from gpuscale.trainer import multiworker

        return multiworker.strategy_for()  # made by setup_devices
    if config.strategy == "central-storage":
        strategy = tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=plan.names, parameter_device="/cpu:0"
        )
        return (
            strategy,
            "reduce-to-one",
            "central-storage keeps the variables on the CPU and reduces gradients there.",
        )
    choice = config.all_reduce
    on_gpu = plan.platform == "gpu"
    if choice in ("auto", "collective"):
        impl = "NCCL" if on_gpu else "ring"
        note = (
            f"all-reduce: TensorFlow's default for MirroredStrategy, CollectiveAllReduce ({impl} implementation)."
            if choice == "auto"
            else ""
        )
        return tf.distribute.MirroredStrategy(plan.names), "collective", note
    if choice in ("nccl", "hierarchical-copy") and not on_gpu:
        raise GpuscaleError(f"--all-reduce {choice} needs GPUs; {CPU_ALL_REDUCE_HINT}")
    ops = {
        "nccl": tf.distribute.NcclAllReduce,
        "hierarchical-copy": tf.distribute.HierarchicalCopyAllReduce,
        "reduce-to-one": tf.distribute.ReductionToOneDevice,
    }[choice]()
    return tf.distribute.MirroredStrategy(plan.names, cross_device_ops=ops), choice, ""


def _variable(v) -> tf.Variable:
    return v.value if isinstance(v, keras.Variable) else v


class Trainer:
    """A model, a strategy, the data, the compiled training step and the phase probe.

    ``run(stop)`` yields a :class:`StepEvent` per step and a :class:`PhaseEvent`
    per probe until ``config.steps`` are done or ``stop`` is set (the current
    step is finished first)."""

    def __init__(self, config: TrainConfig, plan: DevicePlan, *, cpu_count: int | None = None):
        self.config = config
        self.plan = plan
        self.strategy, self.cross_device_ops, strategy_note = build_strategy(config, plan)
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.sizing: Sizing = resolve_sizing(config, plan.platform, self.num_replicas, cpu_count)
        notes = [plan.warning, self.sizing.note, strategy_note]
        if config.mixed_precision:
            policy = "mixed_float16" if plan.platform == "gpu" else "mixed_bfloat16"
            keras.mixed_precision.set_global_policy(policy)
            notes.append(f"mixed precision: {policy}.")
        self.note = " ".join(n for n in notes if n) or None
        keras.utils.set_random_seed(config.seed)
        with self.strategy.scope():
            self.built: BuiltModel = build_model(
                config.model, width=self.sizing.width or 128, image_size=config.image_size
            )
            # Adam that can skip its cross-replica sum, for the split step (trainer/split_step.py)
            optimizer = with_skippable_sum(keras.optimizers.Adam)(learning_rate=1e-3)
            if config.mixed_precision and plan.platform == "gpu":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.built.model.trainable_variables)
        self.model = self.built.model
        self.loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=self.built.from_logits, reduction=None
        )
        self.variables = list(self.model.trainable_variables)
        self.param_count = int(sum(np.prod(v.shape) for v in self.variables))
        self.payload_bytes = int(
            sum(np.prod(v.shape) * tf.as_dtype(v.dtype).size for v in self.variables)
        )
        self.num_tensors = len(self.variables)
        self.global_batch = self.sizing.per_replica_batch * self.num_replicas
        self._batches: Iterator | None = None
        self._compile_functions()

    # -- the replica computations -------------------------------------------------
    def replica_gradients(self, x, y) -> list:
        """Forward + backward on one replica; the loss is averaged over the global
        batch, so the SUM all-reduce of these gradients is the mean gradient."""
        with tf.GradientTape() as tape:
            out = self.model(x, training=True)
            per_example = self.loss(y, tf.cast(out, tf.float32))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, [_variable(v) for v in self.variables])
        if any(g is None for g in grads):
            missing = [v.name for v, g in zip(self.variables, grads, strict=True) if g is None]
            raise GpuscaleError(
                f"the model has trainable variables the loss does not depend on: {', '.join(missing[:5])}"
            )
        # Sparse (embedding) gradients made dense: the payload is then the variables' bytes.
        return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]

    def apply_replica(self, grads: list) -> tf.Tensor:
        """``optimizer.apply(grads)`` on one replica (summing across replicas itself,
        unless the split step turned that off), returning one small value to fetch:
        the optimizer's step count. Fetched from every replica after the call
        (:meth:`_sync`), it comes back only once the whole step is done, the update
        included (the module docstring says why), so no control edge from the
        updated variables is built (reading each of them cost about 10 ops a
        replica)."""
        self.optimizer.apply(grads, self.variables)
        return _variable(self.optimizer.iterations).read_value()

    def _compile_functions(self) -> None:
        strategy = self.strategy

        def train_replica(x, y):
            return self.apply_replica(self.replica_gradients(x, y))

        self.train_fn = tf.function(lambda batch: strategy.run(train_replica, args=batch))
        self.voting_train_fn = None
        """Several workers: the step with the probe ballot and the stop summed in it
        (:meth:`_voting_step`)."""
        self._voting_checked = False
        if self.config.strategy == "multi-worker":
            sum_op = tf.distribute.ReduceOp.SUM
            summing = inner_optimizer(self.optimizer)

            def ballot_of(ballot):
                # replica 0's probe ballot alone (worker 0's first device): one schedule
                # decides; every replica's stop: any worker's stop stops them all
                context = tf.distribute.get_replica_context()
                others = ballot * tf.constant(OTHER_REPLICAS_SHARE, ballot.dtype)
                mine = tf.where(context.replica_id_in_sync_group == 0, ballot, others)
                return context, mine

            def riding_replica(x, y, ballot):
                # the ballot rides the gradients' own all-reduce (one packed collective:
                # one more number), then the optimizer applies the sum without summing again
                context, mine = ballot_of(ballot)
                grads = self.replica_gradients(x, y)
                summed = context.all_reduce(sum_op, [*grads, tf.cast(mine, grads[0].dtype)])
                with summing.gradients_summed():
                    done = self.apply_replica(summed[:-1])
                return done, summed[-1]

            def separate_replica(x, y, ballot):  # an optimizer that cannot skip its sum
                context, mine = ballot_of(ballot)
                return train_replica(x, y), context.all_reduce(sum_op, mine)

            riding = isinstance(summing, SkippableSum)
            self.voting_train_fn = tf.function(
                lambda batch, ballot: strategy.run(
                    riding_replica if riding else separate_replica, args=(*batch, ballot)
                )
            )
            self._voting_checked = not riding
            self._separate_voting_fn = tf.function(
                lambda batch, ballot: strategy.run(separate_replica, args=(*batch, ballot))
            )
        self.probe = PhaseProbe(strategy, self.variables, self.replica_gradients)
        self.split_step = SplitStep(
            strategy,
            self.optimizer,
            self.replica_gradients,
            self.apply_replica,
            [*self.variables, *self.optimizer.variables],
        )

    def scheduler(self, *, split: bool = False) -> ProbeScheduler:
        """When this run probes: every K-th step (``--phase-every K``), never
        (``0``), or within the probe budget (``split``: probes run split steps,
        whose first one is guessed cheaper)."""
        config = self.config
        every = config.phase_every
        return ProbeScheduler(
            0.0 if every == 0 else config.probe_budget,
            every=every or None,
            horizon_steps=max(1, config.steps - config.warmup_steps),
            # --precision: the breakdown known to it is resolved (probes spaced out), so
            # the run stops once its steps pay for the probes it needed, not more
            precision=DEFAULT_PRECISION if config.precision is None else config.precision,
            first_probe_steps=FIRST_SPLIT_PROBE_STEPS if split else FIRST_PROBE_STEPS,
            # its phases split the step as the summary will judge them (--precision's stop)
            replicas=self.num_replicas,
        )

    # -- data -----------------------------------------------------------------------
    def batches(self) -> Iterator:
        """Distributed batches: synthetic ones made once on each device (reused
        every step, so input costs nothing), or a host-side tf.data pipeline."""
        built, per_replica, seed = self.built, self.sizing.per_replica_batch, self.config.seed
        if built.dataset is not None or self.config.data == "host":
            return iter(self.strategy.experimental_distribute_dataset(self._host_dataset()))

        def make_batch():
            rid = tf.distribute.get_replica_context().replica_id_in_sync_group
            s = tf.stack([tf.constant(seed, tf.int32), tf.cast(rid, tf.int32)])
            shape = (per_replica, *built.input_shape)
            if built.input_dtype == "int32":
                x = tf.random.stateless_uniform(
                    shape, s, minval=0, maxval=built.vocab_size or 2, dtype=tf.int32
                )
            else:
                x = tf.random.stateless_uniform(shape, s)
            y = tf.random.stateless_uniform(
                (per_replica,), s + 1, minval=0, maxval=built.num_classes, dtype=tf.int32
            )
            return x, y

        batch = tf.function(lambda: self.strategy.run(make_batch))()
        return itertools.repeat(batch)

    def _host_dataset(self) -> tf.data.Dataset:
        built, options = self.built, tf.data.Options()
        if built.dataset is not None:
            ds = built.dataset
        else:
            rng = np.random.default_rng(self.config.seed)
            pool = max(4 * self.global_batch, 256)
            if built.input_dtype == "int32":
                x = rng.integers(
                    0, built.vocab_size or 2, size=(pool, *built.input_shape), dtype=np.int32
                )
            else:
                x = rng.integers(0, 256, size=(pool, *built.input_shape), dtype=np.uint8)
            y = rng.integers(0, built.num_classes, size=(pool,), dtype=np.int32)
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            if built.input_dtype != "int32":  # decode-like host work: cast, scale, random flip
                ds = ds.map(
                    lambda a, b: (
                        tf.image.random_flip_left_right(tf.cast(a, tf.float32) / 255.0)
                        if len(built.input_shape) == 3
                        else tf.cast(a, tf.float32) / 255.0,
                        b,
                    ),
                    num_parallel_calls=tf.data.AUTOTUNE,
                )
        ds = ds.repeat().batch(self.global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return ds.with_options(options)

    # -- timing ----------------------------------------------------------------------
    def _sync(self, out) -> None:
        """Wait for a step: fetch every replica's part of ``out`` (each from its own
        device, after the call, which on a GPU waits for all that device's queued work)."""
        for value in self.strategy.experimental_local_results(out):
            value.numpy()

    def run(
        self, stop: threading.Event | None = None, *, probe_method: str = "split-step"
    ) -> Iterator[StepEvent | PhaseEvent | LogEvent]:
        """Train ``config.steps`` steps (fewer if ``stop`` is set), yielding events.

        Several workers: a stop rides the next step that can carry it (not a split
        step) in the workers' sum, every worker leaves after that step and does not
        report it (it ran after the stop was asked), and ``stop`` is set on the
        workers that were not asked themselves.

        ``probe_method``: ``"split-step"`` (the probed step runs split, where
        :attr:`split_step` can) or ``"differenced"`` (the two-pass probe after the
        step, as the Keras callback does; ``benchmarks/overhead.py`` compares them)."""
        config = self.config
        if self._batches is None:  # kept across calls: a second run() goes on where the first ended
            self._batches = self.batches()
        batches = self._batches
        split = probe_method == "split-step" and self.split_step.usable
        schedule = self.scheduler(split=split)
        self.schedule = schedule
        probing = schedule.every is not None or schedule.budget > 0
        split = split and probing
        split_next = False  # the scheduler asked for a probe: the next step runs split
        setup_s = 0.0  # compiling the probe's functions, said on the next PhaseEvent
        vote = self._vote(schedule) if probing else None
        carrying = self.voting_train_fn is not None  # several workers: a stop rides the step
        if carrying:
            self._ballots = {
                (probe, asked): tf.constant(step_ballot(probe, asked), tf.float32)
                for probe in (0.0, 1.0)
                for asked in (False, True)
            }
        # --precision out of reach at this budget: said once, as soon as it is clear
        outlook = config.precision is not None and probing and self.num_replicas > 1
        for step in range(config.steps):
            asked = stop is not None and stop.is_set()
            if asked and not carrying:
                return
            start = time.perf_counter()
            batch = next(batches)
            got_batch = time.perf_counter()
            probed = split_next  # this step is a probe's split step
            if split_next:
                times, train_s = self.probe.measure_split(batch, self.split_step.run)
                step_s = got_batch - start + train_s  # the compute pass is no part of it
            elif carrying:  # several workers: the chief's decision and the stops ride the step
                cast = (vote.ballot() if vote is not None else 0.0, asked)
                voted = self._voting_step(batch, self._ballots[cast])
                train_s = time.perf_counter() - got_batch
                step_s = got_batch - start + train_s
                if stop_agreed(voted):  # every worker leaves after this same step, unreported
                    if stop is not None:
                        stop.set()
                    return
            else:
                self._sync(self.train_fn(batch))
                train_s = time.perf_counter() - got_batch
                step_s = got_batch - start + train_s
            warmup = step < config.warmup_steps
            yield StepEvent(
                t=time.time(),
                step=step,
                step_time_s=step_s,
                samples=self.global_batch,
                warmup=warmup,
                total_steps=config.steps,  # the most: --precision may end the run sooner
            )
            # compile the split step and the probe's passes once, after the first step, timed
            # apart (the next PhaseEvent's setup_s): in no probe's cost, so not the budget's
            if split and not split_next and not self.split_step.ready:
                began = time.perf_counter()
                split = self.split_step.prepare(batch)
                setup_s += time.perf_counter() - began
            # (one replica: split only)
            if (
                probing
                and not (split and self.num_replicas == 1)
                and not self.probe.ready_for(split=split)
            ):
                began = time.perf_counter()
                self.probe.prepare(batch, split=split)
                setup_s += time.perf_counter() - began
            schedule.add_step(step_s, warmup=warmup, split=split_next)
            if outlook and not split_next and schedule.outlook_due():  # between probes too
                if warned := _outlook(schedule, config.precision):
                    outlook = False
                    yield warned
            if split_next:
                split_next = False
                # the phases split the usual step's training part (the schedule's reference),
                # not the split step's, which runs a little longer (its halves synchronise):
                # both measured halves scaled to it, so they add up to the step a user pays
                usual_s = max(0.0, schedule.reference_step_s(step_s) - (got_batch - start))
                times = split_to_usual(times, train_s, usual_s)
                # the event's cost: the extra passes and what the split step took over a usual one
                paid = msgspec.structs.replace(
                    times, cost_s=times.cost_s + max(0.0, schedule.last_split_excess_s)
                )
                event = self._phase_event(
                    paid,
                    step,
                    usual_s,
                    got_batch - start,
                    "split-step",
                    split_excess_s=schedule.last_split_excess_s,
                    setup_s=setup_s or None,
                )
                schedule.add_probe(times.cost_s, exposed_share(times, usual_s), phases=event)
                yield event
                setup_s = 0.0
                if outlook and (warned := _outlook(schedule, config.precision)):
                    outlook = False
                    yield warned
            if vote is not None and not probed:  # the chief's ballot cast before this step
                due = vote.received(voted[0])
            elif vote is not None:  # a split step carries no ballot: nothing to read
                due = False
            else:
                due = probing and schedule.due()
            if due:
                if split:
                    split_next = True
                else:
                    times = self.probe.measure(batch)
                    # the training part of the usual step (the schedule's reference), not this one's
                    train_s = max(0.0, schedule.reference_step_s(step_s) - (got_batch - start))
                    event = self._phase_event(
                        times,
                        step,
                        train_s,
                        got_batch - start,
                        "differenced",
                        setup_s=setup_s or None,
                    )
                    schedule.add_probe(times.cost_s, exposed_share(times, train_s), phases=event)
                    yield event
                    setup_s = 0.0
                    if outlook and (warned := _outlook(schedule, config.precision)):
                        outlook = False
                        yield warned
            if config.precision is not None and schedule.precision_reached(config.precision):
                return  # known well enough (--precision), the probes paid for: no more steps

    def _voting_step(self, batch, ballot: tf.Tensor) -> tuple[float, float]:
        """One training step with the workers' ballots (``[probe, stop]``,
        :func:`~gpuscale.trainer.vote.step_ballot`) summed in it, synchronised; the
        sum, ``(the chief's probe ballot, stops)``. Before its first run, checks that
        the optimizer really skipped its own sum while the step was traced (as
        :meth:`SplitStep.prepare` does), else the ballot gets an all-reduce of its
        own (another Keras version)."""
        if not self._voting_checked:
            self._voting_checked = True
            summing = inner_optimizer(self.optimizer)
            summing._sum_skipped = False
            self.voting_train_fn.get_concrete_function(batch, ballot)
            if not summing._sum_skipped:
                self.voting_train_fn = self._separate_voting_fn
        done, total = self.voting_train_fn(batch, ballot)
        self._sync(done)
        probe, stops = self.strategy.experimental_local_results(total)[0].numpy()
        return float(probe), float(stops)

    def _vote(self, schedule: ProbeScheduler) -> StepVote | None:
        """Several workers probing by budget: the chief's schedule decides for all,
        through a ballot summed in the step (:mod:`gpuscale.trainer.vote`); None
        otherwise (one worker, or ``--phase-every K``: every worker counts alike)."""
        if self.voting_train_fn is None or schedule.every is not None or schedule.budget <= 0:
            return None
        # every worker casts its own ballot; the step keeps replica 0's (worker 0's) alone
        return StepVote(schedule, chief=True)

    def _phase_event(
        self,
        times: ProbeTimes,
        step: int,
        train_s: float,
        input_s: float,
        method: str,
        split_excess_s: float | None = None,
        setup_s: float | None = None,
    ) -> PhaseEvent:
        """The PhaseEvent of one probe of ``step`` (``train_s``: its training part;
        ``setup_s``: compiling the probe's functions since the last probe)."""
        return phase_event(
            times,
            step=step,
            step_time_s=train_s,
            input_s=input_s,
            payload_bytes=self.payload_bytes,
            num_tensors=self.num_tensors,
            method=method,
            split_excess_s=split_excess_s,
            setup_s=setup_s,
        )


def _outlook(schedule: ProbeScheduler, precision: float) -> LogEvent | None:
    """The warning that ``--precision`` will likely not be reached in this run
    (:meth:`ProbeScheduler.precision_outlook`), as an event; ``None`` while it can be."""
    said = schedule.precision_outlook(precision)
    return (
        LogEvent(t=time.time(), message=said, source="precision", level="warning") if said else None
    )
