"""What a controller refuses to start with: peers that are not id-host:port, a self id not among
them, a Raft port another process holds (one line naming the key, nothing left running)."""

from __future__ import annotations

import socket

import pytest

from rmq.controller import Controller, ControllerConfig, ControllerSettings
from rmq.errors import ConfigError


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"controllerDLegerPeers": "n0:127.0.0.1:9877"}, "controllerDLegerPeers"),
        ({"controllerDLegerPeers": "n0-127.0.0.1:1;n0-127.0.0.1:2"}, "controllerDLegerPeers"),
        ({"controllerDLegerSelfId": "n7"}, "controllerDLegerSelfId"),
    ],
)
def test_wrong_peers_or_self_id_are_refused_naming_the_key(settings, named):
    with pytest.raises(ConfigError, match=named):
        ControllerSettings.from_properties(settings).controller_config()


def test_a_taken_raft_port_is_refused_and_nothing_keeps_running(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = ControllerConfig(listen_port=0, peers=f"n0-127.0.0.1:{port}", store_path=str(tmp_path))
        with pytest.raises(ConfigError, match=f"Raft address 127.0.0.1:{port}"):
            Controller(config).start()
