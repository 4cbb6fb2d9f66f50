"""Text output off a terminal (a pipe, a file): lines are whole, never hard-wrapped
at 80 columns mid-phrase; tables keep their columns."""

from __future__ import annotations

import io
from pathlib import Path

from rich.table import Table

from gpuscale.cli import main
from gpuscale.commands.console import text_console

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def test_a_long_line_off_a_terminal_stays_one_line_and_a_table_keeps_its_width():
    console = text_console(file=io.StringIO(), width=40)
    console.print("against the probed steps' median 477.1 ms: " * 3)
    table = Table()
    table.add_column("N")
    table.add_column("what")
    table.add_row("1", "a cell long enough to wrap inside its column at forty")
    console.print(table)
    lines = console.file.getvalue().splitlines()
    assert lines[0].count("477.1 ms") == 3
    assert all(len(line) <= 40 for line in lines[1:])


def test_recommend_piped_prints_each_reason_on_one_line(capsys):
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json")]) == 0
    out = capsys.readouterr().out
    why = [line for line in out.splitlines() if line.startswith("  - ")]
    assert why and all(line.rstrip().endswith((".", ")")) for line in why)
    assert any(len(line) > 100 for line in why)


def test_run_summary_piped_keeps_the_phase_line_whole(capsys):
    from types import SimpleNamespace

    from gpuscale.commands.run import print_run_summary

    start = SimpleNamespace(
        model="mnist-cnn",
        num_replicas=2,
        platform="cpu-logical",
        strategy="mirrored",
        cross_device_ops=None,
        scaling="strong",
        global_batch=128,
        per_replica_batch=64,
        note=None,
    )
    summary = dict(
        steps_total=100,
        steps_counted=95,
        step_time_s=0.48,
        phase_steps=1,  # "1 probe, too few for ranges": the line passes 80 columns
        compute_s=0.4,
        compute_err_s=0.01,
        allreduce_s=0.05,
        allreduce_err_s=0.005,
        apply_s=0.02,
        apply_err_s=0.002,
        input_s=0.0,
        comm_share=0.1,
        comm_share_err=0.01,
        phase_consistent=True,
    )
    run = SimpleNamespace(
        start_event=start,
        end=SimpleNamespace(status="completed", summary=summary),
        error=None,
        recording_path=None,
        recording_problem=None,
    )
    print_run_summary(run)
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("  phases (")]
    assert line.endswith("parts of the median step 480.0 ms):")


def test_run_summary_of_several_workers_says_how_many(capsys):
    """`mlp on 2 x CPU` of a two-worker run did not say the two CPUs are two workers'."""
    from types import SimpleNamespace

    from gpuscale.commands.run import print_run_summary

    start = SimpleNamespace(
        model="mlp",
        num_replicas=2,
        num_workers=2,
        devices=[SimpleNamespace(index=0)],
        platform="cpu",
        strategy="multi-worker",
        cross_device_ops="collective",
        global_batch=128,
        per_replica_batch=64,
        scaling="weak",
        note=None,
        config={},
    )
    run = SimpleNamespace(
        start_event=start,
        end=SimpleNamespace(status="completed", summary={"steps_total": 10}),
        error=None,
        recording_path=None,
        recording_problem=None,
    )
    print_run_summary(run)
    assert capsys.readouterr().out.startswith("mlp on 2 x CPU (2 workers, 1 each): multi-worker")


def test_ctrl_c_on_built_in_workers_stops_the_trainer_not_a_script():
    """`--strategy multi-worker --local-workers 2` said "stopping the script" on Ctrl-C."""
    from argparse import Namespace

    from gpuscale.commands.run import stopped_program

    workers = Namespace(command=[], strategy="multi-worker", local_workers=2)
    assert stopped_program(workers) == "trainer"
    assert stopped_program(Namespace(command=["--", "python", "t.py"])) == "script"
    assert stopped_program(Namespace(command=[])) == "trainer"
