# Mapped files: one store file mapped read-write, and the contiguous run of them that makes a log
# (the CommitLog, or one ConsumeQueue). The drawing opens _mapped_file.pyx.
from libc.stdint cimport int64_t
from cpython.buffer cimport Py_buffer


cdef enum:
    PAGE_SIZE = 4096
    # the writer populates the page tables of the next chunk of a file when it enters one: one
    # madvise per chunk instead of a page fault per page (MADV_POPULATE_WRITE, Linux >= 5.14)
    PREFAULT_CHUNK = 1 << 20
    # the largest step by which a sparse file's writer allocates blocks ahead of itself
    ALLOCATE_STEP_MAX = 64 * 1024


cdef class MappedFile:
    cdef readonly str path
    cdef readonly int64_t file_from_offset
    cdef readonly Py_ssize_t file_size
    # bytes written (only the writer advances it) and bytes known to be on disk
    cdef Py_ssize_t wrote_position
    cdef Py_ssize_t flushed_position
    cdef unsigned char* base
    cdef object _mmap
    cdef object _view
    cdef Py_buffer _buffer
    cdef bint _has_buffer
    # store timestamp of the newest record written here (CommitLog files; checkpoint bookkeeping)
    cdef int64_t last_store_timestamp
    # a sparse file has blocks on disk for [0, allocated_position) at least (allocate_to); a
    # fallocated one for all of it
    cdef readonly bint sparse
    cdef Py_ssize_t allocated_position
    # the page tables of [.., prefaulted_position) were populated off the writer's thread
    # (prefault_to); a writer entering a chunk calls prefault_waker instead of prefault when set
    cdef readonly Py_ssize_t prefaulted_position
    cdef public object prefault_waker
    # page faults read around (MADV_NORMAL); off (MADV_RANDOM) while a file made here is written
    cdef bint read_around

    cdef void read_around_on(self) noexcept
    cdef int allocate_to(self, Py_ssize_t position) except -1
    cdef void prefault(self, Py_ssize_t position) noexcept
    cdef int prefault_to(self, Py_ssize_t position) except -1
    cdef object view(self, Py_ssize_t position, Py_ssize_t size)
    cdef int flush_to(self, Py_ssize_t position) except -1
    cdef void _release(self) noexcept


cdef class MappedFileQueue:
    cdef readonly str store_path
    cdef readonly Py_ssize_t mapped_file_size
    cdef readonly bint sparse
    cdef list files
    # everything below this offset is on disk
    cdef int64_t flushed_where
    # msync calls made (benchmarks report flushes per second)
    cdef readonly int64_t flush_count

    cdef MappedFile last_file(self)
    cdef MappedFile create_file(self, int64_t start_offset)
    cdef MappedFile find_by_offset(self, int64_t offset)
    cdef int64_t min_offset(self) noexcept
    cdef int64_t max_offset(self) noexcept
    cdef int flush(self, int least_pages) except -1
    cdef int truncate(self, int64_t offset) except -1
