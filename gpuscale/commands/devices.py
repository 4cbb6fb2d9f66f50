"""``gpuscale devices``: the NVIDIA GPUs NVML sees, how they are connected, and the
devices TensorFlow will use.

NVML answers in-process (no TensorFlow). TensorFlow's view comes from a child
``python -c`` that lists ``tf.config.list_physical_devices()`` under a time
limit, so this process never imports TensorFlow and a slow or missing
TensorFlow is reported, not waited on forever. Without an NVIDIA GPU or driver
it says so in one sentence and shows the CPU fallback runs will use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import msgspec

from gpuscale.analysis.topology import (
    LINK_LABELS,
    SetLink,
    best_gpus,
    pair_class,
    slowest_link,
)
from gpuscale.events.schema import Topology
from gpuscale.formatting import format_bytes, plural

DEFAULT_TF_TIMEOUT_S = 60.0
_MARK = "GPUSCALE-TF-DEVICES "
TF_SCRIPT = (
    "import json, os\n"
    "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')\n"
    "import tensorflow as tf\n"
    "devices = [{'name': d.name, 'device_type': d.device_type}"
    " for d in tf.config.list_physical_devices()]\n"
    "build = tf.sysconfig.get_build_info()\n"
    "print(" + repr(_MARK) + " + json.dumps({'version': tf.__version__,"
    " 'built_with_cuda': bool(tf.test.is_built_with_cuda()),"
    " 'cuda_version': build.get('cuda_version'), 'devices': devices}), flush=True)\n"
)


class TfDevices(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What TensorFlow reported from the child process, or why it could not."""

    ok: bool
    version: str | None = None
    built_with_cuda: bool | None = None
    cuda_version: str | None = None
    devices: list[dict[str, str]] = []
    """``{"name": "/physical_device:GPU:0", "device_type": "GPU"}`` per device."""
    problem: str | None = None
    """One line: TensorFlow missing, too slow, or failing."""


def default_cpu_devices() -> int:
    """The number of logical CPU devices runs use without a GPU (the trainer's default)."""
    try:
        from gpuscale.trainer import options

        value = getattr(options, "DEFAULT_CPU_DEVICES", 2)
        return int(value) if isinstance(value, int) and value > 0 else 2
    except Exception:
        return 2


