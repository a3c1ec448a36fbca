"""Access control: RocketMQ 4.x's plain ACL (``aclEnable``, ``aclConfigFile``).

    config       plain_acl.yml read into rules (accounts, permissions, white addresses)
    address      the address patterns of its white lists
    validator    the check of every request before its processor, and the file's watcher

The wire side (which extFields a signed request carries, how the signature is computed) is shared
with the clients in ``rmq.protocol.acl``.
"""

from rmq.broker.acl.config import AclConfigError, PlainAclConfig, load_plain_acl, parse_plain_acl
from rmq.broker.acl.validator import AclWatcher, PlainAccessValidator

__all__ = [
    "AclConfigError",
    "AclWatcher",
    "PlainAccessValidator",
    "PlainAclConfig",
    "load_plain_acl",
    "parse_plain_acl",
]
