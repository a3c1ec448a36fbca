# cython: cdivision=True, auto_pickle=False
# The ConsumeQueue (per topic and queue id, an index into the CommitLog) and the checkpoint file
# (docs/store-format.md#consumequeue-entry). Named offsets are in _consume_queue.pxd; rmq.store.layout mirrors them.
#
#   ConsumeQueue entry n, at byte 20 n of the queue's log (big-endian, 20 bytes)
#   +--------------------------+--------------+--------------------------+
#   | commitLogOffset      i64 | size     i32 | tagsCode             i64 |
#   0                          8              12                         20
#   size 0x7FFFFFFF: a blank entry (the queue starts past offset 0); tagsCode: Java
#   String.hashCode of TAGS, or the deliver time (ms) of a delayed message
#
#   checkpoint (one 4 KiB page, big-endian)
#   +----------------------------+----------------------------+----------------------------+-----+
#   | physicMsgTimestamp     i64 | logicsMsgTimestamp     i64 | indexMsgTimestamp      i64 | ... |
#   0                            8                            16                           24    4096
#
# Writers hold the store's put lock (puts dispatch here; retention and recovery cut files).
import mmap as _mmap_module
import os

from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memset

from rmq.includes.endian cimport load_be32, load_be64, store_be32, store_be64
from rmq.store._mapped_file cimport MappedFile, MappedFileQueue

from rmq.errors import StoreError

# Python-visible copy of the layout enums, compared with rmq.store.layout by the tests.
LAYOUT = {
    "CQ_COMMITLOG_OFFSET": CQ_COMMITLOG_OFFSET, "CQ_SIZE": CQ_SIZE, "CQ_TAGS_CODE": CQ_TAGS_CODE,
    "CQ_STORE_UNIT_SIZE": CQ_STORE_UNIT_SIZE, "CQ_BLANK_SIZE": CQ_BLANK_SIZE,
    "CHECKPOINT_PHYSIC_TIMESTAMP": CHECKPOINT_PHYSIC_TIMESTAMP,
    "CHECKPOINT_LOGICS_TIMESTAMP": CHECKPOINT_LOGICS_TIMESTAMP,
    "CHECKPOINT_INDEX_TIMESTAMP": CHECKPOINT_INDEX_TIMESTAMP,
    "CHECKPOINT_FILE_SIZE": CHECKPOINT_FILE_SIZE,
}


