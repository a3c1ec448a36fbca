"""Controller mode's wire forms (rmq.protocol.controller): what a broker, a controller and the admin
client exchange round-trips, and what cannot be used is refused naming the field."""

import pytest

from rmq.protocol.controller import (
    NO_BROKER_ID,
    BrokerHeartbeat,
    ControllerMetadata,
    ReplicaIdentity,
    ReplicaInfo,
    ReplicasInfo,
    SyncStateSet,
    decode_broker_names,
    decode_replicas_infos,
    encode_broker_names,
    encode_replicas_infos,
    parse_peers,
)
from rmq.protocol.fields import BadRequest


def test_sync_state_set_body_is_rocketmqs_json_and_round_trips():
    body = SyncStateSet(frozenset({2, 1}), 3).encode()
    assert body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert SyncStateSet.decode(body) == SyncStateSet(frozenset({1, 2}), 3)
    with pytest.raises(BadRequest, match="syncStateSet"):
        SyncStateSet.decode(b'{"syncStateSet":["a"],"syncStateSetEpoch":1}')
    with pytest.raises(BadRequest, match="JSON"):
        SyncStateSet.decode(b"not json")


def test_replica_info_without_a_master_leaves_the_master_fields_out():
    none = ReplicaInfo(NO_BROKER_ID, "", 4, 7)
    assert none.fields() == {"masterEpoch": "4", "syncStateSetEpoch": "7"}
    assert ReplicaInfo.from_fields(none.fields()) == none and not none.has_master
    master = ReplicaInfo(2, "127.0.0.1:10911", 5, 8)
    assert ReplicaInfo.from_fields(master.fields()) == master and master.has_master
    with pytest.raises(BadRequest, match="masterEpoch"):
        ReplicaInfo.from_fields({"masterEpoch": "x"})


def test_heartbeat_and_metadata_round_trip_and_refuse_missing_fields():
    beat = BrokerHeartbeat("C", "b", "127.0.0.1:10911", 2, 3, 1000, 900, 10_000, 1)
    assert BrokerHeartbeat.from_fields(beat.fields(), 5000) == beat
    fields = beat.fields()
    del fields["heartbeatTimeoutMills"]
    assert BrokerHeartbeat.from_fields(fields, 5000).heartbeat_timeout_millis == 5000
    with pytest.raises(BadRequest, match="brokerId"):
        BrokerHeartbeat.from_fields({"clusterName": "C", "brokerName": "b", "brokerAddr": "a:1"}, 5000)
    meta = ControllerMetadata("g", "n1", "127.0.0.1:9878", True, "n0-127.0.0.1:9877;n1-127.0.0.1:9878")
    assert ControllerMetadata.from_fields(meta.fields()) == meta


def test_replicas_infos_and_broker_names_round_trip():
    info = ReplicasInfo(
        1,
        "127.0.0.1:10911",
        2,
        3,
        (ReplicaIdentity("b", 1, "127.0.0.1:10911", True),),
        (ReplicaIdentity("b", 2, "127.0.0.1:10921", False),),
    )
    assert decode_replicas_infos(encode_replicas_infos({"b": info})) == {"b": info}
    assert decode_broker_names(encode_broker_names(["a", "b"])) == ["a", "b"]
    with pytest.raises(BadRequest):
        decode_broker_names(b'{"a": 1}')


def test_peers_parse_as_controllerDLegerPeers_and_bad_ones_are_named():
    assert parse_peers("n0-127.0.0.1:9878; n1-127.0.0.1:9868;") == {"n0": "127.0.0.1:9878", "n1": "127.0.0.1:9868"}
    for bad, part in [("n0127.0.0.1:9878", "n0127"), ("n0-127.0.0.1", "n0-127.0.0.1"), ("n0-h:1;n0-h:2", "twice")]:
        with pytest.raises(ValueError, match=part):
            parse_peers(bad)
    with pytest.raises(ValueError, match="no controller peers"):
        parse_peers(" ; ")
