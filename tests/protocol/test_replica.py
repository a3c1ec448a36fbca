"""Bodies of rmq's own replication requests: GET_HA_STATUS's JSON, as the README's protocol table
documents it, both ways."""

from __future__ import annotations

import json

from rmq.protocol.replica import HAStatus, SlaveReplication


def test_ha_status_body_has_the_documented_keys_and_reads_back():
    status = HAStatus(4096, [SlaveReplication("127.0.0.1:40000", 1_700_000_000_000, 1024, 3072, 12)])
    body = status.encode()
    assert json.loads(body) == {
        "masterMaxOffset": 4096,
        "slaves": [
            {
                "address": "127.0.0.1:40000",
                "connectedSince": 1_700_000_000_000,
                "ackedOffset": 1024,
                "lagBytes": 3072,
                "lagMs": 12,
                "authenticated": False,
                "tls": False,
                "acksCount": True,
                "brokerId": -1,
                "inSync": False,
                "inSyncStateSet": False,
            }
        ],
        "syncStateSet": None,
    }
    assert HAStatus.decode(body) == status
    assert HAStatus.decode(HAStatus(0, []).encode()) == HAStatus(0, [])
    trusted = SlaveReplication("127.0.0.1:40001", 1, 0, 0, 0, authenticated=True, tls=True, acks_count=True)
    assert HAStatus.decode(HAStatus(0, [trusted]).encode()) == HAStatus(0, [trusted])
    # controller mode: the id the slave named, in sync, in the sync state set the controllers gave
    member = SlaveReplication("127.0.0.1:40002", 1, 0, 0, 0, broker_id=2, in_sync=True, in_sync_state_set=True)
    assert HAStatus.decode(HAStatus(0, [member], [1, 2]).encode()) == HAStatus(0, [member], [1, 2])
    # a master from before cluster authentication: a 4.x-style slave, counted
    older = {"address": "a:1", "connectedSince": 1, "ackedOffset": 0, "lagBytes": 0, "lagMs": 0}
    assert HAStatus.decode(json.dumps({"masterMaxOffset": 0, "slaves": [older]}).encode()).slaves == [
        SlaveReplication("a:1", 1, 0, 0, 0, authenticated=False, tls=False, acks_count=True)
    ]
