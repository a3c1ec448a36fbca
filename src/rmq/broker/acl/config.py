"""plain_acl.yml, RocketMQ 4.x's format, read into rules a broker checks requests against.

    globalWhiteRemoteAddresses:          # requests from these addresses pass without a signature
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ              # 7 characters at least, as are secret keys (4.x's rule)
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*  # this account's requests from here pass without a signature
        admin: false                     # admin requests (create or delete topics...) need true
        defaultTopicPerm: DENY           # for topics not listed below (unset: DENY)
        defaultGroupPerm: SUB            # for groups not listed below (unset: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Permissions: ``DENY``, ``PUB``, ``SUB``, ``PUB|SUB`` (or ``SUB|PUB``). A group's permission is kept
under its retry topic ``%RETRY%<group>``, as 4.x keeps it, so a request on a retry topic is a request
on its group. Address patterns: ``rmq.broker.acl.address``.

Stricter than 4.x, which would quietly read a misspelt permission as DENY and ignore an unknown key:
anything this module cannot read is an ``AclConfigError`` naming the line and the field, and the
broker keeps the rules it had. No message ever contains a secret key.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import yaml

from rmq.broker.acl.address import AddressPattern, AddressPatternError
from rmq.errors import ConfigError
from rmq.protocol.message import retry_topic

# RocketMQ's Permission bits.
DENY = 1
ANY = 2
PUB = 4
SUB = 8

PERMISSIONS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
# AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: a key must be longer than this.
KEY_MIN_LENGTH = 6

GLOBAL_WHITE_REMOTE_ADDRESSES = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
_TOP_LEVEL = {GLOBAL_WHITE_REMOTE_ADDRESSES, ACCOUNTS, "dataVersion"}
_ACCOUNT_KEYS = {
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
}


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    names = [name for name, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit]
    return "|".join(names) or "DENY"


class AclConfigError(ConfigError):
    """plain_acl.yml cannot be used; the message says where (file, line, field) and why."""


@dataclasses.dataclass(frozen=True)
class PlainAccount:
    """One account of plain_acl.yml."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    #: topic -> perm, and %RETRY%<group> -> perm for groups
    resource_perms: dict[str, int]


@dataclasses.dataclass(frozen=True)
class PlainAclConfig:
    """The rules of one plain_acl.yml."""

    global_white_remote_addresses: list[AddressPattern]
    accounts: dict[str, PlainAccount]