def tf_devices(
    timeout_s: float = DEFAULT_TF_TIMEOUT_S,
    *,
    python: str = sys.executable,
    code: str = TF_SCRIPT,
) -> TfDevices:
    """List TensorFlow's physical devices in a child process, within ``timeout_s``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        done = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return TfDevices(
            ok=False,
            problem=(
                f"TensorFlow did not list its devices within {timeout_s:g} s "
                "(busy machine? try --tf-timeout 180)"
            ),
        )
    except OSError as exc:
        return TfDevices(ok=False, problem=f"could not start {python} ({exc.strerror or exc})")
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            try:
                data = json.loads(line[len(_MARK) :])
                return TfDevices(
                    ok=True,
                    version=data.get("version"),
                    built_with_cuda=data.get("built_with_cuda"),
                    cuda_version=data.get("cuda_version"),
                    devices=list(data.get("devices") or []),
                )
            except (ValueError, TypeError, AttributeError):
                break
    err = done.stderr.strip().splitlines()
    last = err[-1].strip() if err else f"exit status {done.returncode}"
    if "No module named 'tensorflow'" in done.stderr:
        return TfDevices(
            ok=False,
            problem=f"TensorFlow is not installed for {python} (pip install tensorflow)",
        )
    return TfDevices(ok=False, problem=f"TensorFlow failed to list its devices: {last}")


class GpuChoice(msgspec.Struct, kw_only=True):
    """The GPUs to pass as ``--gpus`` for a run on ``devices`` of them."""

    devices: int
    gpus: list[int]
    link_class: str | None
    """The slowest link among them (:mod:`gpuscale.analysis.topology`); ``None`` for one GPU."""
    peak_bytes_s: float | None = None
    """Its nominal bandwidth per direction; ``None`` when not known."""
    description: str = ""


class DevicesReport(msgspec.Struct, kw_only=True):
    """Everything ``gpuscale devices`` shows (``--json`` prints it)."""

    nvml: Any
    """The :class:`~gpuscale.telemetry.nvml.NvmlProbe`."""
    tensorflow: TfDevices | None
    """``None`` with ``--no-tf``."""
    cpu_fallback: dict[str, int] | None
    """Without NVIDIA GPUs: ``{"logical_devices": N, "cpu_cores": C}``."""
    cuda_visible_devices: str | None = None
    topology: Topology | None = None
    """How the GPUs are connected (:mod:`gpuscale.telemetry.topology`)."""
    all_gpus: SetLink | None = None
    """The slowest link among all GPUs (two or more)."""
    best_gpus: list[GpuChoice] = []
    """For each count below all, the GPUs to use (:func:`best_gpus`)."""


def collect(
    *, nvml: Any = None, tf: bool = True, tf_timeout_s: float = DEFAULT_TF_TIMEOUT_S
) -> DevicesReport:
    """Probe NVML (in-process) and TensorFlow (child process)."""
    from gpuscale.telemetry.nvml import open_nvml
    from gpuscale.telemetry.topology import topology_of

    lib, result = open_nvml(nvml)
    topology = None
    if lib is not None:
        try:
            if result.ok:
                topology = topology_of(lib, {d.index: d.name for d in result.devices})
        finally:
            lib.close()
    all_gpus, best = judge_topology(topology)
    fallback = None
    if not result.ok:
        fallback = {"logical_devices": default_cpu_devices(), "cpu_cores": os.cpu_count() or 1}
    return DevicesReport(
        nvml=result,
        tensorflow=tf_devices(tf_timeout_s) if tf else None,
        cpu_fallback=fallback,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        topology=topology,
        all_gpus=all_gpus,
        best_gpus=best,
    )


def judge_topology(topology: Topology | None) -> tuple[SetLink | None, list[GpuChoice]]:
    """The link among all GPUs and the best GPUs for each smaller count (none
    when NVML reported no pair's link)."""
    if topology is None or len(topology.gpus) < 2:
        return None, []
    every = [g.index for g in topology.gpus]
    all_gpus = slowest_link(topology, every)
    choices = []
    for k in range(1, len(every)):
        gpus = best_gpus(topology, k)  # the rule `run --devices N` and `recommend` advise by
        if gpus is None:  # NVML reported no pair's link: nothing to choose by
            break
        link = slowest_link(topology, gpus)
        choices.append(
            GpuChoice(
                devices=k,
                gpus=gpus,
                link_class=link.link_class if link else None,
                peak_bytes_s=link.peak_bytes_s if link else None,
                description=link.description if link else "",
            )
        )
    return all_gpus, choices


_PCIE_CODES = {
    "internal": "INT",
    "single": "PIX",
    "multiple": "PXB",
    "hostbridge": "PHB",
    "node": "NODE",
    "system": "SYS",
}
TOPOLOGY_LEGEND = (
    "NV# = # NVLink links (direct or to one NVSwitch fabric); PCIe: INT one board, "
    "PIX one switch, PXB several switches, PHB one CPU host bridge, NODE one NUMA node, "
    "SYS across CPU sockets; n/a not reported"
)


def pair_code(topology: Topology, a: int, b: int) -> str:
    """The ``nvidia-smi topo -m`` style code for two GPUs (``X`` for a GPU with itself)."""
    if a == b:
        return "X"
    pair = next((p for p in topology.pairs if (p.a, p.b) == (min(a, b), max(a, b))), None)
    if pair is None:
        return "n/a"
    if pair.nvlinks:
        return f"NV{pair.nvlinks}"
    if pair.nvswitch:
        by_index = {g.index: g for g in topology.gpus}
        links = [
            sum(1 for peer in by_index[i].nvlink_peers if peer.remote == "nvswitch")
            for i in (a, b)
            if i in by_index
        ]
        return f"NV{min(links)}" if links else "NV"
    return _PCIE_CODES.get(pair.pcie or "", "n/a")


def render_topology(report: DevicesReport, console: Any) -> None:
    """The topology matrix, its legend, the link among all GPUs, and the best
    ``--gpus`` for each smaller count."""
    from rich.table import Table

    topology = report.topology
    if topology is None or len(topology.gpus) < 2:
        return
    if report.all_gpus is not None and report.all_gpus.link_class == "unknown":
        if all(pair_class(p) == "unknown" for p in topology.pairs):
            console.print(
                "GPU topology: not reported by NVML (driver or GPUs do not support it).",
                highlight=False,
                markup=False,
            )
            return
    every = [g.index for g in topology.gpus]
    table = Table(title="GPU topology (as nvidia-smi topo -m)", title_justify="left")
    table.add_column("")
    for index in every:
        table.add_column(f"GPU{index}", justify="center")
    for a in every:
        table.add_row(f"GPU{a}", *(pair_code(topology, a, b) for b in every))
    console.print(table)
    console.print(f"Legend: {TOPOLOGY_LEGEND}", highlight=False, markup=False)
    if report.all_gpus is not None:
        console.print(
            f"All {len(every)} GPUs: {report.all_gpus.description} (nominal)",
            highlight=False,
            markup=False,
        )
    if report.best_gpus:
        best = Table(
            title="Best GPUs for fewer (what --devices N uses)",
            title_justify="left",
        )
        for column in ("GPUs", "--gpus", "slowest link", "nominal per direction"):
            best.add_column(column)
        for choice in report.best_gpus:
            link = peak = ""
            if choice.link_class is not None:
                link = LINK_LABELS.get(choice.link_class, choice.link_class)
                peak = "not known"
                if choice.peak_bytes_s is not None:
                    peak = f"{choice.peak_bytes_s / 1e9:.1f} GB/s"
            best.add_row(str(choice.devices), ",".join(map(str, choice.gpus)), link, peak)
        console.print(best)


def _pcie(d: Any) -> str:
    if d.pcie_gen is None and d.pcie_width is None:
        return "n/a"
    now = f"gen{d.pcie_gen or '?'} x{d.pcie_width or '?'}"
    if (d.pcie_max_gen, d.pcie_max_width) not in ((None, None), (d.pcie_gen, d.pcie_width)):
        now += f" (max gen{d.pcie_max_gen or '?'} x{d.pcie_max_width or '?'})"
    return now


def render(report: DevicesReport, console: Any) -> None:
    """Print the report for humans (a rich table)."""
    from rich.markup import escape
    from rich.table import Table

    probe = report.nvml
    if probe.ok:
        versions = f"driver {probe.driver_version or 'n/a'}, CUDA {probe.cuda_version or 'n/a'}"
        table = Table(title=f"NVIDIA GPUs seen by NVML ({versions})", title_justify="left")
        for column, justify in (
            ("#", "right"),
            ("name", "left"),
            ("memory", "right"),
            ("PCIe", "left"),
            ("NVLink", "right"),
            ("MIG", "left"),
        ):
            table.add_column(column, justify=justify)
        for d in probe.devices:
            links = (
                "n/a"
                if d.nvlink_links is None
                else (f"{d.nvlink_links} links" if d.nvlink_links else "none")
            )
            table.add_row(
                str(d.index),
                escape(d.name),
                format_bytes(d.memory_total_bytes),
                _pcie(d),
                links,
                "on" if d.mig else "",
            )
        console.print(table)
        extra = probe.status.split("; ", 1)
        if len(extra) > 1:
            console.print(f"Note: {extra[1]}", highlight=False, markup=False)
        render_topology(report, console)
    else:
        fb = report.cpu_fallback or {"logical_devices": 2, "cpu_cores": os.cpu_count() or 1}
        reason = probe.status.removesuffix(": host samples only")
        cores = fb["cpu_cores"]
        console.print(
            f"{reason}, so runs will use the CPU as {fb['logical_devices']} logical CPU "
            f"devices on {plural(cores, 'core')} (--devices N to change).",
            highlight=False,
            markup=False,
        )
    if report.cuda_visible_devices is not None:
        console.print(
            f"CUDA_VISIBLE_DEVICES={report.cuda_visible_devices!r} limits what TensorFlow sees.",
            highlight=False,
            markup=False,
        )
    tf = report.tensorflow
    if tf is None:
        return
    if not tf.ok:
        console.print(f"TensorFlow: {tf.problem}", highlight=False, markup=False)
        return
    names = ", ".join(d["name"].removeprefix("/physical_device:") for d in tf.devices) or "none"
    if tf.built_with_cuda:
        build = "built with CUDA" + (f" {tf.cuda_version}" if tf.cuda_version else "")
    else:
        build = "built without CUDA"
    console.print(f"TensorFlow {tf.version} ({build}) sees: {names}", highlight=False, markup=False)
    tf_gpus = sum(1 for d in tf.devices if d.get("device_type") == "GPU")
    if probe.ok and tf_gpus == 0:
        console.print(
            f"Warning: NVML sees {len(probe.devices)} GPU(s) but TensorFlow sees none: "
            "install TensorFlow with its CUDA libraries (pip install 'tensorflow[and-cuda]') "
            "and check CUDA_VISIBLE_DEVICES.",
            highlight=False,
            markup=False,
        )
    elif probe.ok and tf_gpus < len(probe.devices) and report.cuda_visible_devices is None:
        console.print(
            f"Note: TensorFlow sees {tf_gpus} of the {len(probe.devices)} GPUs NVML sees.",
            highlight=False,
            markup=False,
        )


def report_json(report: DevicesReport) -> dict[str, Any]:
    """The report as plain data, every device field present (``null`` = n/a)."""
    data = msgspec.to_builtins(report)
    data["nvml"]["devices"] = [
        {name: getattr(d, name) for name in d.__struct_fields__} for d in report.nvml.devices
    ]
    return data


MAX_TF_TIMEOUT_S = 3600.0
"""Longest --tf-timeout: an hour (listing devices takes seconds; far beyond, the
deadline arithmetic overflows)."""


def register(sub) -> None:
    parser = sub.add_parser(
        "devices",
        help="list the NVIDIA GPUs and the devices TensorFlow will use",
        description=(
            "List the NVIDIA GPUs NVML sees (memory, PCIe, NVLink, driver and CUDA "
            "version), how they are connected (a matrix like 'nvidia-smi topo -m', and "
            "the best GPUs for each smaller count), and the devices TensorFlow will use "
            "(asked in a child process). "
            "Without an NVIDIA GPU, shows the CPU fallback runs will use."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--no-tf", action="store_true", help="do not ask TensorFlow (faster: NVML only)"
    )
    parser.add_argument(
        "--tf-timeout",
        type=float,
        default=DEFAULT_TF_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for TensorFlow to list its devices (default {DEFAULT_TF_TIMEOUT_S:g})",
    )
    parser.set_defaults(func=main)


def main(args) -> int:
    from gpuscale.errors import GpuscaleError

    if not 0 < args.tf_timeout <= MAX_TF_TIMEOUT_S:
        raise GpuscaleError(
            f"--tf-timeout must be above 0 and at most {MAX_TF_TIMEOUT_S:g} s, not {args.tf_timeout:g}"
        )
    report = collect(tf=not args.no_tf, tf_timeout_s=args.tf_timeout)
    if args.json:
        sys.stdout.write(json.dumps(report_json(report), indent=2) + "\n")
        return 0
    from gpuscale.commands.console import text_console

    render(report, text_console())
    return 0
