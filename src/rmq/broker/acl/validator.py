"""The broker's check of every request against plain_acl.yml (RocketMQ 4.x's PlainAccessValidator
and PlainPermissionManager.validate), and the watcher that reloads the file when it changes.

In order, for each request (``PlainAccessValidator.check``, run before its processor):

1. a client address in ``globalWhiteRemoteAddresses``: allowed, nothing more is looked at;
2. no ``AccessKey``, or one no account has: refused;
3. a client address in the account's ``whiteRemoteAddress``: allowed without a signature;
4. ``Signature`` not the HMAC-SHA1 of the request under the account's secret key: refused;
5. an admin request code and not an admin account: refused;
6. each resource the request touches (``needed_resources``) checked against the account's
   permission for it, or its default topic / group permission: refused on the first one lacking.
   The resources are read from the request's decoded header, cached on it for its processor
   (``rmq.protocol.headers``): the check and the processor cannot see different topics.
7. after its lookup, a processor asks for SUB on the topic of the message it found
   (``require_sub``: VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK), before answering any of it.

Which request needs what follows RocketMQ 5.x's ACL 2.0 (DefaultAuthorizationContextBuilder) in the
4.x file's terms: QUERY_MESSAGE needs SUB on its topic (and answers only that topic's messages);
VIEW_MESSAGE_BY_ID SUB on the found message's topic; CONSUMER_SEND_MSG_BACK SUB on the group and on
the message's original topic; INVOKE_BROKER_TO_RESET_OFFSET SUB on the group and the topic (or an
admin account without lists); LOCK_BATCH_MQ / UNLOCK_BATCH_MQ SUB on the group and each topic.

Requests of the gRPC endpoint (rmq.proxy) reach the check on a stand-in channel: one carrying a 5.x
client's signed call (``signed_call``, rmq.protocol.acl.SignedCall) is checked as above with that
call's access key and signature (HMAC-SHA1 over its ``x-mq-date-time``, in hex) in place of the
request's extFields, so both protocols meet the same accounts, white lists and permissions; the
endpoint's own requests (``internal``: topic and group configs for routes and settings) pass.

A refusal is NO_PERMISSION (16) with a remark naming the access key, the resource and the permission
it lacks, as RocketMQ 5.x answers; 4.x answered SYSTEM_ERROR (1) with its AclException's text. Both
make clients give up the request rather than wait.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from rmq._service import ServiceThread
from rmq.broker.acl.address import host_of
from rmq.broker.acl.config import (
    ANY,
    DENY,
    PUB,
    SUB,
    AclConfigError,
    PlainAccount,
    PlainAclConfig,
    load_plain_acl,
    perm_name,
)
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol import headers
from rmq.protocol.acl import ACCESS_KEY, SignedCall, signature_matches
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import RETRY_GROUP_TOPIC_PREFIX, retry_topic

if TYPE_CHECKING:
    from rmq.net.channel import Channel

log = logging.getLogger("rmq.broker.acl")

# Permission.ADMIN_CODE of 4.x, and rmq's own promotion of a slave and CommitLog digests (ha-verify:
# seconds of hashing per request, not for any signed client).
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.PROMOTE_TO_MASTER,
        RequestCode.GET_COMMIT_LOG_DIGESTS,
    }
)
# The seconds between two looks at the file: a change takes effect within this (and a read).
WATCH_INTERVAL = 0.5

_SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})


def check_permission(needed: int, owned: int) -> bool:
    """RocketMQ's Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """What ``request`` touches and needs (PlainAccessValidator.parse, scoped as RocketMQ 5.x's ACL
    2.0 scopes them): topic -> PUB or SUB, and ``%RETRY%<group>`` -> SUB for a group. Read from the
    request's decoded header (``rmq.protocol.headers``), the one its processor reads. Requests not
    listed touch nothing: a valid signature is enough for them (route and offset queries), or
    ``admin`` (ADMIN_CODES). VIEW_MESSAGE_BY_ID and CONSUMER_SEND_MSG_BACK touch a message's topic
    too, known only once the processor found the message (``PlainAccessValidator.require_sub``)."""
    code = request.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            needed[resource] = perm

    def add_group(group: str | None) -> None:
        if group:
            needed[retry_topic(group)] = SUB

    if code in _SEND_CODES:
        topic = headers.send_header(request).topic
        # A send to a retry topic is a send back of its group's consumer, which needs SUB on the
        # group (4.x looks up the producer group's retry topic there instead: a slip this does not copy).
        add(topic, SUB if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else PUB)
    elif code == RequestCode.PULL_MESSAGE:
        pull = headers.pull_header(request)
        add(pull.topic, SUB)
        add_group(pull.consumer_group)
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        offset = headers.consumer_offset_header(request)
        add_group(offset.consumer_group)
        add(offset.topic, SUB)
    elif code == RequestCode.HEART_BEAT:
        for consumer in headers.heartbeat(request).consumer_data_set:
            add_group(consumer.group_name)
            for subscription in consumer.subscriptions:
                add(subscription.topic, SUB)
    elif code == RequestCode.POP_MESSAGE:
        pop = headers.pop_header(request)
        add(pop.topic, SUB)
        add_group(pop.consumer_group)
    elif code in (RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        ack = headers.ack_header(request)
        add(ack.topic, SUB)
        add_group(ack.consumer_group)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add_group(headers.send_back_header(request).group)
    elif code == RequestCode.QUERY_MESSAGE:
        add(headers.query_message_header(request).topic, SUB)
    elif code == RequestCode.INVOKE_BROKER_TO_RESET_OFFSET:
        # moving a group's offsets is consuming as that group (RocketMQ 5.x: UPDATE on both)
        reset = headers.reset_offset_header(request)
        add_group(reset.group)
        add(reset.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add_group(headers.client_header(request).consumer_group)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        lock = headers.lock_batch(request)
        add_group(lock.consumer_group)
        for queue in lock.mqs:
            add(queue.topic, SUB)
    return needed


def _resource_text(resource: str) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic:{resource}"


def _refuse(remark: str) -> RequestRefused:
    return RequestRefused(ResponseCode.NO_PERMISSION, remark)


class PlainAccessValidator:
    """Checks requests against the rules of one plain_acl.yml; ``rules`` is replaced whole on a reload
    (one assignment: a request is checked under the old rules or the new, never a mix)."""

    def __init__(self, rules: PlainAclConfig, trace_topic: str = "RMQ_SYS_TRACE_TOPIC"):
        self.rules = rules
        self.trace_topic = trace_topic

    def check(self, channel: Channel, request: RemotingCommand) -> None:
        """Raise RequestRefused (NO_PERMISSION) unless ``request`` from ``channel`` is allowed."""
        if getattr(channel, "internal", False):
            return  # the gRPC endpoint's own request, in process
        self.validate(host_of(channel.remote_address), request, getattr(channel, "signed_call", None))

    def validate(self, host: str, request: RemotingCommand, signed: SignedCall | None = None) -> None:
        """``signed``: the 5.x call the request serves, whose signature stands for the request's."""
        account = self._account_to_check(host, request, signed)
        if account is None:
            return
        access_key = account.access_key
        if signed is not None:
            matches = signed.matches(account.secret_key)
        else:
            matches = signature_matches(request.ext_fields, request.body, account.secret_key)
        if not matches:
            raise _refuse(f"Check signature failed for accessKey={access_key}: wrong secret key?")
        needed = needed_resources(request)
        # message traces may always be written (4.x skips the check for its trace topic)
        if needed.get(self.trace_topic) == PUB:
            return
        if request.code in ADMIN_CODES and not account.admin:
            raise _refuse(f"Need admin permission for request code={request.code}, but accessKey={access_key} is not")
        self._require(account, needed)

    def require_sub(self, channel: Channel, request: RemotingCommand, topic: str) -> None:
        """Refuse (NO_PERMISSION) unless the account of ``request``, already checked, may SUB
        ``topic`` (a ``%RETRY%<group>`` topic: the group): for what a processor finds only after
        its lookup, the topic of the message a VIEW_MESSAGE_BY_ID or CONSUMER_SEND_MSG_BACK names
        (RocketMQ 5.x's ACL 2.0 scoping). Call it before anything of the message is answered."""
        if getattr(channel, "internal", False):
            return
        signed = getattr(channel, "signed_call", None)
        account = self._account_to_check(host_of(channel.remote_address), request, signed)
        if account is not None:
            self._require(account, {topic: SUB})

    def _account_to_check(
        self, host: str, request: RemotingCommand, signed: SignedCall | None = None
    ) -> PlainAccount | None:
        """Steps 1 to 3: None when the client's address lets the request through unchecked, else
        the account whose key it carries (or its 5.x call: ``signed``); refused when there is none."""
        rules = self.rules
        for pattern in rules.global_white_remote_addresses:
            if pattern.match(host):
                return None
        access_key = signed.access_key if signed is not None else request.ext_fields.get(ACCESS_KEY)
        if not access_key:
            raise _refuse(
                f"No accessKey is configured: request code {request.code} from {host} is not signed, "
                "and this broker checks ACL (give the client credentials)"
            )
        account = rules.accounts.get(access_key)
        if account is None:
            raise _refuse(f"No acl config for accessKey={access_key}")
        if account.white_remote_address.match(host):
            return None
        return account

    @staticmethod
    def _require(account: PlainAccount, needed: dict[str, int]) -> None:
        if not needed or (account.admin and not account.resource_perms):
            return
        for resource, perm in needed.items():
            owned = account.resource_perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(perm, owned):
                raise _refuse(
                    f"No permission for {_resource_text(resource)}: accessKey={account.access_key} needs "
                    f"{perm_name(perm)}, has {perm_name(owned)}"
                )


