"""Device cards: one per GPU or logical CPU device, plus the host.

Cards show the latest sample; ``n/a`` where the device does not report a
value. When full cards would take too much of the screen (many devices on a
small terminal) every card condenses to one line. A GPU whose clocks something
holds down (heat, a hardware slowdown, a power brake, a power limit lowered below
its peers') says so in either form: in a synchronous data-parallel run every
replica waits for the slowest, so on an 8-GPU box that one GPU sets the pace.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Static

from gpuscale import formatting as fmt
from gpuscale.analysis.held_down import SLOWDOWNS, held_down_reasons, slowdowns
from gpuscale.analysis.held_down import peer_limits_w as _peer_limits_w
from gpuscale.events.schema import GpuSample, HostSample
from gpuscale.ui.model import DeviceState, Snapshot
from gpuscale.ui.widgets.spark import PercentSparkline

CARD_MIN_WIDTH = 40
"""Columns a full card needs (border included)."""
CARD_HEIGHT = 8
COMPACT_MIN_WIDTH = 40
COMPACT_MARK_WIDTH = 1
"""Columns of the mark that starts each one-line card (its left border)."""
MAX_SHARE_OF_SCREEN = 0.42
"""Full cards may take at most this share of the screen's height."""
MIN_ROWS_LEFT = 19
"""Rows full cards must leave to the rest of the screen, else they condense: the
dashboard's header (2), the grid's border (1), a chart with four rows of plot (10),
the log (5) and the footer (1). At 80x24 one row of full cards (a run on one device,
or a script's before its devices are known) left the step-time chart one row. A grid
given ``rows_left`` asks it instead (the dashboard's log and recommendation row
take more where the screen is tall or wide)."""

HOST_KEY = "host"


def slowdown_tag(sample: GpuSample, peer_limit_w: float | None = None) -> str | None:
    """What a one-line card shows for a GPU held down, or ``None``: the most telling
    reason by the rule a run's summary uses too
    (:func:`gpuscale.analysis.held_down.held_down_reasons`: a power cap only where
    the GPU's power limit is below ``peer_limit_w``, the highest limit of the same
    GPUs on its machine; every GPU under full load reaches its cap)."""
    held = held_down_reasons(sample.throttle_reasons, sample.power_limit_w, peer_limit_w)
    return SLOWDOWNS[held[0]] if held else None


def _pct_style(pct: float | None) -> str:
    if pct is None:
        return "$text-muted"
    if pct >= 90:
        return "$text-error"
    if pct >= 70:
        return "$text-warning"
    return "$text-success"


def _gauge(label: str, pct: float | None, width: int, tail: str) -> Content:
    bar_width = max(width - len(label) - len(tail) - 2, 4)
    return Content.assemble(
        (label, "bold"), " ", (fmt.text_gauge(pct, bar_width), _pct_style(pct)), " ", tail
    )


def _pair(name: str, rx: float | None, tx: float | None, unit: bool = True) -> str:
    """``PCIe ↓61 ↑5.3 GB/s`` (``unit``: with its unit), ``PCIe n/a``."""
    if rx is None and tx is None:
        return f"{name} n/a"
    return f"{name} ↓{fmt.format_gb_s(rx)} ↑{fmt.format_gb_s(tx)}" + (" GB/s" if unit else "")


def links_text(sample: GpuSample, width: int, nvlink_links: int | None = None) -> str:
    """The card's link line, each rate with its unit and never a unit after an
    ``n/a``: ``PCIe ↓61 ↑5.3 GB/s · NVLink n/a``; ``no NVLink`` where the device
    information says it has no link (``nvlink_links`` 0). Both read, where that does
    not fit ``width``: one unit for both, at the end (``PCIe ↓61 ↑5.3 · NVLink ↓120
    ↑118 GB/s``, and without the dot where even that does not fit)."""
    pcie = (sample.pcie_rx_bytes_s, sample.pcie_tx_bytes_s)
    nvlink = (sample.nvlink_rx_bytes_s, sample.nvlink_tx_bytes_s)
    no_nvlink = nvlink_links == 0 and nvlink == (None, None)
    second = "no NVLink" if no_nvlink else _pair("NVLink", *nvlink)
    full = f"{_pair('PCIe', *pcie)} · {second}"
    both_read = pcie != (None, None) and nvlink != (None, None)
    if len(full) <= width or not both_read:
        return full
    short = f"{_pair('PCIe', *pcie, unit=False)} · {second}"
    return short if len(short) <= width else short.replace(" · ", " ")


