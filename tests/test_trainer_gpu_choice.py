"""``--devices N`` on fewer GPUs than the machine has: the best-connected N."""

from __future__ import annotations

import io

import pytest
from fake_nvml import FakeNvml

from gpuscale import cli
from gpuscale.commands.gpu_choice import choose_gpus, with_best_gpus
from gpuscale.errors import GpuscaleError
from gpuscale.telemetry.topology import probe_topology
from gpuscale.trainer.options import TrainConfig


def two_socket_box_with_a_switch_on_socket_1():
    fake = FakeNvml.scenario("pcie-two-sockets")
    fake.ancestors = {
        (a, b): (40 if a < 4 and b < 4 else 10 if a >= 4 and b >= 4 else 50)
        for a in range(8)
        for b in range(a + 1, 8)
    }
    return fake


def test_devices_becomes_the_best_gpus_with_one_line():
    topology = probe_topology(two_socket_box_with_a_switch_on_socket_1())
    config, line = choose_gpus(TrainConfig(devices=4), topology, environ={})
    assert config.devices is None and config.gpus == [4, 5, 6, 7]
    assert config.num_devices == 4
    assert line == (
        "--devices 4: using GPUs 4,5,6,7 of 8, the best-connected "
        "(PCIe switch; --gpus to choose others)"
    )


def test_one_device():
    topology = probe_topology(FakeNvml.scenario("pcie-two-sockets"))
    config, line = choose_gpus(TrainConfig(devices=1), topology, environ={})
    assert config.gpus == [0]
    assert line == "--devices 1: using GPU 0 of 8 (--gpus to choose another)"


@pytest.mark.parametrize(
    ("config", "environ"),
    [
        (TrainConfig(devices=2), {"CUDA_VISIBLE_DEVICES": "2,3"}),  # the user chose already
        (TrainConfig(gpus=[6, 7]), {}),
        (TrainConfig(), {}),  # all GPUs
        (TrainConfig(devices=8), {}),  # all of them
        (TrainConfig(devices=9), {}),  # more than there are: the trainer says so
        (TrainConfig(devices=2, strategy="multi-worker"), {}),
    ],
)
def test_left_alone(config, environ):
    topology = probe_topology(FakeNvml.scenario("pcie-two-sockets"))
    assert choose_gpus(config, topology, environ=environ) == (config, None)


def test_unknown_topology_keeps_the_first_gpus():
    topology = probe_topology(FakeNvml.scenario("topology-not-supported"))
    config = TrainConfig(devices=2)
    assert choose_gpus(config, topology, environ={}) == (config, None)
    assert choose_gpus(config, None, environ={}) == (config, None)


def test_global_batch_still_checked_against_the_count():
    topology = probe_topology(FakeNvml.scenario("nvlink-bridge"))
    config, _ = choose_gpus(TrainConfig(devices=2, global_batch=64), topology, environ={})
    assert config.gpus == [0, 1] and config.global_batch == 64


def test_with_best_gpus_prints_the_line(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    out = io.StringIO()
    config = with_best_gpus(
        TrainConfig(devices=2), nvml=FakeNvml.scenario("nvlink-bridge"), out=out
    )
    assert config.gpus == [0, 1]
    assert out.getvalue() == (
        "gpuscale: --devices 2: using GPUs 0,1 of 4, the best-connected "
        "(NVLink; --gpus to choose others)\n"
    )


def test_with_best_gpus_does_not_start_nvml_when_there_is_nothing_to_choose():
    fake = FakeNvml.scenario("pcie-two-sockets")
    assert with_best_gpus(TrainConfig(gpus=[1]), nvml=fake).gpus == [1]
    assert with_best_gpus(TrainConfig(), nvml=fake).gpus is None
    assert fake.calls["nvmlInit"] == 0


@pytest.mark.parametrize("command", ["run", "watch"])
def test_run_and_watch_hand_the_choice_to_the_run(monkeypatch, capsys, command):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(
        "gpuscale.telemetry.nvml.load_bindings", two_socket_box_with_a_switch_on_socket_1
    )
    seen = []

    class Stop(GpuscaleError):
        pass

    def fake_live_run(config, **kwargs):
        seen.append(config)
        raise Stop("stopped before the trainer")

    monkeypatch.setattr("gpuscale.live.trainer_run.LiveRun", fake_live_run)
    assert cli.main([command, "--devices", "2", "--no-record"]) == 2
    assert seen[0].gpus == [4, 5] and seen[0].devices is None
    assert "gpuscale: --devices 2: using GPUs 4,5 of 8" in capsys.readouterr().err
