"""Multi-worker runs: where the workers are, which one this process is, and how
their events reach the chief. No TensorFlow here (the parent process and the
headless core use it); the TensorFlow side is :mod:`gpuscale.trainer.multiworker`.

Where the cluster comes from
----------------------------
1. ``TF_CONFIG`` (TensorFlow's own convention), e.g.::

       {"cluster": {"worker": ["host1:12345", "host2:12345"]},
        "task": {"type": "worker", "index": 0}}

   A ``chief`` task, if present, is worker 0 and the ``worker`` tasks follow.
2. Slurm, when ``SLURM_JOB_ID`` is set and ``TF_CONFIG`` is not: the nodes of
   ``SLURM_JOB_NODELIST`` and this task's ``SLURM_PROCID``. This module only
   reads what gpuscale needs (the chief's host and this worker's index); the
   trainer hands the cluster to TensorFlow through
   ``tf.distribute.cluster_resolver.SlurmClusterResolver``.

How events reach the chief
--------------------------
The chief (worker 0) listens for events on ``0.0.0.0:47470``
(:data:`gpuscale.events.transport.DEFAULT_PORT`; ``GPUSCALE_PORT`` changes it);
every other worker connects to ``<chief host>:<port>`` (``GPUSCALE_EVENTS``
overrides the address) and presents ``GPUSCALE_TOKEN``, a shared secret that
every worker must have in its environment: a connection without it is closed
and nothing it sent is recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

import msgspec

from gpuscale.errors import GpuscaleError
from gpuscale.events.transport import DEFAULT_PORT, ENV_ADDRESS, ENV_TOKEN, ENV_WORKER

ENV_PORT = "GPUSCALE_PORT"
"""The port the chief's event server listens on (default :data:`DEFAULT_PORT`)."""


class ClusterInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A multi-worker cluster as seen from one of its workers."""

    workers: list[str]
    """``host:port`` of every worker, chief first (TensorFlow's gRPC addresses)."""
    index: int
    """This process's worker index (0 = chief)."""
    source: str
    """``TF_CONFIG`` or ``slurm``."""
    task_type: str = "worker"
    task_index: int = 0
    """TensorFlow's task type and index for this process."""

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def is_chief(self) -> bool:
        return self.index == 0

    @property
    def chief_host(self) -> str:
        return _split_host(self.workers[0])


def _split_host(address: str) -> str:
    host, sep, _port = address.rpartition(":")
    return (host if sep else address).strip("[]")


MAX_TF_CONFIG_BYTES = 1024 * 1024
"""Longest ``TF_CONFIG`` read: 10,000 workers of ``host:port`` take about 300 kB."""


def parse_tf_config(text: str) -> ClusterInfo:
    """Parse a ``TF_CONFIG`` value. Raises :class:`GpuscaleError` naming what is wrong.

    Read as untrusted input (:func:`gpuscale.events.bounded.decode_json`): at most
    :data:`MAX_TF_CONFIG_BYTES`, nested at most ``MAX_DEPTH`` levels; what is quoted
    from it in an error is escaped (:func:`gpuscale.formatting.visible`)."""
    from gpuscale.events.bounded import JsonInputError, decode_json
    from gpuscale.formatting import visible

    try:
        data = text.encode("utf-8", "surrogateescape")
        config = decode_json(data, max_bytes=MAX_TF_CONFIG_BYTES)
    except (JsonInputError, UnicodeError) as exc:
        raise GpuscaleError(f"TF_CONFIG is not usable: {visible(exc)}") from None
    if not isinstance(config, dict):
        raise GpuscaleError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    cluster = config.get("cluster")
    task = config.get("task")
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise GpuscaleError("TF_CONFIG needs a 'cluster' object and a 'task' object")
    unsupported = sorted(set(cluster) - {"chief", "worker"})
    if unsupported:
        raise GpuscaleError(
            f"TF_CONFIG has task types {visible(', '.join(unsupported), limit=200)}: gpuscale's "
            "multi-worker runs use MultiWorkerMirroredStrategy, which takes only 'chief' and "
            "'worker'"
        )
    chief = cluster.get("chief", [])
    workers = cluster.get("worker", [])
    for name, tasks in (("chief", chief), ("worker", workers)):
        if not isinstance(tasks, list) or not all(isinstance(a, str) for a in tasks):
            raise GpuscaleError(f"TF_CONFIG cluster.{name} must be a list of 'host:port' strings")
        for address in tasks:
            if not re.fullmatch(r"\[?[^\s\[\]]+\]?:\d{1,5}", address):
                raise GpuscaleError(
                    f"TF_CONFIG has a bad address {visible(repr(address), limit=200)} "
                    "(want host:port)"
                )
    if len(chief) > 1:
        raise GpuscaleError("TF_CONFIG may have at most one chief")
    all_workers = list(chief) + list(workers)
    if not all_workers:
        raise GpuscaleError("TF_CONFIG lists no workers")
    task_type = task.get("type")
    task_index = task.get("index", 0)
    if task_type not in ("chief", "worker"):
        raise GpuscaleError(
            "TF_CONFIG task type must be 'chief' or 'worker', "
            f"not {visible(repr(task_type), limit=200)}"
        )
    if not isinstance(task_index, int) or isinstance(task_index, bool):
        raise GpuscaleError("TF_CONFIG task index must be an integer")
    tasks = chief if task_type == "chief" else workers
    if not 0 <= task_index < len(tasks):
        raise GpuscaleError(
            f"TF_CONFIG task {task_type} {task_index} is not in the cluster "
            f"({len(tasks)} {task_type} task(s))"
        )
    index = task_index if task_type == "chief" else len(chief) + task_index
    return ClusterInfo(
        workers=all_workers,
        index=index,
        source="TF_CONFIG",
        task_type=task_type,
        task_index=task_index,
    )


def fingerprint(info: ClusterInfo) -> str:
    """What every worker's cluster must agree on, as a short digest for the hello
    (:class:`gpuscale.events.transport.Hello`): how many workers, and each one's port
    in order. Hosts are left out: one machine may be spelled differently on each
    (``node1``, ``node1.cluster``, an address); a port may not."""
    ports = ",".join(address.rpartition(":")[2] for address in info.workers)
    digest = hashlib.sha256(ports.encode()).hexdigest()[:16]
    return f"{info.num_workers}:{digest}"


def cluster_mismatch(info: ClusterInfo, theirs: str, worker: int) -> str:
    """Why the chief (``info``) refuses worker ``worker`` whose cluster's
    :func:`fingerprint` is ``theirs``: another number of workers or other ports
    (TensorFlow would wait for ever for a worker at an address where none listens);
    ``""`` where they agree or the worker did not say."""
    if not theirs or theirs == fingerprint(info):
        return ""
    shown = ", ".join(info.workers[:4]) + (", ..." if info.num_workers > 4 else "")
    count = theirs.partition(":")[0]
    if count != str(info.num_workers):
        differs = f"has {count} workers, the chief's {info.num_workers} ({shown})"
    else:
        differs = f"lists other ports than the chief's ({shown})"
    return (
        f"worker {worker}'s cluster {differs}: every worker needs the same cluster "
        f"({info.source}), in the same order"
    )


def strategy_note(info: ClusterInfo, on_gpu: bool) -> str:
    """The start note's words on a multi-worker run: how many workers, which this is,
    and the all-reduce; a lone CPU worker (one replica) exchanges nothing."""
    from gpuscale.formatting import plural

    text = (
        f"multi-worker: {plural(info.num_workers, 'worker')} from {info.source}, "
        f"this is worker {info.index}; "
    )
    if info.num_workers == 1 and not on_gpu:
        return text + "one replica, nothing to all-reduce."
    return text + f"collective all-reduce ({'NCCL' if on_gpu else 'ring over gRPC'})."


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm host list: ``"node[01-03,07],gpu5"`` -> ``node01 node02 node03 node07 gpu5``."""
    hosts: list[str] = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text):
        prefix, ranges, suffix = match.group(1), match.group(2), match.group(3)
        if ranges is None:
            hosts.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise GpuscaleError(f"cannot read the Slurm node list {text!r}")
            if not sep:
                hosts.append(f"{prefix}{lo}{suffix}")
                continue
            width = len(lo)
            for number in range(int(lo), int(hi) + 1):
                hosts.append(f"{prefix}{number:0{width}d}{suffix}")
    return [h for h in hosts if h]


def parse_slurm(environ: Mapping[str, str], port: int = 8888) -> ClusterInfo:
    """The cluster of a Slurm job: one worker per task (``SLURM_NTASKS``), spread over
    ``SLURM_JOB_NODELIST`` in block order as ``srun`` places them; this task is
    ``SLURM_PROCID``. ``port`` is TensorFlow's gRPC port (SlurmClusterResolver's
    default 8888); gpuscale only needs the hosts."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise GpuscaleError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: run under srun")
    hosts = expand_hostlist(nodelist)
    try:
        ntasks = int(environ.get("SLURM_NTASKS", len(hosts)))
        procid = int(environ.get("SLURM_PROCID", "0"))
    except ValueError:
        raise GpuscaleError("SLURM_NTASKS and SLURM_PROCID must be integers") from None
    if ntasks < 1 or not 0 <= procid < ntasks:
        raise GpuscaleError(f"SLURM_PROCID {procid} is outside SLURM_NTASKS {ntasks}")
    per_node = -(-ntasks // len(hosts))
    workers = [f"{hosts[i // per_node]}:{port + i % per_node}" for i in range(ntasks)]
    return ClusterInfo(
        workers=workers, index=procid, source="slurm", task_type="worker", task_index=procid
    )


def resolve(environ: Mapping[str, str] | None = None) -> ClusterInfo | None:
    """The cluster this process belongs to, from ``TF_CONFIG`` or Slurm; None if neither."""
    environ = os.environ if environ is None else environ
    if environ.get("TF_CONFIG"):
        return parse_tf_config(environ["TF_CONFIG"])
    if environ.get("SLURM_JOB_ID"):
        return parse_slurm(environ)
    return None


def require(environ: Mapping[str, str] | None = None) -> ClusterInfo:
    """Like :func:`resolve`, but a missing cluster is the user's error."""
    info = resolve(environ)
    if info is None:
        raise GpuscaleError(
            "--strategy multi-worker needs a cluster: set TF_CONFIG on every worker "
            "(or run under Slurm with srun), or try it on this machine with --local-workers N"
        )
    return info


def events_port(environ: Mapping[str, str] | None = None) -> int:
    """The port the chief's event server listens on."""
    environ = os.environ if environ is None else environ
    text = environ.get(ENV_PORT, "")
    if not text:
        return DEFAULT_PORT
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise GpuscaleError(f"{ENV_PORT} must be a port number, not {text!r}")
    return int(text)


def events_address(info: ClusterInfo, environ: Mapping[str, str] | None = None) -> str:
    """Where a worker sends its events: ``GPUSCALE_EVENTS`` if set, else the chief's
    host at :func:`events_port`."""
    environ = os.environ if environ is None else environ
    return environ.get(ENV_ADDRESS) or f"{info.chief_host}:{events_port(environ)}"


def shared_token(environ: Mapping[str, str] | None = None) -> str:
    """The token every worker presents to the chief; required for multi-worker runs."""
    environ = os.environ if environ is None else environ
    token = environ.get(ENV_TOKEN, "")
    if len(token) < 8:
        raise GpuscaleError(
            f"multi-worker runs need a shared secret in {ENV_TOKEN} (at least 8 characters) "
            f"on every worker, e.g. export {ENV_TOKEN}=$(python -c 'import secrets; "
            "print(secrets.token_hex(16))')"
        )
    return token


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free right now on ``host`` (for localhost clusters)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def local_tf_configs(num_workers: int, host: str = "127.0.0.1") -> list[str]:
    """``TF_CONFIG`` values for ``num_workers`` workers on this machine (loopback ports)."""
    if num_workers < 1:
        raise GpuscaleError("--local-workers must be at least 1")
    addresses = [f"{host}:{port}" for port in free_ports(num_workers, host)]
    return [
        json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}})
        for i in range(num_workers)
    ]