class _Reader:
    """Walks the YAML node tree, so that every complaint can name its line."""

    def __init__(self, path: str, loader: yaml.SafeLoader):
        self.path = path
        self.loader = loader

    def error(self, node: yaml.Node | None, what: str) -> AclConfigError:
        line = f", line {node.start_mark.line + 1}" if node is not None else ""
        return AclConfigError(f"{self.path}{line}: {what}")

    def mapping(self, node: yaml.Node, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping of keys to values")
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            out[str(key_node.value)] = (key_node, value_node)
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if isinstance(node, yaml.ScalarNode) and self.value(node) is None:
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list")
        return list(node.value)

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def text(self, node: yaml.Node, what: str, optional: bool = False) -> str | None:
        """A scalar as written (``secretKey: 12345678`` is the text "12345678", as 4.x reads it)."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{what} must be a single value")
        if self.value(node) is None:
            if optional:
                return None
            raise self.error(node, f"{what} is empty")
        return str(node.value)

    def pattern(self, node: yaml.Node, what: str) -> AddressPattern:
        try:
            return AddressPattern(self.text(node, what, optional=True))
        except AddressPatternError as exc:
            raise self.error(node, f"{what}: {exc}") from None

    def perm(self, node: yaml.Node | None, what: str) -> int:
        if node is None:
            return DENY
        text = self.text(node, what, optional=True)
        if text is None:
            return DENY
        perm = PERMISSIONS.get(text.strip())
        if perm is None:
            raise self.error(node, f"{what} is {text!r}: expected one of {', '.join(PERMISSIONS)}")
        return perm


def parse_plain_acl(text: str, path: str = "plain_acl.yml") -> PlainAclConfig:
    """The rules in ``text`` (the content of ``path``, named in errors); AclConfigError if unusable."""
    loader = yaml.SafeLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f", line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise AclConfigError(f"{path}{where}: not valid YAML: {problem}") from None
        return _read(_Reader(path, loader), root)
    finally:
        loader.dispose()


def _read(reader: _Reader, root: yaml.Node | None) -> PlainAclConfig:
    if root is None or (isinstance(root, yaml.ScalarNode) and reader.value(root) is None):
        return PlainAclConfig([], {})  # an empty file: no whitelist, no account, every request refused
    top = reader.mapping(root, "the file")
    for key, (key_node, _) in top.items():
        if key not in _TOP_LEVEL:
            raise reader.error(key_node, f"unknown field {key!r}: expected {', '.join(sorted(_TOP_LEVEL))}")
    white: list[AddressPattern] = []
    if GLOBAL_WHITE_REMOTE_ADDRESSES in top:
        for item in reader.sequence(top[GLOBAL_WHITE_REMOTE_ADDRESSES][1], GLOBAL_WHITE_REMOTE_ADDRESSES):
            white.append(reader.pattern(item, GLOBAL_WHITE_REMOTE_ADDRESSES))
    accounts: dict[str, PlainAccount] = {}
    if ACCOUNTS in top:
        for index, node in enumerate(reader.sequence(top[ACCOUNTS][1], ACCOUNTS)):
            account = _account(reader, node, index)
            if account.access_key in accounts:
                raise reader.error(node, f"accessKey {account.access_key!r} appears twice")
            accounts[account.access_key] = account
    return PlainAclConfig(white, accounts)


def _account(reader: _Reader, node: yaml.Node, index: int) -> PlainAccount:
    fields = reader.mapping(node, f"accounts[{index}]")
    for key, (key_node, _) in fields.items():
        if key not in _ACCOUNT_KEYS:
            raise reader.error(key_node, f"accounts[{index}]: unknown field {key!r}")

    def get(key: str) -> yaml.Node | None:
        return fields[key][1] if key in fields else None

    keys = {}
    for key in ("accessKey", "secretKey"):
        found = get(key)
        if found is None:
            raise reader.error(node, f"accounts[{index}] has no {key}")
        value = reader.text(found, f"accounts[{index}].{key}")
        assert value is not None
        if len(value) <= KEY_MIN_LENGTH:
            # the secret's own value is never shown
            raise reader.error(found, f"accounts[{index}].{key} must be longer than {KEY_MIN_LENGTH} characters")
        keys[key] = value
    where = f"accounts[{index}] ({keys['accessKey']})"
    admin_node = get("admin")
    admin = False if admin_node is None else reader.value(admin_node)
    if admin is None:
        admin = False
    if not isinstance(admin, bool):
        raise reader.error(admin_node, f"{where}.admin must be true or false")
    white_node = get("whiteRemoteAddress")
    perms: dict[str, int] = {}
    for key, is_topic in (("groupPerms", False), ("topicPerms", True)):
        found = get(key)
        if found is None:
            continue
        for item in reader.sequence(found, f"{where}.{key}"):
            text = reader.text(item, f"{where}.{key}")
            assert text is not None
            resource, sep, perm_text = text.partition("=")
            if not sep or not resource.strip() or "=" in perm_text:
                raise reader.error(item, f"{where}.{key}: {text!r} is not 'name=PERM', e.g. topicA=SUB")
            perm = PERMISSIONS.get(perm_text.strip())
            if perm is None:
                raise reader.error(item, f"{where}.{key}: {text!r}: expected one of {', '.join(PERMISSIONS)}")
            name = resource.strip()
            perms[name if is_topic else retry_topic(name)] = perm
    return PlainAccount(
        access_key=keys["accessKey"],
        secret_key=keys["secretKey"],
        white_remote_address=(
            AddressPattern(None) if white_node is None else reader.pattern(white_node, f"{where}.whiteRemoteAddress")
        ),
        admin=admin,
        default_topic_perm=reader.perm(get("defaultTopicPerm"), f"{where}.defaultTopicPerm"),
        default_group_perm=reader.perm(get("defaultGroupPerm"), f"{where}.defaultGroupPerm"),
        resource_perms=perms,
    )


def load_plain_acl(path: str | os.PathLike[str]) -> PlainAclConfig:
    """The rules of the file at ``path``; AclConfigError if it cannot be read or used."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"cannot read {os.fspath(path)}: {exc}") from None
    return parse_plain_acl(text, os.fspath(path))