class AclWatcher(ServiceThread):
    """Reloads plain_acl.yml into a validator when the file changes (its size, mtime or inode), looked
    at every WATCH_INTERVAL; a file that cannot be used keeps the last good rules, and says why once."""

    interval = WATCH_INTERVAL

    def __init__(self, path: str, validator: PlainAccessValidator):
        super().__init__("rmq-broker-acl-watch")
        self.path = path
        self.validator = validator
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def run_once(self) -> None:
        self.wait_for_running(self.interval)
        if self.is_stopped:
            return
        self.reload_if_changed()

    def reload_if_changed(self) -> bool:
        """Reload if the file changed since last seen; True when new rules took effect."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self._seen = stamp
        if stamp is None:
            log.error("ACL file %s is gone: keeping the rules loaded before", self.path)
            return False
        if stamp[1] == 0:
            # most likely a rewrite caught between its truncation and its write
            log.error(
                "ACL file %s is empty: keeping the rules loaded before (write 'accounts: []' to refuse all)", self.path
            )
            return False
        try:
            rules = load_plain_acl(self.path)
        except AclConfigError as exc:
            log.error("ACL file changed but cannot be used, keeping the rules loaded before: %s", exc)
            return False
        self.validator.rules = rules
        log.info(
            "ACL file %s reloaded: %d accounts, %d global white addresses",
            self.path,
            len(rules.accounts),
            len(rules.global_white_remote_addresses),
        )
        return True
