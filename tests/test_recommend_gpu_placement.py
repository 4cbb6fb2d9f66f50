"""`recommend --from` over recordings that carry the machine's topology names the
GPUs to use for the recommended count (the best-connected, by the rule `gpuscale
devices` lists them by) and says under Confidence where a measured count ran on
worse-connected GPUs than the machine offers, with what to measure again. Old
recordings (no topology), sweep files and other machines' runs: nothing said.
Recordings: the real Sampler and Recorder over FakeNvml (tests/eight_gpu_recordings.py),
an 8-GPU PCIe box on two sockets (0-1, 2-3 one PCIe switch; 0-3 one socket) and an
NVSwitch H100 box; no TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from eight_gpu_recordings import record
from fake_nvml import FakeNvml

from gpuscale.analysis.placement import worse_placed
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.analysis.topology import best_gpus, gpus_of_run, machine_topology
from gpuscale.cli import main
from gpuscale.commands.devices import judge_topology
from gpuscale.recording.reader import load_run
from gpuscale.telemetry.topology import probe_topology

PCIE = "pcie-two-sockets"
H100 = "h100-box"
MEASURE_AGAIN = "measure it again with 'gpuscale run --gpus 0,1,2,3'"


def _runs(folder: Path, machine: str) -> dict[str, Path]:
    """1 device on GPU 0, 2 on 0,1, 4 on 0-3 (one socket) and on 0,1,4,5 (two
    sockets: on the PCIe box its exchange is ten times slower), 8 on all."""
    folder.mkdir()
    pcie = machine == PCIE
    return {
        "1": record(folder / "g1.ndjson", machine=machine, gpus=[0], seed=1),
        "2": record(folder / "g2.ndjson", machine=machine, gpus=[0, 1], seed=2),
        "4good": record(
            folder / "g4good.ndjson",
            machine=machine,
            gpus=[0, 1, 2, 3],
            exchange_s=0.012 if pcie else None,
            seed=3,
        ),
        "4bad": record(
            folder / "g4bad.ndjson",
            machine=machine,
            gpus=[0, 1, 4, 5],
            exchange_s=0.12 if pcie else None,
            seed=4,
        ),
        "8": record(
            folder / "g8.ndjson",
            machine=machine,
            gpus=list(range(8)),
            exchange_s=0.10 if pcie else None,
            seed=5,
        ),
    }


@pytest.fixture(scope="module")
def pcie(tmp_path_factory) -> dict[str, Path]:
    return _runs(tmp_path_factory.mktemp("runs") / PCIE, PCIE)


@pytest.fixture(scope="module")
def h100(tmp_path_factory) -> dict[str, Path]:
    return _runs(tmp_path_factory.mktemp("runs") / H100, H100)


def _text(capsys, runs: dict[str, Path], *names: str, flags: tuple[str, ...] = ()) -> str:
    assert main(["recommend", "--no-chart", *flags, "--from", *(str(runs[n]) for n in names)]) == 0
    return capsys.readouterr().out


def _json(capsys, *paths: Path | str, flags: tuple[str, ...] = ()) -> dict:
    assert main(["recommend", "--json", *flags, "--from", *map(str, paths)]) == 0
    return json.loads(capsys.readouterr().out)


def _confidence(out: str) -> str:
    return " ".join(out.split("\nConfidence\n", 1)[1].split())


def test_a_badly_placed_count_is_said_and_the_recommended_count_gets_its_gpus(capsys, pcie):
    """The 4-device run across the sockets makes 2 -> 4 'not worth it'; the output
    names GPUs 0,1 for the 2 recommended and says what 4 to measure again on."""
    out = _text(capsys, pcie, "1", "2", "4bad", "8")
    assert "Recommendation: MULTI: 2 devices" in out
    assert "2 -> 4: 1.09x the samples/s, marginal efficiency 54% (floor 60%): not worth it." in out
    verdict = " ".join(out.split("Recommendation:", 1)[1].split("\nWhy\n")[0].split())
    assert (
        "Use GPUs 0,1 for 2 devices on the machine the runs were recorded on (gpuscale run "
        "--gpus 0,1, or CUDA_VISIBLE_DEVICES=0,1): the best-connected 2 of its 8, as "
        "'gpuscale devices' lists them (slowest link: PCIe switch, PCIe 4.0 x16: 31.5 GB/s "
        "per direction)." in verdict
    )
    said = _confidence(out)
    assert (
        "At 4 devices the run used GPUs 0,1,4,5 (slowest link: across CPU sockets), though "
        "GPUs 0,1,2,3 are better connected (PCIe host bridge): the throughput measured there "
        "may understate what 4 well-chosen GPUs do" in said
    )
    assert MEASURE_AGAIN + " and the run's other options" in said
    assert said.count("GPUs 0,1,4,5") == 1  # one sentence


def test_json_carries_the_gpus(capsys, pcie):
    doc = _json(capsys, *(pcie[n] for n in ("1", "2", "4bad", "8")))
    rec = doc["recommendation"]
    assert rec["gpus"] == [0, 1]
    assert rec["gpus_note"].startswith("Use GPUs 0,1 for 2 devices")
    assert rec["better_gpus"] == [
        {
            "config": "resnet50, mirrored, batch 64/replica",
            "devices": 4,
            "gpus": [0, 1, 4, 5],
            "link_class": "cross-socket",
            "link": "across CPU sockets",
            "better_gpus": [0, 1, 2, 3],
            "better_link_class": "pcie-hostbridge",
            "better_link": "PCIe host bridge",
        }
    ]
    assert any(MEASURE_AGAIN in line for line in rec["confidence"])
    measured = {p["devices"]: p["gpus"] for p in doc["points"] if not p.get("predicted")}
    assert measured == {1: [0], 2: [0, 1], 4: [0, 1, 4, 5], 8: list(range(8))}


def test_a_sweep_file_read_back_keeps_the_gpus_used_and_names_none(capsys, pcie, tmp_path):
    """A sweep file carries no topology: the points keep which GPUs they used, and
    nothing is said about which to use (documented)."""
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(_json(capsys, *(pcie[n] for n in ("1", "2", "4bad", "8")))))
    again = _json(capsys, saved)
    assert again["recommendation"]["gpus"] is None
    assert again["recommendation"]["better_gpus"] == []
    assert [p.get("gpus") for p in again["points"] if not p.get("predicted")] == [
        [0],
        [0, 1],
        [0, 1, 4, 5],
        list(range(8)),
    ]


def test_well_placed_runs_say_nothing_and_all_gpus_need_no_choice(capsys, pcie):
    out = _text(capsys, pcie, "1", "2", "4good", "8")
    assert "Recommendation: MULTI: 8 devices" in out  # 2 -> 4 pays on one socket
    assert "Use GPUs" not in out and "better connected" not in out  # 8 of 8: nothing to choose
    out = _text(capsys, pcie, "1", "2", "4good", "8", flags=("--max-devices", "4"))
    assert "Recommendation: MULTI: 4 devices" in out
    assert "Use GPUs 0,1,2,3 for 4 devices" in out and "better connected" not in out


def test_both_four_device_runs_combined_still_say_the_bad_one(capsys, pcie):
    out = _text(capsys, pcie, "1", "2", "4good", "4bad", "8")
    said = _confidence(out)
    assert "At 4 devices the run used GPUs 0,1,4,5" in said and MEASURE_AGAIN in said


def test_on_an_nvswitch_box_any_gpus_are_as_good(capsys, h100):
    out = _text(capsys, h100, "1", "2", "4bad", "8")
    assert "better connected" not in out and "Use GPUs" not in out
    out = _text(capsys, h100, "1", "2", "4bad", "8", flags=("--max-devices", "4"))
    assert "Use GPUs 0,1,2,3 for 4 devices" in out
    assert "(slowest link: NVSwitch, NVLink x18: 450.0 GB/s per direction)" in out


def _without_topology(path: Path, to: Path) -> Path:
    lines = path.read_text().splitlines()
    start = json.loads(lines[0])
    del start["topology"]
    start["schema"] = "1.0"
    to.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    return to


def test_old_recordings_without_topology_say_nothing(capsys, pcie, tmp_path):
    old = [_without_topology(pcie[n], tmp_path / f"{n}.ndjson") for n in ("1", "2", "4bad", "8")]
    rec = _json(capsys, *old)["recommendation"]
    assert rec["gpus"] is None and rec["gpus_note"] is None and rec["better_gpus"] == []
    # one old recording among new ones: its machine is not known to be theirs
    mixed = [old[0], pcie["2"], pcie["4bad"], pcie["8"]]
    assert _json(capsys, *mixed)["recommendation"]["better_gpus"] == []


def test_a_sweep_file_among_the_inputs_or_another_machine_say_nothing(capsys, pcie, h100, tmp_path):
    table = tmp_path / "table.json"
    table.write_text(
        json.dumps(
            {
                "defaults": {"scaling": "weak", "per_replica_batch": 64, "model": "resnet50"},
                "points": [{"devices": 1, "step_time_s": 0.13, "config": "published"}],
            }
        )
    )
    rec = _json(capsys, pcie["2"], pcie["4bad"], table)["recommendation"]
    assert rec["gpus"] is None and rec["better_gpus"] == []
    assert (
        machine_topology(
            [load_run(pcie["4bad"]).start.topology, load_run(h100["4bad"]).start.topology]
        )
        is None
    )


def test_the_rule_is_the_one_devices_lists():
    """`gpuscale devices`' best --gpus for each count is what recommend names."""
    topology = probe_topology(FakeNvml.scenario(PCIE))
    _, choices = judge_topology(topology)
    assert [c.gpus for c in choices] == [best_gpus(topology, k) for k in range(1, 8)]
    assert best_gpus(topology, 4) == [0, 1, 2, 3] and best_gpus(topology, 8) is None


