"""The sweeps among the recordings: the runs one ``gpuscale recommend`` made, one
per device count, found again as one thing.

* **Exact** (format 1.3 on): every run of a sweep carries the same
  :class:`~gpuscale.events.schema.SweepRef` in its start event (the sweep's id, the
  run's index, the counts planned). Runs are grouped by that id, whatever their
  status, in the order of their index.
* **Guessed** (recordings without a sweep id, before format 1.3): completed runs of
  one model on one platform with a growing device count, each starting within
  :data:`SWEEP_GAP_S` of the previous one's end. Such a group is named
  ``guess-YYYYMMDD-HHMMSS`` after its first run's start (local time), and says it
  is a guess wherever it is shown.

A sweep is named on the command line by its name as ``gpuscale runs`` shows it (or
a unique prefix of it, ``sweep`` or ``guess`` at the shortest), alone (looked up in the runs folder) or after a folder
(``DIR/sweep-...``); :func:`resolve_inputs` turns such names into the recordings of
the sweep, for ``gpuscale replay`` and ``gpuscale recommend --from``.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import msgspec

from gpuscale.errors import GpuscaleError
from gpuscale.formatting import plural
from gpuscale.recording.store import RunInfo, find_run, list_runs, name_says, runs_dir

SWEEP_PREFIX = "sweep-"
"""How every sweep id begins (recording file names begin with a digit)."""
GUESS_PREFIX = "guess-"
"""How the name of a guessed group begins."""
SWEEP_GAP_S = 600.0
"""Guessed groups: a run starts within this many seconds of the previous one's end."""


def new_sweep_id(when: datetime | None = None) -> str:
    """A fresh sweep id: ``sweep-`` + the local time (``YYYYMMDD-HHMMSS``) + 4 random
    hex digits, e.g. ``sweep-20261123-125500-3f2a``: sorts by time, reads like the
    recordings' names, and two sweeps begun in the same second differ."""
    when = when or datetime.now()
    return f"{SWEEP_PREFIX}{when:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class SweepGroup(msgspec.Struct, kw_only=True):
    """The recordings of one sweep."""

    name: str
    """The sweep id, or ``guess-...`` for a guessed group."""
    exact: bool
    """True: grouped by the sweep id the runs carry; False: a guess (no id)."""
    runs: list[RunInfo]
    """In the sweep's order (index, then start time)."""
    planned: list[int]
    """The device counts the sweep set out to measure (a guess: the counts it has)."""
    unreadable: dict[int, RunInfo] = {}
    """Counts not measured whose recording is there but cannot be read (listed
    ``unreadable``, so it says no sweep): found by its file name
    (:func:`_unreadable_counts`). Said as ``2 (unreadable: its gzip data is
    damaged)``, never as not run."""

    @property
    def model(self) -> str:
        return next((r.model for r in self.runs if r.model != "?"), "?")

    @property
    def platform(self) -> str:
        """The runs' platform; CPU logical devices where a guessed group joins a
        script's one-CPU run (``cpu``) to its runs on CPU logical devices."""
        platforms = {r.platform for r in self.runs}
        if platforms == {"cpu", "cpu-logical"}:
            return "cpu-logical"
        return self.runs[0].platform if self.runs else "?"

    @property
    def measured(self) -> list[int]:
        """Device counts with a completed run, or with a run cut short (stopped,
        interrupted) after counting steps: what the sweep measured."""
        return sorted({r.devices for r in self.readable})

    @property
    def readable(self) -> list[RunInfo]:
        """The runs ``recommend --from`` reads of the sweep: the completed ones, and
        for a count without one, its runs cut short that counted steps (what they
        counted is a measurement; given by path they are read the same way)."""
        done = {r.devices for r in self.runs if r.status == "completed"}
        return [
            r
            for r in self.runs
            if r.status == "completed" or (r.devices not in done and counted_before_cut(r))
        ]

    @property
    def cut_short(self) -> list[int]:
        """Measured counts whose run was cut short (no completed run)."""
        return sorted({r.devices for r in self.readable if r.status != "completed"})

    def measured_text(self, counts: list[int] | None = None) -> str:
        """The measured counts (or ``counts`` of them), each cut short one with what
        it counted: ``1 (stopped, 169 steps counted), 2``; ``none``."""
        parts = []
        for n in self.measured if counts is None else counts:
            cut = [r for r in self.readable if r.devices == n and r.status != "completed"]
            if not cut:
                parts.append(str(n))
                continue
            run = cut[-1]
            if run.steps_counted is not None:
                what = f"{plural(run.steps_counted, 'step')} counted"
            else:
                what = f"{plural(run.steps or 0, 'step')} recorded"
            damaged = ", its recording damaged" if run.damage else ""
            parts.append(f"{n} ({run.status}, {what}{damaged})")
        return ", ".join(parts) or "none"

    @property
    def missing(self) -> list[int]:
        """Planned counts not measured (:attr:`measured`)."""
        measured = set(self.measured)
        return [n for n in self.planned if n not in measured]

    def why_missing(self) -> list[str]:
        """One phrase per missing count: ``4 (stopped)``, ``8 (not run)``."""
        out = []
        for n in self.missing:
            statuses = [r.status for r in self.runs if r.devices == n]
            if n in self.unreadable:
                statuses.append(f"unreadable: {self.unreadable[n].problem}")
            out.append(f"{n} ({', '.join(dict.fromkeys(statuses)) if statuses else 'not run'})")
        return out

    def unreadable_warnings(self) -> list[str]:
        """One line per count whose recording cannot be read: the warning ``replay``
        and ``recommend --from`` give when the sweep is named."""
        return [
            f"sweep {self.name}: its {n}-device recording {run.path} is unreadable: "
            f"{run.problem}; {plural(n, 'device')} not measured"
            for n, run in sorted(self.unreadable.items())
        ]

    def describe(self) -> str:
        """One line: which sweep, what it measured, what it did not."""
        measured = self.measured_text()
        where = f"{self.model} on {_platform_word(self.platform)}"
        if not self.exact:
            return (
                f"sweep {self.name} ({where}; grouped by a guess: recorded alone, not by a "
                f"sweep, or before sweep ids): measured on {plural(self.measured, 'device') if self.measured else 'none'}"
            )
        line = f"sweep {self.name} ({where}): planned {plural(self.planned, 'device')}, measured {measured}"
        if self.missing:
            line += "; not measured: " + ", ".join(self.why_missing())
        return line

    def to_json(self) -> dict:
        """What ``gpuscale runs --json`` lists for the sweep."""
        return {
            "id": self.name,
            "guessed": not self.exact,
            "model": self.model,
            "platform": self.platform,
            "planned": list(self.planned),
            "measured": self.measured,
            "cut_short": self.cut_short,
            "missing": self.missing,
            "recordings": [
                {"path": r.path, "devices": r.devices, "status": r.status} for r in self.runs
            ]
            + [
                {"path": r.path, "devices": n, "status": r.status, "problem": r.problem}
                for n, r in sorted(self.unreadable.items())
            ],
        }


