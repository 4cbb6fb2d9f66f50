"""Small findings of a new user's trial: a command's unknown flag names that
command's help; a precision of 3 suggests 3%; replay's timeline flags are refused
where there is no timeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


@pytest.mark.parametrize("command", ["run", "replay", "runs", "recommend"])
def test_an_unknown_flag_names_the_commands_own_help(command, capsys):
    argv = [command, "--bogus"] + (["x.ndjson"] if command == "replay" else [])
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"gpuscale: error: unrecognized arguments: --bogus (see 'gpuscale {command} --help')"
    ]


def test_an_unknown_flag_before_any_command_names_gpuscale_help(capsys):
    with pytest.raises(SystemExit):
        main(["--bogus"])
    assert "(see 'gpuscale --help')" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--precision", "3"), ("--probe-budget", "2")])
def test_a_whole_number_percentage_suggests_the_percent_sign(flag, value, capsys):
    with pytest.raises(SystemExit):
        main(["run", flag, value])
    err = capsys.readouterr().err
    assert f"for {value} percent write {value}%" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "files",
    [
        ["seed002_mnist.json"],
        ["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"],
    ],
)
@pytest.mark.parametrize("flags", [["--end"], ["--speed", "5"]])
def test_replay_refuses_timeline_flags_for_a_sweep(files, flags, capsys):
    assert main(["replay", *(str(SAMPLES / f) for f in files), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a sweep's scaling view has no timeline" in err[0]
    assert flags[0] in err[0]
