"""Where recordings live, what they are called, and a cheap listing of them.

Runs are stored in ``<data dir>/runs/``, where the data dir is
``$GPUSCALE_DATA_DIR`` when set, else ``platformdirs.user_data_dir("gpuscale")``
(``~/.local/share/gpuscale`` on Linux, ``~/Library/Application Support/gpuscale``
on macOS). A run's file name says when it started (local time), which model
and how many devices: ``20261121-193000_mnist-cnn_2xcpu.ndjson``.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

import msgspec

from gpuscale.errors import GpuscaleError
from gpuscale.events.bounded import JsonInputError, check_depth, open_untrusted
from gpuscale.events.run_name import script_name
from gpuscale.events.schema import (
    EndEvent,
    Event,
    StartEvent,
    StepEvent,
    SweepRef,
    run_duration_s,
)
from gpuscale.recording.format import (
    DECODE_ERRORS,
    GZIP_CUT_AT_START,
    GZIP_MAGIC,
    MAX_LINE_BYTES,
    READER_MINOR,
    SUFFIXES,
    is_gzip_damage_warning,
    parse_version,
    version_problem,
)
from gpuscale.recording.liveness import writer_alive
from gpuscale.recording.reader import (
    START_FURTHER_IN,
    GzipCut,
    GzipDamaged,
    RecordingError,
    gunzip_chunks,
    iter_events,
    joined_events,
)

ENV_DATA_DIR = "GPUSCALE_DATA_DIR"
TAIL_BYTES = 64 * 1024
"""How much of a file's end :func:`list_runs` reads to find its end event."""

LIST_GZIP_BYTES = 8 * 1024 * 1024
"""Most compressed bytes :func:`list_runs` decompresses of one ``.gz`` recording
to find its end (a gzip stream can only be read from its start): about a second.
A larger file is listed from its first line, with status ``unscanned``."""

_PLATFORM_SHORT = {"gpu": "gpu", "cpu-logical": "cpu", "cpu": "cpu"}


def data_dir() -> Path:
    """gpuscale's data folder: ``$GPUSCALE_DATA_DIR`` or the platform's user data dir."""
    override = os.environ.get(ENV_DATA_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("gpuscale", appauthor=False))


def runs_dir() -> Path:
    """The folder recordings are written to by default (may not exist yet)."""
    return data_dir() / "runs"


def screenshots_dir() -> Path:
    """The folder the dashboard saves its SVG screenshots to (may not exist yet)."""
    return data_dir() / "screenshots"


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return slug[:limit].strip("-.") or "run"


def default_path(
    model: str,
    devices: int,
    platform: str,
    when: datetime | None = None,
    *,
    compress: bool = False,
) -> Path:
    """A fresh path in :func:`runs_dir` for a run of ``model`` on ``devices``
    devices of ``platform`` (``gpu``, ``cpu-logical`` or ``cpu``) started at
    ``when`` (default now, local time), e.g.
    ``.../runs/20261121-193000_mnist-cnn_2xcpu.ndjson``. If that name is taken,
    ``-2``, ``-3``, ... is appended. ``compress`` gives a ``.ndjson.gz`` name."""
    when = when or datetime.now()
    stamp = when.strftime("%Y%m%d-%H%M%S")
    device_part = f"{max(int(devices), 0)}x{_PLATFORM_SHORT.get(platform, _slug(platform, 12))}"
    stem = f"{stamp}_{_slug(model)}_{device_part}"
    suffix = ".ndjson.gz" if compress else ".ndjson"
    folder = runs_dir()
    candidate = folder / f"{stem}{suffix}"
    number = 2
    while candidate.exists():
        candidate = folder / f"{stem}-{number}{suffix}"
        number += 1
    return candidate


def device_text(run: RunInfo) -> str:
    """A run's devices as its default file name and ``gpuscale runs`` say them:
    ``2xcpu``, ``8xgpu``."""
    return f"{run.devices}x{'cpu' if run.platform.startswith('cpu') else run.platform}"


def name_says(name: str, model: str, devices: str) -> bool:
    """Whether a recording's file ``name`` carries its ``model`` and ``devices``
    (``2xcpu``), as :func:`default_path` names it."""
    return f"_{_slug(model)}_{devices}" in name


