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


cdef class FastLane:
    # A server's compiled shortcut for the requests that carry the traffic (the broker's send lane):
    # 1 when it served the frame (its answer, if any, appended to ``out``), 0 to leave the frame to
    # the processors. ``peer`` is what ``connect`` answered for the connection.
    cdef int serve(self, object peer, const unsigned char* header, Py_ssize_t header_len,
                   const unsigned char* body, Py_ssize_t body_len, bytearray out) except -1


cdef class FrameDecoder:
    cdef readonly Py_ssize_t max_frame_size
    cdef bytearray _buffer
    cdef object _error
    # set for one feed (FrameDecoder.feed's lane arguments)
    cdef FastLane _lane
    cdef object _lane_peer
    cdef bytearray _lane_out
    cdef Py_ssize_t _lane_out_limit
    # frames the lanes served, in all (what the channel counts as progress besides commands)
    cdef readonly unsigned long long lane_served

    cdef int _decode(self, const unsigned char* data, Py_ssize_t length, list commands,
                     Py_ssize_t* consumed) except -1
