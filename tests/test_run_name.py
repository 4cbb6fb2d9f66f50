"""A script run without a model name is named by its script, never by its code
(trial 9: `gpuscale runs` showed `import sys; sys.exit(3)` as the Model)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from recording_samples import sample_events, write_run

from gpuscale.cli import main
from gpuscale.events.run_name import script_name
from gpuscale.recording.store import list_runs


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "-c", "import sys; sys.exit(3)"], "python -c"),
        (["python3", "-uc", "print(1)"], "python -c"),
        (["python", "-"], "python -"),
        (["python", "examples/train.py", "--epochs", "3"], "train.py"),
        (["/usr/bin/python3.11", "-W", "ignore", "-X", "dev", "a/train.py"], "train.py"),
        (["python", "-u", "-m", "pkg.train"], "pkg.train"),
        (["./train.sh", "--epochs", "3"], "train.sh"),  # was "3"
        (["uv", "run", "train.py"], "train.py"),
        (["bash", "-c", "python train.py"], "bash"),
        ([], "script"),
    ],
)
def test_script_name(argv, name):
    assert script_name(argv) == name


def test_runs_names_a_made_up_start_by_its_script_not_its_code(tmp_path, capsys):
    """Recordings made before the fix carry the code as their model: the listing
    names them from the command the start event kept."""
    events = sample_events(steps=3)
    code = "import sys; sys.exit(3)"
    events[0] = msgspec.structs.replace(
        events[0],
        source="script",
        model=code,
        config={"argv": ["python", "-c", code], "callback": False},
    )
    write_run(tmp_path / "old.ndjson", events)
    keras = sample_events(steps=3)  # a start the script's callback sent: its own model
    keras[0] = msgspec.structs.replace(
        keras[0], source="script", model="small-cnn", config={"argv": ["k.py"], "script": "k.py"}
    )
    write_run(tmp_path / "keras.ndjson", keras)
    models = {Path(r.path).name: r.model for r in list_runs(tmp_path)}
    assert models == {"old.ndjson": "python -c", "keras.ndjson": "small-cnn"}
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "python -c" in out and "sys.exit" not in out, out
