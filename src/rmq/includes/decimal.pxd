# Integers written as decimal text in place, as Java's Long.toString and Python's str() write them:
# the numbers of a remoting header's JSON (opaque, code, queueId, queueOffset, ...), written by the
# compiled paths that build or answer frames without a Python object per message (the broker's send
# lane, the client's send frames, rmq-perf's load generator).
from libc.stdint cimport int64_t, uint64_t


cdef enum:
    # the longest decimal of an int64, sign included: "-9223372036854775808"
    MAX_DECIMAL = 20


cdef inline uint64_t _magnitude(int64_t value) noexcept nogil:
    # -INT64_MIN does not fit an int64: negate in unsigned arithmetic
    return <uint64_t>(-(value + 1)) + 1 if value < 0 else <uint64_t>value


cdef inline Py_ssize_t decimal_length(int64_t value) noexcept nogil:
    """How many characters ``put_decimal`` writes for ``value``."""
    cdef uint64_t magnitude = _magnitude(value)
    cdef Py_ssize_t n = 2 if value < 0 else 1
    while magnitude >= 10:
        magnitude //= 10
        n += 1
    return n


cdef inline char* put_decimal(char* p, int64_t value) noexcept nogil:
    """Write ``value`` at ``p`` (at most MAX_DECIMAL characters); where the text ends."""
    cdef char digits[MAX_DECIMAL]
    cdef int n = 0
    cdef uint64_t magnitude = _magnitude(value)
    if value < 0:
        p[0] = c'-'
        p += 1
    while True:
        digits[n] = <char>(c'0' + magnitude % 10)
        n += 1
        magnitude //= 10
        if magnitude == 0:
            break
    while n:
        n -= 1
        p[0] = digits[n]
        p += 1
    return p
