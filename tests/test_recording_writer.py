"""The recorder: lines on disk as they happen, problems reported once, the run goes on."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from recording_samples import T0, sample_events, write_run

from gpuscale.events.schema import EndEvent, LogEvent, StartEvent, StepEvent
from gpuscale.recording import writer as writer_module
from gpuscale.recording.format import CLOCK_SOURCE
from gpuscale.recording.reader import load_run
from gpuscale.recording.writer import Recorder

CHILD = textwrap.dedent(
    """
    import sys, time
    from gpuscale.events.schema import StartEvent, StepEvent
    from gpuscale.recording.writer import Recorder

    path, pause_every = sys.argv[1], float(sys.argv[2])
    recorder = Recorder(path)
    recorder.write(StartEvent(t=1e9, gpuscale_version="0", host="h", pid=1))
    step = 0
    while True:
        if pause_every and step == 100:
            time.sleep(pause_every)
        recorder.write(StepEvent(t=1e9 + step * 0.01, step=step, step_time_s=0.01, samples=8))
        step += 1
        print(step, flush=True)
        if pause_every and step == 101:
            time.sleep(3600)  # everything written so far must survive the kill
    """
)


def _kill_after(path: Path, written: int, pause_s: float = 0.0) -> int:
    """Run the child, SIGKILL it once it reports ``written`` events; return its last report."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(pause_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        last = 0
        for line in child.stdout:
            last = int(line)
            if last >= written:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return last


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("name", ["killed.ndjson", "killed.ndjson.gz"])
def test_sigkill_loses_at_most_the_last_flush_interval(tmp_path, name):
    """The child writes 100 steps, waits past the flush interval, writes one more
    and hangs until killed: the 100 are on disk (the last one may be lost)."""
    path = tmp_path / name
    reported = _kill_after(path, 101, pause_s=writer_module.FLUSH_INTERVAL_S * 2 + 0.3)
    warnings = []
    run = load_run(path, on_warning=warnings.append)
    steps = [e for e in run.events if isinstance(e, StepEvent)]
    assert reported == 101 and len(steps) >= 100
    assert [e.step for e in steps] == list(range(len(steps)))
    assert run.end is None and any("no end event" in w for w in warnings)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_while_writing_keeps_everything_but_the_last_moments(tmp_path):
    """Killed in full flow: what is on disk is a readable prefix."""
    path = tmp_path / "flowing.ndjson"
    reported = _kill_after(path, 3000)
    run = load_run(path)
    steps = [e for e in run.events if isinstance(e, StepEvent)]
    assert [e.step for e in steps] == list(range(len(steps)))
    assert len(steps) <= reported + 1000


