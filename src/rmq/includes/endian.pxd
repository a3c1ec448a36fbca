# Big-endian loads and stores over raw memory, for every on-disk and on-wire format of RocketMQ
# (all of them are big-endian, as Java's ByteBuffer writes them).
#
# Written as shifts rather than byte-swap builtins: the code is the same on any host byte order,
# and gcc/clang -O2 turn each function into one load or store plus a bswap (movbe on x86).
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t


cdef inline int32_t load_be32(const unsigned char* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline int64_t load_be64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>load_be32(p) << 32) | <uint32_t>load_be32(p + 4))


cdef inline void store_be32(unsigned char* p, int32_t value) noexcept nogil:
    cdef uint32_t v = <uint32_t>value
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void store_be64(unsigned char* p, int64_t value) noexcept nogil:
    cdef uint64_t v = <uint64_t>value
    store_be32(p, <int32_t>(v >> 32))
    store_be32(p + 4, <int32_t>v)


cdef inline uint16_t load_be16(const unsigned char* p) noexcept nogil:
    return <uint16_t>((p[0] << 8) | p[1])


cdef inline void store_be16(unsigned char* p, uint16_t value) noexcept nogil:
    p[0] = <unsigned char>(value >> 8)
    p[1] = <unsigned char>value