def test_which_runs_say_their_gpus(pcie):
    start = load_run(pcie["4bad"]).start
    assert gpus_of_run(start) == [0, 1, 4, 5]
    # a user's script numbers its devices from 0 among those CUDA_VISIBLE_DEVICES shows
    assert gpus_of_run(msgspec.structs.replace(start, source="script")) is None
    # no --gpus on a subset: a CUDA_VISIBLE_DEVICES the user set may have renumbered them
    config = {"model": "resnet50"}
    assert gpus_of_run(msgspec.structs.replace(start, config=config)) is None
    every = load_run(pcie["8"]).start
    assert gpus_of_run(msgspec.structs.replace(every, config=config)) == list(range(8))
    # a hostile config: no crash, not known
    assert gpus_of_run(msgspec.structs.replace(start, config={"gpus": ["0", 1, None, 5]})) is None


def test_a_topology_listing_a_gpu_twice_is_not_used(pcie):
    topology = load_run(pcie["8"]).start.topology
    twice = msgspec.structs.replace(topology, gpus=[*topology.gpus, topology.gpus[0]])
    assert machine_topology([twice]) is None
    assert machine_topology([topology, topology]) is topology


def test_replay_and_the_library_say_the_same(pcie):
    """`recommend()` with the sweep's topology (what replay's scaling view shows)."""
    sweep = load_inputs([pcie[n] for n in ("1", "2", "4bad", "8")])
    assert sweep.topology is not None
    rec = recommend(sweep.points, topology=sweep.topology)
    assert rec.gpus == [0, 1] and [b.devices for b in rec.better_gpus] == [4]
    assert recommend(sweep.points).gpus is None  # no topology given: nothing named
    assert worse_placed([], sweep.topology) == []
    from gpuscale.commands.replay import _sweep_view
    from gpuscale.ui.widgets.scaling import recommendation_text

    view = _sweep_view([pcie[n] for n in ("1", "2", "4bad", "8")], sweep=sweep)
    text = recommendation_text(view.recommendation()).plain
    assert "Use GPUs 0,1 for 2 devices" in text and "GPUs 0,1,4,5" in text