def test_unwritable_path_is_reported_once_and_writes_become_no_ops(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    problems: list[str] = []
    recorder = Recorder(blocker / "runs" / "run.ndjson", on_problem=problems.append)
    assert not recorder.active
    for event in sample_events():
        recorder.write(event)  # the run goes on
    recorder.close()
    assert len(problems) == 1
    assert "recording stopped" in problems[0] and str(blocker) in problems[0]
    assert "--record" in problems[0] and "\n" not in problems[0]
    assert recorder.problem == problems[0]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_folder_is_reported_once(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    problems: list[str] = []
    with Recorder(folder / "run.ndjson", on_problem=problems.append) as recorder:
        recorder.write(sample_events()[0])
    assert len(problems) == 1 and "no permission" in problems[0]


def test_existing_file_is_never_overwritten(tmp_path):
    path = tmp_path / "precious.ndjson"
    path.write_text("my data\n")
    problems: list[str] = []
    with Recorder(path, on_problem=problems.append) as recorder:
        for event in sample_events():
            recorder.write(event)
    assert path.read_text() == "my data\n"
    assert len(problems) == 1 and "already exists" in problems[0]


class _DiskFills:
    """Stands in for os.write: the disk fills after ``room`` bytes (a short write,
    then ENOSPC), like a real full disk."""

    def __init__(self, room: int):
        self.room = room
        self.calls_after_full = 0

    def __call__(self, fd: int, data) -> int:
        if self.room <= 0:
            self.calls_after_full += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(len(data), self.room)
        self.room -= n
        return os.write(fd, bytes(data[:n]))


def test_full_disk_is_reported_once_and_what_was_written_stays_readable(tmp_path, monkeypatch):
    events = sample_events()
    full = write_run(tmp_path / "reference.ndjson", events).read_bytes()
    room = full.index(b"\n", len(full) // 2) + 30  # half the file and a cut line
    disk = _DiskFills(room)
    monkeypatch.setattr(writer_module, "_os_write", disk)
    problems: list[str] = []
    path = tmp_path / "full.ndjson"
    with Recorder(path, on_problem=problems.append) as recorder:
        for event in events:
            recorder.write(event)  # never raises
        assert not recorder.active
    assert len(problems) == 1
    assert "disk holding" in problems[0] and "is full" in problems[0]
    assert "the run goes on without recording" in problems[0]
    assert disk.calls_after_full == 1  # then the recorder stopped trying
    run = load_run(path)
    kept = full[:room].count(b"\n")
    assert run.events == events[:kept]
    assert run.truncated  # the half-written line was dropped with a warning


def test_fsync_failure_is_a_problem_too(tmp_path, monkeypatch):
    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(writer_module, "_os_fsync", failing_fsync)
    problems: list[str] = []
    with Recorder(tmp_path / "run.ndjson", on_problem=problems.append) as recorder:
        for event in sample_events():
            recorder.write(event)
    assert len(problems) == 1 and "Input/output error" in problems[0]


def test_fsync_is_rate_limited_and_done_at_close(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(writer_module, "_os_fsync", lambda fd: calls.append(fd))
    with Recorder(tmp_path / "run.ndjson", durable=False) as recorder:
        for event in sample_events(steps=200):
            recorder.write(event)
        during = len(calls)
    assert during <= 2  # at most once a second while writing fast
    assert len(calls) == during + 1  # and once at close


def test_problem_default_goes_to_stderr(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    Recorder(blocker / "run.ndjson").close()
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: warning: recording stopped") and err.count("\n") == 1


def test_unstorable_event_is_replaced_by_a_note_and_the_file_stays_readable(tmp_path):
    events = sample_events(steps=4)
    bad_nan = StepEvent(t=T0 + 1.5, step=99, step_time_s=float("nan"), samples=1)
    events[5:5] = [bad_nan]
    path = tmp_path / "run.ndjson"
    with Recorder(path) as recorder:
        for event in events:
            recorder.write(event)
    run = load_run(path)
    notes = [e for e in run.events if isinstance(e, LogEvent) and e.source == "recorder"]
    assert len(notes) == 1
    assert "dropped a 'step' event" in notes[0].message and "null" in notes[0].message
    assert not any(isinstance(e, StepEvent) and e.step == 99 for e in run.events)
    assert len(run.events) == len(events)


def test_issue17_case5_events_whose_clock_steps_back_are_kept(tmp_path):
    """An NTP step or a VM resume: the wall time goes back 60 s. Every event is
    kept with its own t, after a clock marker, and the file reads back."""
    start = sample_events(steps=0)[0]
    path = tmp_path / "run.ndjson"
    steps = [StepEvent(t=T0 + i, step=i, step_time_s=1.0, samples=8) for i in range(60)]
    steps += [StepEvent(t=T0 + i - 60, step=i, step_time_s=1.0, samples=8) for i in range(60, 120)]
    with Recorder(path) as recorder:
        recorder.write(start)
        for event in steps:
            recorder.write(event)
        recorder.write(EndEvent(t=T0 + 70, status="completed", steps=120))
    run = load_run(path)
    kept = [e for e in run.events if isinstance(e, StepEvent)]
    assert [e.step for e in kept] == list(range(120))
    assert [e.t for e in kept] == [e.t for e in steps]  # wall time kept as data
    markers = [e for e in run.events if isinstance(e, LogEvent) and e.source == CLOCK_SOURCE]
    assert len(markers) == 1 and "stepped back 1 s" not in markers[0].message


def test_events_after_the_end_are_not_written(tmp_path):
    events = sample_events(steps=2)
    path = tmp_path / "run.ndjson"
    with Recorder(path) as recorder:
        for event in events + [events[3], EndEvent(t=T0 + 99, status="completed")]:
            recorder.write(event)
    assert load_run(path).events == events


def test_events_before_the_start_are_stored_after_it(tmp_path):
    events = sample_events(steps=3)
    early = [
        StepEvent(t=T0 - 5, step=0, step_time_s=0.1, samples=1),
        LogEvent(t=T0 - 4, message="x"),
    ]
    path = tmp_path / "run.ndjson"
    with Recorder(path) as recorder:
        for event in early + events:
            recorder.write(event)
    assert load_run(path).events == events[:1] + early + events[1:]


def test_a_run_that_never_starts_leaves_no_file_and_says_so(tmp_path):
    problems: list[str] = []
    path = tmp_path / "run.ndjson"
    with Recorder(path, on_problem=problems.append) as recorder:
        recorder.write(LogEvent(t=T0, message="starting"))
    assert not path.exists()
    assert problems == [
        "nothing recorded: the run ended before its start event (1 earlier event not saved)"
    ]


def test_held_events_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_module, "MAX_HELD_EVENTS", 10)
    problems: list[str] = []
    with Recorder(tmp_path / "run.ndjson", on_problem=problems.append) as recorder:
        for step in range(20):
            recorder.write(StepEvent(t=T0, step=step, step_time_s=0.1, samples=1))
        assert not recorder.active
    assert len(problems) == 1 and "before the run's start event" in problems[0]


def test_unstorable_start_event_stops_recording_with_one_message(tmp_path):
    problems: list[str] = []
    path = tmp_path / "run.ndjson"
    with Recorder(path, on_problem=problems.append) as recorder:
        recorder.write(StartEvent(t=float("nan"), gpuscale_version="0", host="h", pid=1))
        recorder.write(StepEvent(t=T0, step=0, step_time_s=0.1, samples=1))
    assert len(problems) == 1 and "start event cannot be stored" in problems[0]
    assert not path.exists()


class _FakeNumpyScalar:
    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


def test_free_form_fields_store_foreign_values(tmp_path):
    start = StartEvent(
        t=T0,
        gpuscale_version="0",
        host="h",
        pid=1,
        config={"lr": _FakeNumpyScalar(0.01), "data": Path("/data/x"), "other": object()},
    )
    path = write_run(tmp_path / "run.ndjson", [start])
    config = load_run(path).start.config
    assert config["lr"] == 0.01 and config["data"] == "/data/x"
    assert config["other"].startswith("<object object")


def test_nothing_written_leaves_no_file(tmp_path):
    path = tmp_path / "sub" / "run.ndjson"
    with Recorder(path) as recorder:
        assert recorder.active and path.exists()
    assert not path.exists() and path.parent.is_dir()


def test_close_is_idempotent_and_later_writes_are_ignored(tmp_path):
    path = write_run(tmp_path / "run.ndjson")
    size = path.stat().st_size
    recorder = Recorder(tmp_path / "other.ndjson")
    recorder.write(sample_events()[0])
    recorder.close()
    recorder.close()
    recorder.write(sample_events()[1])
    assert "closed, 1 events" in repr(recorder)
    assert path.stat().st_size == size


@pytest.mark.parametrize("name", ["run.ndjson", "run.ndjson.gz"])
def test_concurrent_writers_produce_whole_lines(tmp_path, name):
    path = tmp_path / name
    recorder = Recorder(path)
    recorder.write(StartEvent(t=T0, gpuscale_version="0", host="h", pid=1))

    def produce(worker: int) -> None:
        for step in range(300):
            recorder.write(
                StepEvent(
                    t=T0 + step * 0.001, worker=worker, step=step, step_time_s=0.001, samples=1
                )
            )

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorder.write(EndEvent(t=T0 + 1, status="completed", steps=300))
    recorder.close()
    run = load_run(path)
    assert len(run.events) == 2 + 4 * 300
    for worker in range(4):
        steps = [e.step for e in run.events if isinstance(e, StepEvent) and e.worker == worker]
        assert steps == list(range(300))


def test_a_taken_default_name_moves_to_the_next_number(tmp_path):
    """Two runs that start in the same second get the same default name: the
    second one's Recorder takes ``-2`` (then ``-3``) instead of losing its recording."""
    taken = tmp_path / "20261121-193000_m_2xcpu.ndjson"
    taken.write_text("first run\n")
    (tmp_path / "20261121-193000_m_2xcpu-2.ndjson").write_text("second run\n")
    problems: list[str] = []
    with Recorder(taken, on_problem=problems.append, rename_if_taken=True) as recorder:
        for event in sample_events():
            recorder.write(event)
    assert problems == []
    assert recorder.path.name == "20261121-193000_m_2xcpu-3.ndjson"
    assert recorder.events_written == len(sample_events())
    assert taken.read_text() == "first run\n"


def test_issue17_case4_lines_are_batched_and_the_end_is_durable_at_once(tmp_path, monkeypatch):
    """A fast producer costs one write call per batch, not per line; a batch
    reaches the file within the flush interval on its own; the end event is
    written and fsync-ed before ``write`` returns."""
    writes: list[int] = []
    syncs: list[int] = []

    def counting_write(fd, data):
        writes.append(len(data))
        return os.write(fd, data)

    monkeypatch.setattr(writer_module, "_os_write", counting_write)
    monkeypatch.setattr(writer_module, "_os_fsync", lambda fd: syncs.append(fd))
    path = tmp_path / "run.ndjson"
    events = sample_events(steps=2000)
    with Recorder(path) as recorder:
        for event in events[:-1]:
            recorder.write(event)
        assert len(writes) < 200  # the start at once, then batches
        deadline = time.monotonic() + 10.0  # hang guard; the promise is FLUSH_INTERVAL_S
        while recorder.events_written < len(events) - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert recorder.events_written == len(events) - 1
        synced = len(syncs)
        recorder.write(events[-1])
        assert recorder.events_written == len(events) and len(syncs) == synced + 1
    assert load_run(path).events == events


def test_a_process_that_exits_without_closing_still_writes_its_batch(tmp_path):
    path = tmp_path / "unclosed.ndjson"
    code = textwrap.dedent(
        f"""
        from gpuscale.events.schema import LogEvent, StartEvent
        from gpuscale.recording.writer import Recorder
        recorder = Recorder({str(path)!r})
        recorder.write(StartEvent(t=1e9, gpuscale_version="0", host="h", pid=1))
        for i in range(10):
            recorder.write(LogEvent(t=1e9 + i, message=str(i)))
        raise SystemExit(3)  # e.g. an exception out of the user's script
        """
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 3
    run = load_run(path)
    assert [e.message for e in run.events if isinstance(e, LogEvent)] == [str(i) for i in range(10)]


def test_a_gz_recording_is_gzip_members_of_whole_lines(tmp_path, monkeypatch):
    """A new gzip member after each GZIP_MEMBER_BYTES of text, at the end of a
    batch: each holds whole lines (damage in one loses its lines only: the reader
    reads on from the next), and any gzip reader reads the file whole."""
    import gzip
    import zlib

    monkeypatch.setattr(writer_module, "GZIP_MEMBER_BYTES", 8 * 1024)
    events = sample_events(steps=200)
    path = tmp_path / "run.ndjson.gz"
    with Recorder(path) as recorder:
        for number, event in enumerate(events):
            recorder.write(event)
            if number % 10 == 0:
                recorder.flush()
    data = path.read_bytes()
    texts = []
    while data:
        member = zlib.decompressobj(31)
        texts.append(member.decompress(data))
        assert member.eof  # each member whole, its checksum read
        data = member.unused_data
    assert len(texts) > 5
    assert all(text.startswith(b"{") and text.endswith(b"\n") for text in texts)
    assert all(len(text) < 8 * 1024 + 4 * 1024 for text in texts)  # a batch past the size
    assert gzip.decompress(path.read_bytes()) == b"".join(texts)
    assert len(load_run(path).events) == len(events)
