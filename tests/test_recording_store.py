"""Where runs are stored, how they are named, and `gpuscale runs`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from recording_samples import T0, sample_events, write_run

from gpuscale.cli import main as cli_main
from gpuscale.recording import store
from gpuscale.recording.reader import RecordingError, load_run
from gpuscale.recording.store import default_path, find_run, list_runs, runs_dir

WHEN = datetime(2026, 11, 21, 19, 30, 0)


def test_runs_dir_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(tmp_path / "data"))
    assert runs_dir() == tmp_path / "data" / "runs"


def test_runs_dir_defaults_to_the_platform_user_data_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv("GPUSCALE_DATA_DIR", raising=False)
    assert runs_dir() == Path(platformdirs.user_data_dir("gpuscale", appauthor=False)) / "runs"


def test_default_path_says_when_which_model_and_how_many_devices():
    path = default_path("mnist-cnn", 2, "cpu-logical", WHEN)
    assert path == runs_dir() / "20261121-193000_mnist-cnn_2xcpu.ndjson"
    assert default_path("ResNet50", 8, "gpu", WHEN).name == "20261121-193000_resnet50_8xgpu.ndjson"
    assert default_path("mnist-cnn", 1, "gpu", WHEN, compress=True).name.endswith(
        "_1xgpu.ndjson.gz"
    )


def test_default_path_makes_awkward_model_names_safe():
    name = default_path("../my model: v2/train.py", 4, "gpu", WHEN).name
    assert name == "20261121-193000_my-model-v2-train.py_4xgpu.ndjson"
    assert "/" not in default_path("/" * 10, 1, "gpu", WHEN).name
    assert default_path("", 1, "gpu", WHEN).name == "20261121-193000_run_1xgpu.ndjson"
    assert len(default_path("x" * 500, 1, "gpu", WHEN).name) < 80


def test_default_path_is_unique_when_the_name_is_taken():
    first = default_path("mnist-cnn", 2, "gpu", WHEN)
    write_run(first)
    second = default_path("mnist-cnn", 2, "gpu", WHEN)
    assert second.name == "20261121-193000_mnist-cnn_2xgpu-2.ndjson"
    write_run(second)
    assert default_path("mnist-cnn", 2, "gpu", WHEN).name.endswith("-3.ndjson")


def test_default_path_uses_now_when_not_told():
    before = datetime.now().replace(microsecond=0)
    stamp = datetime.strptime(default_path("m", 1, "gpu").name[:15], "%Y%m%d-%H%M%S")
    assert before <= stamp <= datetime.now()


def test_list_runs_reads_complete_killed_gzip_and_damaged_runs(tmp_path):
    write_run(tmp_path / "b_done.ndjson")
    killed = sample_events(steps=7, end=False)
    write_run(tmp_path / "a_killed.ndjson.gz", killed)
    (tmp_path / "c_junk.ndjson").write_text("hello\n")
    (tmp_path / "notes.txt").write_text("not listed")
    (tmp_path / "folder.ndjson").mkdir()
    runs = list_runs(tmp_path)
    by_name = {Path(r.path).name: r for r in runs}
    assert set(by_name) == {"b_done.ndjson", "a_killed.ndjson.gz", "c_junk.ndjson"}

    done = by_name["b_done.ndjson"]
    assert (done.model, done.devices, done.platform) == ("mnist-cnn", 2, "gpu")
    assert done.steps == 20 and done.duration_s == pytest.approx(7.0)  # start to end event
    assert done.status == "completed" and done.problem is None
    assert done.start_t == T0 and done.when.timestamp() == T0
    assert done.size_bytes == (tmp_path / "b_done.ndjson").stat().st_size

    gone = by_name["a_killed.ndjson.gz"]
    assert gone.status == "interrupted" and gone.steps == 7
    assert gone.duration_s == pytest.approx(killed[-1].t - T0)

    junk = by_name["c_junk.ndjson"]
    assert junk.status == "unreadable" and "not a JSON object" in junk.problem
    # Readable runs first, oldest first; unreadable ones last.
    assert Path(runs[-1].path).name == "c_junk.ndjson"


def test_list_runs_reads_only_the_head_and_tail(tmp_path):
    events = sample_events(steps=3000)
    path = write_run(tmp_path / "long.ndjson", events)
    data = path.read_bytes()
    assert len(data) > 10 * store.TAIL_BYTES
    middle = data.index(b"\n", len(data) // 2) + 1
    path.write_bytes(data[:middle] + b"damage the reader would refuse\n" + data[middle:])
    (run,) = list_runs(tmp_path)  # the middle is never read
    assert run.steps == 3000 and run.status == "completed"
    warnings: list[str] = []
    assert len(load_run(path, warnings.append).events) == len(events)  # skipped when read
    assert len(warnings) == 1 and "not JSON" in warnings[0] and "skipped" in warnings[0]


def test_list_runs_of_missing_folder_is_empty(tmp_path):
    assert list_runs(tmp_path / "nowhere") == []


def test_find_run_by_path_or_unique_prefix():
    a = write_run(default_path("mnist-cnn", 1, "gpu", WHEN))
    b = write_run(default_path("mnist-cnn", 2, "gpu", WHEN))
    assert find_run(str(a)) == a
    assert find_run("20261121-193000_mnist-cnn_2") == b
    with pytest.raises(RecordingError, match="2 recordings"):
        find_run("20261121")
    with pytest.raises(RecordingError, match="no recording"):
        find_run("nothing-like-this")


def test_cli_runs_table(capsys):
    write_run(default_path("mnist-cnn", 2, "gpu", WHEN))
    assert cli_main(["runs"]) == 0
    out = capsys.readouterr().out
    assert str(runs_dir()) in out
    assert "mnist-cnn" in out and "2xgpu" in out and "completed" in out and "7.00 s" in out


def test_cli_runs_json(capsys):
    path = write_run(default_path("mnist-cnn", 2, "gpu", WHEN))
    assert cli_main(["runs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["runs"]
    assert doc["folder"] == str(runs_dir()) and doc["sweeps"] == []
    assert row["path"] == str(path) and row["sweep"] is None
    assert row["model"] == "mnist-cnn" and row["devices"] == 2 and row["steps"] == 20
    assert row["duration_s"] == pytest.approx(7.0) and row["size_bytes"] == path.stat().st_size
    assert datetime.fromisoformat(row["when"]).timestamp() == T0


def test_cli_runs_empty_says_where_it_looked(capsys):
    assert cli_main(["runs"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and str(runs_dir()) in out and out.startswith("No recordings")
    assert cli_main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "folder": str(runs_dir()),
        "runs": [],
        "sweeps": [],
    }


def test_cli_runs_empty_dir_says_the_truth_of_that_folder(capsys, tmp_path, monkeypatch):
    """Runs are saved in the runs folder, not in any folder given with --dir: an empty
    one is said to be empty, and where gpuscale's own recordings are."""
    empty = tmp_path / "emptydir"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli_main(["runs", "--dir", "emptydir"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"No recordings in emptydir (gpuscale saves its runs in {runs_dir()}, which "
        "'gpuscale runs' lists without --dir).\n"
    )
    assert "saves one there" not in out
    # the runs folder itself, however it is written, is where every run is saved
    runs_dir().mkdir(parents=True)
    assert cli_main(["runs", "--dir", f"{runs_dir()}/../runs/"]) == 0
    assert "(every 'gpuscale run' saves one there)" in capsys.readouterr().out


def test_cli_runs_dir(tmp_path, capsys):
    write_run(tmp_path / "mine.ndjson")
    assert cli_main(["runs", "--dir", str(tmp_path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 1
    assert cli_main(["runs", "--dir", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: error: --dir") and "does not exist" in err


def test_list_runs_shows_the_start_that_supersedes_a_provisional_one(tmp_path):
    import msgspec

    from gpuscale.events.schema import StartEvent

    events = sample_events()
    real = events[0]
    provisional = msgspec.structs.replace(
        real, provisional=True, model="train.py", num_replicas=1, platform="cpu"
    )
    write_run(tmp_path / "run.ndjson", [provisional, *events[1:3], real, *events[3:]])
    (info,) = list_runs(tmp_path)
    assert isinstance(real, StartEvent) and not real.provisional
    assert (info.model, info.devices, info.platform) == (
        real.model,
        real.num_replicas,
        real.platform,
    )
    assert info.status == "completed"
    loaded = load_run(tmp_path / "run.ndjson")
    assert loaded.start == real and loaded.events[0] == provisional