def gpu_lines(
    sample: GpuSample | None,
    width: int,
    ended: bool = False,
    nvlink_links: int | None = None,
    peer_limit_w: float | None = None,
) -> Content:
    """The body of a full GPU card (5 lines); ``ended``: the run is over, so no
    sample is coming; ``nvlink_links``: the GPU's active NVLink links, where the
    device information says (0: the link line says ``no NVLink``); ``peer_limit_w``
    as :func:`slowdown_tag` takes it: what holds the GPU down is said first, as a
    warning, the clocks' other reasons (a power cap its peers share, ``gpu_idle``)
    after the rest, plainly."""
    if sample is None:
        return Content(
            "no samples of this GPU in this run" if ended else "waiting for the first sample…"
        )
    util = sample.util_gpu_pct
    lines = [_gauge("util", util, width, f"{fmt.format_number(util, '3.0f', '%')}")]
    mem_pct = (
        100 * sample.mem_used_bytes / sample.mem_total_bytes
        if sample.mem_used_bytes is not None and sample.mem_total_bytes
        else None
    )
    mem_tail = f"{fmt.format_gb(sample.mem_used_bytes)}/{fmt.format_gb(sample.mem_total_bytes)} GB"
    lines.append(_gauge("mem ", mem_pct, width, mem_tail))
    power = f"{fmt.format_number(sample.power_w)}/{fmt.format_number(sample.power_limit_w)} W"
    temp = f"{fmt.format_number(sample.temp_c)} °C"
    clock = f"SM {fmt.format_number(sample.sm_clock_mhz)} MHz"
    lines.append(Content(f"{power} · {temp} · {clock}"))
    lines.append(Content(links_text(sample, width, nvlink_links)))
    if sample.gpm_sm_activity_pct is None and sample.gpm_tensor_activity_pct is None:
        gpm = Content.styled("GPM activity n/a", "$text-muted")
    else:
        gpm = Content(
            f"GPM SM {fmt.format_pct(sample.gpm_sm_activity_pct)}"
            f" · tensor {fmt.format_pct(sample.gpm_tensor_activity_pct)}"
        )
    held = held_down_reasons(sample.throttle_reasons, sample.power_limit_w, peer_limit_w)
    if held:  # first, so a narrow card cuts the GPM numbers, not this
        words = ", ".join(SLOWDOWNS[reason] for reason in held)
        gpm = Content.styled(f"throttled: {words}", "$text-warning") + " · " + gpm
    reasons = sample.throttle_reasons or ()
    others = [SLOWDOWNS[r] for r in slowdowns(reasons) if r not in held]
    others += [r for r in reasons if r not in SLOWDOWNS]  # gpu_idle, sync_boost, ...
    if others:  # every GPU under full load reaches its cap: no alarm
        gpm = gpm + Content.styled(" · clocks: " + ", ".join(others), "$text-muted")
    lines.append(gpm)
    return Content("\n").join(lines)


