"""An empty path (``--plot ""``, an unset shell variable) is bad input for every
option that takes one: one line naming the option, exit 2; never ignored
(``--plot ""`` wrote nothing and said nothing) nor read as the current folder
(``Path("")`` is ``.``: ``runs --dir ""`` listed it, ``replay ""`` called it a
directory, ``--record " "`` recorded to a file named by a space). No TensorFlow."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.cli import main

SAMPLE = str(Path(__file__).resolve().parent.parent / "sample_runs" / "seed002_mnist.json")

CASES = {
    "recommend --plot": (["recommend", "--from", SAMPLE, "--plot", "{}"], "--plot", "a file name"),
    "recommend --from": (["recommend", "--from", SAMPLE, "{}"], "--from", "a file name"),
    "replay FILE": (["replay", "{}"], "FILE", "a file name"),
    "run --record": (["run", "--record", "{}"], "--record", "a file name"),
    "watch --record": (["watch", "--record", "{}"], "--record", "a file name"),
    "runs --dir": (["runs", "--dir", "{}"], "--dir", "a folder"),
}


@pytest.mark.parametrize(("argv", "option", "give"), list(CASES.values()), ids=list(CASES))
@pytest.mark.parametrize("path", ["", "  "], ids=["empty", "spaces"])
def test_an_empty_path_is_one_line_and_exit_2(
    argv, option, give, path, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # nothing may be written here
    argv = [path if a == "{}" else a for a in argv]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    what = "an empty path" if not path else f"a path of spaces only ({path!r})"
    command = argv[0]
    assert captured.err.splitlines() == [
        f"gpuscale: error: argument {option}: {what}: give {give} (see 'gpuscale {command} --help')"
    ]
    assert captured.out == "" and list(tmp_path.iterdir()) == []