CUT_SHORT_STATUSES = ("stopped", "interrupted")
"""Statuses of a run cut short whose counted steps are still a measurement:
stopped (Ctrl-C, SIGTERM), interrupted (killed: no end event)."""


def counted_before_cut(run: RunInfo) -> bool:
    """Whether ``run`` was cut short after counting steps (its end's summary says
    how many; a run without one, interrupted, is taken to have counted some when
    it has steps: the reader leaves it out if they were all warm-up)."""
    if run.status not in CUT_SHORT_STATUSES:
        return False
    return bool(run.steps_counted if run.steps_counted is not None else run.steps)


def _platform_word(platform: str) -> str:
    return {"cpu-logical": "CPU logical devices", "cpu": "CPUs", "gpu": "GPUs"}.get(
        platform, platform
    )


def sweep_groups(runs: Sequence[RunInfo]) -> list[SweepGroup]:
    """The sweeps among ``runs``, oldest first: exact groups (every run carrying one
    sweep id, however many) and, among the runs without an id, guessed groups of
    two runs or more."""
    by_id: dict[str, list[RunInfo]] = {}
    for run in runs:
        if run.sweep is not None:
            by_id.setdefault(run.sweep.id, []).append(run)
    groups = []
    for sweep_id, members in by_id.items():
        members.sort(key=lambda r: (r.sweep.index, r.start_t or 0.0, r.path))  # type: ignore[union-attr]
        planned: list[int] = []
        for run in members:  # every run says the same; a union if they do not
            planned += [n for n in run.sweep.planned if n not in planned]  # type: ignore[union-attr]
        planned += [r.devices for r in members if r.devices and r.devices not in planned]
        groups.append(SweepGroup(name=sweep_id, exact=True, runs=members, planned=planned))
    _unreadable_counts(groups, [r for r in runs if r.status == "unreadable"])
    groups += _guessed_groups([r for r in runs if r.sweep is None])
    groups.sort(key=lambda g: (min((r.start_t or 0.0) for r in g.runs), g.name))
    return groups