def gpu_line(device: DeviceState, width: int, peer_limit_w: float | None = None) -> Content:
    """A GPU in one line (compact mode); a GPU held down shows why in place of its
    bar and memory (:func:`slowdown_tag`, ``peer_limit_w`` as there)."""
    name = f"GPU{device.index}" if device.worker == 0 else f"w{device.worker}/GPU{device.index}"
    if device.lost:
        return Content.assemble(
            (name, "bold"), " ", ("LOST (fell off the bus)", "bold $text-error")
        )
    sample = device.last
    if sample is None:
        return Content.assemble((name, "bold"), " waiting…")
    util = sample.util_gpu_pct
    mem = f"{fmt.format_gb(sample.mem_used_bytes)}/{fmt.format_gb(sample.mem_total_bytes)}G"
    tail = f" {fmt.format_number(util, '3.0f', '%')} {mem} {fmt.format_number(sample.power_w)}W {fmt.format_number(sample.temp_c)}°C"
    tag = slowdown_tag(sample, peer_limit_w)
    if tag is not None:  # why, in place of the bar and the memory (which it makes room for)
        tail = f" {fmt.format_number(util, '3.0f', '%')} {fmt.format_number(sample.power_w)}W {fmt.format_number(sample.temp_c)}°C"
        tag_width = max(width - len(name) - len(tail) - 1, len(tag))
        return Content.assemble(
            (name, "bold"), " ", (tag.ljust(tag_width), "bold $text-warning"), tail
        )
    bar_width = max(width - len(name) - len(tail) - 1, 3)
    return Content.assemble(
        (name, "bold"), " ", (fmt.text_gauge(util, bar_width), _pct_style(util)), tail
    )


def trainer_text(
    host: HostSample,
    trainer: HostSample | None,
    ended: bool,
    compact: bool,
    who: str = "trainer",
) -> str:
    """The run's own processes: CPU (share of one core) and resident memory. A sample
    that did not measure them (they exited: no size, or a zero one) shows the latest
    sample that did (``trainer``), or "ended" once the run is over: never a zero or
    an n/a that only says the processes are gone. ``who``: ``trainer`` (gpuscale's)
    or ``script`` (the user's own, ``watch -- COMMAND``)."""
    measured = bool(host.proc_rss_bytes)
    if ended and not measured:
        if compact or trainer is None:
            return f"{who} ended"
        return f"{who} ended · RSS was {fmt.format_bytes(trainer.proc_rss_bytes)}"
    shown = host if measured else trainer
    if shown is None:
        return f"{who} n/a" if compact else f"{who} CPU n/a · RSS n/a"
    cpu, rss = fmt.format_pct(shown.proc_cpu_pct), fmt.format_bytes(shown.proc_rss_bytes)
    return f"{who} {cpu} {rss}" if compact else f"{who} CPU {cpu} · RSS {rss}"


def host_lines(
    host: HostSample | None,
    width: int,
    compact: bool,
    ended: bool = False,
    trainer: HostSample | None = None,
    who: str = "trainer",
) -> Content:
    """The host: all-core CPU, memory, and the trainer's own CPU and memory
    (``trainer``: the latest sample that measured them, see :func:`trainer_text`);
    ``ended``: the run is over, so no sample is coming."""
    if host is None:
        if ended:
            return Content("host: no host samples in this run")
        return Content("host: waiting for the first sample…")
    mem_pct = 100 * host.mem_used_bytes / host.mem_total_bytes if host.mem_total_bytes else None
    mem_tail = f"{fmt.format_gb(host.mem_used_bytes)}/{fmt.format_gb(host.mem_total_bytes)} GB"
    if compact:
        tail = f" {host.cpu_pct:3.0f}% · {trainer_text(host, trainer, ended, True, who)}"
        bar_width = max(width - len("host") - len(tail) - 1, 3)
        return Content.assemble(
            ("host", "bold"),
            " ",
            (fmt.text_gauge(host.cpu_pct, bar_width), _pct_style(host.cpu_pct)),
            tail,
        )
    return Content("\n").join(
        [
            _gauge("CPU ", host.cpu_pct, width, f"{host.cpu_pct:3.0f}%"),
            _gauge("mem ", mem_pct, width, mem_tail),
            Content(trainer_text(host, trainer, ended, False, who)),
            Content.styled(f"{who} % = share of one core", "$text-muted"),
            Content.styled("all-core CPU % over time:", "$text-muted"),
        ]
    )


