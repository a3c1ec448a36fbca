# cython: cdivision=True, auto_pickle=False
# Mapped files (docs/store-format.md#mapped-files): a log is a run of fixed-size files, contiguous by start offset,
# each named by that offset as 20 digits and mapped read-write. CommitLog files are allocated on disk
# whole when made (a SYNC_FLUSH put must not wait for block allocation); ConsumeQueue files are sparse,
# allocated page by page ahead of the writer (a queue that holds one message costs a page, not 6 MB).
#
#   store_path/                          (the CommitLog: commitlog/; a ConsumeQueue: consumequeue/T/q/)
#   +----------------------+----------------------+-----+----------------------+
#   | 00000000000000000000 | 00000000001073741824 | ... | newest file          |
#   | [0, S)               | [S, 2S)              |     | [kS, (k+1)S)         |   S = mapped_file_size
#   +----------------------+----------------------+-----+----------------------+
#
#   one file:  0 .............. flushed_position ............. wrote_position ........ file_size
#              |  on disk (msync'd)  |  written, in the page cache  |  zeros (fallocated)   |
#   sparse:    0 ............................................. wrote_position ... allocated_position ... file_size
#              |  written                                           | zeros, allocated | a hole (no blocks)  |
#
# A write through a mapping into a hole on a full disk is a SIGBUS, not an error: every write into a
# sparse file goes below allocated_position, which allocate_to moves with posix_fallocate (ENOSPC
# comes back as an OSError there, before anything is written).
#
# Lifetime: mapped memory stays valid while any memoryview handed out still references its mmap
# object. Closing a file (the store's shutdown) or deleting it (retention, truncation: under the
# store's put lock) unmaps it and closes the descriptor the mmap object keeps at once, unless a
# view handed out still uses the mapping: then both go with the last such view, so readers never
# see memory unmapped under them; a msync holds the mmap itself for the time it runs without the
# GIL (MappedFile.flush_to). A closed file's ``base`` is NULL and its queue holds no file any more:
# compiled code finds nothing to read rather than freed memory.
import logging
import mmap as _mmap_module
import os

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release
from libc.errno cimport errno
from libc.stdint cimport int64_t
from libc.string cimport memset, strerror
from posix.fcntl cimport O_CREAT, O_RDWR, open as c_open
from posix.unistd cimport close as c_close

from rmq.includes.system cimport MADV_NORMAL, MADV_RANDOM, MADV_WILLNEED, MS_SYNC, madvise, msync

from rmq.errors import StoreError

log = logging.getLogger("rmq.store")

cdef extern from "<fcntl.h>" nogil:
    int posix_fallocate(int fd, long offset, long length)
    int fallocate(int fd, int mode, long offset, long length)
    enum:
        FALLOC_FL_KEEP_SIZE
        FALLOC_FL_PUNCH_HOLE

cdef extern from *:
    """
    #ifndef MADV_POPULATE_WRITE
    #define MADV_POPULATE_WRITE 23
    #endif
    """
    int MADV_POPULATE_WRITE


cdef inline void populate(void* at, size_t n, bint read_around) noexcept nogil:
    """Fault [at, at + n) in for writing with read-around off for the time of it (``prefault``).

    The range is first read into the page cache as one readahead of just that range (WILLNEED):
    it comes in large folios, where the faults with read-around off would allocate and zero it page
    by page. A fresh fallocated MiB cost 0.83-0.86 ms of CPU so, 1.02-1.13 ms without (this VM, ext4);
    the writer still finds every page mapped writable."""
    madvise(at, n, MADV_WILLNEED)
    if read_around:
        madvise(at, n, MADV_RANDOM)
    madvise(at, n, MADV_POPULATE_WRITE)
    if read_around:
        madvise(at, n, MADV_NORMAL)


# a CommitLog file made ahead of its writer carries this until the writer's roll-over renames it
MADE_AHEAD_SUFFIX = ".ahead"


def file_name_of(int64_t offset):
    """A store file's name: its start offset as 20 digits."""
    return "%020d" % offset


