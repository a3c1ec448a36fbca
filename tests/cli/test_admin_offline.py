"""rmq-admin without a cluster: argument parsing, tables, and a clear failure when nobody answers."""

from __future__ import annotations

import datetime

import click
import pytest
from click.testing import CliRunner

from rmq.cli.admin import main, parse_timestamp, render_table
from tests.helpers import free_port


def test_timestamps_in_every_accepted_form():
    assert parse_timestamp("1700000000123") == 1700000000123
    assert parse_timestamp("latest") == -1
    local = datetime.datetime(2024, 5, 1, 12, 0, 0, 250000)
    assert parse_timestamp("2024-05-01T12:00:00.250") == int(local.timestamp() * 1000)
    assert parse_timestamp("2024-05-01#12:00:00:250") == int(local.timestamp() * 1000)
    assert abs(parse_timestamp("now") - datetime.datetime.now().timestamp() * 1000) < 5000
    with pytest.raises(click.BadParameter, match="expected milliseconds"):
        parse_timestamp("yesterday")


def test_tables_align_text_left_and_numbers_right():
    assert render_table(["Topic", "Lag"], [["a", 5], ["long-name", 120]]).splitlines() == [
        "Topic      Lag",
        "a            5",
        "long-name  120",
    ]


def test_name_server_down_is_a_one_line_error_and_exit_1():
    result = CliRunner().invoke(main, ["topic", "list", "-n", f"127.0.0.1:{free_port()}", "--timeout", "1"])
    assert result.exit_code == 1
    assert result.output.startswith("rmq-admin: cannot reach the cluster: no name server answered")
    assert "Traceback" not in result.output


def test_bad_usage_exits_2():
    result = CliRunner().invoke(main, ["consumer", "reset-offset", "G", "T", "--timestamp", "soon"])
    assert result.exit_code == 2 and "expected milliseconds" in result.output
    assert CliRunner().invoke(main, ["message", "id", "not-an-id", "-n", "127.0.0.1:1"]).exit_code == 1