def test_hand_edited_indices_and_pair_order(pcie):
    """Found by review: indices shifted out of range were written by --json and refused
    on reading it back ('Use GPUs -3,-2'); pairs listed b < a read as 'link not
    reported by NVML' while the topology said links were known."""
    start = load_run(pcie["4bad"]).start
    for shift in (70_000, -3):
        devices = [msgspec.structs.replace(d, index=d.index + shift) for d in start.devices]
        config = {**start.config, "gpus": [i + shift for i in start.config["gpus"]]}
        edited = msgspec.structs.replace(start, devices=devices, config=config)
        assert gpus_of_run(edited) is None
    topology = load_run(pcie["8"]).start.topology
    swapped = msgspec.structs.replace(
        topology, pairs=[msgspec.structs.replace(p, a=p.b, b=p.a) for p in topology.pairs]
    )
    assert best_gpus(swapped, 4) == best_gpus(topology, 4) == [0, 1, 2, 3]


def test_measure_next_names_the_gpus_to_measure_on(capsys, pcie):
    """A sweep of one count says what to measure next; on a machine whose topology
    the recording carries, on which GPUs (it named none)."""
    out = " ".join(_text(capsys, pcie, "1").split())
    assert "Measure 2 on GPUs 0,1 (gpuscale run --gpus 0,1) next: predicted " in out
    out = " ".join(_text(capsys, pcie, "2").split())
    assert "Measure 1 device next: the baseline" in out  # one device: nothing to choose
    rec = recommend(load_inputs([pcie["1"]]).points)  # no topology given: no GPUs named
    assert rec.measure_next.startswith("measure 2 next")
