"""TF_CONFIG and Slurm parsing (no TensorFlow), event address and token rules."""

from __future__ import annotations

import json

import pytest

from gpuscale.errors import GpuscaleError
from gpuscale.live import cluster


def _tf_config(cluster_spec: dict, task_type: str = "worker", index: int = 0) -> str:
    return json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index}})


def test_workers_only():
    info = cluster.parse_tf_config(_tf_config({"worker": ["a:1", "b:2", "c:3"]}, index=2))
    assert info.workers == ["a:1", "b:2", "c:3"]
    assert info.index == 2 and not info.is_chief and info.num_workers == 3
    assert info.chief_host == "a"


def test_chief_is_worker_zero_and_workers_follow():
    spec = {"chief": ["boss:10"], "worker": ["w1:11", "w2:12"]}
    assert cluster.parse_tf_config(_tf_config(spec, "chief", 0)).index == 0
    info = cluster.parse_tf_config(_tf_config(spec, "worker", 1))
    assert info.index == 2 and info.workers[0] == "boss:10" and info.chief_host == "boss"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({"cluster": {"worker": ["a:1"]}}), "'task'"),
        (_tf_config({"worker": ["a:1"], "ps": ["p:2"]}), "ps"),
        (_tf_config({"worker": ["a:1"]}, index=3), "not in the cluster"),
        (_tf_config({"worker": ["nohost"]}), "bad address"),
        (_tf_config({"worker": []}), "no workers"),
        (_tf_config({"worker": ["a:1"]}, "evaluator"), "task type"),
    ],
)
def test_bad_tf_config_is_one_clear_error(text, needle):
    with pytest.raises(GpuscaleError, match=needle):
        cluster.parse_tf_config(text)


def test_slurm_hostlist_and_tasks():
    assert cluster.expand_hostlist("gpu[01-03,07],login5") == [
        "gpu01",
        "gpu02",
        "gpu03",
        "gpu07",
        "login5",
    ]
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NTASKS": "4",
        "SLURM_PROCID": "3",
    }
    info = cluster.resolve(env)
    assert info is not None and info.source == "slurm"
    assert info.index == 3 and info.num_workers == 4
    assert info.workers == ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]
    assert cluster.events_address(info, env) == f"node1:{cluster.DEFAULT_PORT}"


def test_tf_config_wins_over_slurm_and_none_without_either():
    env = {"TF_CONFIG": _tf_config({"worker": ["x:1"]}), "SLURM_JOB_ID": "1"}
    assert cluster.resolve(env).source == "TF_CONFIG"
    assert cluster.resolve({}) is None
    with pytest.raises(GpuscaleError, match="needs a cluster"):
        cluster.require({})


def test_events_address_port_and_token_rules():
    info = cluster.parse_tf_config(
        _tf_config({"worker": ["10.0.0.5:2222", "10.0.0.6:2222"]}, index=1)
    )
    assert cluster.events_address(info, {}) == "10.0.0.5:47470"
    assert cluster.events_address(info, {"GPUSCALE_PORT": "5000"}) == "10.0.0.5:5000"
    assert cluster.events_address(info, {"GPUSCALE_EVENTS": "h:9"}) == "h:9"
    with pytest.raises(GpuscaleError, match="GPUSCALE_PORT"):
        cluster.events_port({"GPUSCALE_PORT": "http"})
    with pytest.raises(GpuscaleError, match="GPUSCALE_TOKEN"):
        cluster.shared_token({})
    assert cluster.shared_token({"GPUSCALE_TOKEN": "s3cret-token"}) == "s3cret-token"


def test_local_tf_configs_are_one_cluster_on_loopback():
    configs = [json.loads(c) for c in cluster.local_tf_configs(3)]
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 3 and all(w.startswith("127.0.0.1:") for w in workers)
    assert [c["task"]["index"] for c in configs] == [0, 1, 2]
    assert all(c["cluster"]["worker"] == workers for c in configs)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SLURM_JOB_ID": "1"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_PROCID": "x"}, "integers"),
        (
            {
                "SLURM_JOB_ID": "1",
                "SLURM_JOB_NODELIST": "n1",
                "SLURM_NTASKS": "2",
                "SLURM_PROCID": "2",
            },
            "outside",
        ),
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[a-b]"}, "node list"),
    ],
)
def test_bad_slurm_environment_is_one_clear_error(env, needle):
    with pytest.raises(GpuscaleError, match=needle):
        cluster.resolve(env)


def test_launching_a_missing_program_is_a_clear_error(tmp_path):
    with pytest.raises(GpuscaleError, match="cannot start"):
        cluster.launch_local_workers(
            [str(tmp_path / "missing")], 2, events_address="127.0.0.1:1", token="t"
        )


def test_the_strategy_note_of_one_cpu_worker_says_nothing_is_all_reduced():
    """`--local-workers 1` read "1 workers from TF_CONFIG" and spoke of a collective
    all-reduce beside "(1 replica, no all-reduce)"."""
    one = cluster.parse_tf_config(
        json.dumps({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}})
    )
    note = cluster.strategy_note(one, on_gpu=False)
    assert "1 worker from TF_CONFIG" in note and "all-reduce (" not in note
    assert "nothing to all-reduce" in note
    assert "ring over gRPC" in cluster.strategy_note(
        cluster.parse_tf_config(
            json.dumps({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker"}})
        ),
        on_gpu=False,
    )
    assert "1 worker from TF_CONFIG" in cluster.strategy_note(one, on_gpu=True)
