"""SelectMessageQueueByHash must pick the queue a Java producer picks for the same argument."""

from __future__ import annotations

import pickle

import pytest
from rocketmq_sdk.producer import SelectMessageQueueByHash, SelectMessageQueueByRandom, java_hash_code
from rocketmq_sdk.protocol import Message, MessageQueue


def _mqs(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "broker-a", i) for i in range(n)]


@pytest.mark.parametrize(("arg", "expected"), [
    ("a", 97),                       # 'a'
    ("ab", 97 * 31 + 98),            # 3105
    ("abc", 96354),                  # (97*31 + 98)*31 + 99
    ("Aa", 2112), ("BB", 2112),      # the classic Java collision
    ("hello", 99162322),
    ("polygenelubricants", -2**31),  # hashCode == Integer.MIN_VALUE
    ("", 0),
    (7, 7), (-7, -7),                # Integer.hashCode is the value
    (2**40, 256),                    # Long.hashCode: (int)(v ^ (v >>> 32)) = 2^8
    (True, 1231), (False, 1237),     # Boolean.hashCode
])
def test_java_hash_code_matches_java(arg, expected):
    assert java_hash_code(arg) == expected


@pytest.mark.parametrize(("arg", "n", "index"), [
    ("abc", 4, 96354 % 4),            # 2
    ("hello", 3, 99162322 % 3),       # 1
    ("polygenelubricants", 3, 2),     # Java: Math.abs(MIN_VALUE % 3) = Math.abs(-2) = 2
    ("polygenelubricants", 4, 0),     # MIN_VALUE % 4 = 0
    (-7, 4, 3),                       # Java: -7 % 4 = -3, abs → 3 (Python's -7 % 4 would be 1)
    (-9, 8, 1),                       # Java: -9 % 8 = -1 → 1 (Python: 7)
    (10, 8, 2),
])
def test_select_by_hash_uses_java_remainder_then_abs(arg, n, index):
    mq = SelectMessageQueueByHash().select(_mqs(n), Message("T", b"x"), arg)
    assert mq.queue_id == index


def test_select_by_hash_is_stable_and_picklable():
    sel = pickle.loads(pickle.dumps(SelectMessageQueueByHash()))
    mqs = _mqs(16)
    picks = {sel(mqs, Message("T", b"x"), f"order-{i}") for i in range(3)}
    assert picks == {sel(mqs, Message("T", b"x"), f"order-{i}") for i in range(3)}


def test_select_by_random_picks_queues_of_the_list_and_ignores_the_argument():
    mqs = _mqs(4)
    picks = {SelectMessageQueueByRandom()(mqs, Message("T", b"x"), "same-arg") for _ in range(400)}
    assert picks == set(mqs)  # every queue of the list, and only those (P(miss one) ≈ 4e-50)
