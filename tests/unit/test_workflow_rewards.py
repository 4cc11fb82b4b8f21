"""What counts as a reward, and when two rewards agree."""

from __future__ import annotations

import math

import pytest

from rltui.checks.workflow.rewards import REPR_LIMIT, check_reward, rewards_equal, short_repr


@pytest.mark.parametrize("value", [1, 0, -3, 0.5, 1e300, {"acc": 1.0, "len": 3},
                                   {"a": -0.0}])
def test_numbers_and_dicts_of_numbers_are_rewards(value):
    reward, problem = check_reward(value)
    assert problem is None and reward == value


@pytest.mark.parametrize("value, reason", [
    (True, "bool is not a reward"),
    (False, "bool is not a reward"),
    (float("nan"), "nan is not a finite number"),
    (float("inf"), "inf is not a finite number"),
    (-math.inf, "-inf is not a finite number"),
    ("1.0", "str is not a number"),
    (None, "returned None"),
    ([1.0], "list is not a number"),
    ({}, "empty dict"),
    ({"acc": "yes"}, "key 'acc': str is not a number"),
    ({"acc": float("nan")}, "key 'acc': nan is not a finite number"),
    ({"acc": True}, "key 'acc': a bool is not a reward"),
    ({1: 1.0}, "dict key 1 is not a string"),
    ({"nested": {"a": 1.0}}, "key 'nested': dict is not a number"),
])
def test_everything_else_is_invalid_with_a_reason(value, reason):
    reward, problem = check_reward(value)
    assert reward is None
    assert reason in problem.reason
    assert problem.repr == short_repr(value)


def test_numpy_scalars_are_numbers_and_tensors_get_a_hint():
    np = pytest.importorskip("numpy")
    assert check_reward(np.float32(0.5)) == (0.5, None)
    reward, _ = check_reward({"a": np.int64(3)})
    assert reward == {"a": 3} and type(reward["a"]) is int
    assert "bool is not a reward" in check_reward(np.bool_(True))[1].reason
    assert "nan is not a finite number" in check_reward(np.float64("nan"))[1].reason
    assert check_reward(np.array([1.0]))[1].reason == \
        "ndarray is not a number (a tensor or array? return .item())"


def test_repr_is_truncated_and_a_broken_repr_does_not_raise():
    assert len(short_repr("x" * 1000)) == REPR_LIMIT

    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    _, problem = check_reward(Broken())
    assert "Broken" in problem.repr and "repr failed" in problem.repr


def test_equal_within_tolerance_dicts_need_the_same_keys():
    assert rewards_equal(1.0, 1.0 + 1e-12)
    assert not rewards_equal(1.0, 1.0 + 1e-6)
    assert rewards_equal(1, 1.0)
    assert rewards_equal({"a": 1.0, "b": 0.0}, {"b": 0.0, "a": 1.0})
    assert not rewards_equal({"a": 1.0}, {"a": 1.0, "b": 0.0})
    assert not rewards_equal({"a": 1.0}, {"a": 0.0})
    assert not rewards_equal({"a": 1.0}, 1.0)
