"""A recording without an end event whose writer is still alive is a run in
progress: ``running`` in ``gpuscale runs`` (table and JSON), in the reader's
warning and in ``replay``'s summary; once its process is gone it is interrupted."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import msgspec
from recording_samples import T0, sample_events, write_run

from gpuscale.cli import main
from gpuscale.recording.liveness import writer_alive
from gpuscale.recording.reader import load_run
from gpuscale.recording.store import list_runs


def _unfinished(pid: int, host: str | None = None) -> list:
    """A run without its end event, written now by process ``pid`` on ``host``."""
    shift = time.time() - T0
    events = [
        msgspec.structs.replace(event, t=event.t + shift)
        for event in sample_events(steps=8, end=False)
    ]
    events[0] = msgspec.structs.replace(
        events[0], pid=pid, host=host if host is not None else socket.gethostname()
    )
    return events


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_run_whose_writer_is_alive_is_running_in_runs(tmp_path, capsys):
    write_run(tmp_path / "live.ndjson", _unfinished(os.getpid()))
    write_run(tmp_path / "gone.ndjson", _unfinished(_dead_pid()))
    by_name = {os.path.basename(r.path): r for r in list_runs(tmp_path)}
    assert by_name["live.ndjson"].status == "running"
    assert by_name["gone.ndjson"].status != "running"

    assert main(["runs", "--dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    live = next(line for line in rows if "live.ndjson" in line)
    gone = next(line for line in rows if "gone.ndjson" in line)
    assert " running " in live and "interrupted" not in live
    assert " interrupted " in gone

    assert main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    status = {os.path.basename(r["path"]): r["status"] for r in doc["runs"]}
    assert status["live.ndjson"] == "running"
    assert status["gone.ndjson"] != "running"


def test_a_pid_on_another_host_or_reused_since_is_not_the_writer():
    here = _unfinished(os.getpid())[0]
    assert writer_alive([here])
    assert not writer_alive([msgspec.structs.replace(here, host="elsewhere")])
    # This process was created after a start event from long ago: a reused pid.
    assert not writer_alive([msgspec.structs.replace(here, t=T0)])


def test_reader_and_replay_say_a_run_in_progress_is_running(tmp_path, capsys):
    live = write_run(tmp_path / "live.ndjson", _unfinished(os.getpid()))
    gone = write_run(tmp_path / "gone.ndjson", _unfinished(_dead_pid()))
    warnings: list[str] = []
    load_run(live, on_warning=warnings.append)
    assert warnings[-1].endswith("the run is still running; read what was recorded so far")
    warnings.clear()
    load_run(gone, on_warning=warnings.append)
    assert "interrupted (its process is gone)" in warnings[-1]

    assert main(["replay", str(live)]) == 0  # not a terminal: the summary as text
    captured = capsys.readouterr()
    assert "status: running" in captured.out and "interrupted" not in captured.out
    assert main(["replay", str(gone)]) == 0
    assert "status: interrupted (no end event)" in capsys.readouterr().out


async def test_the_replayed_dashboard_of_a_run_in_progress_says_running(tmp_path):
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import ReplaySource
    from gpuscale.ui.widgets.header import RunHeader

    live = write_run(tmp_path / "live.ndjson", _unfinished(os.getpid()))
    app = build_app(ReplaySource(live))
    async with app.run_test(size=(100, 30)) as pilot:
        app.action_jump_end()
        for _ in range(50):
            await app.settle()
            await pilot.pause(0.05)
            if app._finished_posted:
                break
        await app.settle()
        header = app.query_one(RunHeader)
        line = "".join(s.text for s in header.render_lines(header.region.reset_offset)[1])
    assert line.strip().startswith("RUNNING (recorded so far)"), line
