"""``rmq-admin broker status``: GET_BROKER_RUNTIME_INFO's table, as ``mqadmin brokerStatus``
prints it, from real rmq-namesrv and rmq-broker processes."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.protocol.codes import ResponseCode
from tests.helpers.requests import pull_request, send_request, update_topic_request

TOPIC = "StatusTopic"


def admin(cluster, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "-n", cluster.namesrv_addr])
    return result.exit_code, result.output


def test_status_shows_what_the_broker_took_in_and_handed_out(cluster):
    assert cluster.call(update_topic_request(TOPIC, queues=1)).code == ResponseCode.SUCCESS
    before = json.loads(admin(cluster, "broker", "status", "broker-a", "--json")[1])["table"]
    for i in range(7):
        answer = cluster.call(send_request(TOPIC, b"status %d" % i))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    pulled = cluster.call(pull_request(TOPIC, 0, 0, group="StatusGroup", max_msgs=4))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark

    code, out = admin(cluster, "broker", "status", "broker-a", "--json")
    assert code == 0, out
    status = json.loads(out)
    assert status["brokerAddr"] == cluster.broker_addr
    table = status["table"]
    assert int(table["msgPutTotalTodayNow"]) == int(before["msgPutTotalTodayNow"]) + 7
    assert int(table["msgGetTotalTodayNow"]) == int(before["msgGetTotalTodayNow"]) + 4
    assert re.fullmatch(r"\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    assert 0 < int(table["bootTimestamp"]) <= int(table["earliestMessageTimeStamp"])
    assert re.fullmatch(r"Total : [\d.]+ \w?i?B, Free : [\d.]+ \w?i?B\.", table["commitLogDirCapacity"])
    assert table["dispatchBehindBytes"] == "0"
    for key in ("putTps", "getTransferedTps", "remainHowManyDataToFlush", "commitLogMaxOffset", "brokerVersionDesc"):
        assert key in table

    # by address too, one "key : value" line each, as brokerStatus prints them
    code, out = admin(cluster, "broker", "status", cluster.broker_addr)
    assert code == 0, out
    lines = dict(re.split(r"\s+: ", line, maxsplit=1) for line in out.splitlines())
    assert lines["msgPutTotalTodayNow"] == table["msgPutTotalTodayNow"]
    assert lines["brokerName"] == "broker-a"


def test_an_unknown_broker_name_is_a_clear_error(cluster):
    code, out = admin(cluster, "broker", "status", "broker-zz")
    assert code == 1
    assert "broker-zz" in out and "not known" in out
