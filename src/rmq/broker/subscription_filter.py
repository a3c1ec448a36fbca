"""Subscription expressions compiled into store filters off the event loop, and the bounded cache
of what they compiled to (PULL_MESSAGE and CHECK_CLIENT_CONFIG share it).

    filters = SubscriptionFilters(server.call_soon_threadsafe)    # start() / shutdown() with the broker
    found = filters.lookup(topic, sub_string, expression_type)    # loop thread: the fast path
    if found is NOT_BUILT:
        filters.build_later(topic, sub_string, expression_type, on_built)   # on_built(found), on the loop

``found`` is the store's ``TagFilter``, None (everything) or the refusal ``(code, remark)``. A
processor uses ``find``, which does both and hands the request back to it once built:

    found = filters.find(topic, sub_string, expression_type, built,
                         lambda built: server.answer_later(channel, request, partial(handler, built=built)))
    if found is NOT_BUILT: return None          # answered later, by the handler called again

Why a thread: an SQL92 expression of MAX_EXPRESSION_LENGTH characters takes about 0.3 s to compile,
which on the loop would stall every client. The compile runs on ``rmq-broker-filter-compile`` (it
holds the GIL while it runs, but Python hands the GIL back to the loop every few milliseconds), and the
request is answered when its result is back on the loop. An expression over the length bound is
refused on the loop at once, which costs nothing; a TAG expression of up to INLINE_TAG_LENGTH
characters is built there too (a split and a hash per tag: microseconds), so the pulls of ordinary
tag subscriptions never queue behind an SQL92 compile. The requests waiting for a compile are bounded by
the characters of their expressions (MAX_WAITING_CHARACTERS): past it a request is refused
SYSTEM_BUSY and may retry, as RocketMQ refuses a pull its full pull thread pool cannot take.

The same thread parses a HEART_BEAT body too big to parse on the loop (``run_later``: the
subscriptions' tags are hashed one by one; ``rmq.broker.processor.client_manage``).

The cache is an LRU bounded by an estimate of the memory each entry holds (about 2 KB plus 70 bytes
per character of the expression for a compiled SQL92 filter): distinct expressions a client makes
up evict each other instead of growing the broker. Loop thread only: the worker only runs its jobs.
"""

from __future__ import annotations

import enum
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

from rmq._log import RateLimitedLog
from rmq._service import ServiceThread
from rmq.errors import RequestRefused
from rmq.protocol.codes import ResponseCode
from rmq.protocol.sql92 import MAX_EXPRESSION_LENGTH
from rmq.protocol.subscription import ExpressionType, build_subscription_data, sql92_filter
from rmq.store import TagFilter

log = logging.getLogger("rmq.broker")

# A store filter, None (every message), or the refusal (response code, remark).
Built = TagFilter | tuple[int, str] | None
Key = tuple[str, str, str]  # (topic, expression type, expression)
Done = Callable[[Any, "Exception | None"], None]
T = TypeVar("T")

# What the cache may hold, in estimated bytes (_cost): ~15,000 ordinary subscriptions, or a handful
# of the longest expressions allowed.
FILTER_CACHE_MAX_BYTES = 32 * 1024 * 1024
_ENTRY_BYTES = 2048
_BYTES_PER_CHARACTER = 80
# Characters of the expressions of the requests waiting for a compile, at most.
MAX_WAITING_CHARACTERS = 4 * MAX_EXPRESSION_LENGTH
_WAITER_CHARACTERS = 256  # what a waiting request counts for beside its expression
# TAG expressions this short are built on the loop.
INLINE_TAG_LENGTH = 1024


class _NotBuilt(enum.Enum):
    NOT_BUILT = "NOT_BUILT"


NOT_BUILT: Final = _NotBuilt.NOT_BUILT


