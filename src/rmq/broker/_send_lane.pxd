# The JSON primitives of the broker's compiled lanes (the send lane's header scanner, shared with
# the pull lane, rmq.broker._pull_lane): bounds-checked reads of a remoting header's JSON, each
# answering -1 / 0 where the lane leaves the frame to the Python processors (see _send_lane.pyx).
from libc.stdint cimport INT32_MAX, INT32_MIN, int64_t, uint32_t
from libc.string cimport memcmp


cdef enum:
    # decimals of up to 18 digits fit an int64_t (rmq.net._codec's _int_of reads those itself)
    MAX_PLAIN_DECIMAL_DIGITS = 18


cdef class _Peer:
    # what the send lane keeps of a connection (SendLane.connect): the born host and port the
    # processor would store, the address the processors log, and where the answers the lane
    # completes after the read go (SYNC_FLUSH: once the flush round covers the send)
    cdef uint32_t host
    cdef int port
    cdef str address
    cdef object deliver


cdef struct Span:
    const unsigned char* start  # NULL: absent
    Py_ssize_t length           # between the quotes, as on the wire
    bint escaped


cdef inline Py_ssize_t _skip_ws(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and (p[i] == c' ' or p[i] == c'\t' or p[i] == c'\n' or p[i] == c'\r'):
        i += 1
    return i


cdef inline int _hex(unsigned char c) noexcept nogil:
    if c'0' <= c <= c'9':
        return c - c'0'
    if c'a' <= c <= c'f':
        return c - c'a' + 10
    if c'A' <= c <= c'F':
        return c - c'A' + 10
    return -1


cdef inline int _escaped_char(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, Py_ssize_t* used) noexcept nogil:
    """The ASCII character of the escape at p[i] (a backslash), its length in ``used``; -1 when the
    lane leaves it (an escape above ASCII, a surrogate, or one orjson refuses)."""
    cdef int a, b, c, d
    if i + 1 >= n:
        return -1
    cdef unsigned char e = p[i + 1]
    used[0] = 2
    if e == c'"' or e == c'\\' or e == c'/':
        return e
    if e == c'b':
        return 8
    if e == c'f':
        return 12
    if e == c'n':
        return 10
    if e == c'r':
        return 13
    if e == c't':
        return 9
    if e != c'u' or i + 5 >= n:
        return -1
    a = _hex(p[i + 2])
    b = _hex(p[i + 3])
    c = _hex(p[i + 4])
    d = _hex(p[i + 5])
    if a != 0 or b < 0 or c < 0 or d < 0 or b > 0 or c > 7:
        return -1
    used[0] = 6
    return c * 16 + d


cdef inline Py_ssize_t _scan_string(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, Span* span) noexcept nogil:
    """The string opening at p[i] (a quote): the index after its closing quote, its span in ``span``;
    -1 when the lane leaves it (see _escaped_char; raw control characters and bytes above 0x7F)."""
    cdef Py_ssize_t used
    cdef unsigned char c
    i += 1
    span.start = p + i
    span.escaped = False
    while i < n:
        c = p[i]
        # one unsigned compare for the plain run (0x20..0x7F but quote and backslash)
        if <unsigned char>(c - 0x20) < 0x60 and c != c'"' and c != c'\\':
            i += 1
            continue
        if c == c'"':
            span.length = (p + i) - span.start
            return i + 1
        if c == c'\\':
            if _escaped_char(p, i, n, &used) < 0:
                return -1
            span.escaped = True
            i += used
        elif c < 0x20 or c >= 0x80:
            return -1
        else:
            i += 1
    return -1


cdef inline Py_ssize_t _unescape(const unsigned char* s, Py_ssize_t n, unsigned char* out) noexcept nogil:
    """The bytes of a string _scan_string accepted (so its str's UTF-8: all ASCII); their length."""
    cdef Py_ssize_t i = 0, o = 0, used = 0
    while i < n:
        if s[i] == c'\\':
            out[o] = <unsigned char>_escaped_char(s, i, n, &used)
            i += used
        else:
            out[o] = s[i]
            i += 1
        o += 1
    return o


cdef inline Py_ssize_t _scan_int(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, int64_t* out) noexcept nogil:
    """A JSON integer at p[i] in the int32 range (what the codec's header ints must be): the index
    after it; -1 for anything else (a fraction, an exponent, leading zeros, too many digits)."""
    cdef bint negative = False
    cdef Py_ssize_t start
    cdef int64_t value = 0
    if i < n and p[i] == c'-':
        negative = True
        i += 1
    start = i
    while i < n and c'0' <= p[i] <= c'9':
        if i - start >= MAX_PLAIN_DECIMAL_DIGITS:
            return -1
        value = value * 10 + (p[i] - c'0')
        i += 1
    if i == start or (p[start] == c'0' and i - start > 1):
        return -1
    if i < n and (p[i] == c'.' or p[i] == c'e' or p[i] == c'E'):
        return -1
    if negative:
        value = -value
    if value < INT32_MIN or value > INT32_MAX:
        return -1
    out[0] = value
    return i


cdef inline Py_ssize_t _skip_literal(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """true, false or null at p[i]: the index after it, else -1."""
    if i + 4 <= n and (memcmp(p + i, b"true", 4) == 0 or memcmp(p + i, b"null", 4) == 0):
        return i + 4
    if i + 5 <= n and memcmp(p + i, b"false", 5) == 0:
        return i + 5
    return -1


cdef inline bint _same(const unsigned char* a, const char* b, Py_ssize_t n) noexcept nogil:
    """``a[:n] == b[:n]``, compared here: the names are a few bytes (V2's are one), where a call of
    memcmp per candidate cost more than the whole header's scan besides (~80 calls per send)."""
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != <unsigned char>b[i]:
            return False
    return True


cdef inline int _key_index(const Span* key, const char** names, const Py_ssize_t* lengths, int count) noexcept nogil:
    cdef int k
    for k in range(count):
        if key.length == lengths[k] and _same(key.start, names[k], key.length):
            return k
    return -1


cdef inline int _field_int(const Span* span, int64_t low, int64_t high, bint required, int64_t default,
                    int64_t* out) noexcept nogil:
    """An ext field as ``RemotingCommand.ext_int`` and send_header read it (absent or empty: the
    default), in [low, high]: 1, or 0 when the lane leaves it (what send_header refuses or what
    only Python's int() reads: signs, spaces, underscores, more digits)."""
    cdef const unsigned char* s = span.start
    cdef Py_ssize_t n = span.length, i = 0
    cdef int64_t value = 0
    if s == NULL or n == 0:
        if required:
            return 0
        out[0] = default
        return 1
    if span.escaped:
        return 0
    if s[0] == c'-':
        i = 1
    if i >= n or n - i > MAX_PLAIN_DECIMAL_DIGITS:
        return 0
    while i < n:
        if not c'0' <= s[i] <= c'9':
            return 0
        value = value * 10 + (s[i] - c'0')
        i += 1
    if s[0] == c'-':
        value = -value
    if value < low or value > high:
        return 0
    out[0] = value
    return 1


cdef inline int _header_code(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """The request code of a header that opens with it (``{"code":N``, as Java's fastjson, which
    sorts the keys, and rmq's clients write it; JSON whitespace allowed), else -1: which lane a
    frame is for, at a glance."""
    cdef int64_t code
    cdef Py_ssize_t i = _skip_ws(p, 0, n)
    if i >= n or p[i] != c'{':
        return -1
    i = _skip_ws(p, i + 1, n)
    if i + 6 > n or memcmp(p + i, b'"code"', 6) != 0:
        return -1
    i = _skip_ws(p, i + 6, n)
    if i >= n or p[i] != c':':
        return -1
    if _scan_int(p, _skip_ws(p, i + 1, n), n, &code) < 0:
        return -1
    return <int>code


# A request's header as the lanes read it: the three ints of the frame, and each extFields value
# named in a lane's table.
cdef struct RequestHead:
    int code
    int opaque
    int flag


cdef enum:
    # the top-level keys of a remoting header, by their place in _top_key
    TOP_CODE = 0
    TOP_OPAQUE = 1
    TOP_FLAG = 2
    TOP_VERSION = 3
    TOP_LANGUAGE = 4
    TOP_REMARK = 5
    TOP_EXT = 6
    N_TOP_KEYS = 7


cdef inline int _top_key(const Span* key) noexcept nogil:
    cdef const unsigned char* k = key.start
    cdef Py_ssize_t n = key.length
    if n == 4 and _same(k, b"code", 4):
        return TOP_CODE
    if n == 6 and _same(k, b"opaque", 6):
        return TOP_OPAQUE
    if n == 4 and _same(k, b"flag", 4):
        return TOP_FLAG
    if n == 7 and _same(k, b"version", 7):
        return TOP_VERSION
    if n == 8 and _same(k, b"language", 8):
        return TOP_LANGUAGE
    if n == 6 and _same(k, b"remark", 6):
        return TOP_REMARK
    if n == 9 and _same(k, b"extFields", 9):
        return TOP_EXT
    return -1


cdef inline Py_ssize_t _scan_fields(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, const char** names,
                                    const Py_ssize_t* lengths, int count, Span* spans) noexcept nogil:
    """The extFields object at p[i]: every value a string, ``spans[k]`` the value of ``names[k]``
    (the others skipped); the index after it, -1 when the lane leaves it (a duplicate of a named
    key, an escaped key, a value that is no string: the codec coerces it)."""
    cdef Span key, value
    cdef int k
    i = _skip_ws(p, i + 1, n)
    if i < n and p[i] == c'}':
        return i + 1
    while True:
        if i >= n or p[i] != c'"':
            return -1
        i = _scan_string(p, i, n, &key)
        if i < 0 or key.escaped:
            return -1
        i = _skip_ws(p, i, n)
        if i >= n or p[i] != c':':
            return -1
        i = _skip_ws(p, i + 1, n)
        if i >= n or p[i] != c'"':
            return -1
        i = _scan_string(p, i, n, &value)
        if i < 0:
            return -1
        k = _key_index(&key, names, lengths, count)
        if k >= 0:
            if spans[k].start != NULL:
                return -1
            spans[k] = value
        i = _skip_ws(p, i, n)
        if i < n and p[i] == c',':
            i = _skip_ws(p, i + 1, n)
            continue
        if i < n and p[i] == c'}':
            return i + 1
        return -1


cdef inline int _scan_request(const unsigned char* p, Py_ssize_t n, const int* codes, int n_codes, const char** names,
                              const Py_ssize_t* lengths, int count, Span* spans, RequestHead* head) noexcept nogil:
    """A header of one of the ``n_codes`` request ``codes`` read as rmq.net's codec reads it, into ``head`` and ``spans``
    (``count`` of them, zeroed here): 1, or 0 when the lane leaves the frame (another code, or
    anything the codec would coerce, refuse or read otherwise: a language that is no string, a
    remark that is neither string nor null, a repeated key, a nested value, trailing bytes)."""
    cdef Span key, value
    cdef bint seen[N_TOP_KEYS]
    cdef int k, c
    cdef int64_t number = 0
    cdef Py_ssize_t i
    for k in range(N_TOP_KEYS):
        seen[k] = False
    for k in range(count):
        spans[k].start = NULL
        spans[k].length = 0
        spans[k].escaped = False
    head.code = head.opaque = head.flag = 0
    i = _skip_ws(p, 0, n)
    if i >= n or p[i] != c'{':
        return 0
    i = _skip_ws(p, i + 1, n)
    while True:
        if i >= n or p[i] != c'"':
            return 0
        i = _scan_string(p, i, n, &key)
        if i < 0 or key.escaped:
            return 0
        i = _skip_ws(p, i, n)
        if i >= n or p[i] != c':':
            return 0
        i = _skip_ws(p, i + 1, n)
        if i >= n:
            return 0
        k = _top_key(&key)
        if k >= 0:
            if seen[k]:
                return 0
            seen[k] = True
        if k == TOP_EXT:
            if p[i] != c'{':
                return 0
            i = _scan_fields(p, i, n, names, lengths, count, spans)
        elif k == TOP_CODE or k == TOP_OPAQUE or k == TOP_FLAG or k == TOP_VERSION:
            i = _scan_int(p, i, n, &number)
            if k == TOP_CODE:
                head.code = <int>number
                if i >= 0:
                    for c in range(n_codes):
                        if number == codes[c]:
                            break
                    else:
                        return 0  # another lane's request (or none's): no need to read further
            elif k == TOP_OPAQUE:
                head.opaque = <int>number
            elif k == TOP_FLAG:
                head.flag = <int>number
        elif p[i] == c'"':
            i = _scan_string(p, i, n, &value)
        elif k == TOP_LANGUAGE:
            return 0
        elif p[i] == c'-' or c'0' <= p[i] <= c'9':
            if k == TOP_REMARK:
                return 0
            i = _scan_int(p, i, n, &number)
        elif k == TOP_REMARK and not (i + 4 <= n and memcmp(p + i, b"null", 4) == 0):
            return 0
        else:
            i = _skip_literal(p, i, n)
        if i < 0:
            return 0
        i = _skip_ws(p, i, n)
        if i < n and p[i] == c',':
            i = _skip_ws(p, i + 1, n)
            continue
        if i < n and p[i] == c'}':
            break
        return 0
    if _skip_ws(p, i + 1, n) != n or not seen[TOP_CODE] or not seen[TOP_EXT]:
        return 0
    return 1
