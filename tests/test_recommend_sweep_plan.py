"""The live sweep's per-count configurations: made and validated before any
TensorFlow starts, one workload at every count (no TensorFlow here)."""

from __future__ import annotations

import pytest

from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.commands.recommend_live import sweep_configs
from gpuscale.errors import GpuscaleError
from gpuscale.trainer.options import TrainConfig


def test_a_picked_global_batch_is_rounded_up_to_split_across_every_count():
    # On CPU the trainer picks global batch 128 for mnist-cnn: 3 devices cannot split it.
    configs, notes = sweep_configs(TrainConfig(), [1, 2, 3], None, "cpu-logical")
    assert [c.devices for c in configs] == [1, 2, 3]
    assert {c.global_batch for c in configs} == {132}
    assert {c.width for c in configs[1:]} == {32}
    assert notes and "132" in notes[0] and "128" in notes[0]


def test_every_count_is_pinned_to_what_the_first_picks_and_the_pick_is_said():
    configs, notes = sweep_configs(TrainConfig(), [1, 2, 4], None, "cpu-logical")
    assert [(c.global_batch, c.width) for c in configs] == [(128, 32)] * 3
    # Only the devices differ, so the counts can share one trainer process.
    from gpuscale.trainer.options import shared_process_refusal

    assert shared_process_refusal(configs) is None
    assert len(notes) == 1 and "32 channels" in notes[0] and "128" in notes[0]


def test_a_count_given_in_full_is_left_as_asked():
    asked = TrainConfig(width=16, global_batch=64)
    configs, notes = sweep_configs(asked, [1, 2], None, "cpu-logical")
    assert configs[0] == TrainConfig(devices=1, width=16, global_batch=64) and not notes


def test_a_users_global_batch_that_a_count_cannot_split_is_refused():
    with pytest.raises(GpuscaleError, match=r"--global-batch 100 .*1, 3.*multiple of 3"):
        sweep_configs(TrainConfig(global_batch=100), [1, 3], None, "cpu-logical")


def test_weak_scaling_pins_the_batch_per_replica_and_gpus_are_drawn_from_the_pool():
    configs, _ = sweep_configs(TrainConfig(model="resnet50"), [1, 2], [0, 2, 5], "gpu")
    assert [c.gpus for c in configs] == [[0], [0, 2]]
    assert configs[1].batch_per_replica == 64 and configs[1].devices is None


def test_every_count_is_validated_like_a_run():
    with pytest.raises(GpuscaleError, match="2-device run of the sweep: --strategy one-device"):
        sweep_configs(TrainConfig(strategy="one-device"), [1, 2], None, "cpu-logical")


def test_a_bad_count_stops_the_sweep_before_any_trainer_starts(monkeypatch, capsys):
    def no_trainer(*args, **kwargs):
        raise AssertionError("a trainer was started")

    monkeypatch.setattr("gpuscale.live.trainer_run.LiveRun", no_trainer)
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 3], "CPU", None, 3))
    monkeypatch.setattr("os.cpu_count", lambda: 4)  # 3 CPU devices make sense here
    assert main(["recommend", "--sweep", "1,3", "--global-batch", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--global-batch 100" in err[0], err


def test_with_a_topology_each_count_takes_the_best_connected_gpus_of_the_pool(monkeypatch):
    from fake_nvml import FakeNvml

    from gpuscale.commands.recommend_live import sweep_topology

    fake = FakeNvml.scenario("pcie-two-sockets")
    fake.ancestors = {  # socket 1 has one PCIe switch; socket 0 none
        (a, b): (40 if a < 4 and b < 4 else 10 if a >= 4 and b >= 4 else 50)
        for a in range(8)
        for b in range(a + 1, 8)
    }
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    topology = sweep_topology(list(range(8)), nvml=fake)
    configs, notes = sweep_configs(
        TrainConfig(model="resnet50"), [1, 2, 4, 8], list(range(8)), "gpu", topology
    )
    assert [c.gpus for c in configs] == [[0], [4, 5], [4, 5, 6, 7], list(range(8))]
    assert notes[-1] == (
        "GPUs per count, the best-connected by topology: 1: 0; 2: 4,5; 4: 4,5,6,7; "
        "8: 0,1,2,3,4,5,6,7"
    )
    configs, _ = sweep_configs(TrainConfig(model="resnet50"), [1, 2], [0, 1, 2, 3], "gpu", topology)
    assert [c.gpus for c in configs] == [[0], [0, 1]]  # within the pool


def test_no_topology_for_the_sweep_when_the_user_chose_or_nvml_cannot_say(monkeypatch):
    from fake_nvml import FakeNvml

    from gpuscale.commands.recommend_live import sweep_topology

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert sweep_topology([0, 1], nvml=FakeNvml.scenario("pcie-two-sockets")) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert sweep_topology(None, nvml=FakeNvml.scenario("pcie-two-sockets")) is None
    assert sweep_topology([0, 1], nvml=FakeNvml.scenario("topology-not-supported")) is None
    assert sweep_topology([0, 1], nvml=FakeNvml.scenario("pcie-two-sockets")) is not None


@pytest.mark.parametrize("counts", ["1,1", "1,2,2", "2,1,2"])
def test_a_count_given_twice_is_refused_in_one_line(counts, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["recommend", "--sweep", counts])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "more than once" in err[0], err
