"""The cluster's credentials on a name server (beyond 4.x, whose name servers take any write): a
name server started with the cluster account (``clusterAccessKey`` / ``clusterSecretKey``) checks the
plain-ACL signature (``rmq.protocol.acl``) of every write (``WRITE_CODES``: REGISTER_BROKER,
UNREGISTER_BROKER, DELETE_TOPIC_IN_NAMESRV, a broker's write permission, the KV config) with
``rmq.net.cluster_auth.ClusterAuth`` (the rules and the modes are there; a controller checks its
writes with it too). Reads stay open.
"""

from __future__ import annotations

from rmq.net.cluster_auth import REFUSAL_LOG_INTERVAL, ClusterAuth, Verdict
from rmq.protocol.codes import RequestCode

__all__ = ["REFUSAL_LOG_INTERVAL", "WRITE_CODES", "ClusterAuth", "Verdict"]

WRITE_CODES = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
    }
)
