# Remoting frame codec, compiled (the layout table opens _codec.pyx; codec_py.py is the pure twin).

cdef enum:
    TOTAL_LENGTH_SIZE = 4       # int32 total_length, not counting itself
    HEADER_LENGTH_SIZE = 4      # int32 (serialize_type << 24) | header_length
    PREFIX_SIZE = 8             # both length fields
    HEADER_LENGTH_MASK = 0xFFFFFF
    SERIALIZE_TYPE_SHIFT = 24


cdef class RemotingCommand:
    cdef public int code
    cdef public object language
    cdef public int version
    cdef public int opaque
    cdef public int flag
    cdef public object remark
    cdef public object ext_fields
    cdef public object body
    cdef public object cached_header


cdef class FrameDecoder:
    cdef readonly Py_ssize_t max_frame_size
    cdef bytearray _buffer
    cdef object _error

    cdef int _decode(self, const unsigned char* data, Py_ssize_t length, list commands,
                     Py_ssize_t* consumed) except -1
