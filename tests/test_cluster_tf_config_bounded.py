"""A hostile TF_CONFIG is one line of error: bounded in size and depth, and what
is quoted from it escaped."""

from __future__ import annotations

import json

import pytest

from gpuscale.errors import GpuscaleError
from gpuscale.live import cluster


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than"),
        (json.dumps({"cluster": {"worker": ["a:1"] * 200_000}, "task": {}}), "longer than"),
        ('{"a": 1e999}', "TF_CONFIG is not usable"),
        ("\udcff", "TF_CONFIG is not usable"),
    ],
    ids=["deep", "huge", "overflow", "bad-utf8"],
)
def test_hostile_tf_config_is_one_line(text, needle):
    with pytest.raises(GpuscaleError, match=needle) as caught:
        cluster.parse_tf_config(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_what_is_quoted_from_it_is_escaped():
    spec = {"cluster": {"worker": ["a:1"]}, "task": {"type": "\x1b]0;PWNED\x07", "index": 0}}
    with pytest.raises(GpuscaleError) as caught:
        cluster.parse_tf_config(json.dumps(spec))
    assert "\x1b" not in str(caught.value) and "\x07" not in str(caught.value)
    spec = {"cluster": {"worker": ["a:1"], "\x1b[2J": []}, "task": {"type": "worker"}}
    with pytest.raises(GpuscaleError, match="task types") as caught:
        cluster.parse_tf_config(json.dumps(spec))
    assert "\x1b" not in str(caught.value)


def test_a_byte_order_mark_is_tolerated():
    spec = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    assert cluster.parse_tf_config("\ufeff" + json.dumps(spec)).index == 1