class RunInfo(msgspec.Struct, kw_only=True):
    """One recording as :func:`list_runs` sees it, read cheaply (first line and tail)."""

    path: str
    start_t: float | None
    """Start time, seconds since the Unix epoch (the start event's ``t``)."""
    model: str
    devices: int
    """Replicas of the run (``num_replicas``: devices across all workers)."""
    platform: str
    steps: int | None
    """From the end event; for a run without one, the highest step number seen
    near the end of the file (``None`` if none)."""
    steps_counted: int | None = None
    """Steps its median is of (warm-up left out), from the end event's summary (0
    when the summary leaves it out: it omits what is at its default); ``None`` when
    there is no summary (no end event, an older recording)."""
    duration_s: float | None
    """:func:`~gpuscale.events.schema.run_duration_s`: from the start event (start-up
    not included) to the end event, or to the last event of a run with none."""
    size_bytes: int
    status: str
    """The end event's status (``completed``, ``stopped``, ``failed``, ``lost``),
    ``running`` (no end event yet, and the process that writes it is alive on this
    host: :mod:`~gpuscale.recording.liveness`), ``interrupted`` (no end event, and
    no writer alive: killed; the word ``runs``, ``replay`` and the dashboard show), ``unscanned`` (a
    ``.gz`` too large to decompress for a listing: see :data:`LIST_GZIP_BYTES`)
    or ``unreadable``."""
    problem: str | None = None
    """Why the file cannot be read, when ``status`` is ``unreadable``."""
    damage: str | None = None
    """What damage the listing forgave in a file it lists (the reader says the same
    and reads what it lists): gzip data damaged after some lines (``its gzip data is
    damaged after line 90: the 90 lines before it are read``), a damaged first line
    before the run's start event (``line 1: ...: read from the start event on line
    4``). ``None`` when none."""
    sweep: SweepRef | None = None
    """The sweep the run is one count of (its start event's ``sweep``, format 1.3 on)."""
    strategy: str = ""
    """The start event's ``strategy`` (``mirrored``, ``multi-worker``, ...; empty when
    unknown)."""
    workers: int = 1
    """Worker processes of the run (the start event's ``num_workers``)."""
    source: str = "trainer"
    """Who produced the run (the start event's ``source``: ``trainer``, ``script``)."""
    payload_bytes: int | None = None
    """Gradient bytes per step (the start event's ``payload_bytes``; ``None``: not
    known): two runs of one model name with different payloads are different models."""

    @property
    def when(self) -> datetime | None:
        """Start time as a local datetime (``None`` when it has no date: missing,
        or outside what a calendar date can show)."""
        if not self.start_t:
            return None
        try:
            return datetime.fromtimestamp(self.start_t).astimezone()
        except (ValueError, OverflowError, OSError):
            return None


def list_runs(directory: str | os.PathLike | None = None) -> list[RunInfo]:
    """Every recording in ``directory`` (default :func:`runs_dir`), oldest first.

    Reads each file's first line and last :data:`TAIL_BYTES` (gzip files are
    decompressed in a stream, keeping only the tail), so listing is fast and
    bounded in memory. A file that cannot be read is listed with its problem; a
    folder that does not exist holds none, one that cannot be read is a one-line
    :class:`GpuscaleError`."""
    folder = Path(directory) if directory is not None else runs_dir()
    try:
        entries = [p for p in folder.iterdir() if p.name.endswith(SUFFIXES) and p.is_file()]
    except FileNotFoundError:  # no run recorded yet
        return []
    except OSError as exc:  # a folder it may not read: never "No recordings"
        said = (exc.strerror or str(exc)).lower()
        raise GpuscaleError(f"cannot list the recordings in {folder}: {said}") from None
    runs = [_safe_info(path) for path in entries]
    runs.sort(key=lambda r: (r.start_t is None, r.start_t or 0.0, r.path))
    return runs


def _safe_info(path: Path) -> RunInfo:
    """:func:`_info`, but a file that breaks it is listed as unreadable: one bad
    file never breaks the listing of the others."""
    try:
        return _info(path)
    except Exception as exc:  # noqa: BLE001 - listed with its problem, never a traceback
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        said = " ".join(str(exc).split())[:120]
        return _unreadable(path, size, f"cannot be listed ({said or type(exc).__name__})")