def launch_local_workers(
    argv: Sequence[str],
    num_workers: int,
    *,
    events_address: str,
    token: str,
    env: Mapping[str, str] | None = None,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
) -> list[subprocess.Popen]:
    """Start ``num_workers`` copies of ``argv`` on this machine as one multi-worker
    cluster: each gets its own ``TF_CONFIG`` (loopback ports), ``GPUSCALE_WORKER``,
    and the chief's event address and token. Each runs in its own process group, so
    the caller can stop it with everything it started, and on Linux dies with the
    calling process (see :func:`gpuscale.live.child.spawn`). If one cannot start, the
    ones already started are killed (with their process groups) and reaped."""
    from gpuscale.live.child import spawn

    base = dict(os.environ if env is None else env)
    procs: list[subprocess.Popen] = []
    try:
        for index, tf_config in enumerate(local_tf_configs(num_workers)):
            worker_env = dict(base)
            worker_env.update(
                {
                    "TF_CONFIG": tf_config,
                    ENV_ADDRESS: events_address,
                    ENV_TOKEN: token,
                    ENV_WORKER: str(index),
                    "PYTHONUNBUFFERED": "1",
                }
            )
            procs.append(
                spawn(
                    list(argv),
                    env=worker_env,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=sys.platform != "win32",
                )
            )
    except OSError as exc:
        for proc in procs:
            _kill_group(proc)
        raise GpuscaleError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    return procs


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (its own session) and reap it."""
    try:
        if sys.platform != "win32":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        return
    from gpuscale.live.child import release

    release(proc)
