"""``rmq-admin broker ha-verify`` against a replicating master and slave (real processes): identical
while the slave copies the master, and the range of one byte changed behind the slave's back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmq.cli.admin import main
from rmq.protocol.codes import ResponseCode
from rmq.protocol.layout import REC_BORNTIMESTAMP
from tests.helpers.processes import BrokerPair
from tests.helpers.requests import send_request

pytestmark = pytest.mark.slow

RANGE = 64 * 1024


def ha_verify(pair: BrokerPair, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["broker", "ha-verify", "broker-a", "-n", pair.namesrv_addr, *args])
    return result.exit_code, result.output


def test_identical_replica_then_the_range_of_a_damaged_byte(spawn, tmp_path: Path):
    pair = BrokerPair(spawn, tmp_path).start()
    try:
        topic = pair.create_topic("Verified")
        offsets = []
        for i in range(400):
            answer = pair.call(pair.master_addr, send_request(topic, b"m-%d-" % i + b"x" * 700, queue_id=i % 4))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            offsets.append(int(answer.ext_fields["msgId"][16:], 16))
        pair.wait_replicated(topic)

        code, output = ha_verify(pair, "--range-size", "64k", "--json")
        assert code == 0, output
        [check] = json.loads(output)
        assert check["identical"] and check["slave_id"] == 1 and check["verified_from"] == 0
        assert check["verified_to"] == check["master_max_offset"] == check["slave_max_offset"] > 4 * RANGE
        code, output = ha_verify(pair, "--range-size", "64k")
        assert code == 0 and f"identical from offset 0 up to offset {check['verified_to']}" in output

        # stop the slave, change one byte no CRC covers (a born timestamp), start it again
        pair.slave_proc.kill()
        pair.slave_proc.wait(10)
        record = next(o for o in offsets if o > 2 * RANGE)
        target = record + REC_BORNTIMESTAMP + 4
        files = sorted((tmp_path / "slave" / "commitlog").iterdir(), key=lambda p: int(p.name))
        holder = [p for p in files if int(p.name) <= target][-1]
        data = bytearray(holder.read_bytes())
        data[target - int(holder.name)] ^= 0xFF
        holder.write_bytes(bytes(data))
        pair.start_slave()

        code, output = ha_verify(pair, "--range-size", "64k", "--json")
        assert code == 1
        [check] = json.loads(output)
        assert not check["identical"] and check["first_difference"] == target // RANGE * RANGE
        assert check["difference_length"] == RANGE
    finally:
        pair.close()
