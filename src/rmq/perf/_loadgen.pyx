# cython: boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
"""rmq-perf's worker loop, compiled: N requests in flight on one connection, answers parsed in C,
latencies into rmq.perf.histogram's buckets; the twin of ``rmq.perf.load._drive`` (one semantics,
checked against each other by tests/perf/test_loadgen.py). ``run(stop)`` loops without the GIL
until the interval ends at ``stop`` (or the run does); Python reports between intervals.

Requests are templates encoded once; per request only two numbers are written in place::

    remoting (rmq): a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE frame
        [opaque_at, +D)   the header's "opaque" value, D digits (OPAQUE_BASE .. +SPAN: always D)
        [born_at, +13)    extFields "g", bornTimestamp in ms, once per burst
    remoting (rmq): a PULL_MESSAGE frame of one queue, walked from offset 0 by maxMsgNums (= batch)
        [opaque_at, +D)   as above
        [offset_at, +1)   extFields "queueOffset": "0" in the template, replaced by the offset as
                          Long.toString writes it (1-19 digits): the frame's total_length and
                          header_length grow by the digits added. The next request of that queue
                          asks for offset + batch, or 0 once offset + 2 * batch passes its limit
                          (the queue's max offset: every pull then finds a full batch)
    RESP (Redis): *8 $4 XADD ... : sent as it is

Answers read::

    remoting frame (docs/protocol.md#frame, big-endian)
    offset  size  field
    0       4     total_length    = 4 + header_length + body_length
    4       4     serialize_type << 24 | header_length (JSON only)
    8       H     header          JSON: "code":-?\\d+ and "opaque":\\d+ found by scanning; an
                                  answer that starts {"code":0, is a success without a search
    8+H     B     body            skipped; a pull's FOUND (code 0) answer: stored records back to
                                  back, counted by walking their int32 totalSize (a size under 4
                                  or past the body's end: the failure "records")

    RESP reply, one per command in order
    $<n>\\r\\n<n bytes>\\r\\n     bulk string (the XADD's entry id; $-1 has no payload): success
    -<message>\\r\\n              error: failure "error:" + its first 40 characters
    +... / :... / other\\r\\n     one line: success

Latency, as in the Python loop: from the send (closed loop) or from the request's due time
start + k * period (open loop), never recorded for a request due before ``t0`` (the warm-up).
In an open loop ``delay_counts`` (when given) gets, per request, how long after it could go out
it went out: from its due time, or from the answer that freed a slot of the full in-flight window
after it (a server that stalls holds requests back there: that wait stays the server's). What is
left is the generator's own lateness, inside the latency, told apart from the server's; an answer
the generator read late still counts as the server's.
"""

from cpython.bytes cimport PyBytes_AS_STRING
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove
from rmq.includes.decimal cimport MAX_DECIMAL, put_decimal

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int CLOCK_MONOTONIC
    int CLOCK_REALTIME
    int clock_gettime(int clk_id, timespec* tp)
    int nanosleep(const timespec* req, timespec* rem)

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    short POLLIN
    short POLLOUT
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    int ppoll(pollfd* fds, unsigned long nfds, const timespec* tmo, const void* sigmask)

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    int MSG_NOSIGNAL

cdef extern from "<string.h>" nogil:
    void* memmem(const void* haystack, size_t hlen, const void* needle, size_t nlen)

cdef extern from * nogil:
    int __builtin_clzll(unsigned long long x)

# The layout enum of _loadgen.pxd, for the test that checks it against rmq.perf.histogram.
LAYOUT = {
    "PRECISION_BITS": PRECISION_BITS,
    "SUB_BUCKETS": SUB_BUCKETS,
    "MAX_EXPONENT": MAX_EXPONENT,
    "N_BUCKETS": N_BUCKETS,
}
REMOTING = PROTOCOL_REMOTING
RESP = PROTOCOL_RESP
INTERVAL_END = RUN_INTERVAL_END
DONE = RUN_DONE
CONNECTION_LOST = RUN_CONNECTION_LOST