cdef class ConsumeQueue:
    """Per (topic, queue id) index into the CommitLog: 20-byte entries, entry n at byte 20 n."""

    def __init__(self, str topic, int queue_id, str store_path, Py_ssize_t mapped_file_size):
        self.topic = topic
        self.queue_id = queue_id
        mapped_file_size -= mapped_file_size % CQ_STORE_UNIT_SIZE
        # sparse: a topic made by one send costs its queues a page each, not 6,000,000 bytes each
        # (RocketMQ's files of this kind are sparse too); _write_at allocates ahead of the writer
        self.files = MappedFileQueue(os.path.join(store_path, topic, str(queue_id)), mapped_file_size, True)
        self.min_logic_offset = 0
        self.next_queue_offset = 0
        self.max_physic_offset = 0

    def load(self):
        """Map the files and find the last valid entry (offset >= 0 and size > 0) in the newest ones."""
        cdef MappedFile mf
        cdef const unsigned char* e
        cdef Py_ssize_t pos, index, last
        cdef int64_t offset
        cdef int32_t size
        self.files.load()
        files = self.files.files
        if not files:
            return
        self.min_logic_offset = (<MappedFile>files[0]).file_from_offset
        # Scan from three files before the last one that holds an entry. Files are created (and
        # sized) before their entries are flushed, and flushes go file after file: after a power
        # loss the newest files may be all zeros and the one before them cut mid-way. Starting
        # among the zero files would take their start for the end, with a hole of zero entries
        # before it that re-dispatch never fills.
        last = len(files) - 1
        while last > 0 and load_be32((<MappedFile>files[last]).base + CQ_SIZE) <= 0:
            last -= 1
        index = max(0, last - 2)
        end = (<MappedFile>files[index]).file_from_offset
        for mf in files[index:]:
            pos = 0
            while pos + CQ_STORE_UNIT_SIZE <= mf.file_size:
                e = mf.base + pos
                offset = load_be64(e + CQ_COMMITLOG_OFFSET)
                size = load_be32(e + CQ_SIZE)
                if offset < 0 or size <= 0:
                    break
                if size != CQ_BLANK_SIZE:
                    self.max_physic_offset = offset + size
                pos += CQ_STORE_UNIT_SIZE
            end = mf.file_from_offset + pos
            if pos < mf.file_size:
                break
        self.files.truncate(end)
        self.files.flushed_where = end
        for mf in self.files.files:
            mf.flushed_position = mf.wrote_position
        self.next_queue_offset = self.max_offset()

    cdef int64_t max_offset(self) noexcept:
        return self.files.max_offset() // CQ_STORE_UNIT_SIZE

    cdef int reserve(self, Py_ssize_t entries) except -1:
        """Make sure files exist, with blocks on disk, for ``entries`` more entries before the
        CommitLog is written, so a full disk refuses the message instead of leaving it undispatched."""
        cdef MappedFile last = self.files.last_file()
        cdef int64_t need_end = (self.next_queue_offset + entries) * CQ_STORE_UNIT_SIZE
        cdef int64_t start
        if last is not None and need_end <= last.file_from_offset + last.allocated_position:
            return 0
        if last is None:
            start = self.next_queue_offset * CQ_STORE_UNIT_SIZE
            last = self.files.create_file(start - start % self.files.mapped_file_size)
            self.min_logic_offset = start
        while last.file_from_offset + last.file_size < need_end:
            last.allocate_to(last.file_size)
            last = self.files.create_file(last.file_from_offset + last.file_size)
        last.allocate_to(need_end - last.file_from_offset)
        return 0

    cdef int put_entry(self, int64_t phy_offset, int32_t size, int64_t tags_code,
                       int64_t queue_offset) except -1:
        cdef int64_t expected = queue_offset * CQ_STORE_UNIT_SIZE
        cdef int64_t current = self.files.max_offset()
        cdef MappedFile mf
        cdef unsigned char* e
        if self.files.last_file() is not None and expected < current:
            return 0      # already dispatched (re-dispatch after recovery)
        if self.files.last_file() is None:
            self.next_queue_offset = queue_offset
            self.reserve(1)
            current = self.files.max_offset()
        while current < expected:
            # a hole before this entry (the queue starts past 0): blank entries keep entry n at byte 20 n
            self._write_at(current, 0, CQ_BLANK_SIZE, 0)
            current += CQ_STORE_UNIT_SIZE
        self._write_at(expected, phy_offset, size, tags_code)
        self.max_physic_offset = phy_offset + size
        self.next_queue_offset = queue_offset + 1
        return 0

    cdef int _write_at(self, int64_t position, int64_t phy_offset, int32_t size,
                              int64_t tags_code) except -1:
        cdef MappedFile mf = self.files.last_file()
        cdef unsigned char* e
        if mf is None or position >= mf.file_from_offset + mf.file_size:
            mf = self.files.create_file(position - position % self.files.mapped_file_size)
        if mf.file_from_offset + mf.wrote_position != position:
            raise RuntimeError(f"{self.topic}/{self.queue_id}: writing at {position}, file at "
                               f"{mf.file_from_offset + mf.wrote_position}")
        if mf.wrote_position + CQ_STORE_UNIT_SIZE > mf.allocated_position:
            # puts reserved this already; a re-dispatch (recovery, a slave) gets ENOSPC here
            mf.allocate_to(mf.wrote_position + CQ_STORE_UNIT_SIZE)
        e = mf.base + mf.wrote_position
        store_be64(e + CQ_COMMITLOG_OFFSET, <uint64_t>phy_offset)    # commitLogOffset
        store_be32(e + CQ_SIZE, <uint32_t>size)                      # size
        store_be64(e + CQ_TAGS_CODE, <uint64_t>tags_code)            # tagsCode
        mf.wrote_position += CQ_STORE_UNIT_SIZE
        return 0

    cdef const unsigned char* entry(self, int64_t queue_offset) noexcept:
        cdef int64_t position = queue_offset * CQ_STORE_UNIT_SIZE
        cdef MappedFile mf = self.files.find_by_offset(position)
        if mf is None or position - mf.file_from_offset + CQ_STORE_UNIT_SIZE > mf.wrote_position:
            return NULL
        return mf.base + (position - mf.file_from_offset)

    def get_entry(self, int64_t queue_offset):
        """(commitLogOffset, size, tagsCode) of one entry, or None."""
        cdef const unsigned char* e = self.entry(queue_offset)
        if e == NULL:
            return None
        return (load_be64(e + CQ_COMMITLOG_OFFSET), load_be32(e + CQ_SIZE), load_be64(e + CQ_TAGS_CODE))

    def read_entries(self, int64_t queue_offset, Py_ssize_t max_entries):
        """Zero-copy view of up to ``max_entries`` raw entries from ``queue_offset`` (one file at most)."""
        cdef int64_t position = queue_offset * CQ_STORE_UNIT_SIZE
        cdef MappedFile mf = self.files.find_by_offset(position)
        cdef Py_ssize_t start, n
        if mf is None:
            return None
        start = position - mf.file_from_offset
        n = min(mf.wrote_position - start, max_entries * CQ_STORE_UNIT_SIZE)
        return mf.view(start, n) if n > 0 else None

    @property
    def min_offset(self):
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def max_offset_in_queue(self):
        return self.max_offset()

    @property
    def max_physic_offset(self):
        return self.max_physic_offset

    @property
    def mapped_file_queue(self):
        return self.files

    def truncate_dirty(self, int64_t phy_offset):
        """Drop the entries that point at or past ``phy_offset`` (the CommitLog was cut there)."""
        cdef MappedFile mf
        cdef Py_ssize_t pos
        cdef int64_t offset
        cdef int32_t size
        cdef const unsigned char* e
        while self.files.files:
            mf = self.files.files[-1]
            pos = 0
            while pos < mf.wrote_position:
                e = mf.base + pos
                offset = load_be64(e + CQ_COMMITLOG_OFFSET)
                size = load_be32(e + CQ_SIZE)
                if size != CQ_BLANK_SIZE and offset >= phy_offset:
                    break
                if size != CQ_BLANK_SIZE:
                    self.max_physic_offset = offset + size
                pos += CQ_STORE_UNIT_SIZE
            if pos == 0 and len(self.files.files) > 1:
                mf.destroy()
                self.files.files.pop()
                continue
            if pos < mf.wrote_position:
                memset(mf.base + pos, 0, mf.wrote_position - pos)
                mf.wrote_position = pos
                mf.flushed_position = min(mf.flushed_position, pos)
                self.files.flushed_where = min(self.files.flushed_where, mf.file_from_offset + pos)
            break
        self.next_queue_offset = self.max_offset()
        if self.min_logic_offset > self.files.max_offset():
            self.min_logic_offset = self.files.max_offset()

    def correct_min_offset(self, int64_t min_phy_offset):
        """Move the min offset past entries whose CommitLog files are gone."""
        cdef MappedFile mf
        cdef Py_ssize_t pos
        cdef const unsigned char* e
        for mf in self.files.files:
            pos = max(0, self.min_logic_offset - mf.file_from_offset)
            while pos < mf.wrote_position:
                e = mf.base + pos
                if load_be32(e + CQ_SIZE) != CQ_BLANK_SIZE and load_be64(e + CQ_COMMITLOG_OFFSET) >= min_phy_offset:
                    self.min_logic_offset = mf.file_from_offset + pos
                    return
                pos += CQ_STORE_UNIT_SIZE
        self.min_logic_offset = self.files.max_offset()

    def delete_expired_files(self, int64_t min_phy_offset):
        """Delete files whose every entry points below ``min_phy_offset`` (never the last file).
        Returns how many went."""
        cdef MappedFile mf
        cdef const unsigned char* e
        deleted = 0
        while len(self.files.files) > 1:
            mf = self.files.files[0]
            if mf.wrote_position < mf.file_size:
                break
            e = mf.base + mf.file_size - CQ_STORE_UNIT_SIZE
            if load_be64(e + CQ_COMMITLOG_OFFSET) + load_be32(e + CQ_SIZE) > min_phy_offset:
                break
            self.files.delete_first_file()
            deleted += 1
        self.correct_min_offset(min_phy_offset)
        return deleted

    def flush(self, int least_pages=0):
        self.files.flush(least_pages)

    def close(self):
        """Close its files (the store shuts down); they stay on disk."""
        self.files.close()

    def destroy(self):
        self.files.destroy()

    def __repr__(self):
        return f"<ConsumeQueue {self.topic}/{self.queue_id} [{self.min_offset}, {self.max_offset()})>"


