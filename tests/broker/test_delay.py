"""Delay levels and delayOffset.json."""

import json

import pytest

from rmq.broker.delay import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    DelayOffsetManager,
    delay_level_to_queue_id,
    queue_id_to_delay_level,
)
from rmq.errors import ConfigError
from rmq.settings import parse_delay_levels


def test_rocketmqs_eighteen_levels():
    levels = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
    assert len(levels) == 18
    assert levels[1] == 1000 and levels[3] == 10_000 and levels[5] == 60_000
    assert levels[17] == 3_600_000 and levels[18] == 7_200_000
    assert parse_delay_levels(" 2d  90s ") == {1: 172_800_000, 2: 90_000}
    assert delay_level_to_queue_id(1) == 0 and queue_id_to_delay_level(17) == 18


@pytest.mark.parametrize(
    "text, message",
    [
        ("1s 5x", "level 2 is '5x'"),
        ("1s s", "level 2 is 's'"),
        ("1.5s", "level 1 is '1.5s'"),
        ("", "messageDelayLevel is empty"),
    ],
)
def test_bad_levels_are_refused_clearly(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_delay_levels(text)


def test_delay_offset_json_survives_a_restart(store_dir):
    m = DelayOffsetManager(store_dir)
    assert m.offset(3) == 0
    m.update_offset(1, 12)
    m.update_offset(3, 4)
    assert m.persist()
    assert json.loads((store_dir / "config" / "delayOffset.json").read_text()) == {"offsetTable": {"1": 12, "3": 4}}
    m.update_offset(1, 12)
    assert not m.persist()  # unchanged
    again = DelayOffsetManager(store_dir)
    assert again.load() and again.offset_table() == {1: 12, 3: 4}
