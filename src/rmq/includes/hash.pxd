# Java String.hashCode over the UTF-16 code units of a UTF-8 byte string.
#
# RocketMQ uses it for a ConsumeQueue entry's tags code (TAGS.hashCode()) and for the IndexFile
# key hash (abs((topic + "#" + key).hashCode())). Using the same hash keeps our files meaningful
# to RocketMQ's own tools, and it is stable across processes and versions.
# The hash is incremental: java_hash_update(java_hash_update(0, topic), "#") continued with the key
# equals the hash of "topic#key", so index keys are hashed without building the joined string.
# Pure-Python reference: rmq.protocol.message.java_string_hash (tests check they agree).
#
# Speed: h = 31h + c is a serial multiply-add, ~4 cycles a character, and every put hashes ~50
# (topic#UNIQ_KEY, topic#each key). Arithmetic is mod 2^32, so four ASCII characters fold in one
# step, h = 31^4 h + 31^3 c0 + 31^2 c1 + 31 c2 + c3, whose products are independent: same result,
# a quarter of the chain.
from libc.stdint cimport int32_t, uint32_t

cdef enum:
    P1 = 31
    P2 = 31 * 31
    P3 = 31 * 31 * 31
    P4 = 31 * 31 * 31 * 31


cdef inline uint32_t java_hash_update(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c, cp
    cdef Py_ssize_t i = 0
    while i < n:
        if i + 4 <= n and ((s[i] | s[i + 1] | s[i + 2] | s[i + 3]) & 0x80) == 0:
            h = (h * <uint32_t>P4 + <uint32_t>s[i] * <uint32_t>P3 + <uint32_t>s[i + 1] * <uint32_t>P2
                 + <uint32_t>s[i + 2] * <uint32_t>P1 + s[i + 3])
            i += 4
            continue
        c = s[i]
        if c < 0x80:
            h = h * 31 + c
            i += 1
            continue
        if c >= 0xF0 and i + 3 < n:
            cp = ((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
            i += 4
        elif c >= 0xE0 and c < 0xF0 and i + 2 < n:
            cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
            i += 3
        elif c >= 0xC0 and c < 0xE0 and i + 1 < n:
            cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F)
            i += 2
        else:
            cp = 0xFFFD  # what a Java decoder substitutes for a malformed byte
            i += 1
        if cp >= 0x10000:
            cp -= 0x10000
            h = h * 31 + (0xD800 + (cp >> 10))
            h = h * 31 + (0xDC00 + (cp & 0x3FF))
        else:
            h = h * 31 + cp
    return h


cdef inline int32_t java_string_hash(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    return <int32_t>java_hash_update(0, s, n)