# ---------------------------------------------------------------------------------------------
# checkpoint

cdef class StoreCheckpoint:
    """The ``checkpoint`` file: how far each log was known durable, as store timestamps (ms)."""

    def __init__(self, str path):
        self.path = path
        with open(path, "a+b") as f:
            if os.fstat(f.fileno()).st_size != CHECKPOINT_FILE_SIZE:
                f.truncate(CHECKPOINT_FILE_SIZE)
            # blocks on disk now: a write through the mapping on a full disk would be a SIGBUS
            os.posix_fallocate(f.fileno(), 0, CHECKPOINT_FILE_SIZE)
            self._mmap = _mmap_module.mmap(f.fileno(), CHECKPOINT_FILE_SIZE)
        PyObject_GetBuffer(self._mmap, &self._buffer, PyBUF_WRITABLE)
        self._has_buffer = True
        self.base = <unsigned char*>self._buffer.buf

    def __dealloc__(self):
        if self._has_buffer:
            PyBuffer_Release(&self._buffer)

    cdef unsigned char* field(self, Py_ssize_t at) except NULL:
        if self.base == NULL:
            raise StoreError(f"checkpoint {self.path} is closed: its store was shut down")
        return self.base + at

    @property
    def physic_msg_timestamp(self):
        return load_be64(self.field(CHECKPOINT_PHYSIC_TIMESTAMP))

    @physic_msg_timestamp.setter
    def physic_msg_timestamp(self, int64_t value):
        store_be64(self.field(CHECKPOINT_PHYSIC_TIMESTAMP), <uint64_t>value)

    @property
    def logics_msg_timestamp(self):
        return load_be64(self.field(CHECKPOINT_LOGICS_TIMESTAMP))

    @logics_msg_timestamp.setter
    def logics_msg_timestamp(self, int64_t value):
        store_be64(self.field(CHECKPOINT_LOGICS_TIMESTAMP), <uint64_t>value)

    @property
    def index_msg_timestamp(self):
        return load_be64(self.field(CHECKPOINT_INDEX_TIMESTAMP))

    @index_msg_timestamp.setter
    def index_msg_timestamp(self, int64_t value):
        store_be64(self.field(CHECKPOINT_INDEX_TIMESTAMP), <uint64_t>value)

    def flush(self):
        self.field(0)
        self._mmap.flush()

    def close(self):
        """Unmap the file and close its descriptor; reads and writes then raise StoreError.
        Idempotent."""
        if self._has_buffer:
            PyBuffer_Release(&self._buffer)
            self._has_buffer = False
        self.base = NULL
        self._mmap.close()