# The Python loop sleeps at most this long between looks at the clock: the same here.
cdef double MAX_WAIT = 0.05
cdef double SEND_WAIT_MS = 1000
cdef Py_ssize_t READ_SIZE = 1 << 20
cdef const char* SUCCESS_HEAD = b'{"code":0,'
cdef const char* CODE_KEY = b'"code":'
cdef const char* OPAQUE_KEY = b'"opaque":'
cdef const char* ERROR_PREFIX = b"error:"
cdef const char* BAD_RECORDS = b"records"


cdef inline double monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)  # time.monotonic's clock: t0 and end come from the parent
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline uint64_t wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <uint64_t>ts.tv_sec * 1000 + <uint64_t>(ts.tv_nsec // 1000000)


cdef inline void write_digits(char* at, uint64_t value, int width) noexcept nogil:
    cdef int i
    for i in range(width - 1, -1, -1):
        at[i] = <char>(48 + value % 10)
        value //= 10


cdef inline Py_ssize_t be32(const char* p) noexcept nogil:
    cdef const unsigned char* u = <const unsigned char*>p
    return (<Py_ssize_t>u[0] << 24) | (<Py_ssize_t>u[1] << 16) | (<Py_ssize_t>u[2] << 8) | <Py_ssize_t>u[3]


cdef inline void put_be32(char* p, Py_ssize_t value) noexcept nogil:
    cdef int i
    for i in range(3, -1, -1):
        p[i] = <char>(value & 0xFF)
        value >>= 8


cdef inline int64_t count_records(const char* p, Py_ssize_t size) noexcept nogil:
    """The stored records back to back in ``p[:size]``; -1 when their sizes do not add up to it."""
    cdef int64_t n = 0
    cdef Py_ssize_t pos = 0, record
    while pos < size:
        if size - pos < RECORD_SIZE_FIELD:
            return -1
        record = be32(p + pos)
        if record < RECORD_SIZE_FIELD or record > size - pos:
            return -1
        pos += record
        n += 1
    return n


cdef inline int64_t number_at(const char* p, const char* end, bint* found) noexcept nogil:
    """The decimal (optionally negative) starting at ``p``; ``found`` false when there is none, or
    one too long for an int64 (no code or opaque is)."""
    cdef bint negative = p < end and p[0] == 45  # '-'
    cdef int64_t value = 0
    cdef int digits = 0
    if negative:
        p += 1
    while p < end and 48 <= p[0] <= 57:
        value = value * 10 + (p[0] - 48)
        p += 1
        digits += 1
        if digits > MAX_DECIMAL_DIGITS:
            found[0] = False
            return 0
    found[0] = digits > 0
    return -value if negative else value


cdef inline int64_t field_number(const char* header, const char* end, const char* key, size_t key_len) noexcept nogil:
    """The number after ``key`` in a JSON header; -1 when the header has no such field."""
    cdef const char* at = <const char*>memmem(header, end - header, key, key_len)
    cdef bint found = False
    cdef int64_t value
    if at == NULL:
        return -1
    value = number_at(at + key_len, end, &found)
    return value if found else -1


cpdef Py_ssize_t bucket_index(int64_t value_us) noexcept nogil:
    """rmq.perf.histogram.index_of of one value, in C."""
    cdef int e
    if value_us < 0:
        value_us = 0
    elif value_us >= (<int64_t>1 << MAX_EXPONENT):
        value_us = (<int64_t>1 << MAX_EXPONENT) - 1
    if value_us < SUB_BUCKETS:
        return <Py_ssize_t>value_us
    e = 63 - __builtin_clzll(<unsigned long long>value_us)
    return (e - PRECISION_BITS + 1) * SUB_BUCKETS + <Py_ssize_t>(value_us >> (e - PRECISION_BITS)) - SUB_BUCKETS


cdef class Loop:
    """One worker's connection: ``fd`` (non-blocking, connected), its requests (``templates``, with
    where each one's opaque and born timestamp go; -1: nowhere), the load (``in_flight``, ``period``
    seconds between requests, 0 for a closed loop) and the run's times (time.monotonic). Pulls:
    ``offset_at`` (where each template's queueOffset "0" is) and ``offset_limit`` (its queue's
    max offset), one per template; ``batch`` is their maxMsgNums."""

    def __init__(self, int fd, int protocol, list templates, list opaque_at, list born_at, int in_flight,
                  double period, int batch, uint64_t first_seq, double t_warm, double t0, double end,
                  double drain_timeout, int64_t[::1] counts, uint64_t opaque_base=0, uint64_t opaque_span=1,
                  list offset_at=None, list offset_limit=None, int64_t[::1] delay_counts=None):
        cdef Py_ssize_t i, offset = 0
        cdef uint64_t capacity = 1
        if self.out != NULL:
            raise RuntimeError("a Loop is initialised once")
        if protocol != PROTOCOL_REMOTING and protocol != PROTOCOL_RESP:
            raise ValueError(f"protocol {protocol}, expected {PROTOCOL_REMOTING} (remoting) or {PROTOCOL_RESP} (RESP)")
        if not templates or len(opaque_at) != len(templates) or len(born_at) != len(templates):
            raise ValueError(f"{len(templates)} templates with {len(opaque_at)} opaque and {len(born_at)} born "
                             "offsets: expected one of each per template, at least one template")
        if in_flight < 1 or batch < 1:
            raise ValueError(f"in_flight {in_flight} and batch {batch}: expected both at least 1")
        if counts.shape[0] != N_BUCKETS:
            raise ValueError(f"counts of {counts.shape[0]} buckets, expected {N_BUCKETS} (rmq.perf.histogram's)")
        self.opaque_digits = len(str(opaque_base))
        if protocol == PROTOCOL_REMOTING and (
            opaque_span < 1 or len(str(opaque_base + opaque_span - 1)) != self.opaque_digits
        ):
            raise ValueError(f"opaques {opaque_base} + {opaque_span}: expected all of one number of digits")
        self.fd, self.protocol, self.in_flight, self.batch, self.period = fd, protocol, in_flight, batch, period
        self.t0, self.end, self.drain_timeout = t0, end, drain_timeout
        self.opaque_base, self.opaque_span, self.seq = opaque_base, opaque_span, first_seq
        self._counts = counts
        self.counts = &counts[0]
        if delay_counts is not None:
            if delay_counts.shape[0] != N_BUCKETS:
                raise ValueError(f"delay_counts of {delay_counts.shape[0]} buckets, expected {N_BUCKETS}")
            self._delay_counts = delay_counts
            self.delay_counts = &delay_counts[0]
        self.next_due = t_warm
        self.wake_by = t_warm
        self.n_templates = len(templates)
        self._templates = b"".join(templates)
        self.templates = PyBytes_AS_STRING(self._templates)
        n = self.n_templates
        self.template_at = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.template_len = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.opaque_at = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.born_at = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.offset_at = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.cursor = <int64_t*>calloc(n, sizeof(int64_t))
        self.offset_limit = <int64_t*>calloc(n, sizeof(int64_t))
        if not (self.template_at and self.template_len and self.opaque_at and self.born_at and self.offset_at
                and self.cursor and self.offset_limit):
            raise MemoryError()
        self.walks = offset_at is not None
        if self.walks and (protocol != PROTOCOL_REMOTING or offset_limit is None or len(offset_at) != n
                           or len(offset_limit) != n):
            raise ValueError(f"pulls: {len(offset_at)} offsets and "
                             f"{'no' if offset_limit is None else len(offset_limit)} limits for {n} remoting "
                             "templates: expected one of each per template")
        for i in range(n):
            size = len(templates[i])
            self.template_at[i], self.template_len[i] = offset, size
            self.opaque_at[i], self.born_at[i] = opaque_at[i], born_at[i]
            for at, width in ((opaque_at[i], self.opaque_digits), (born_at[i], BORN_DIGITS)):
                if at != -1 and not 0 <= at <= size - width:
                    raise ValueError(f"template {i}: a number at {at} does not fit its {size} bytes")
            if protocol == PROTOCOL_REMOTING and opaque_at[i] == -1:
                raise ValueError(f"template {i}: a remoting request needs its opaque's offset")
            self.offset_at[i] = -1
            if self.walks:
                at = offset_at[i]
                header_end = FRAME_PREFIX_SIZE + (int.from_bytes(templates[i][4:8], "big") & HEADER_LENGTH_MASK)
                if not FRAME_PREFIX_SIZE <= at < min(header_end, size) or templates[i][at:at + 1] != b"0":
                    raise ValueError(f"template {i}: its queueOffset at {at} is not a \"0\" in its header")
                if born_at[i] != -1:
                    raise ValueError(f"template {i}: a pull has no born timestamp, expected -1 for it")
                if offset_limit[i] < 0:
                    raise ValueError(f"template {i}: max offset {offset_limit[i]}, expected >= 0")
                self.offset_at[i], self.offset_limit[i] = at, offset_limit[i]
            offset += size
            self.max_template = max(self.max_template, size)
        if self.walks:
            self.max_template += MAX_DECIMAL - OFFSET_PLACEHOLDER_DIGITS
        self.out = <char*>malloc(self.max_template * in_flight)
        self.in_cap = READ_SIZE
        self.inbuf = <char*>malloc(self.in_cap)
        # twice the in-flight: a slot freed by an answer is found at once even when one request is
        # stuck while the others go round
        while capacity < 2 * <uint64_t>in_flight:
            capacity <<= 1
        self.mask = capacity - 1
        self.slot_opaque = <uint64_t*>malloc(capacity * sizeof(uint64_t))
        self.slot_due = <double*>malloc(capacity * sizeof(double))
        if not (self.out and self.inbuf and self.slot_opaque and self.slot_due):
            raise MemoryError()
        for i in range(<Py_ssize_t>capacity):
            self.slot_opaque[i] = 0  # no opaque is 0: OPAQUE_BASE > 0

    def __dealloc__(self):
        free(self.template_at)
        free(self.template_len)
        free(self.opaque_at)
        free(self.born_at)
        free(self.offset_at)
        free(self.cursor)
        free(self.offset_limit)
        free(self.out)
        free(self.inbuf)
        free(self.slot_opaque)
        free(self.slot_due)

    def run(self, double stop):
        """Send and read until ``stop`` (an interval's end) or the end of the run; RUN_INTERVAL_END,
        RUN_DONE (sent until ``end``, answered or drained) or RUN_CONNECTION_LOST."""
        cdef double now, wake, timeout, answered
        cdef int status
        cdef timespec ts
        cdef pollfd pfd
        if self.out == NULL or self.inbuf == NULL:
            raise RuntimeError("Loop not initialised: construct it with Loop(fd, protocol, ...)")
        with nogil:
            while True:
                now = monotonic()
                if now - self.wake_by > self.late_max:
                    self.late_max = now - self.wake_by
                if now >= stop:
                    status = RUN_INTERVAL_END
                    break
                if now < self.end:
                    if self._send_burst(now) < 0:
                        status = RUN_CONNECTION_LOST
                        break
                elif self.outstanding == 0 or now >= self.end + self.drain_timeout:
                    status = RUN_DONE
                    break
                wake = stop if stop < self.end + self.drain_timeout else self.end + self.drain_timeout
                if now < self.t0 and self.t0 < wake:
                    wake = self.t0
                if now < self.end and self.period > 0 and self.outstanding < self.in_flight and self.next_due < wake:
                    wake = self.next_due
                timeout = wake - now
                if timeout > MAX_WAIT:
                    timeout = MAX_WAIT
                if timeout < 0:
                    timeout = 0
                self.wake_by = now + timeout
                ts.tv_sec = <time_t>timeout
                ts.tv_nsec = <long>((timeout - ts.tv_sec) * 1e9)
                if self.outstanding == 0:
                    nanosleep(&ts, NULL)
                    continue
                pfd.fd, pfd.events, pfd.revents = self.fd, POLLIN, 0
                if ppoll(&pfd, 1, &ts, NULL) <= 0:
                    continue
                status = self._read(&answered)
                if status == 0:
                    continue
                if status > 0:
                    if self.protocol == PROTOCOL_REMOTING:
                        status = self._parse_remoting(answered)
                    else:
                        status = self._parse_resp(answered)
                if status < 0:  # the connection ended, or sent what no server sends: given up
                    status = RUN_CONNECTION_LOST
                    self.lost += <int64_t>self.outstanding * self.batch
                    self.outstanding = 0
                    break
        return status

    def set_period(self, double period):
        """A rate profile's next step: ``period`` seconds between requests from now on. The requests
        already due keep their due times (``next_due`` runs on), so a step changes the rate without
        a gap or a burst; an open loop stays open (``period`` > 0) and a closed one closed."""
        if (period > 0) != (self.period > 0):
            raise ValueError(f"period {period} for a loop of period {self.period}: "
                             "expected both open (> 0) or both closed (0)")
        self.period = period

    def take(self):
        """This interval's (sent, acked, failures {key: messages}, lost to the connection, latest
        wake-up in seconds), its counters then zeroed; the histogram is the ``counts`` array."""
        cdef int i
        failures = {}
        for i in range(self.n_failures):
            key = self.failures[i].key[:self.failures[i].key_len].decode("utf-8", "replace")
            failures[key] = self.failures[i].count
        out = (self.sent, self.acked, failures, self.lost, self.late_max)
        self.sent = self.acked = self.lost = 0
        self.n_failures = 0
        self.late_max = 0.0
        return out

    cdef int _send_burst(self, double now) noexcept nogil:
        """What may go out now: up to the in-flight, in an open loop only what has fallen due;
        -1 when the connection is lost."""
        cdef int n = self.in_flight - self.outstanding
        cdef int k, t
        cdef int64_t due
        cdef uint64_t opaque, slot, born = 0
        cdef Py_ssize_t length = 0, size
        cdef ssize_t written
        cdef double intended
        cdef const char* templates = self.templates
        cdef pollfd pfd
        if n <= 0:
            return 0
        if self.period > 0:
            due = <int64_t>((now - self.next_due) / self.period) + 1 if now >= self.next_due else 0
            if due < n:
                n = <int>due
            if n <= 0:
                return 0
        for k in range(n):
            intended = self.next_due + k * self.period if self.period > 0 else now
            if self.delay_counts != NULL and self.period > 0 and intended >= self.t0:
                self.delay_counts[bucket_index(<int64_t>((now - max(intended, self.freed_at)) * 1e6))] += self.batch
            self.seq += 1
            t = <int>(self.seq % self.n_templates)
            if self.offset_at[t] >= 0:
                size = self._pull_frame(self.out + length, t)
            else:
                size = self.template_len[t]
                memcpy(self.out + length, templates + self.template_at[t], size)
            if self.protocol == PROTOCOL_REMOTING:
                while True:  # a slot still held by a request not answered yet: the next opaque
                    opaque = self.opaque_base + self.seq % self.opaque_span
                    slot = opaque & self.mask
                    if self.slot_opaque[slot] == 0:
                        break
                    self.seq += 1
                self.slot_opaque[slot] = opaque
                self.slot_due[slot] = intended
                # a pull's offset grew the header in front of its opaque when it comes first
                write_digits(self.out + length + self.opaque_at[t] + (
                    size - self.template_len[t] if self.offset_at[t] >= 0 and self.opaque_at[t] > self.offset_at[t]
                    else 0), opaque, self.opaque_digits)
            else:
                self.slot_due[self.fifo_tail & self.mask] = intended
                self.fifo_tail += 1
            if self.born_at[t] >= 0:
                if born == 0:
                    born = wall_ms()
                write_digits(self.out + length + self.born_at[t], born, BORN_DIGITS)
            length += size
        if self.period > 0:
            self.next_due += n * self.period
        size = 0
        while size < length:
            written = send(self.fd, self.out + size, length - size, MSG_NOSIGNAL)
            if written >= 0:
                size += written
            elif errno == EAGAIN or errno == EINTR:
                pfd.fd, pfd.events, pfd.revents = self.fd, POLLOUT, 0
                poll(&pfd, 1, <int>SEND_WAIT_MS)
            else:  # as the Python loop: this burst lost, those before it still awaited (then timed out)
                self.lost += <int64_t>n * self.batch
                return -1
        self.outstanding += n
        if now >= self.t0:
            self.sent += <int64_t>n * self.batch
        return 0

    cdef Py_ssize_t _pull_frame(self, char* at, int t) noexcept nogil:
        """Template ``t`` at ``at`` with its queue's next offset in it; its size. The walk moves on."""
        cdef const char* template = self.templates + self.template_at[t]
        cdef Py_ssize_t split = self.offset_at[t], size = self.template_len[t], grown
        cdef int64_t offset = self.cursor[t]
        cdef char* digits_end
        self.cursor[t] = offset + self.batch if offset + 2 * self.batch <= self.offset_limit[t] else 0
        memcpy(at, template, split)
        digits_end = put_decimal(at + split, offset)
        grown = (digits_end - (at + split)) - OFFSET_PLACEHOLDER_DIGITS
        memcpy(digits_end, template + split + OFFSET_PLACEHOLDER_DIGITS, size - split - OFFSET_PLACEHOLDER_DIGITS)
        put_be32(at, be32(template) + grown)
        put_be32(at + 4, be32(template + 4) + grown)  # the header length's top byte (the serialize type) kept
        return size + grown

    cdef int _read(self, double* answered) noexcept nogil:
        """What the connection has for us into ``inbuf``: its size, 0 for nothing yet, -1 when the
        connection is lost."""
        cdef ssize_t got
        cdef char* grown
        if self.in_cap - self.in_len < READ_SIZE // 4:
            grown = <char*>realloc(self.inbuf, self.in_cap * 2)
            if grown == NULL:
                return -1
            self.inbuf, self.in_cap = grown, self.in_cap * 2
        got = recv(self.fd, self.inbuf + self.in_len, self.in_cap - self.in_len, 0)
        answered[0] = monotonic()
        if got > 0:
            self.in_len += got
            return <int>got
        if got < 0 and (errno == EAGAIN or errno == EINTR):
            return 0
        return -1

    cdef int _room_for(self, Py_ssize_t size) noexcept nogil:
        """``inbuf`` grown to hold an answer of ``size`` bytes; -1 when memory is out."""
        cdef char* grown
        if size <= self.in_cap:
            return 0
        grown = <char*>realloc(self.inbuf, size)
        if grown == NULL:
            return -1
        self.inbuf, self.in_cap = grown, size
        return 0

    cdef void _consumed(self, Py_ssize_t pos) noexcept nogil:
        if pos:
            memmove(self.inbuf, self.inbuf + pos, self.in_len - pos)
            self.in_len -= pos

    cdef int _parse_remoting(self, double answered) noexcept nogil:
        """The complete frames read; -1 for one no broker sends (its lengths do not add up)."""
        cdef Py_ssize_t pos = 0, total, header_len, frame_end
        cdef const char* header
        cdef const char* header_end
        cdef int64_t code, opaque, messages
        cdef uint64_t slot
        cdef char key[MAX_DECIMAL]
        cdef int key_len
        while self.in_len - pos >= FRAME_PREFIX_SIZE:
            total = be32(self.inbuf + pos)
            header_len = be32(self.inbuf + pos + 4) & HEADER_LENGTH_MASK
            if total < 4 or total > MAX_ANSWER_FRAME or header_len > total - 4:
                return -1
            frame_end = pos + 4 + total
            if frame_end > self.in_len:
                self._consumed(pos)
                return self._room_for(4 + total)
            header = self.inbuf + pos + FRAME_PREFIX_SIZE
            header_end = header + header_len
            if header_len >= 10 and memcmp(header, SUCCESS_HEAD, 10) == 0:  # rmq's answers begin so
                code = 0
            else:
                code = field_number(header, header_end, CODE_KEY, 7)
            opaque = field_number(header, header_end, OPAQUE_KEY, 9)
            pos = frame_end
            slot = <uint64_t>opaque & self.mask
            if opaque <= 0 or self.slot_opaque[slot] != <uint64_t>opaque:
                continue  # not a request of ours
            self.slot_opaque[slot] = 0
            messages = self.batch
            if code == 0 and self.walks:
                messages = count_records(header_end, self.inbuf + frame_end - header_end)
                if messages < 0:
                    self._answered(self.slot_due[slot], answered, self.batch, BAD_RECORDS, 7)
                    continue
            if code == 0:
                self._answered(self.slot_due[slot], answered, messages, NULL, 0)
            else:
                key_len = <int>(put_decimal(key, code) - key)
                self._answered(self.slot_due[slot], answered, self.batch, key, key_len)
        self._consumed(pos)
        return 0

    cdef int _parse_resp(self, double answered) noexcept nogil:
        """The complete replies read, each answering the oldest request; -1 for a bulk length
        that is not a number."""
        cdef Py_ssize_t pos = 0, end
        cdef const char* line
        cdef const char* eol
        cdef int64_t length
        cdef bint found
        cdef char key[FAILURE_KEY_SIZE]
        cdef int key_len
        cdef double intended
        while pos < self.in_len:
            line = self.inbuf + pos
            eol = <const char*>memmem(line, self.in_len - pos, b"\r\n", 2)
            if eol == NULL:
                break
            key_len = 0
            if line[0] == 36:  # '$': a bulk string, or $-1 for none
                length = number_at(line + 1, eol, &found)
                if not found or length > MAX_ANSWER_FRAME:
                    return -1
                end = (eol - self.inbuf) + 2 + (length + 2 if length >= 0 else 0)
                if end > self.in_len:
                    self._consumed(pos)
                    return self._room_for(end - pos)
            else:
                end = (eol - self.inbuf) + 2
                if line[0] == 45:  # '-': an error
                    key_len = 6 + min(<int>(eol - line - 1), RESP_ERROR_CHARS)
                    memcpy(key, ERROR_PREFIX, 6)
                    memcpy(key + 6, line + 1, key_len - 6)
            pos = end
            if self.fifo_head == self.fifo_tail:
                continue  # a reply to nothing we sent
            intended = self.slot_due[self.fifo_head & self.mask]
            self.fifo_head += 1
            self._answered(intended, answered, self.batch, key if key_len else NULL, key_len)
        self._consumed(pos)
        return 0

    cdef void _answered(self, double intended, double answered, int64_t messages, const char* failure,
                        int failure_len) noexcept nogil:
        """One request answered: recorded unless it was sent in the warm-up (``failure`` NULL: a
        success of ``messages``; else the ``messages`` it failed)."""
        cdef int i
        if self.outstanding == self.in_flight:  # a request held back by the full window may go now
            self.freed_at = answered
        self.outstanding -= 1
        if intended < self.t0:
            return
        if failure == NULL:
            self.acked += messages
            self.counts[bucket_index(<int64_t>((answered - intended) * 1e6))] += messages
            return
        for i in range(self.n_failures):
            if self.failures[i].key_len == failure_len and memcmp(self.failures[i].key, failure, failure_len) == 0:
                self.failures[i].count += messages
                return
        if self.n_failures == MAX_FAILURE_KINDS:  # more kinds than anyone reads: with the last one
            self.failures[MAX_FAILURE_KINDS - 1].count += messages
            return
        i = self.n_failures
        self.n_failures += 1
        memcpy(self.failures[i].key, failure, failure_len)
        self.failures[i].key_len = failure_len
        self.failures[i].count = messages

