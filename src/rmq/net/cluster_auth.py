"""The cluster's credentials on a server that takes the cluster's own writes (beyond 4.x, whose name
servers take any write): a name server's registrations (rmq.namesrv.auth), what brokers ask a
controller to change and their heartbeats (rmq.controller). Each role says which of its requests
are writes; reads stay open, as clients have no cluster account.

    signed by the cluster account       taken, and counted as signed (a registration may then
                                        replace a live master with a newer epoch)
    another access key, a bad signature refused NO_PERMISSION, whatever the mode
    unsigned, enforcing                 refused NO_PERMISSION
    unsigned, permissive                taken as an unsigned write (the upgrade path: brokers and
                                        rmq-admin get the credentials one by one, the log says
                                        who still writes unsigned, then the mode turns enforcing)

Refusals and unsigned writes are logged at most once a minute per source host and kind
(``rmq._log.RateLimitedLog``, REFUSAL_LOG_INTERVAL): a peer repeating a forged frame cannot flood
the log, and one holding a forgery across a broker's 30 s registrations is one line, with the count
of what followed on the next.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rmq._log import RateLimitedLog
from rmq.net.codec import RemotingCommand
from rmq.protocol.acl import ACCESS_KEY, SIGNATURE, ClusterAuthMode, signature_matches
from rmq.protocol.codes import RequestCode

# Seconds between two log lines of one source's refused (or, permissive, unsigned) writes: longer
# than a broker's registration period, so a forgery held open logs once.
REFUSAL_LOG_INTERVAL = 60.0


@dataclasses.dataclass
class Verdict:
    """A write's standing: ``refused`` (the remark of a NO_PERMISSION answer) or taken, ``signed``
    or not."""

    signed: bool = False
    refused: str | None = None


class ClusterAuth:
    """Checks a server's writes against the cluster account; ``role`` names the server in remarks
    ("name server", "controller"), ``logger`` is where refusals are logged."""

    def __init__(
        self,
        access_key: str,
        secret_key: str,
        mode: ClusterAuthMode = ClusterAuthMode.ENFORCING,
        role: str = "name server",
        logger: str = "rmq.namesrv",
    ):
        if not access_key or not secret_key:
            raise ValueError("the cluster account needs an access key and a secret key")
        self.access_key = access_key
        self._secret_key = secret_key
        self.mode = mode
        self.role = role
        self._log = RateLimitedLog(logging.getLogger(logger), REFUSAL_LOG_INTERVAL)

    def __repr__(self) -> str:
        return f"ClusterAuth({self.access_key!r}, mode={self.mode.value})"

    def check(self, channel: Any, request: RemotingCommand) -> Verdict:
        source = getattr(channel, "remote_address", "?")
        host = source.rpartition(":")[0] or source
        what = f"{RequestCode(request.code).name} ({request.code})"
        access_key = request.ext_fields.get(ACCESS_KEY)
        if not access_key and SIGNATURE not in request.ext_fields:
            if self.mode is ClusterAuthMode.PERMISSIVE:
                self._log.warning(
                    (host, "unsigned"),
                    "took an unsigned %s from %s (clusterAuthMode=permissive): give that process the "
                    "cluster credentials before turning the mode to enforcing",
                    what,
                    source,
                )
                return Verdict()
            return self._refuse(
                host,
                source,
                f"{what} to this {self.role} must be signed by the cluster account (AccessKey and Signature "
                "extFields, plain ACL): the sender has no cluster credentials (clusterAccessKey/clusterSecretKey)",
            )
        if access_key != self.access_key:
            return self._refuse(
                host,
                source,
                f"{what} is signed with access key {access_key!r}, and this {self.role} takes writes only "
                f"from the cluster account (clusterAccessKey)",
            )
        if not signature_matches(request.ext_fields, request.body, self._secret_key):
            return self._refuse(
                host,
                source,
                f"{what}: check signature failed for the cluster account {access_key!r} (wrong clusterSecretKey?)",
            )
        return Verdict(signed=True)

    def _refuse(self, host: str, source: str, remark: str) -> Verdict:
        self._log.warning((host, "refused"), "refused a write from %s: %s", source, remark)
        return Verdict(refused=remark)
