"""Small findings of a new user's trial: a command's unknown flag names that
command's help; a precision of 3 suggests 3%; replay's timeline flags are refused
where there is no timeline; a negative value (``--probe-budget -1%``) gets the
option's own error, not argparse's "expected one argument"."""

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


def _error_of(argv, capsys) -> tuple[int, list[str]]:
    """``gpuscale ARGV``'s exit status and its stderr lines (a usage error exits)."""
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--probe-budget", "-1%"],
        ["watch", "--probe-budget", "-1%"],
        ["recommend", "--probe-budget", "-1%"],
        ["run", "--probe-budget", "-1e-2"],
        ["run", "--precision", "-3%"],
        ["run", "--gpus", "-1,2"],
        ["recommend", "--min-efficiency", "-60%"],
        ["recommend", "--price-per-device-hour", "-1e3"],
        ["recommend", "--sweep", "-1,2"],
        ["run", "--sample-interval", "-1e-3"],
        ["replay", str(SAMPLES / "mnist-cnn_1xcpu.ndjson"), "--speed", "-1e3"],
        ["devices", "--no-tf", "--tf-timeout", "-1e3"],
    ],
)
def test_a_negative_value_gets_its_options_own_error(argv, capsys):
    """A value that starts with a minus and a digit is the option's value, as
    ``--flag=VALUE`` is, not an unknown option ("expected one argument")."""
    *before, flag, value = argv
    code, err = _error_of(argv, capsys)
    assert code == 2 and len(err) == 1 and "expected one argument" not in err[0], err
    assert (code, err) == _error_of([*before, f"{flag}={value}"], capsys)


@pytest.mark.parametrize("command", ["run", "watch", "recommend"])
def test_the_scripts_arguments_after_a_bare_double_dash_stay_as_written(command):
    from gpuscale.cli import _parse, build_parser

    script = ["python", "train.py", "--probe-budget", "-1%", "--", "-3e-2"]
    args = _parse(build_parser(), [command, "--steps", "5", "--", *script])
    assert args.command == ["--", *script] and args.probe_budget == 0.02 and args.steps == 5