def build_filter(topic: str, sub_string: str, expression_type: str) -> Built:
    """The store filter of a subscription, or its refusal; ``expression_type`` upper case."""
    try:
        if expression_type == ExpressionType.SQL92:
            sql = sql92_filter(topic, sub_string.strip())
            return TagFilter.of_properties(sql, sql.property_names)
        subscription = build_subscription_data(topic, sub_string, expression_type)
    except RequestRefused as e:
        return (e.code, e.remark or "")
    return None if subscription.sub_all else TagFilter(subscription.code_set, subscription.tags_set)


def _cost(key: Key) -> int:
    return _ENTRY_BYTES + _BYTES_PER_CHARACTER * len(key[2])


class FilterCache:
    """An LRU of built filters bounded by their estimated bytes (module docstring)."""

    def __init__(self, max_bytes: int = FILTER_CACHE_MAX_BYTES):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Key, Built] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> Built | _NotBuilt:
        try:
            found = self._entries[key]
        except KeyError:
            return NOT_BUILT
        self._entries.move_to_end(key)
        return found

    def put(self, key: Key, built: Built) -> None:
        cost = _cost(key)
        if cost > self.max_bytes:
            return
        if key in self._entries:
            self.bytes -= cost
        self._entries[key] = built
        self._entries.move_to_end(key)
        self.bytes += cost
        while self.bytes > self.max_bytes:
            evicted, _ = self._entries.popitem(last=False)
            self.bytes -= _cost(evicted)


class FilterCompileService(ServiceThread):
    """``rmq-broker-filter-compile``: runs the jobs handed to it one at a time, each result (or the
    exception it raised) handed to the loop."""

    interval = 1.0

    def __init__(self, call_soon_threadsafe: Callable[..., None]):
        super().__init__("rmq-broker-filter-compile")
        self._call_soon_threadsafe = call_soon_threadsafe
        # (work, on_done): appended by the loop, taken here (deque operations are atomic)
        self._jobs: deque[tuple[Callable[[], Any], Done]] = deque()

    def submit(self, work: Callable[[], Any], on_done: Done) -> None:
        self._jobs.append((work, on_done))
        self.wakeup()

    def run_once(self) -> None:
        while self._jobs and not self.is_stopped:
            work, on_done = self._jobs.popleft()
            result, error = None, None
            try:
                result = work()
            except Exception as exc:
                error = exc
            try:
                self._call_soon_threadsafe(on_done, result, error)
            except RuntimeError:
                pass  # the loop is closed: nobody is left to answer
        self.wait_for_running(self.interval)