_NAME_TIME = re.compile(r"^(\d{8}-\d{6})_")
_ID_TIME = re.compile(r"^" + re.escape(SWEEP_PREFIX) + r"(\d{8}-\d{6})-")


def _local_time(stamp: str) -> float | None:
    """``YYYYMMDD-HHMMSS`` (local time, as recordings and sweep ids are named) as
    seconds since the epoch."""
    try:
        return datetime.strptime(stamp, "%Y%m%d-%H%M%S").timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _unreadable_counts(groups: list[SweepGroup], unreadable: list[RunInfo]) -> None:
    """Give each exact sweep the unreadable recordings of the counts it did not
    measure (:attr:`SweepGroup.unreadable`). An unreadable file says no sweep; its
    name does, as gpuscale names recordings (``20261127-205347_mnist-cnn_2xcpu.ndjson``):
    the sweep's model and a count it planned but did not measure, at a time from when
    the sweep began (its id says) to :data:`SWEEP_GAP_S` after its last run ended.
    Each file goes to one count of one sweep, the first that fits."""
    for run in unreadable:
        name = Path(run.path).name
        stamp = _NAME_TIME.match(name)
        when = _local_time(stamp.group(1)) if stamp else None
        if when is None:
            continue
        for group in groups:
            began = _ID_TIME.match(group.name)
            first = _local_time(began.group(1)) if began else None
            starts = [r.start_t for r in group.runs if r.start_t is not None]
            if first is None:
                first = min(starts, default=when) - SWEEP_GAP_S
            last = max(
                ((r.start_t or 0.0) + (r.duration_s or 0.0) for r in group.runs), default=first
            )
            if not first - 1 <= when <= last + SWEEP_GAP_S:
                continue
            short = "cpu" if group.platform.startswith("cpu") else group.platform
            count = next(
                (
                    n
                    for n in group.missing
                    if n not in group.unreadable and name_says(name, group.model, f"{n}x{short}")
                ),
                None,
            )
            if count is not None:
                group.unreadable = {**group.unreadable, count: run}
                break


def _family(platform: str) -> str:
    """GPUs or CPUs: a script's run on one CPU says ``cpu`` (its strategy saw one
    device), its runs on 2 or more CPU logical devices ``cpu-logical``; the same
    sweep (:func:`gpuscale.analysis.model` takes them together too)."""
    return "cpu" if platform.startswith("cpu") else platform


def _same_program(a: RunInfo, b: RunInfo) -> bool:
    """One model by its name, and by who ran it and its gradient bytes where both
    runs say them: a script's ``mlp`` (the Keras model's name) and the built-in
    trainer's ``mlp`` are different networks, as are two with different payloads."""
    if a.model != b.model or a.source != b.source:
        return False
    return a.payload_bytes is None or b.payload_bytes is None or a.payload_bytes == b.payload_bytes


def _guessed_groups(runs: Sequence[RunInfo]) -> list[SweepGroup]:
    done = sorted(
        (r for r in runs if r.status == "completed" and r.start_t is not None and r.devices),
        key=lambda r: r.start_t or 0.0,
    )
    chains: list[list[RunInfo]] = []
    current: list[RunInfo] = []
    for run in done:
        if current:
            last = current[-1]
            end = (last.start_t or 0.0) + (last.duration_s or 0.0)
            if (
                # one program with every run of the chain, not the last alone (a run
                # that does not say its payload would join 100 and 200 bytes' runs)
                all(_same_program(run, earlier) for earlier in current)
                and _family(run.platform) == _family(last.platform)
                and run.devices > last.devices
                and (run.start_t or 0.0) - end <= SWEEP_GAP_S
            ):
                current.append(run)
                continue
            chains.append(current)
        current = [run]
    chains.append(current)
    groups = []
    for chain in chains:
        if len(chain) < 2:
            continue
        when = chain[0].when
        stamp = when.strftime("%Y%m%d-%H%M%S") if when else Path(chain[0].path).name
        groups.append(
            SweepGroup(
                name=f"{GUESS_PREFIX}{stamp}",
                exact=False,
                runs=chain,
                planned=[r.devices for r in chain],
            )
        )
    return groups


def is_sweep_name(name: str) -> bool:
    """Whether ``name`` (or its last part, after a folder) names a sweep: it begins
    with ``sweep-`` or ``guess-``, or is ``sweep`` or ``guess`` alone (the shortest
    beginning: the only sweep, or the only guessed one). A name such as
    ``sweep.json`` stays a file name."""
    base = name.replace(os.sep, "/").rstrip("/").rpartition("/")[2]
    prefixes = (SWEEP_PREFIX, GUESS_PREFIX)
    return base.startswith(prefixes) or base in {p.rstrip("-") for p in prefixes}