class DeviceCard(Vertical):
    """One device (or the host): a text body and its utilization history; a GPU that
    reads GPM, its SM activity's history beside it (``busy ▁▁██ SM ▁▁█▁``: busy is not
    working)."""

    def __init__(self, key: str, title: str) -> None:
        super().__init__(classes="card")
        self.key = key
        self.border_title = title
        self.body = Static(classes="card-body")
        self.spark = PercentSparkline([], classes="card-spark")
        self.spark_label = Static("busy", classes="spark-label")
        self.sm_label = Static("SM", classes="spark-label sm")
        self.sm_spark = PercentSparkline([], classes="card-spark sm")
        for widget in (self.spark_label, self.sm_label, self.sm_spark):
            widget.display = False  # until a GPU's GPM history shows
        self.sparks = Horizontal(
            self.spark_label, self.spark, self.sm_label, self.sm_spark, classes="card-sparks"
        )

    def compose(self):
        yield self.body
        yield self.sparks

    def show_sparks(self, busy: list[float], sm: list[float]) -> None:
        """The busy history, and beside it the SM activity's where there is one (GPM);
        without it the busy one alone, across the card."""
        self.spark.data = busy or [0.0]
        working = bool(sm)
        for widget in (self.spark_label, self.sm_label, self.sm_spark):
            widget.display = working
        if working:
            self.sm_spark.data = sm

    def show_device(
        self,
        device: DeviceState,
        compact: bool,
        width: int,
        ended: bool = False,
        replicas: int = 1,
        peer_limit_w: float | None = None,
    ) -> None:
        """``replicas``: how many replicas the run has (the card of a lone CPU
        replica does not speak of others); ``peer_limit_w``: the highest power limit
        of the same GPUs on its machine (:func:`slowdown_tag`)."""
        body = self.body
        info = device.info
        self.set_class(device.lost, "lost")
        if device.kind != "gpu":
            if device.kind == "cpu":  # one worker's CPU device: its replica over gRPC
                short = " this worker's replica"
                lines = [
                    f"worker {device.worker}'s replica, on",
                    "its CPU cores (one CPU device",
                    "per worker, all-reduce over",
                    "gRPC): see the host card",
                ]
            else:  # a CPU logical device
                short = " logical device, uses host cores"
                lines = (
                    [
                        "one replica on the host's CPU",
                        "cores, shared with the other",
                        "replicas: no per-device numbers,",
                    ]
                    if replicas > 1
                    else [
                        "the run's only replica, on",
                        "the host's CPU cores: no per-",
                        "device numbers,",
                    ]
                ) + ["see the host card"]
            tf_name = (info.tf_name or "").rsplit("/", 1)[-1] if info else ""
            body.update(
                Content.assemble((f"CPU:{device.index}", "bold"), short)
                if compact
                else Content("\n").join(
                    [
                        *map(Content, lines),
                        Content.styled(f"TensorFlow {fmt.visible(tf_name)}", "$text-muted"),
                    ]
                )
            )
            self.sparks.display = False
            return
        if compact:
            body.update(gpu_line(device, width, peer_limit_w))
            return
        if device.lost:
            body.update(
                Content.styled(
                    "LOST: the GPU fell off the bus\n(NVML reports GpuIsLost);\nno further samples",
                    "bold $text-error",
                )
            )
        else:
            links = info.nvlink_links if info is not None else None
            body.update(gpu_lines(device.last, width, ended, links, peer_limit_w))
        self.show_sparks(list(device.util_history_pct), list(device.sm_history_pct))
        used = device.last.proc_mem_bytes if device.last is not None else None
        self.border_subtitle = f"run uses {fmt.format_bytes(used)}" if used is not None else ""

    def show_host(
        self,
        host: HostSample | None,
        history: list[float],
        compact: bool,
        width: int,
        ended: bool = False,
        trainer: HostSample | None = None,
        who: str = "trainer",
    ) -> None:
        self.body.update(host_lines(host, width, compact, ended, trainer, who))
        if not compact:
            self.show_sparks(history, [])


def device_title(device: DeviceState, workers: int = 1) -> str:
    """``workers``: the run's workers (with several, every card names its worker)."""
    info = device.info
    prefix = f"worker {device.worker} · " if device.worker or workers > 1 else ""
    if device.kind == "cpu":  # a worker's own CPU device (multi-worker), not a logical one
        return f"{prefix}CPU:{device.index}"
    if device.kind != "gpu":
        return f"{prefix}CPU:{device.index} (logical)"
    name = fmt.visible(info.name, limit=60) if info is not None else ""
    return (
        f"{prefix}GPU {device.index} · {name}"
        if name and name != f"GPU {device.index}"
        else f"{prefix}GPU {device.index}"
    )