def _info(path: Path) -> RunInfo:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    try:
        head, tail, whole, damage = _head_and_tail(path)
    except _ReadWhole:
        return _info_read(path, size)
    except RecordingError as exc:
        return _unreadable(path, size, exc.reason)
    except OSError as exc:
        return _unreadable(path, size, f"cannot read: {exc.strerror or exc}")
    try:
        start = _start(path, head)
    except RecordingError as exc:
        # a damaged first line: the reader reads from a start event further in
        found = _start_further_in(path)
        if found is None:
            return _unreadable(path, size, exc.reason)
        start, skipped = found
        damage = "; ".join(filter(None, (skipped, damage)))
    first = start
    if start.provisional:  # the run's own start follows: what the listing shows
        start = _superseding_start(path) or start
    newer_minor = (parse_version(first.schema) or (0, 0))[1] > READER_MINOR
    if tail is None:
        return _run_info(path, size, first, start, None, None, None, damage, scanned=False)
    end, last_step, last_t = _scan_tail(tail, whole, newer_minor)
    return _run_info(path, size, first, start, end, last_step, last_t, damage)


def _run_info(
    path: Path,
    size: int,
    first: StartEvent,
    start: StartEvent,
    end: EndEvent | None,
    last_step: int | None,
    last_t: float | None,
    damage: str | None,
    *,
    scanned: bool = True,
) -> RunInfo:
    """A listed run: from its first start event, the start it is shown by (its own
    after a provisional first), its end event, highest step and latest time."""
    steps_counted: int | None = None
    if not scanned:
        steps, duration, status = None, None, "unscanned"
    elif end is not None:
        steps: int | None = end.steps
        if isinstance(end.summary, dict):
            # the summary leaves out what is at its default (RunSummary is
            # omit_defaults): no steps_counted in it is 0 counted, not unknown
            counted = end.summary.get("steps_counted", 0)
            if isinstance(counted, int) and not isinstance(counted, bool) and counted >= 0:
                steps_counted = counted
        duration: float | None = run_duration_s(start.t, max(end.t, last_t or end.t))
        status = end.status
    else:
        steps = last_step + 1 if last_step is not None else None
        duration = run_duration_s(start.t, last_t) if last_t is not None else None
        status = "running" if writer_alive((first, start)) else "interrupted"
    return RunInfo(
        path=str(path),
        start_t=start.t,
        model=_model_of(start),
        devices=start.num_replicas,
        platform=start.platform,
        steps=steps,
        steps_counted=steps_counted,
        duration_s=duration,
        size_bytes=size,
        status=status,
        damage=damage or None,
        sweep=start.sweep,
        strategy=start.strategy,
        workers=start.num_workers,
        source=start.source,
        payload_bytes=start.payload_bytes,
    )


def _model_of(start: StartEvent) -> str:
    """The Model column: the start event's model; for the start gpuscale made up
    for a script without its callback, the script's name from the command it kept
    (``train.py``, ``python -c``: never the code, which recordings made before
    :func:`~gpuscale.events.run_name.script_name` said so carry as their model)."""
    config = start.config or {}
    argv = config.get("argv")
    if (
        start.source == "script"
        and config.get("callback") is False
        and isinstance(argv, list)
        and argv
        and all(isinstance(a, str) for a in argv)
    ):
        return script_name(argv)
    return start.model or str(config.get("model", "") or "?")


def _unreadable(path: Path, size: int, problem: str) -> RunInfo:
    return RunInfo(
        path=str(path),
        start_t=None,
        model="?",
        devices=0,
        platform="?",
        steps=None,
        duration_s=None,
        size_bytes=size,
        status="unreadable",
        problem=problem,
    )


def _head_and_tail(path: Path) -> tuple[bytes, bytes | None, bool, str | None]:
    """The first line, the last TAIL_BYTES (``None`` for a gzip file too large to
    decompress for a listing), whether the tail is the whole file, and what damage
    was forgiven (gzip data damaged after some lines: they are listed)."""
    try:
        f, regular = open_untrusted(path)
    except JsonInputError as exc:
        raise RecordingError(path, str(exc)) from None
    with f:
        if not regular:
            raise RecordingError(path, "not a regular file")
        if f.peek(2)[:2] == GZIP_MAGIC:
            return _gzip_head_and_tail(f, path)
        head = f.readline(MAX_LINE_BYTES)
        size = os.fstat(f.fileno()).st_size
        offset = max(size - TAIL_BYTES, 0)
        f.seek(offset)
        return head, f.read(TAIL_BYTES), offset == 0, None


