"""A sweep is one thing in the recordings (gpuscale.recording.sweeps): every run of a
sweep carries its id; `gpuscale runs` groups by it (a guess only for older
recordings), `--json` lists the groups, and `replay` and `recommend --from` take a
sweep's name. No TensorFlow."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from recording_samples import sample_events, write_run

from gpuscale.cli import main
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import (
    SCHEMA_VERSION,
    EndEvent,
    StartEvent,
    SweepRef,
    decode,
    encode,
)
from gpuscale.recording.reader import load_run
from gpuscale.recording.store import list_runs
from gpuscale.recording.sweeps import (
    find_sweep,
    new_sweep_id,
    resolve_inputs,
    sweep_groups,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
STOPPED = "sweep-20261123-125500-3f2a"
OTHER = "sweep-20261123-140000-0b1c"


def sweep_run(
    folder: Path,
    devices: int,
    index: int,
    planned: list[int],
    sweep_id: str = STOPPED,
    *,
    at: float = 0.0,
    status: str = "completed",
    available: int | None = None,
    steps: int = 12,
) -> Path:
    """One run of a sweep at ``devices``, ``at`` seconds after T0, ending with ``status``
    after ``steps`` steps (the first 2 warm-up; its end's summary counts the rest, as
    gpuscale's own end events do); ``available``: the devices its machine had (format
    1.4), else unsaid (older ones)."""
    events = sample_events(steps=steps, gpus=devices)
    for event in events:
        event.t += at
        if isinstance(event, StartEvent):
            event.sweep = SweepRef(
                id=sweep_id, index=index, planned=planned, available_devices=available
            )
        if isinstance(event, EndEvent):
            event.status = status
            event.summary = {"steps_total": steps, "steps_counted": max(0, steps - 2)}
    return write_run(folder / f"{sweep_id}-{index}_mnist-cnn_{devices}xgpu.ndjson", events)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A sweep stopped at its third count (1, 2 measured; 4 stopped in its warm-up:
    no step counted; 8 never run), a complete sweep of two counts, two older runs
    that look like a sweep, one lone run."""
    planned = [1, 2, 4, 8]
    sweep_run(tmp_path, 1, 0, planned, at=0)
    sweep_run(tmp_path, 2, 1, planned, at=10)
    sweep_run(tmp_path, 4, 2, planned, at=20, status="stopped", steps=2)
    sweep_run(tmp_path, 1, 0, [1, 2], OTHER, at=5000)
    sweep_run(tmp_path, 2, 1, [1, 2], OTHER, at=5010)
    for name in ("mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson", "mlp_2xcpu.ndjson"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    return tmp_path


def test_the_sweep_travels_in_the_start_event_and_old_recordings_still_read(tmp_path):
    ref = SweepRef(id="sweep-20261123-125500-3f2a", index=1, planned=[1, 2, 4])
    start = msgspec.structs.replace(sample_events()[0], sweep=ref)
    back = decode(encode(start))
    assert back.sweep == ref and back.schema == SCHEMA_VERSION == "1.8"
    assert back.sweep.available_devices is None  # a 1.3 sweep: the machine unsaid
    known = msgspec.structs.replace(ref, available_devices=4)
    assert decode(encode(msgspec.structs.replace(start, sweep=known))).sweep == known
    # a 1.2 recording (no sweep field) reads as a run of its own
    assert load_run(SAMPLES / "mnist-cnn_1xcpu.ndjson").start.sweep is None
    with pytest.raises(msgspec.ValidationError):  # an id that is no file-name-safe word
        decode(encode(start).replace(b"3f2a", b"3f 2a"))


def test_new_ids_read_like_the_recordings_names_and_differ():
    from datetime import datetime

    when = datetime(2026, 11, 23, 12, 55, 0)
    first, second = new_sweep_id(when), new_sweep_id(when)
    assert re.fullmatch(r"sweep-20261123-125500-[0-9a-f]{4}", first)
    assert first != second or new_sweep_id(when) != first


def test_runs_are_grouped_by_their_sweep_id_and_older_ones_by_a_guess(recorded):
    groups = {g.name: g for g in sweep_groups(list_runs(recorded))}
    stopped, other = groups[STOPPED], groups[OTHER]
    assert stopped.exact and [r.devices for r in stopped.runs] == [1, 2, 4]
    assert stopped.planned == [1, 2, 4, 8]
    assert stopped.measured == [1, 2] and stopped.missing == [4, 8]
    assert stopped.why_missing() == ["4 (stopped)", "8 (not run)"]
    assert other.exact and other.measured == [1, 2] and other.missing == []
    (guess,) = [g for g in groups.values() if not g.exact]
    assert guess.name.startswith("guess-")
    assert [Path(r.path).name for r in guess.runs] == [
        "mnist-cnn_1xcpu.ndjson",
        "mnist-cnn_2xcpu.ndjson",
    ]
    # the lone run is in no group; runs with an id are never part of a guess
    grouped = {r.path for g in groups.values() for r in g.runs}
    assert str(recorded / "mlp_2xcpu.ndjson") not in grouped
    assert sum(len(g.runs) for g in groups.values()) == len(grouped) == 7


def test_a_scripts_runs_on_one_cpu_then_two_logical_devices_are_guessed_a_sweep(tmp_path):
    """A script under MirroredStrategy says ``cpu`` on one CPU (its strategy saw one
    device) and ``cpu-logical`` on two: run one after the other they are the sweep
    they were (a new user's trial: no guess was shown)."""
    one = sample_events(steps=12, gpus=1)
    two = sample_events(steps=12, gpus=2)
    for events, platform, at in ((one, "cpu", 0.0), (two, "cpu-logical", 60.0)):
        for event in events:
            event.t += at
            if isinstance(event, StartEvent):
                event.platform = platform
    write_run(tmp_path / "train_1xcpu.ndjson", one)
    write_run(tmp_path / "train_2xcpu.ndjson", two)
    (guess,) = sweep_groups(list_runs(tmp_path))
    assert not guess.exact and [r.devices for r in guess.runs] == [1, 2]
    assert guess.platform == "cpu-logical"


def test_a_script_and_the_built_in_trainer_of_one_model_name_are_no_guessed_sweep(tmp_path):
    """``gpuscale run --local-workers 1 --model mlp`` then ``gpuscale run --local-workers
    2 -- python examples/train_multiworker.py`` (its Keras model is also named
    ``mlp``, 814 kB of gradients against the built-in's 11.7 MB) were guessed one
    sweep, and ``recommend --from guess-...`` gave 2.70x on 2 workers sharing 2 cores
    (135% efficiency): two different networks, one at each count. Runs of one source
    and payload still are."""
    one = sample_events(steps=12, gpus=1)
    two = sample_events(steps=12, gpus=2)
    for events, at, source, payload in (
        (one, 0.0, "trainer", 11_700_000),
        (two, 60.0, "script", 814_120),
    ):
        for event in events:
            event.t += at
            if isinstance(event, StartEvent):
                event.source, event.payload_bytes = source, payload
    write_run(tmp_path / "mlp_1xcpu.ndjson", one)
    write_run(tmp_path / "mlp_2xcpu.ndjson", two)
    assert sweep_groups(list_runs(tmp_path)) == []
    with pytest.raises(GpuscaleError):
        find_sweep("guess", tmp_path)

    for events in (one, two):
        for event in events:
            if isinstance(event, StartEvent):
                event.source, event.payload_bytes = "script", 814_120
    (tmp_path / "same").mkdir()
    write_run(tmp_path / "same" / "mlp_1xcpu.ndjson", one)
    write_run(tmp_path / "same" / "mlp_2xcpu.ndjson", two)
    (guess,) = sweep_groups(list_runs(tmp_path / "same"))
    assert [r.devices for r in guess.runs] == [1, 2]


def test_a_run_without_a_payload_does_not_join_two_payloads_into_one_guess(tmp_path):
    """Each run was compared with the chain's last alone, and a run that does not say
    its payload matches any: 100, none, 200 bytes made one guessed sweep of two models."""
    chain = []
    for gpus, at, payload in ((1, 0.0, 100), (2, 60.0, None), (4, 120.0, 200)):
        events = sample_events(steps=12, gpus=gpus)
        for event in events:
            event.t += at
            if isinstance(event, StartEvent):
                event.payload_bytes = payload
        chain.append(events)
        write_run(tmp_path / f"m_{gpus}xgpu.ndjson", events)
    groups = sweep_groups(list_runs(tmp_path))
    assert all({r.payload_bytes for r in g.runs} - {None} != {100, 200} for g in groups)
    assert [[r.devices for r in g.runs] for g in groups] == [[1, 2]]


def test_runs_json_lists_the_groups(recorded, capsys):
    assert main(["runs", "--dir", str(recorded), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["folder"] == str(recorded) and len(doc["runs"]) == 8
    sweeps = {s["id"]: s for s in doc["sweeps"]}
    stopped = sweeps[STOPPED]
    assert stopped["guessed"] is False
    assert [r["devices"] for r in stopped["recordings"]] == [1, 2, 4]
    assert [r["status"] for r in stopped["recordings"]] == ["completed", "completed", "stopped"]
    assert all(Path(r["path"]).exists() for r in stopped["recordings"])
    assert (stopped["planned"], stopped["measured"], stopped["missing"]) == (
        [1, 2, 4, 8],
        [1, 2],
        [4, 8],
    )
    assert [s["guessed"] for s in doc["sweeps"]].count(True) == 1
    by_file = {Path(r["path"]).name: r for r in doc["runs"]}
    assert by_file[f"{OTHER}-1_mnist-cnn_2xgpu.ndjson"]["sweep"]["index"] == 1
    assert by_file[f"{OTHER}-0_mnist-cnn_1xgpu.ndjson"]["sweep"] == {
        "id": OTHER,
        "index": 0,
        "planned": [1, 2],
    }
    assert by_file["mlp_2xcpu.ndjson"]["sweep"] is None


def _terminal(monkeypatch, columns: int) -> None:
    import rich.console

    real = rich.console.Console
    monkeypatch.setattr(
        rich.console,
        "Console",
        lambda **kw: real(**{**kw, "force_terminal": True, "width": columns}),
    )


@pytest.mark.parametrize("columns", [80, 120, None])
def test_runs_shows_each_sweep_with_whole_file_names(recorded, capsys, monkeypatch, columns):
    if columns:
        _terminal(monkeypatch, columns)
    assert main(["runs", "--dir", str(recorded)]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    words = set(out.split())
    for path in recorded.iterdir():  # every file name, whole, in one piece
        assert path.name in words, (path.name, out)
    assert STOPPED in words and OTHER in words and any(w.startswith("guess-") for w in words)
    if columns:
        assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
    # the rows of a sweep carry its label; the list of sweeps says which label is which
    flat = " ".join(out.split())  # the descriptions wrap at the screen's width
    assert re.search(rf"\b[A-C] {STOPPED} [^?]*not measured: 4 \(stopped\), 8 \(not run\)", flat)
    assert re.search(r"\b[A-C]\? guess-\S+ [^:]*a guess", flat)
    # not only older recordings: runs recorded alone are guessed at too, and it says so
    assert "runs recorded alone, not by a sweep, or before sweep ids" in flat


def test_a_sweep_is_named_by_its_id_a_prefix_or_dir_and_id(recorded, monkeypatch):
    assert find_sweep(STOPPED, recorded).name == STOPPED
    assert find_sweep("sweep-20261123-1255", recorded).name == STOPPED
    assert find_sweep(f"{recorded}/{OTHER}").name == OTHER
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(recorded.parent))
    (recorded.parent / "runs").symlink_to(recorded)
    assert find_sweep(OTHER).name == OTHER  # alone: the runs folder
    with pytest.raises(GpuscaleError, match="2 sweeps .* begin so"):
        find_sweep("sweep-2026", recorded)
    with pytest.raises(GpuscaleError, match="no sweep of that name"):
        find_sweep("sweep-19990101", recorded)


def test_dir_and_a_beginning_resolve_like_a_beginning_alone(recorded, capsys):
    """``DIR/guess`` (the only guessed sweep) resolves as ``guess-...`` does; ``sweep``
    alone is a beginning too (here of two sweeps: one line); ``sweep.json`` stays a file."""
    resolved = resolve_inputs([f"{recorded}/guess"])
    assert [p.name for p in resolved.paths] == ["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"]
    assert resolved.sweeps[0].name.startswith("guess-")
    with pytest.raises(GpuscaleError, match="2 sweeps .* begin so"):
        resolve_inputs([f"{recorded}/sweep"])
    assert resolve_inputs([f"{recorded}/sweep.json"]).paths == [recorded / "sweep.json"]
    assert main(["recommend", "--from", f"{recorded}/guess", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(p["devices"] for p in doc["points"] if not p.get("predicted")) == [1, 2]


def test_resolving_a_stopped_sweep_gives_its_measured_runs(recorded):
    resolved = resolve_inputs([f"{recorded}/{STOPPED}", str(recorded / "mlp_2xcpu.ndjson")])
    assert [p.name for p in resolved.paths] == [
        f"{STOPPED}-0_mnist-cnn_1xgpu.ndjson",
        f"{STOPPED}-1_mnist-cnn_2xgpu.ndjson",
        "mlp_2xcpu.ndjson",
    ]
    (note,) = resolved.notes
    assert "planned 1, 2, 4, 8 devices, measured 1, 2" in note
    assert "not measured: 4 (stopped), 8 (not run)" in note


def test_replay_of_a_stopped_sweep_shows_what_is_missing(recorded):
    from gpuscale.commands.replay import _sweep_view
    from gpuscale.ui.sweep_app import SweepApp

    resolved = resolve_inputs([f"{recorded}/{STOPPED}"])
    view = _sweep_view(resolved.paths, resolved.sweeps)
    assert view.measured_counts == [1, 2] and view.planned == [1, 2, 4, 8]
    assert view.state == "stopped" and view.heading.startswith(f"{STOPPED}: Scaling of mnist-cnn")
    assert view.status_line == "not measured: 4 (stopped), 8 (not run)"
    assert "Sweep stopped after 2 of 4 counts" in view.state_line()

    async def header_text() -> str:
        app = SweepApp(view)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            text = str(app.header_panel.render())
            await pilot.press("q")
        return text

    import asyncio

    text = asyncio.run(header_text())
    assert "STOPPED" in text and "1✓ 2✓ 4· 8·" in text and "not measured: 4" in text


def test_recommend_from_a_sweep_rejudges_it(recorded, capsys):
    name = f"{recorded}/{STOPPED}"
    assert main(["recommend", "--from", name, "--no-chart", "--min-efficiency", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "not measured: 4 (stopped), 8 (not run)" in " ".join(out.split())
    assert main(["recommend", "--from", name, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["devices"] for p in doc["points"] if not p.get("predicted")] == [1, 2]
    assert STOPPED in doc["note"] and "not measured: 4 (stopped)" in doc["note"]


def test_a_recorded_sweep_predicts_no_further_than_its_machine(tmp_path, capsys):
    """A sweep that says its machine had 2 devices (format 1.4) is re-judged, by name
    or by its files, as live: no predicted rows past 2; one that does not say (a 1.3
    sweep) predicts up to 8, as before."""
    from gpuscale.commands.replay import _sweep_view

    sweep_run(tmp_path, 1, 0, [1, 2], STOPPED, available=2)
    sweep_run(tmp_path, 2, 1, [1, 2], STOPPED, at=10, available=2)
    sweep_run(tmp_path, 1, 0, [1, 2], OTHER, at=5000)
    sweep_run(tmp_path, 2, 1, [1, 2], OTHER, at=5010)
    by_name = ["--from", f"{tmp_path}/{STOPPED}"]
    by_files = ["--from", *sorted(map(str, tmp_path.glob(f"{STOPPED}-*")))]
    for inputs in (by_name, by_files):
        assert main(["recommend", *inputs, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["available_devices"] == 2
        assert [p["devices"] for p in doc["points"]] == [1, 2]  # nothing predicted
    assert main(["recommend", *by_name, "--no-chart"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "does not say how many devices" not in out
    assert "No predictions past the 2 devices available" in out  # as the live sweep says
    resolved = resolve_inputs([f"{tmp_path}/{STOPPED}"])
    assert _sweep_view(resolved.paths, resolved.sweeps).available_devices == 2
    # an older sweep keeps today's behaviour: the machine unsaid, predictions to 8
    assert main(["recommend", "--from", f"{tmp_path}/{OTHER}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "available_devices" not in doc
    assert max(p["devices"] for p in doc["points"]) == 8


@pytest.mark.parametrize("command", [["replay"], ["recommend", "--from"]])
def test_a_sweep_name_that_matches_nothing_is_one_line(recorded, capsys, command):
    assert main([*command, f"{recorded}/sweep-19990101"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no sweep of that name" in err
    assert "Traceback" not in err


def test_a_damaged_recording_in_the_sweep_is_one_line(recorded, capsys):
    path = recorded / f"{OTHER}-1_mnist-cnn_2xgpu.ndjson"
    lines = path.read_bytes().splitlines()
    lines.append(lines[5])  # an event after the end: two runs joined, not forgiven
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["recommend", "--from", f"{recorded}/{OTHER}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and path.name in err and "Traceback" not in err


def test_a_damaged_line_in_a_recording_of_the_sweep_is_skipped_with_a_warning(recorded, capsys):
    path = recorded / f"{OTHER}-1_mnist-cnn_2xgpu.ndjson"
    lines = path.read_bytes().splitlines()
    lines[5] = b'{"kind": "step", "t": "garbage'
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["recommend", "--from", f"{recorded}/{OTHER}"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gpuscale: warning: {path}: line 6: not JSON (it ends early), skipped"], err


def test_a_sweep_without_a_completed_run_is_one_line(tmp_path, capsys):
    sweep_run(tmp_path, 1, 0, [1, 2], status="failed")
    assert main(["replay", f"{tmp_path}/{STOPPED}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no run with counted steps" in err and len(err.splitlines()) == 1


def test_replay_of_a_sweep_never_imports_tensorflow(recorded):
    script = f"""
import asyncio, sys
from gpuscale.ui import sweep_app

def headless_run(self, *args, **kwargs):
    async def go():
        async with self.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("q")
    asyncio.run(go())

sweep_app.SweepApp.run = headless_run
sys.stdout.isatty = lambda: True
from gpuscale.cli import main
rc = main(["replay", {f"{recorded}/{STOPPED}"!r}])
assert "tensorflow" not in sys.modules, "replay imported TensorFlow"
print("rc", rc)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rc 0" in out.stdout


def test_every_start_event_of_a_run_carries_its_sweep():
    from gpuscale.live.base import RunBase

    run = RunBase()
    run._init_run()
    run.record = None
    ref = SweepRef(id=STOPPED, index=2, planned=[1, 2, 4])
    run.sweep_ref = ref
    provisional = msgspec.structs.replace(sample_events()[0], provisional=True)
    own = sample_events()[0]
    run._begin_recording(provisional, "m")
    run._record_start(own, "m")
    assert provisional.sweep == ref and own.sweep == ref
    mine = SweepRef(id="sweep-other", index=0, planned=[1])
    kept = msgspec.structs.replace(sample_events()[0], sweep=mine)
    run._record_start(kept, "m")
    assert kept.sweep == mine


def test_a_watched_sweep_gives_each_run_its_place():
    from gpuscale.ui.live_sweep import LiveSweep
    from gpuscale.ui.sweep_app import SweepView

    made = []

    class Run:
        """What a live sweep reads of a run: a recorded sample run at ``devices``."""

        error = None
        recording_path = None

        def __init__(self, devices):
            self.events_ = sample_events(steps=12, gpus=devices)
            self.end = self.events_[-1]
            self.done = True

        def start(self):
            return self

        def stop(self):
            pass

        def events(self, timeout=None):
            yield from self.events_
            self.events_ = []

    def factory(config, record):
        made.append(Run(config))
        return made[-1]

    view = SweepView(points=[], planned=[1, 2, 4], state="running", available_devices=4)
    runner = LiveSweep(view, [1, 2, 4], record=False, run_factory=factory, sweep_id=STOPPED)
    final = runner.run(lambda v: None, lambda v: None)
    assert final.measured_counts == [1, 2, 4]
    assert [r.sweep_ref for r in made] == [
        SweepRef(id=STOPPED, index=i, planned=[1, 2, 4], available_devices=4) for i in range(3)
    ]


def test_a_script_runs_start_events_carry_the_sweep(tmp_path):
    """A script sweep's run (here a script without the callback: gpuscale makes its
    start up) is recorded with the sweep in its provisional start and its own."""
    from gpuscale.live.script_run import ScriptRun
    from gpuscale.recording.reader import iter_events

    ref = SweepRef(id=STOPPED, index=1, planned=[1, 2])
    path = tmp_path / "script.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", "import time; print('hi'); time.sleep(0.3)"],
        record=path,
        start_timeout_s=0.1,
        sampler=False,
    )
    run.sweep_ref = ref
    with run:
        assert run.wait(timeout=30)
    starts = [e for e in iter_events(path) if isinstance(e, StartEvent)]
    assert starts and all(s.sweep == ref for s in starts)
    assert run.start_event is not None and run.start_event.sweep == ref


def test_a_count_stopped_after_counting_steps_is_measured_by_name_as_by_path(tmp_path, capsys):
    """Ctrl-C in a sweep's first count, 10 steps counted: `runs` says it was measured
    (stopped, with its steps), `recommend --from` of the sweep's name reads it (it
    used to refuse: 'no completed run to read') and says it was stopped, as it does
    when the file is given by its path (which used to say nothing)."""
    path = sweep_run(tmp_path, 1, 0, [1, 2], STOPPED, status="stopped")
    (group,) = sweep_groups(list_runs(tmp_path))
    assert group.measured == [1] and group.cut_short == [1] and group.missing == [2]
    assert group.describe().endswith(
        "measured 1 (stopped, 10 steps counted); not measured: 2 (not run)"
    )
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    listing = " ".join(capsys.readouterr().out.split())
    assert "measured on 1 (stopped, 10 steps counted); not measured: 2 (not run)" in listing
    assert main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["sweeps"]
    assert listed["measured"] == [1] and listed["cut_short"] == [1] and listed["missing"] == [2]
    from gpuscale.commands.replay import _sweep_view

    resolved = resolve_inputs([f"{tmp_path}/{STOPPED}"])
    view = _sweep_view(resolved.paths, resolved.sweeps, resolved.cut_short)
    assert view.state == "stopped"
    assert view.status_line == "cut short: 1 (stopped, 10 steps counted); not measured: 2 (not run)"
    said = f"{path}: the run was stopped before its end; judged from the 10 steps it counted"
    for given in (f"{tmp_path}/{STOPPED}", str(path)):
        assert main(["recommend", "--from", given, "--json"]) == 0
        out, err = capsys.readouterr()
        (point,) = [p for p in json.loads(out)["points"] if not p.get("predicted")]
        assert point["devices"] == 1 and point["steps"] == 10
        assert f"gpuscale: warning: {said}" in err.splitlines()


def test_a_stopped_count_that_counted_no_step_is_left_out_of_its_sweep(tmp_path, capsys):
    """A run cut short whose recording does not say what it counted (no end summary)
    is read by the sweep's name; all warm-up, it is left out with a warning, and the
    sweep's other counts are judged (given by path alone it is refused, as before)."""
    sweep_run(tmp_path, 1, 0, [1, 2], STOPPED)
    events = sample_events(steps=2, gpus=2)  # both warm-up
    for event in events:
        if isinstance(event, StartEvent):
            event.sweep = SweepRef(id=STOPPED, index=1, planned=[1, 2])
        if isinstance(event, EndEvent):
            event.status = "stopped"
    cut = write_run(tmp_path / f"{STOPPED}-1_mnist-cnn_2xgpu.ndjson", events)
    assert main(["recommend", "--from", f"{tmp_path}/{STOPPED}", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [p["devices"] for p in json.loads(out)["points"] if not p.get("predicted")] == [1]
    assert (
        f"gpuscale: warning: {cut}: no counted steps (the run ended during warm-up); left out"
        in err
    )
    assert main(["recommend", "--from", str(cut)]) == 2


def test_a_count_stopped_in_its_warm_up_is_not_measured_though_its_summary_omits_the_0(
    tmp_path, capsys
):
    """gpuscale's end summary leaves out what is at its default (RunSummary is
    omit_defaults): a run stopped during warm-up has no ``steps_counted`` in it. That
    is 0 counted, not unknown: the count is not measured (it used to be listed as
    ``2 (stopped, 3 steps recorded)``, from its warm-up steps)."""
    from gpuscale.analysis.summary import summarize

    sweep_run(tmp_path, 1, 0, [1, 2], STOPPED)
    events = sample_events(steps=2, gpus=2)  # both warm-up
    for event in events:
        if isinstance(event, StartEvent):
            event.sweep = SweepRef(id=STOPPED, index=1, planned=[1, 2])
        if isinstance(event, EndEvent):
            event.status = "stopped"
            event.summary = msgspec.to_builtins(summarize(events[:-1]))
    assert "steps_counted" not in events[-1].summary  # as gpuscale writes it
    cut = write_run(tmp_path / f"{STOPPED}-1_mnist-cnn_2xgpu.ndjson", events)
    listed = {Path(r.path).name: r for r in list_runs(tmp_path)}
    assert listed[cut.name].steps_counted == 0
    (group,) = sweep_groups(list_runs(tmp_path))
    assert group.measured == [1] and group.cut_short == [] and group.missing == [2]
    assert group.describe().endswith("measured 1; not measured: 2 (stopped)")
    assert main(["recommend", "--from", f"{tmp_path}/{STOPPED}"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not measured: 2 (stopped)" in out and "steps recorded" not in out, out
    from gpuscale.commands.replay import _sweep_view

    resolved = resolve_inputs([f"{tmp_path}/{STOPPED}"])
    view = _sweep_view(resolved.paths, resolved.sweeps, resolved.cut_short)
    assert view.status_line == "not measured: 2 (stopped)"


# -- trial 2: a damaged recording in a sweep -------------------------------------------


def _named_sweep(folder: Path, damage) -> tuple[str, Path]:
    """A sweep of 1, 2 and 4 devices named as gpuscale names its recordings (the
    local time, the model, the count); ``damage(bytes) -> bytes`` spoils the
    2-device file. Its id and that file."""
    from datetime import datetime

    from recording_samples import T0

    sweep_id = f"sweep-{datetime.fromtimestamp(T0):%Y%m%d-%H%M%S}-51d2"
    paths = []
    for index, (devices, at) in enumerate([(1, 0), (2, 20), (4, 40)]):
        made = sweep_run(folder, devices, index, [1, 2, 4], sweep_id, at=at)
        stamp = datetime.fromtimestamp(T0 + at).strftime("%Y%m%d-%H%M%S")
        paths.append(made.rename(folder / f"{stamp}_mnist-cnn_{devices}xgpu.ndjson"))
    paths[1].write_bytes(damage(paths[1].read_bytes()))
    return sweep_id, paths[1]


def test_an_unreadable_recording_is_said_for_its_count_never_not_run(tmp_path, capsys):
    """Trial 2 (dd): a sweep whose 2-device file was damaged said "not measured: 2
    (not run)" in runs and recommend --from NAME, with no warning. Its file is found
    by its name: "2 (unreadable: <why>)", and a warning when the sweep is named."""
    sweep_id, bad = _named_sweep(tmp_path, lambda data: b"\x1f\x8bgarbage")
    why = "not a gzip file (it starts like one, but its gzip header is damaged)"
    (group,) = [g for g in sweep_groups(list_runs(tmp_path)) if g.name == sweep_id]
    assert group.measured == [1, 4] and group.missing == [2]
    assert group.why_missing() == [f"2 (unreadable: {why})"]
    warning = (
        f"gpuscale: warning: sweep {sweep_id}: its 2-device recording {bad} is unreadable: "
        f"{why}; 2 devices not measured"
    )
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"not measured: 2 (unreadable: {why})" in out and "not run" not in out, out
    for command in (["recommend", "--from"], ["replay"]):
        assert main([*command, f"{tmp_path}/{sweep_id}"]) == 0
        captured = capsys.readouterr()
        assert warning in captured.err.splitlines(), captured.err
        assert "not run" not in captured.out + captured.err
    assert main(["recommend", "--from", f"{tmp_path}/{sweep_id}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert warning.removeprefix("gpuscale: warning: ") in doc["recommendation"]["warnings"]
    assert main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    (listed,) = [s for s in json.loads(capsys.readouterr().out)["sweeps"] if s["id"] == sweep_id]
    assert {"path": str(bad), "devices": 2, "status": "unreadable", "problem": why} in listed[
        "recordings"
    ]


def test_an_unreadable_file_of_another_model_or_time_is_not_the_sweeps(tmp_path):
    sweep_id, bad = _named_sweep(tmp_path, lambda data: b"\x1f\x8bgarbage")
    bad.rename(bad.with_name(bad.name.replace("mnist-cnn", "resnet")))
    (group,) = [g for g in sweep_groups(list_runs(tmp_path)) if g.name == sweep_id]
    assert group.why_missing() == ["2 (not run)"] and group.unreadable == {}


def test_a_sweeps_gzip_damaged_mid_way_is_measured_from_its_lines(tmp_path, capsys):
    """Trial 2 (dd): the 2-device file gzipped and corrupted mid-stream. What is
    whole of it is read, the count measured from it, its damage said."""
    import zlib

    def damage(data: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        whole = b"\n".join(data.split(b"\n")[:40]) + b"\n"
        return packer.compress(whole) + packer.flush(zlib.Z_SYNC_FLUSH) + b"\xff" * 32

    sweep_id, bad = _named_sweep(tmp_path, damage)
    gz = bad.rename(bad.with_name(bad.name + ".gz"))
    said = "its gzip data is damaged after line 40: the 40 lines before it are read"
    said += "; the run after 3.25 s is lost (damage noticed at byte "
    (group,) = [g for g in sweep_groups(list_runs(tmp_path)) if g.name == sweep_id]
    assert group.measured == [1, 2, 4] and group.missing == []
    assert "2 (interrupted, 9 steps recorded, its recording damaged)" in group.describe()
    assert main(["recommend", "--from", f"{tmp_path}/{sweep_id}"]) == 0
    err = capsys.readouterr().err
    assert any(line.startswith(f"gpuscale: warning: {gz}: {said}") for line in err.splitlines())


def test_a_run_is_replayed_and_read_by_its_file_name_as_runs_lists_it(
    tmp_path, monkeypatch, capsys
):
    """`gpuscale runs` lists file names only (under 'Recorded runs in DIR'): `replay
    NAME` of one, from another folder, said 'NAME: no such file' (a sweep's name was
    found, a run's was not). A bare name that is no file is a recording in the runs
    folder whose name begins so; none or several: one line, exit 2."""
    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True)
    for name in ("mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"):
        shutil.copy(SAMPLES / name, runs / f"20261121-1930{name[10]}0_{name}")
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    two = "20261121-193020_mnist-cnn_2xcpu.ndjson"
    assert main(["replay", two]) == 0
    assert "status: completed" in capsys.readouterr().out
    assert main(["replay", "20261121-193010"]) == 0  # a unique beginning
    assert "mnist-cnn" in capsys.readouterr().out
    assert main(["recommend", "--from", "20261121-193010", two]) == 0
    assert f"from {runs / two}" in capsys.readouterr().out
    assert main(["replay", "20261121"]) == 2
    assert capsys.readouterr().err.startswith(
        f"gpuscale: error: 20261121: 2 recordings in {runs} start with it"
    )
    assert main(["replay", "nothing.ndjson"]) == 2
    assert capsys.readouterr().err == (
        f"gpuscale: error: nothing.ndjson: no such file, and no recording in {runs} "
        "starts with it\n"
    )
    # './NAME' is a file here, never one of the runs folder's (replay took it as a
    # path, which drops the './', and played the runs folder's file of that name)
    assert main(["replay", f"./{two}"]) == 2
    assert "no such file" in capsys.readouterr().err
    # the exact name beside a second run of the same second ('NAME-2'): that one
    stem = two.removesuffix(".ndjson")
    shutil.copy(runs / two, runs / f"{stem}-2.ndjson")
    assert main(["replay", stem]) == 0
    assert "status: completed" in capsys.readouterr().out


def test_a_bare_name_in_a_runs_folder_that_cannot_be_read_says_so(tmp_path):
    """find_run turned any folder error into 'no recording starts with it'; an
    unreadable runs folder is an error everywhere else."""
    from gpuscale.errors import GpuscaleError
    from gpuscale.recording.store import find_run

    not_a_folder = tmp_path / "runs"
    not_a_folder.write_text("a file where the runs folder should be")
    with pytest.raises(GpuscaleError, match="cannot list the recordings in .*: not a directory"):
        find_run("20261121", not_a_folder)