def _workers(snap: Snapshot) -> int:
    return snap.start.num_workers if snap.start is not None else 1


def peer_limits_w(devices: list[DeviceState]) -> dict[tuple[int, str], float]:
    """The highest power limit of each kind of GPU on each machine, by
    ``(worker, name)``: what a GPU's own limit is compared with (:func:`slowdown_tag`)."""
    return _peer_limits_w(
        (
            device.worker,
            device.info.name if device.info is not None else "",
            device.last.power_limit_w,
        )
        for device in devices
        if device.kind == "gpu" and device.last is not None
    )


class DeviceGrid(Vertical, can_focus=True):
    """All device cards, wrapping to the width; condensed when space is short."""

    BORDER_TITLE = "Devices"

    def __init__(
        self,
        *,
        id: str | None = None,
        max_share: float = MAX_SHARE_OF_SCREEN,
        rows_left: Callable[[int, int], int] | None = None,
    ) -> None:
        super().__init__(id=id)
        self.rows_left = rows_left or (lambda width, height: MIN_ROWS_LEFT)
        """The rows full cards must leave to the rest of a ``width`` x ``height``
        screen, else they condense (:data:`MIN_ROWS_LEFT` unless given)."""
        self._keys: list[str] = []
        self._cards: list[DeviceCard] = []
        self._snap: Snapshot | None = None
        self.compact = False
        self.max_share = max_share
        """Full cards take at most this share of the screen's height, else one line each."""

    def _layout_for(self, count: int) -> tuple[int, bool, int]:
        """(columns, compact, text width inside one card) for ``count`` cards,
        computed from the screen size so it does not wait for a layout pass."""
        width = max(self.app.size.width, 1)
        screen_height = self.app.size.height
        columns = max(1, width // CARD_MIN_WIDTH)
        rows = math.ceil(count / columns)
        cards_height = rows * CARD_HEIGHT
        if (
            cards_height <= screen_height * self.max_share
            and screen_height - cards_height >= self.rows_left(width, screen_height)
        ):
            card_width = (width - (columns - 1)) // columns
            return columns, False, card_width - 4  # border and padding
        columns = max(1, width // COMPACT_MIN_WIDTH)
        return columns, True, (width - (columns - 1)) // columns - 1 - COMPACT_MARK_WIDTH

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_again)

    def _show_again(self) -> None:
        """The last snapshot again (a resize, new cards mounted): the grid redraws
        itself, whichever app it is in."""
        if self._snap is not None:
            self.show(self._snap)

    def show(self, snap: Snapshot) -> None:
        self._snap = snap
        keys = [HOST_KEY] + [f"{d.worker}-{d.index}" for d in snap.devices]
        if keys != self._keys:
            self._keys = keys
            self.remove_children()  # completes later: never query the cards, keep the list
            cards = [DeviceCard(HOST_KEY, "host")]
            cards += [
                DeviceCard(key, device_title(d, _workers(snap)))
                for key, d in zip(keys[1:], snap.devices, strict=False)
            ]
            self._cards = cards
            self.mount_all(cards)
            self.call_after_refresh(self._show_again)
            return
        columns, compact, text_width = self._layout_for(len(keys))
        self.compact = compact
        self.set_class(compact, "compact")
        self.styles.grid_size_columns = columns
        cards = self._cards
        if not cards:
            return
        ended = snap.end is not None
        who = "script" if snap.start is not None and snap.start.source == "script" else "trainer"
        cards[0].show_host(
            snap.host, snap.host_cpu_history_pct, compact, text_width, ended, snap.host_trainer, who
        )
        limits = peer_limits_w(snap.devices)
        for card, device in zip(cards[1:], snap.devices, strict=False):
            card.border_title = device_title(device, _workers(snap))
            name = device.info.name if device.info is not None else ""
            card.show_device(
                device,
                compact,
                text_width,
                ended,
                replicas=len(snap.devices),
                peer_limit_w=limits.get((device.worker, name)),
            )
