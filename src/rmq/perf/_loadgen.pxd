# rmq-perf's compiled worker loop (the wire formats it reads open _loadgen.pyx; load.py is the Python twin).

from libc.stdint cimport int64_t, uint64_t

cdef enum:
    # what the requests are and how answers find them
    PROTOCOL_REMOTING = 1       # rmq's frames: answers matched by the opaque they echo
    PROTOCOL_RESP = 2           # Redis: one reply per command, in order
    # a remoting frame's prefix: int32 total_length, int32 (serialize_type << 24) | header_length
    FRAME_PREFIX_SIZE = 8
    HEADER_LENGTH_MASK = 0xFFFFFF
    # an answer frame larger than this is not one rmq sends: the connection is given up
    MAX_ANSWER_FRAME = 16777216
    # a born timestamp in milliseconds has 13 digits until 2286
    BORN_DIGITS = 13
    # a pull template's queueOffset holds this one digit ("0") where each request's offset goes
    OFFSET_PLACEHOLDER_DIGITS = 1
    # a stored record opens with its int32 totalSize, which counts these 4 bytes too
    RECORD_SIZE_FIELD = 4
    # the histogram scheme of rmq.perf.histogram (loglinear-p5-us)
    PRECISION_BITS = 5
    SUB_BUCKETS = 32
    MAX_EXPONENT = 37
    N_BUCKETS = 1056
    # distinct failure kinds kept per interval (more than that are counted under the last one)
    MAX_FAILURE_KINDS = 16
    FAILURE_KEY_SIZE = 48
    # decimals of up to 18 digits fit an int64_t whatever they are
    MAX_DECIMAL_DIGITS = 18
    # RESP: the first bytes of an error reply that name it
    RESP_ERROR_CHARS = 40
    # run(): why it returned
    RUN_INTERVAL_END = 0
    RUN_DONE = 1
    RUN_CONNECTION_LOST = 2


cdef struct Failure:
    char key[FAILURE_KEY_SIZE]
    int key_len
    int64_t count


cdef class Loop:
    cdef int fd
    cdef int protocol
    cdef int in_flight
    cdef int batch
    cdef double period
    cdef double t0
    cdef double end
    cdef double drain_timeout
    # the request templates, back to back in one buffer
    cdef bytes _templates
    cdef const char* templates
    cdef int n_templates
    cdef Py_ssize_t* template_at
    cdef Py_ssize_t* template_len
    cdef Py_ssize_t* opaque_at
    cdef Py_ssize_t* born_at
    # pulls: where each template's queueOffset goes (-1: a send), the offset its next request
    # asks for and the queue's max offset, where the walk wraps to 0
    cdef Py_ssize_t* offset_at
    cdef int64_t* cursor
    cdef int64_t* offset_limit
    cdef bint walks
    cdef Py_ssize_t max_template
    cdef uint64_t opaque_base
    cdef uint64_t opaque_span
    cdef int opaque_digits
    cdef uint64_t seq
    # a burst of requests, and the answers read but not yet parsed
    cdef char* out
    cdef char* inbuf
    cdef Py_ssize_t in_len
    cdef Py_ssize_t in_cap
    # outstanding requests: by opaque (slot = opaque & mask) or in order (a ring)
    cdef uint64_t mask
    cdef uint64_t* slot_opaque
    cdef double* slot_due
    cdef uint64_t fifo_head
    cdef uint64_t fifo_tail
    cdef readonly int outstanding
    cdef double next_due
    # this interval
    cdef int64_t[::1] _counts
    cdef int64_t* counts
    # open loop: how late each request went out after it fell due, by message (NULL: not kept)
    cdef int64_t[::1] _delay_counts
    cdef int64_t* delay_counts
    # when an answer last freed a slot of the full in-flight window
    cdef double freed_at
    cdef int64_t sent
    cdef int64_t acked
    cdef int64_t lost
    cdef Failure failures[MAX_FAILURE_KINDS]
    cdef int n_failures
    cdef double wake_by
    cdef double late_max

    cdef int _send_burst(self, double now) noexcept nogil
    cdef int _read(self, double* answered) noexcept nogil
    cdef int _room_for(self, Py_ssize_t size) noexcept nogil
    cdef void _consumed(self, Py_ssize_t pos) noexcept nogil
    cdef int _parse_remoting(self, double answered) noexcept nogil
    cdef int _parse_resp(self, double answered) noexcept nogil
    cdef Py_ssize_t _pull_frame(self, char* at, int t) noexcept nogil
    cdef void _answered(self, double intended, double answered, int64_t messages, const char* failure,
                        int failure_len) noexcept nogil