class _ReadWhole(Exception):
    """A ``.gz`` whose gzip data is damaged mid-way: listed from what the reader
    reads of it (:func:`_info_read`), so that both say the same of it (one over
    :data:`LIST_GZIP_BYTES` whose first line is whole: from that line, unscanned)."""


def _gzip_head_and_tail(f, path: Path) -> tuple[bytes, bytes | None, bool, str | None]:
    head = b""
    tail = b""
    dropped = False
    too_large = os.fstat(f.fileno()).st_size > LIST_GZIP_BYTES
    chunks = gunzip_chunks(f, 1 << 20)
    try:
        for out in chunks:
            if isinstance(out, GzipDamaged):  # read on past damage: as the reader does
                if too_large and b"\n" in (head := _head_with(head, out)):
                    break  # listed from its first line, unscanned, as a whole one
                raise _ReadWhole
            if not head or (b"\n" not in head and len(head) < MAX_LINE_BYTES):
                head += out[: MAX_LINE_BYTES - len(head)]
            if too_large and (b"\n" in head or len(head) >= MAX_LINE_BYTES):
                break  # the first line is all a listing reads of a large .gz
            tail += out
            if len(tail) > 2 * TAIL_BYTES:
                tail = tail[-TAIL_BYTES:]
                dropped = True
    except GzipCut:
        if not head and not tail:  # ends before any text: cut, not empty
            raise RecordingError(path, GZIP_CUT_AT_START) from None
    except GzipDamaged as exc:
        if exc.fatal:
            raise RecordingError(path, exc.problem()) from None
        if not (too_large and b"\n" in (head := _head_with(head, exc))):
            raise _ReadWhole from None
    finally:
        chunks.close()
    nl = head.find(b"\n")
    if nl >= 0:
        head = head[: nl + 1]
    if too_large:
        return head, None, False, None
    return head, tail, not dropped, None


def _head_with(head: bytes, damage: GzipDamaged) -> bytes:
    """``head`` (the text before the first newline so far) with what the damaged
    gzip member held of it: the first line may be in a member not yet verified."""
    if b"\n" in head:
        return head
    return (head + damage.salvaged)[:MAX_LINE_BYTES]


def _info_read(path: Path, size: int) -> RunInfo:
    """A recording listed from all its events as the reader reads them (a ``.gz``
    damaged mid-way): what it says of the damage, the run's start (its own, when
    a provisional one came first), end, last step and time."""
    said: list[str] = []
    events = iter_events(path, said.append)
    first = start = end = None
    last_step = last_t = None
    try:
        for event in events:
            cls = type(event)
            if cls is StartEvent:
                if first is None:
                    first = start = event
                elif start.provisional and not event.provisional:
                    start = event
            elif cls is EndEvent:
                end = event
            else:
                if cls is StepEvent and (last_step is None or event.step > last_step):
                    last_step = event.step
                if last_t is None or event.t > last_t:
                    last_t = event.t
    except RecordingError as exc:
        where = f"line {exc.line}: " if exc.line is not None else ""
        return _unreadable(path, size, where + exc.reason)
    except OSError as exc:
        return _unreadable(path, size, f"cannot read: {exc.strerror or exc}")
    finally:
        events.close()
    if first is None or start is None:
        return _unreadable(path, size, "no start event: not a gpuscale recording")
    prefix = f"{path}: "
    damage = "; ".join(
        w.removeprefix(prefix)
        for w in said
        if START_FURTHER_IN in w or is_gzip_damage_warning(w.removeprefix(prefix))
    )
    return _run_info(path, size, first, start, end, last_step, last_t, damage)


_probe = msgspec.json.Decoder(dict)
_start_decoder = msgspec.json.Decoder(StartEvent)
_event_decoder = msgspec.json.Decoder(Event)


