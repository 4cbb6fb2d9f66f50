"""Trainer options, sizing and log classification: fast, no TensorFlow."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from gpuscale.errors import GpuscaleError
from gpuscale.live.child import classify_line
from gpuscale.trainer import sizing
from gpuscale.trainer.options import (
    TrainConfig,
    add_trainer_arguments,
    config_from_args,
    from_json,
    to_json,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def parse(*argv: str) -> TrainConfig:
    parser = _Parser()
    add_trainer_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_defaults():
    config = parse()
    assert config.strategy == "mirrored"
    assert config.all_reduce == "auto"
    assert config.model == "mnist-cnn"
    assert config.data == "synthetic"
    assert config.phase_every is None  # probes scheduled by the budget
    assert config.probe_budget == 0.02
    assert config.devices is None and config.gpus is None
    assert config.batch_per_replica is None and config.global_batch is None


def test_full_set_round_trips_through_json():
    config = parse(
        "--gpus", "0,2", "--strategy", "mirrored", "--all-reduce", "nccl", "--model", "resnet50",
        "--image-size", "64", "--batch-per-replica", "16", "--data", "host", "--steps", "50",
        "--warmup-steps", "3", "--phase-every", "5", "--mixed-precision", "--seed", "7",
    )  # fmt: skip
    assert config.gpus == [0, 2]
    assert config.num_devices == 2
    assert config.batch_per_replica == 16
    assert from_json(to_json(config)) == config


@pytest.mark.parametrize(
    ("text", "share"), [("2%", 0.02), ("0.5%", 0.005), ("0.1", 0.1), ("0", 0.0)]
)
def test_probe_budget_takes_a_percentage_or_a_fraction(text, share):
    assert parse("--probe-budget", text).probe_budget == pytest.approx(share)


@pytest.mark.parametrize("text", ["lots", "100%", "-1%"])
def test_bad_probe_budget_is_an_argparse_error(text):
    with pytest.raises(ValueError):
        parse("--probe-budget", text)


def test_user_model_spec_accepted():
    assert parse("--model", "pkg.models:build").model == "pkg.models:build"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--devices", "0"], "--devices must be at least 1"),
        (["--devices", "2", "--gpus", "0,1"], "not both"),
        (["--gpus", "1,1"], "lists a GPU twice"),
        (["--strategy", "one-device", "--devices", "2"], "uses one device"),
        (
            ["--strategy", "central-storage", "--all-reduce", "nccl"],
            "applies to --strategy mirrored",
        ),
        (["--model", "nonsense"], "expected one of mnist-cnn"),
        (["--model", "pkg.mod:"], "package.module:function"),
        (["--model", "mlp", "--width", "8"], "--width applies to --model mnist-cnn"),
        (["--width", "0"], "--width must be 1 to 65,536, not 0"),
        (["--image-size", "64"], "--image-size applies to --model resnet50"),
        (["--model", "resnet50", "--image-size", "16"], "must be 32 (ResNet-50's minimum)"),
        (["--global-batch", "0"], "--global-batch must be 1 to"),
        (["--global-batch", "100", "--devices", "3"], "does not split evenly across 3"),
        (["--steps", "0"], "--steps must be 1 to"),
        (["--steps", "5", "--warmup-steps", "5"], "leaves no measured step"),
        (["--phase-every", "-1"], "--phase-every must be 0 to"),
        (["--devices", "99999999999999999999999"], "more than gpuscale supports (65,536)"),
        (["--gpus", "0,99999999999"], "beyond any machine"),
        (["--seed", "-1"], "--seed must be 0 to 2,147,483,647"),
        (["--seed", "2147483648"], "--seed must be 0 to"),
        (["--global-batch", "99999999999999999999"], "TensorFlow's int32"),
        (["--batch-per-replica", "2147483647", "--devices", "2"], "global batch over"),
    ],
)
def test_bad_options_raise_one_line(argv, message):
    with pytest.raises(GpuscaleError) as info:
        parse(*argv)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    "argv", [["--gpus", "a,b"], ["--batch-per-replica", "8", "--global-batch", "16"]]
)
def test_argparse_level_errors(argv):
    with pytest.raises(ValueError):
        parse(*argv)


def test_from_json_rejects_garbage():
    with pytest.raises(GpuscaleError, match="bad trainer configuration"):
        from_json('{"steps": "many"}')


def test_cpu_sizing_shrinks_and_says_why():
    s = sizing.resolve_sizing(TrainConfig(), "cpu-logical", 2, cpu_count=2)
    assert s.width == sizing.CPU_WIDTH
    assert s.per_replica_batch * 2 == sizing.CPU_GLOBAL_BATCH
    assert s.scaling == "strong"
    assert "--width 128 --global-batch 1024" in s.note


def test_gpu_sizing_is_seed_002():
    s = sizing.resolve_sizing(TrainConfig(), "gpu", 4)
    assert (s.width, s.per_replica_batch, s.scaling) == (128, 256, "strong")


def test_explicit_batch_is_kept_and_weak():
    s = sizing.resolve_sizing(TrainConfig(batch_per_replica=8), "cpu-logical", 2)
    assert (s.width, s.per_replica_batch, s.scaling) == (128, 8, "weak")


def test_auto_global_batch_rounds_to_the_replica_count():
    s = sizing.resolve_sizing(TrainConfig(), "cpu-logical", 3, cpu_count=2)
    assert s.per_replica_batch * 3 >= sizing.CPU_GLOBAL_BATCH
    assert "3 replicas" in s.note


@pytest.mark.parametrize(
    ("line", "stream", "level"),
    [
        (
            "E0000 00:00:1795289356.351890    7852 cuda_platform.cc:52] failed call to cuInit: x",
            "stderr",
            "debug",
        ),
        ("W0000 00:00:1795289356.351890    7852 foo.cc:1] something odd", "stderr", "warning"),
        ("E0000 00:00:1795289356.351890    7852 foo.cc:1] broken", "stderr", "error"),
        ("Traceback (most recent call last):", "stderr", "warning"),
        ("epoch 1 done", "stdout", "info"),
        (
            "To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
            "rebuild TensorFlow with the appropriate compiler flags.",
            "stderr",
            "debug",
        ),
    ],
)
def test_classify_trainer_output(line, stream, level):
    assert classify_line(line, stream)[0] == level


def test_run_help_does_not_import_tensorflow():
    code = (
        "import sys, contextlib, io\n"
        "from gpuscale.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['run', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert '--batch-per-replica' in out.getvalue(), out.getvalue()\n"
        "import gpuscale.live.trainer_run, gpuscale.trainer.options, gpuscale.trainer.sizing\n"
        "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]\n"
        "print('imported:', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_precision_is_a_share_and_not_for_multi_worker():
    assert parse("--precision", "3%").precision == pytest.approx(0.03)
    assert parse().precision is None
    with pytest.raises(GpuscaleError, match="stop together"):
        parse("--precision", "3%", "--strategy", "multi-worker")


@pytest.mark.parametrize(
    ("flag", "text", "says"),
    [
        ("--precision", "-1", "argument --precision: the precision must be in (0%, 100%)"),
        ("--precision", "150%", "argument --precision: the precision must be in (0%, 100%)"),
        ("--precision", "0", "argument --precision: the precision must be in (0%, 100%)"),
        ("--precision", "lots", "argument --precision: expected a precision"),
        ("--probe-budget", "150%", "argument --probe-budget: the probe budget must be in [0%"),
    ],
)
def test_each_share_option_names_itself_and_its_own_range(flag, text, says):
    with pytest.raises(ValueError) as caught:
        parse(f"{flag}={text}")
    assert says in str(caught.value)


def _no_gpu():
    return []


@pytest.mark.parametrize(
    ("devices", "sweep", "says"),
    [
        (99, None, "--devices asks for 99 CPU logical devices"),
        (None, [1, 2, 99], "--sweep asks for 99 CPU logical devices"),
        (3, None, "use at most 2"),
    ],
)
def test_more_cpu_devices_than_cores_are_refused_before_tensorflow(devices, sweep, says):
    from gpuscale.trainer.options import check_cpu_devices

    with pytest.raises(GpuscaleError, match="2 CPU cores") as caught:
        check_cpu_devices(TrainConfig(devices=devices), sweep, cores=2, gpus_found=_no_gpu)
    assert says in str(caught.value)


def test_cpu_devices_within_the_cores_or_with_gpus_pass():
    from gpuscale.trainer.options import check_cpu_devices

    check_cpu_devices(TrainConfig(devices=2), [1, 2], cores=1, gpus_found=_no_gpu)  # the default 2
    check_cpu_devices(TrainConfig(devices=8), None, cores=8, gpus_found=_no_gpu)
    check_cpu_devices(TrainConfig(devices=8), None, cores=2, gpus_found=lambda: [0, 1])  # GPUs
    check_cpu_devices(TrainConfig(devices=8), None, cores=2, gpus_found=lambda: None)  # unknown


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--devices", "99", "--no-record", "--steps", "10"],
        ["watch", "--devices", "99", "--no-record", "--", "python", "x.py"],
        ["recommend", "--sweep", "1,99", "--no-record"],
        ["recommend", "--sweep", "1,99", "--no-record", "--", "python", "x.py"],
    ],
    ids=["run", "watch-script", "recommend", "recommend-script"],
)
def test_99_cpu_devices_are_refused_at_once(tmp_path, argv):
    if os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl"):
        pytest.skip("a GPU machine: --devices counts GPUs there")
    if (os.cpu_count() or 1) >= 99:
        pytest.skip("a machine with 99 cores")
    result = subprocess.run(
        [sys.executable, "-m", "gpuscale", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "99 CPU logical devices" in lines[0], result.stderr
    assert "use at most" in lines[0]


def _cli_args(*argv: str) -> argparse.Namespace:
    """``gpuscale ARGV`` as the command line parses it (no TensorFlow)."""
    from gpuscale.cli import _parse, build_parser

    return _parse(build_parser(), list(argv))


@pytest.mark.parametrize("command", ["run", "watch"])
def test_local_workers_imply_multi_worker_without_a_strategy(command):
    """`gpuscale run --local-workers 2` was refused ("needs --strategy multi-worker"):
    two or more local workers of the built-in trainer mean a multi-worker run."""
    from gpuscale.live.script_run import wants_script_run
    from gpuscale.trainer.options import strategy_of

    args = _cli_args(command, "--local-workers", "2", "--model", "mlp")
    assert strategy_of(args) == "multi-worker"
    assert config_from_args(args).strategy == "multi-worker" and wants_script_run(args)
    said = _cli_args(command, "--local-workers", "3", "--strategy", "multi-worker")
    assert config_from_args(said).strategy == "multi-worker"
    # without --local-workers, or for a script (it picks its own strategy): as before
    assert config_from_args(_cli_args(command)).strategy == "mirrored"
    script = _cli_args(command, "--local-workers", "2", "--", "python", "train.py")
    assert config_from_args(script).strategy == "mirrored" and wants_script_run(script)
    assert config_from_args(_cli_args("recommend")).strategy == "mirrored"


def test_implied_local_workers_start_the_built_in_trainer_as_multi_worker(monkeypatch):
    from gpuscale.live import script_run

    monkeypatch.setattr(script_run, "_check_builtin_workers", lambda config, env: None)
    run = script_run.script_run_from_args(_cli_args("run", "--local-workers", "2"), None)
    assert run.local_workers == 2 and run.argv[1:3] == ["-m", "gpuscale.trainer"]
    assert from_json(run.argv[-1]).strategy == "multi-worker"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--local-workers", "2", "--strategy", "mirrored"],
            "--local-workers 2 starts a multi-worker cluster, not --strategy mirrored: "
            "leave --strategy out",
        ),
        (["--strategy", "one-device", "--local-workers", "4"], "not --strategy one-device"),
        (["--local-workers", "1"], "--local-workers 1 is a cluster of one worker: say "),
        (["--local-workers", "2", "--precision", "3%"], "stop together"),
    ],
)
def test_local_workers_with_another_strategy_is_one_line(argv, says):
    from gpuscale.live.script_run import script_run_from_args

    args = _cli_args("run", *argv)
    with pytest.raises(GpuscaleError) as info:
        config_from_args(args)
        script_run_from_args(args, None)
    assert says in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2