class SubscriptionFilters:
    """The cache, the compile service, and the requests waiting for it (module docstring)."""

    def __init__(self, call_soon_threadsafe: Callable[..., None], cache_max_bytes: int = FILTER_CACHE_MAX_BYTES):
        self.cache = FilterCache(cache_max_bytes)
        self.compiler = FilterCompileService(call_soon_threadsafe)
        # key -> callbacks of the requests waiting for it (loop thread)
        self._waiting: dict[Key, list[Callable[[Built], None]]] = {}
        self.waiting_characters = 0
        self._failures = RateLimitedLog(log)

    def start(self) -> None:
        self.compiler.start()

    def shutdown(self) -> None:
        """Stop compiling; the requests still waiting are not answered (their connections close)."""
        self.compiler.shutdown()

    @staticmethod
    def key(topic: str, sub_string: str, expression_type: str) -> Key:
        return (topic, expression_type.strip().upper(), sub_string)

    def lookup(self, topic: str, sub_string: str, expression_type: str) -> Built | _NotBuilt:
        """What the subscription built to, if it is cached; NOT_BUILT if not. An SQL92 expression
        over the length bound is refused here, without a compile and without a cache entry."""
        key = self.key(topic, sub_string, expression_type)
        found = self.cache.get(key)
        if found is NOT_BUILT:
            if key[1] == ExpressionType.SQL92:
                if len(sub_string.strip()) > MAX_EXPRESSION_LENGTH:
                    return build_filter(topic, sub_string, key[1])  # the parser's first check: nothing is parsed
            elif len(sub_string) <= INLINE_TAG_LENGTH:
                found = build_filter(topic, sub_string, key[1])
                self.cache.put(key, found)
        return found

    def _reserve(self, characters: int) -> None:
        """Count a waiting request; SYSTEM_BUSY if those waiting already hold MAX_WAITING_CHARACTERS
        (when nothing waits, any request may: one bigger than the bound is still served)."""
        if self.waiting_characters and self.waiting_characters + characters > MAX_WAITING_CHARACTERS:
            raise RequestRefused(
                ResponseCode.SYSTEM_BUSY,
                "[OVERLOAD]system busy, start flow control for a while: requests of "
                f"{self.waiting_characters} characters are waiting to compile, at most {MAX_WAITING_CHARACTERS}",
            )
        self.waiting_characters += characters

    def run_later(
        self, characters: int, work: Callable[[], T], on_done: Callable[[T | None, Exception | None], None]
    ) -> None:
        """Loop thread: ``work()`` on the compile thread, then ``on_done(result, None)`` or
        ``on_done(None, exception)`` on the loop; ``characters`` (what the request holds) count
        towards MAX_WAITING_CHARACTERS until then (SYSTEM_BUSY past it). For work as slow as a
        compile, as parsing the subscriptions of a big heartbeat."""
        self._reserve(characters + _WAITER_CHARACTERS)

        def done(result: T | None, error: Exception | None) -> None:
            self.waiting_characters -= characters + _WAITER_CHARACTERS
            on_done(result, error)

        self.compiler.submit(work, done)

    def build_later(self, topic: str, sub_string: str, expression_type: str, on_built: Callable[[Built], None]) -> None:
        """Compile off the loop, then ``on_built(found)`` on the loop (loop thread); requests for
        one expression share its compile. SYSTEM_BUSY as ``run_later``."""
        key = self.key(topic, sub_string, expression_type)
        self._reserve(len(sub_string) + _WAITER_CHARACTERS)
        waiters = self._waiting.get(key)
        if waiters is not None:
            waiters.append(on_built)
            return
        self._waiting[key] = [on_built]
        self.compiler.submit(partial(build_filter, topic, sub_string, key[1]), partial(self._built, key))

    def find(
        self,
        topic: str,
        sub_string: str,
        expression_type: str,
        built: tuple[Key, Built] | None,
        again: Callable[[tuple[Key, Built]], None],
    ) -> TagFilter | None | _NotBuilt:
        """The filter of a subscription; raises RequestRefused with its refusal. If it is not built
        yet, NOT_BUILT, and ``again((key, built))`` on the loop once it is: the caller then asks
        again with that ``built``, which is used even if the cache dropped it meanwhile."""
        key = self.key(topic, sub_string, expression_type)
        found: Built | _NotBuilt
        if built is not None and built[0] == key:
            found = built[1]
        else:
            found = self.lookup(topic, sub_string, expression_type)
            if found is NOT_BUILT:
                self.build_later(topic, sub_string, expression_type, lambda result: again((key, result)))
                return NOT_BUILT
        if isinstance(found, tuple):
            raise RequestRefused(*found)
        return found

    def _built(self, key: Key, built: Built, error: Exception | None) -> None:  # the loop thread
        if error is not None:  # a bug of the compiler: this subscription is refused, not the broker
            self._failures.log(
                logging.ERROR, ("compile", type(error)), "building the filter of %r failed", key[0], exc_info=error
            )
            built = (ResponseCode.SYSTEM_ERROR, f"subscription to {key[0]!r}: the filter failed to build ({error!r})")
        self.cache.put(key, built)
        waiters = self._waiting.pop(key, [])
        self.waiting_characters -= len(waiters) * (len(key[2]) + _WAITER_CHARACTERS)
        for on_built in waiters:
            on_built(built)