cdef class MappedFile:
    """One fixed-size store file, mapped read-write.

    Allocated whole at creation (posix_fallocate), writes through the mapping cannot hit a full
    disk (a SIGBUS): running out of space shows up here, as an OSError, when the file is created.
    A ``sparse`` file gets only its size; its writer calls ``allocate_to`` before each write past
    ``allocated_position``, where running out of space is the OSError instead.
    """

    def __init__(self, str path, int64_t file_from_offset, Py_ssize_t file_size, bint create=False,
                 bint sparse=False):
        cdef int fd, rc = 0
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.sparse = sparse
        fd = c_open(path.encode(), O_RDWR | (O_CREAT if create else 0), 0o644)
        if fd < 0:
            raise OSError(errno, f"cannot open {path}: {strerror(errno).decode()}")
        try:
            if create:
                os.ftruncate(fd, 0)     # a new file starts as zeros, whatever was left at this name
            if os.fstat(fd).st_size != file_size:
                if not create:
                    log.warning("%s is %d bytes, expected %d: resizing it", path, os.fstat(fd).st_size, file_size)
                os.ftruncate(fd, file_size)
            if not sparse:
                with nogil:
                    rc = posix_fallocate(fd, 0, file_size)
                self.allocated_position = file_size
            if rc != 0:
                raise OSError(rc, f"cannot allocate {file_size} bytes for {path}: {strerror(rc).decode()}")
            self._mmap = _mmap_module.mmap(fd, file_size)
        except BaseException:
            c_close(fd)
            if create:
                os.unlink(path)
            raise
        c_close(fd)
        PyObject_GetBuffer(self._mmap, &self._buffer, PyBUF_WRITABLE)
        self._has_buffer = True
        self.base = <unsigned char*>self._buffer.buf
        self._view = memoryview(self._mmap)
        if create:
            # No read-around while it is written: a fault of its writer, the broker's event loop,
            # would read 8 MiB (read_ahead_kb here) of zeros around it into the page cache, a new
            # ConsumeQueue whole (~2.3 ms per roll-over, a topic's queues rolling together), a
            # CommitLog chunk the prefault thread has not reached yet 15-20 ms. Read-around comes
            # back for its readers when the writer moves on (``read_around_on``).
            madvise(self.base, file_size, MADV_RANDOM)
            self.read_around = False
        else:
            self.read_around = True

    def __dealloc__(self):
        self._release()

    cdef void _release(self) noexcept:
        if self._has_buffer:
            PyBuffer_Release(&self._buffer)
            self._has_buffer = False
        self.base = NULL

    cdef void read_around_on(self) noexcept:
        """Its writer moved on to the next file: page faults read around again, for its readers."""
        if not self.read_around and self.base != NULL:
            madvise(self.base, self.file_size, MADV_NORMAL)
            self.read_around = True

    cdef int allocate_to(self, Py_ssize_t position) except -1:
        """Give [allocated_position, ``position``) blocks on disk, rounded up to whole pages, so
        writes through the mapping below ``position`` cannot fault; OSError (ENOSPC) otherwise.
        Steps double from a page up to ALLOCATE_STEP_MAX: a queue that holds one message costs a
        page, a busy one a syscall per 64 KiB (open, fallocate, close: ~17 us; page by page they
        added ~0.06 us of CPU to a 0.45 us put of a 100-byte message without keys).
        On a disk too full for the step, just what ``position`` needs is asked for.
        A file loaded from disk starts at 0: allocating pages it already has costs no space."""
        cdef Py_ssize_t start = self.allocated_position, end, step
        cdef int fd, rc
        if position <= start:
            return 0
        position = (position + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        step = min(max(start, PAGE_SIZE), ALLOCATE_STEP_MAX)
        end = max(position, start + step)
        fd = c_open(self.path.encode(), O_RDWR, 0)
        if fd < 0:
            raise OSError(errno, f"cannot open {self.path}: {strerror(errno).decode()}")
        with nogil:
            rc = posix_fallocate(fd, start, min(end, self.file_size) - start)
            if rc != 0 and end > position:
                end = position
                rc = posix_fallocate(fd, start, min(end, self.file_size) - start)
        c_close(fd)
        end = min(end, self.file_size)
        if rc != 0:
            raise OSError(rc, f"cannot allocate bytes {start}..{end} of {self.path}: {strerror(rc).decode()}")
        self.allocated_position = end
        return 0

    cdef void prefault(self, Py_ssize_t position) noexcept:
        """Populate the chunk after the one ``position`` is in (no-op where unsupported).

        Only that chunk: its pages are faulted in with read-around off (MADV_RANDOM for the time of
        the populate, then MADV_NORMAL, which merges the mapping back into one). With read-around
        on, the first fault of a chunk reads a whole readahead window around it (read_ahead_kb:
        8 MiB on this VM's disk); for a fallocated file that is 8 MiB of unwritten extents zeroed
        by memset in one fault, 15-20 ms of the writer's (the event loop's) CPU once every 8 MiB
        of CommitLog: issue 12's open-loop stall. Chunk by chunk the same zeroing costs ~1.3 ms
        at most, and readers of cold data keep their readahead."""
        cdef Py_ssize_t start = (position // PREFAULT_CHUNK + 1) * PREFAULT_CHUNK
        cdef Py_ssize_t n = PREFAULT_CHUNK
        if start >= self.file_size or self.base == NULL:
            return
        if start + n > self.file_size:
            n = self.file_size - start
        with nogil:
            populate(self.base + start, n, self.read_around)

    cdef int prefault_to(self, Py_ssize_t position) except -1:
        """``prefault``'s work for every chunk from the writer's up to ``position``, on a thread
        other than the writer's (the store's rmq-store-prefault), the GIL released around each
        chunk: the writer, an event loop, then finds its pages there instead of stalling on them
        (~1 ms per MiB on this VM, up to ~10 ms on a busy host, once per MiB of CommitLog). The
        mapping is held as in ``flush_to``: a file destroyed meanwhile stays mapped until the end."""
        cdef Py_ssize_t start = max(self.prefaulted_position, self.wrote_position & ~(<Py_ssize_t>PREFAULT_CHUNK - 1))
        cdef Py_ssize_t end = min(position, self.file_size), n
        cdef object mapping = self._mmap
        cdef Py_buffer held
        cdef char* base
        if start >= end or mapping is None:
            return 0
        PyObject_GetBuffer(mapping, &held, PyBUF_SIMPLE)
        base = <char*>held.buf
        try:
            while start < end:
                n = min(<Py_ssize_t>PREFAULT_CHUNK, end - start)
                with nogil:
                    populate(base + start, n, self.read_around)
                start += n
                self.prefaulted_position = start
        finally:
            PyBuffer_Release(&held)
        return 0

    cdef object view(self, Py_ssize_t position, Py_ssize_t size):
        if self._view is None:
            raise StoreError(f"{self.path} is closed: its store was shut down")
        return self._view[position:position + size]

    cdef int flush_to(self, Py_ssize_t position) except -1:
        """msync [flushed_position, position) with the GIL released."""
        cdef Py_ssize_t start = self.flushed_position & ~(PAGE_SIZE - 1)
        # The mapping must outlive the msync. While the GIL is released, retention may destroy()
        # this file (it holds the put lock; a flush thread does not) and drop the file's references
        # to its mmap: with no other reference, the mmap would be unmapped, and the address range
        # possibly reused, under the msync. ``mapping`` keeps the mmap object alive and the buffer
        # export ``held`` keeps it mapped (an exported mmap refuses close()) until the msync returned.
        cdef object mapping = self._mmap
        cdef Py_buffer held
        cdef int rc
        if position <= self.flushed_position or mapping is None:
            return 0
        PyObject_GetBuffer(mapping, &held, PyBUF_SIMPLE)
        try:
            with nogil:
                rc = msync(<unsigned char*>held.buf + start, position - start, MS_SYNC)
                if rc != 0:
                    rc = errno      # before the release below can change errno
        finally:
            PyBuffer_Release(&held)
        if rc != 0:
            raise OSError(rc, f"msync of {self.path} failed: {strerror(rc).decode()}")
        self.flushed_position = position
        return 0

    @property
    def wrote_position(self):
        return self.wrote_position

    @property
    def flushed_position(self):
        return self.flushed_position

    @property
    def is_full(self):
        return self.wrote_position == self.file_size

    def read(self, Py_ssize_t position, Py_ssize_t size):
        """A zero-copy view of [position, position + size) (bounded by what was written)."""
        if position < 0 or size < 0 or position + size > self.wrote_position:
            raise ValueError(f"range {position}+{size} outside the {self.wrote_position} bytes written")
        return self.view(position, size)

    def close(self):
        """Unmap the file and close its descriptor, now or, while a view handed out still uses the
        mapping, when the last such view goes; reads then raise StoreError. Idempotent."""
        cdef object mapping = self._mmap
        self._release()
        self._view = None
        self._mmap = None
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:
                pass    # exported to a reader (or a msync under way): unmapped when it lets go

    @property
    def closed(self):
        return self._mmap is None

    def destroy(self):
        """Close and unlink the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def zero_from(self, Py_ssize_t position):
        """Zero [position, end): whole pages are punched out (and re-allocated unless the file is
        sparse), so stale bytes past a cut can never be mistaken for records later."""
        cdef Py_ssize_t page_end = (position + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        # the punch goes to the end of the last page: ext4 keeps (zeroed) a partial last block that
        # a punch stops at the file's size short of
        cdef Py_ssize_t punch_end = (self.file_size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        cdef int fd, rc = 0
        if self.base == NULL:
            raise StoreError(f"{self.path} is closed: its store was shut down")
        if page_end > self.file_size:
            page_end = self.file_size
        memset(self.base + position, 0, page_end - position)
        if page_end < self.file_size:
            fd = c_open(self.path.encode(), O_RDWR, 0)
            if fd < 0:
                raise OSError(errno, f"cannot open {self.path}")
            with nogil:
                rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, page_end, punch_end - page_end)
                if rc != 0:
                    rc = errno
                elif not self.sparse:
                    rc = posix_fallocate(fd, page_end, self.file_size - page_end)
            c_close(fd)
            if rc != 0:  # no hole punching here: zero through the mapping instead
                memset(self.base + page_end, 0, self.file_size - page_end)
            elif self.sparse and self.allocated_position > page_end:
                self.allocated_position = page_end

    def __repr__(self):
        return f"<MappedFile {self.path} wrote={self.wrote_position} flushed={self.flushed_position}>"


cdef class MappedFileQueue:
    """The files of one log (the CommitLog, or one ConsumeQueue), contiguous by start offset;
    ``sparse`` files (MappedFile) are allocated by their writer as it goes."""

    def __init__(self, str store_path, Py_ssize_t mapped_file_size, bint sparse=False):
        if mapped_file_size <= 0:
            raise ValueError(f"mapped file size {mapped_file_size} must be positive")
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.sparse = sparse
        self.files = []
        self.flushed_where = 0

    def load(self):
        """Map the files found on disk. Files with foreign names are ignored; only the newest run of
        contiguous files is kept (a gap means the older ones cannot be read consistently)."""
        if not os.path.isdir(self.store_path):
            os.makedirs(self.store_path, exist_ok=True)
            return
        offsets = []
        for name in os.listdir(self.store_path):
            if len(name) == 20 and name.isdigit():
                offsets.append(int(name))
            elif name.endswith(MADE_AHEAD_SUFFIX) and name[:20].isdigit():
                os.unlink(os.path.join(self.store_path, name))  # made ahead, never written
            else:
                log.warning("ignoring %s in %s: not a store file name", name, self.store_path)
        offsets.sort()
        start = 0
        for i in range(1, len(offsets)):
            if offsets[i] != offsets[i - 1] + self.mapped_file_size:
                log.error("%s: gap between %020d and %020d; keeping only the files from %020d",
                          self.store_path, offsets[i - 1], offsets[i], offsets[i])
                start = i
        for i, offset in enumerate(offsets):
            path = os.path.join(self.store_path, file_name_of(offset))
            if i < start or offset % self.mapped_file_size:
                log.error("%s: moving aside %s", self.store_path, path)
                os.replace(path, path + ".bad")
                continue
            mf = MappedFile(path, offset, self.mapped_file_size, False, self.sparse)
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            self.files.append(mf)
        if self.files:
            self.flushed_where = (<MappedFile>self.files[-1]).file_from_offset + self.mapped_file_size

    cdef MappedFile last_file(self):
        cdef Py_ssize_t n = len(self.files)
        return <MappedFile>self.files[n - 1] if n else None

    cdef MappedFile create_file(self, int64_t start_offset):
        cdef MappedFile previous = self.last_file()
        os.makedirs(self.store_path, exist_ok=True)
        mf = MappedFile(os.path.join(self.store_path, file_name_of(start_offset)), start_offset,
                        self.mapped_file_size, True, self.sparse)
        if not self.files:
            self.flushed_where = start_offset
        else:
            previous.read_around_on()
        self.files.append(mf)
        return mf

    cdef MappedFile find_by_offset(self, int64_t offset):
        cdef MappedFile first
        cdef Py_ssize_t index
        if not self.files or offset < 0:
            return None
        first = self.files[0]
        index = (offset - first.file_from_offset) // self.mapped_file_size
        if offset < first.file_from_offset or index >= len(self.files):
            return None
        return self.files[index]

    cdef int64_t min_offset(self) noexcept:
        if not self.files:
            return 0
        return (<MappedFile>self.files[0]).file_from_offset

    cdef int64_t max_offset(self) noexcept:
        cdef MappedFile last
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    cdef int flush(self, int least_pages) except -1:
        """Make everything written durable (only if >= least_pages dirty pages, or a file is full)."""
        cdef MappedFile mf
        cdef Py_ssize_t target
        if self.flushed_where < self.min_offset():
            self.flushed_where = self.min_offset()
        mf = self.find_by_offset(self.flushed_where)
        if mf is None:
            mf = self.last_file()
            if mf is None or self.flushed_where > mf.file_from_offset:
                return 0
        while True:
            target = mf.wrote_position
            if (least_pages > 0 and target < mf.file_size
                    and (target // PAGE_SIZE) - (mf.flushed_position // PAGE_SIZE) < least_pages):
                return 0
            if target > mf.flushed_position:
                mf.flush_to(target)
                self.flush_count += 1
            self.flushed_where = mf.file_from_offset + target
            if target < mf.file_size:
                return 0
            mf = self.find_by_offset(mf.file_from_offset + mf.file_size)
            if mf is None:
                return 0

    cdef int truncate(self, int64_t offset) except -1:
        """Forget everything at or past ``offset``: later files go, the tail of its file is zeroed."""
        cdef MappedFile mf
        while self.files:
            mf = self.files[-1]
            if mf.file_from_offset >= offset and len(self.files) > 1 or mf.file_from_offset > offset:
                mf.destroy()
                self.files.pop()
                continue
            if mf.file_from_offset + mf.file_size > offset:
                mf.zero_from(offset - mf.file_from_offset)
                mf.wrote_position = offset - mf.file_from_offset
                if mf.flushed_position > mf.wrote_position:
                    mf.flushed_position = mf.wrote_position
            break
        if self.flushed_where > offset:
            self.flushed_where = offset
        return 0

    @property
    def mapped_files(self):
        """The files, oldest first (a copy of the list)."""
        return list(self.files)

    def get_min_offset(self):
        return self.min_offset()

    def get_max_offset(self):
        return self.max_offset()

    def get_flushed_where(self):
        return self.flushed_where

    def find_file(self, int64_t offset):
        return self.find_by_offset(offset)

    def flush_pages(self, int least_pages=0):
        self.flush(least_pages)
        return self.flushed_where

    def truncate_to(self, int64_t offset):
        self.truncate(offset)

    def delete_first_file(self):
        """Delete the oldest file (never the last one). True if one went."""
        cdef MappedFile mf
        if len(self.files) <= 1:
            return False
        mf = self.files.pop(0)
        mf.destroy()
        if self.flushed_where < self.min_offset():
            self.flushed_where = self.min_offset()
        return True

    def close(self):
        """Close every file (MappedFile.close), keeping them on disk; the queue holds none from
        now on. Idempotent."""
        files, self.files = self.files, []
        for mf in files:
            (<MappedFile>mf).close()

    def destroy(self):
        for mf in self.files:
            (<MappedFile>mf).destroy()
        self.files = []
        self.flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