def _start(path: Path, head: bytes) -> StartEvent:
    if not head.strip():
        raise RecordingError(path, "empty file: not a gpuscale recording")
    head = head.removeprefix(b"\xef\xbb\xbf")
    try:
        check_depth(head)
    except JsonInputError as exc:
        raise RecordingError(path, f"line 1: {exc}") from None
    try:
        fields = _probe.decode(head)
    except DECODE_ERRORS:
        raise RecordingError(
            path, "line 1 is not a JSON object: not a gpuscale recording"
        ) from None
    if fields.get("kind") != "start":
        raise RecordingError(path, "line 1 is not a start event: not a gpuscale recording")
    schema = fields.get("schema", "1.0")
    problem = version_problem(schema) if isinstance(schema, str) else "bad 'schema' field"
    if problem is not None:
        raise RecordingError(path, problem)
    try:
        return _start_decoder.decode(head)
    except DECODE_ERRORS as exc:
        raise RecordingError(path, f"line 1 is not a valid start event ({exc})") from None


def _start_further_in(path: Path) -> tuple[StartEvent, str] | None:
    """The start event the reader reads a recording from when its first line is
    damaged, and its warning (which lines it skipped); ``None`` when it finds none."""
    said: list[str] = []
    events = iter_events(path, said.append)
    try:
        first = next(events, None)
    except (RecordingError, OSError):
        return None
    finally:
        events.close()
    if not isinstance(first, StartEvent):
        return None
    prefix = f"{path}: "
    skipped = next((w.removeprefix(prefix) for w in said if START_FURTHER_IN in w), "")
    return first, skipped


SUPERSEDING_START_EVENTS = 100_000
"""How far into a recording :func:`list_runs` looks for the start event that
supersedes a provisional one (it comes within the run's first seconds)."""


def _superseding_start(path: Path) -> StartEvent | None:
    """The start event that supersedes a provisional first one, if near the top."""
    events = iter_events(path)
    try:
        for number, event in enumerate(events):
            if number and isinstance(event, StartEvent) and not event.provisional:
                return event
            if number >= SUPERSEDING_START_EVENTS:
                break
    except (RecordingError, OSError):
        pass
    finally:
        events.close()
    return None


def _scan_tail(
    tail: bytes, whole: bool, newer_minor: bool = False
) -> tuple[EndEvent | None, int | None, float | None]:
    """(end event, highest step, latest t) among the complete lines of ``tail``; a
    line of events run together read as the reader reads it (:func:`joined_events`;
    ``newer_minor``: the file is of a newer minor version)."""
    lines = tail.split(b"\n")
    if not whole:
        lines = lines[1:]  # the first is probably cut
    end = None
    last_step = None
    last_t = None
    for line in reversed(lines):
        if not line.strip():
            continue
        try:
            events = [_event_decoder.decode(line)]
        except DECODE_ERRORS:
            # a newline lost: the events run together
            events = joined_events(line, _event_decoder.decode, newer_minor)
        for event in reversed(events):
            if isinstance(event, EndEvent) and end is None:
                end = event
            if isinstance(event, StepEvent) and (last_step is None or event.step > last_step):
                last_step = event.step
            if not isinstance(event, StartEvent) and (last_t is None or event.t > last_t):
                last_t = event.t
    return end, last_step, last_t


def find_run(name: str, directory: str | os.PathLike | None = None) -> Path:
    """A recording named by path, or by (a unique prefix of) its file name in the
    runs folder. Raises :class:`RecordingError` when there is none or several."""
    direct = Path(name).expanduser()
    if direct.exists() or os.sep in name or "/" in name:
        return direct
    folder = Path(directory) if directory is not None else runs_dir()
    try:
        matches = sorted(
            p for p in folder.iterdir() if p.name.startswith(name) and p.name.endswith(SUFFIXES)
        )
    except FileNotFoundError:  # no run recorded yet
        matches = []
    except OSError as exc:  # a folder it may not read: never "no recording starts with it"
        said = (exc.strerror or str(exc)).lower()
        raise GpuscaleError(f"cannot list the recordings in {folder}: {said}") from None
    # the whole file name, or its stem with a suffix, before its beginnings ('STEM' is
    # STEM.ndjson even beside STEM-2.ndjson, a second run started in the same second)
    exact = [p for p in matches if p.name == name] or [
        p for p in matches if any(p.name == name + suffix for suffix in SUFFIXES)
    ]
    if len(exact) == 1:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RecordingError(name, f"no such file, and no recording in {folder} starts with it")
    raise RecordingError(
        name, f"{len(matches)} recordings in {folder} start with it; give more of the name"
    )


__all__ = [
    "ENV_DATA_DIR",
    "RunInfo",
    "data_dir",
    "default_path",
    "find_run",
    "iter_events",
    "list_runs",
    "runs_dir",
]