def find_sweep(name: str, directory: str | os.PathLike | None = None) -> SweepGroup:
    """The sweep ``name`` (its id or a unique prefix; ``DIR/NAME`` looks in DIR),
    among the recordings in ``directory`` (default :func:`runs_dir`). One-line
    :class:`GpuscaleError` when none or several match."""
    folder_part, _, base = name.replace(os.sep, "/").rstrip("/").rpartition("/")
    if folder_part:
        folder = Path(folder_part).expanduser()
    else:
        folder = Path(directory) if directory is not None else runs_dir()
    if not folder.is_dir():
        raise GpuscaleError(f"{name}: no sweep of that name: no recordings in {folder} yet")
    groups = sweep_groups(list_runs(folder))
    exact = [g for g in groups if g.name == base]
    matches = exact or [g for g in groups if g.name.startswith(base)]
    if not matches:
        kind = "guessed sweep" if base.startswith(GUESS_PREFIX.rstrip("-")) else "sweep"
        raise GpuscaleError(
            f"{name}: no {kind} of that name in {folder} ('gpuscale runs"
            f"{'' if directory is None and not folder_part else f' --dir {folder}'}' lists them)"
        )
    if len(matches) > 1:
        listed = ", ".join(g.name for g in matches[:4]) + (", ..." if len(matches) > 4 else "")
        raise GpuscaleError(
            f"{name}: {len(matches)} sweeps in {folder} begin so ({listed}); give more of the name"
        )
    return matches[0]


class Resolved(msgspec.Struct, kw_only=True):
    """Inputs with every sweep name replaced by its measured recordings."""

    paths: list[Path]
    cut_short: list[Path] = []
    """Those of ``paths`` that are a sweep's runs cut short (stopped, interrupted):
    one that turns out to have counted no step is left out, with a warning."""
    sweeps: list[SweepGroup]
    """The sweeps named, in order."""
    notes: list[str]
    """One line per sweep named: :meth:`SweepGroup.describe`."""
    warnings: list[str] = []
    """One line per count of a sweep named whose recording cannot be read
    (:meth:`SweepGroup.unreadable_warnings`)."""


def resolve_inputs(
    names: Sequence[str | os.PathLike], directory: str | os.PathLike | None = None
) -> Resolved:
    """``names`` as paths: an existing file stays itself; a bare name that is none
    (no folder in it) is a recording in the runs folder whose file name begins so
    (:func:`~gpuscale.recording.store.find_run`: one line when none or several); a sweep's name (see
    :func:`find_sweep`) becomes its measured recordings (:attr:`SweepGroup.readable`:
    completed runs, and runs stopped or interrupted after counting steps, which
    :meth:`SweepGroup.describe` says; a failed run measured nothing); anything
    else is left for the reader to refuse."""
    paths: list[Path] = []
    cut_short: list[Path] = []
    sweeps: list[SweepGroup] = []
    warnings: list[str] = []
    for raw in names:
        name = str(raw)
        if Path(name).expanduser().exists():
            paths.append(Path(name))
            continue
        if not is_sweep_name(name):
            # a recording's file name as `gpuscale runs` lists it (or a unique
            # beginning of it), in the runs folder; a path is left for the reader
            if os.sep in name or "/" in name or not name:
                paths.append(Path(name))
            else:
                paths.append(find_run(name, directory))
            continue
        group = find_sweep(name, directory)
        readable = group.readable
        if not readable:
            statuses = ", ".join(
                [f"{r.devices}: {r.status}" for r in group.runs]
                + [f"{n}: unreadable ({r.problem})" for n, r in sorted(group.unreadable.items())]
            )
            raise GpuscaleError(
                f"{name}: sweep {group.name} has no run with counted steps to read ({statuses})"
            )
        paths += [Path(r.path) for r in readable]
        cut_short += [Path(r.path) for r in readable if r.status != "completed"]
        sweeps.append(group)
        warnings += group.unreadable_warnings()
    return Resolved(
        paths=paths,
        cut_short=cut_short,
        sweeps=sweeps,
        notes=[g.describe() for g in sweeps],
        warnings=warnings,
    )


__all__ = [
    "GUESS_PREFIX",
    "SWEEP_PREFIX",
    "Resolved",
    "SweepGroup",
    "find_sweep",
    "is_sweep_name",
    "new_sweep_id",
    "resolve_inputs",
    "sweep_groups",
]
