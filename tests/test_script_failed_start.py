"""A script that fails before gpuscale's callback reports its start: the start
gpuscale makes up for it says the devices the script was asked to use
(``--devices N``, ``GPUSCALE_DEVICES``) and their platform, as the provisional one
did, so its recording is named and listed for them (``_2xcpu``, not ``_1xcpu``)
and a sweep's failed count is matched to its count (``not measured: 2 (failed)``,
not ``2 (not run)``). No TensorFlow: plain Python scripts (tests/fake_script.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuscale.cli import main
from gpuscale.recording.reader import load_run
from gpuscale.recording.store import runs_dir

FAKE = Path(__file__).with_name("fake_script.py")


def test_run_of_a_script_that_fails_at_once_is_recorded_on_the_devices_asked(
    tmp_path, capsys, _isolated_data_dir
):
    script = tmp_path / "fails.py"
    script.write_text('import sys\nprint("RuntimeError: boom", file=sys.stderr)\nsys.exit(3)\n')
    assert main(["run", "--devices", "2", "--", sys.executable, str(script)]) == 3
    (path,) = runs_dir().glob("*.ndjson")
    assert path.name.endswith("_fails.py_2xcpu.ndjson"), path.name
    run = load_run(path)
    assert run.start.num_replicas == 2 and run.start.platform == "cpu-logical"
    assert not run.start.provisional
    assert run.start.note.startswith("the script exited with status 3 before")
    assert run.end.status == "failed"
    capsys.readouterr()
    assert main(["runs"]) == 0
    listing = capsys.readouterr().out
    (line,) = [row for row in listing.splitlines() if path.name in row]
    assert " 2xcpu " in line and "failed" in line


def test_a_sweeps_count_that_fails_at_once_is_that_count(monkeypatch, capsys, _isolated_data_dir):
    from gpuscale.commands import recommend_live

    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep on CPU", None, 2))
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    argv = ["recommend", "--sweep", "1,2", "--no-chart", "--", sys.executable, str(FAKE)]
    assert main(argv) == 3
    names = sorted(p.name for p in runs_dir().glob("*.ndjson"))
    assert [n.rsplit("_", 1)[1] for n in names] == ["1xcpu.ndjson", "2xcpu.ndjson"], names
    capsys.readouterr()
    assert main(["runs"]) == 0
    listing = " ".join(capsys.readouterr().out.split())
    assert "measured on 1; not measured: 2 (failed)" in listing, listing
