# cython: cdivision=True, auto_pickle=False
# The CommitLog (docs/store-format.md#commitlog-record): every topic's records appended back to back, sequential writes
# only, into mapped files of mappedFileSizeCommitLog bytes. A record is rmq.protocol._record's.
#
#   CommitLog file k: S bytes, named by its start offset kS as 20 digits
#   +----------+----------+-----+----------+-------------------------------------+
#   | record   | record   | ... | record   | [i32 remaining][i32 0xCBD43194] ... |
#   +----------+----------+-----+----------+-------------------------------------+
#   kS         each record's PHYSICALOFFSET is kS + its position    EOF marker: the next record did
#                                                                   not fit, it opens file k + 1
#
# Every record leaves room for an EOF marker behind it, so a roll-over always has room to write one.
# Appends and roll-overs run under the store's put lock (rmq.store._store.StoreCore._lock).
import logging
import os
import threading

from libc.stdint cimport int32_t, int64_t, uint32_t

from rmq.includes.endian cimport load_be32, load_be64
from rmq.store._group_commit cimport GroupCommit
from rmq.store._ha_stream cimport HAStream
from rmq.store._mapped_file cimport MappedFile, MappedFileQueue

import rmq.store._mapped_file as _mapped_file
from rmq.protocol._record cimport (END_FILE_MIN_BLANK_LENGTH, MESSAGE_MAGIC_CODE, REC_FIXED_OVERHEAD, REC_MAGIC,
                                   REC_STORETIMESTAMP, REC_TOTALSIZE, write_end_of_file)

log = logging.getLogger("rmq.store")

# how long a roll-over waits for the next file being made ahead (RocketMQ's AllocateMappedFileService
# waits 5 s for its allocation) before making it itself
MADE_AHEAD_WAIT_SECONDS = 5.0


cdef class CommitLog(MappedFileQueue):
    """The CommitLog's files: appends that roll over to a new file with an EOF marker, and records
    found by their physical offset."""

    def __init__(self, str store_path, Py_ssize_t mapped_file_size, GroupCommit group_commit=None):
        MappedFileQueue.__init__(self, store_path, mapped_file_size)
        self.group_commit = group_commit
        self.making_ahead = threading.Lock()

    cdef MappedFile writable_file(self, Py_ssize_t size, int* status):
        """The file the next ``size`` bytes go to, rolling over (EOF marker) when they do not fit;
        None, with ``status`` set, when there is none."""
        cdef MappedFile mf = self.last_file()
        cdef MappedFile next_file
        cdef Py_ssize_t remaining
        if size + END_FILE_MIN_BLANK_LENGTH > self.mapped_file_size:
            status[0] = MESSAGE_ILLEGAL
            return None
        try:
            if mf is None:
                mf = self.create_file(0)
                self.publish_files()
                self._hand_prefault(mf)
                return mf
            if mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH <= mf.file_size:
                return mf
            # create the next file before marking this one full: if the disk is full, nothing changes
            next_file = self._roll_over_file(mf.file_from_offset + mf.file_size)
        except OSError as e:
            log.error("cannot create a CommitLog file: %s", e)
            status[0] = CREATE_MAPPED_FILE_FAILED
            return None
        self.publish_files()
        self._hand_prefault(next_file)
        remaining = mf.file_size - mf.wrote_position
        if remaining > 0:
            write_end_of_file(mf.base + mf.wrote_position, <int32_t>remaining)
        rmq_release_fence()
        mf.wrote_position = mf.file_size
        return next_file

    cdef MappedFile _roll_over_file(self, int64_t offset):
        """The file that starts at ``offset``: the one made ahead, or made now (OSError when it
        cannot be). Never two at once: a roll-over while the prefault thread makes that file waits
        for it, and that thread waits for a roll-over, so that two fallocates on a nearly full disk
        cannot both fail, the put be refused, where one alone would have succeeded."""
        cdef MappedFile next_file
        if not self.making_ahead.acquire(True, MADE_AHEAD_WAIT_SECONDS):
            return self.create_file(offset)  # its maker is stuck (a stalled disk)
        try:
            next_file = self.take_made_ahead(offset)
            if next_file is None:
                next_file = self.create_file(offset)
            return next_file
        finally:
            self.making_ahead.release()

    cdef void _hand_prefault(self, MappedFile mf) noexcept:
        """A new last file: the prefault thread, if any, populates its first chunks at once."""
        mf.prefault_waker = self.prefault_waker
        if self.prefault_waker is not None:
            self.prefault_waker()

    def set_prefault_waker(self, waker):
        """``waker()`` (a prefault thread's wakeup) is called instead of populating the next chunk
        whenever the writer enters one, and when a file is made; None: the writer populates."""
        cdef MappedFile mf = self.last_file()
        self.prefault_waker = waker
        if mf is not None:
            mf.prefault_waker = waker

    def prefault_ahead(self, Py_ssize_t chunks):
        """Populate the last file's page tables up to ``chunks`` whole chunks past the writer's
        (off the writer's thread: ``MappedFile.prefault_to``); once the writer is past the middle
        of its file, make the next file ahead, its first ``chunks`` chunks populated."""
        cdef MappedFile mf = self.last_file()
        if mf is None:
            return
        mf.prefault_to(((mf.wrote_position // PREFAULT_CHUNK) + 1 + chunks) * PREFAULT_CHUNK)
        if self.made_ahead is None and mf.wrote_position >= mf.file_size // 2:
            self._make_ahead(chunks)

    cdef int _make_ahead(self, Py_ssize_t chunks) except -1:
        """RocketMQ's AllocateMappedFileService: the file after the last one made (fallocated,
        mapped) and its first chunks populated on this thread, not the writer's; at the roll-over
        the writer renames it in (``take_made_ahead``). Made in the writer's own roll-over it cost
        the broker's event loop 3-6 ms per 1 GiB file (fallocate, mmap, then a first write that
        read around 8 MiB of the new file). It carries a suffix until then, so a crash or a stop
        leaves no empty file in the log (``MappedFileQueue.load`` removes it)."""
        cdef MappedFile made
        cdef MappedFile mf
        cdef int64_t offset
        with self.making_ahead:
            mf = self.last_file()   # again: the writer may have rolled over meanwhile
            if self.made_ahead is not None or mf is None or mf.wrote_position < mf.file_size // 2:
                return 0
            offset = mf.file_from_offset + mf.file_size
            path = os.path.join(self.store_path, _mapped_file.file_name_of(offset)) + _mapped_file.MADE_AHEAD_SUFFIX
            try:
                made = MappedFile(path, offset, self.mapped_file_size, True, False)
            except OSError as e:  # the disk is full, say: the writer's roll-over reports it if it still is
                log.warning("cannot make the next CommitLog file ahead: %s", e)
                return 0
            made.prefault_to(chunks * PREFAULT_CHUNK)
            self.made_ahead = made
        return 0

    cdef MappedFile take_made_ahead(self, int64_t offset):
        """The file made ahead, renamed to its place in the log, if it starts at ``offset``; None
        (and it is removed) otherwise: the log was cut back, or the writer rolled over first."""
        cdef MappedFile made = self.made_ahead
        if made is None:
            return None
        self.made_ahead = None
        if made.file_from_offset != offset:
            made.destroy()
            return None
        path = made.path[: -len(_mapped_file.MADE_AHEAD_SUFFIX)]
        try:
            os.rename(made.path, path)
        except OSError as e:
            log.warning("cannot rename %s into the CommitLog: %s", made.path, e)
            made.destroy()
            return None
        made.path = path
        self.last_file().read_around_on()
        self.files.append(made)
        return made

    def drop_made_ahead(self):
        """Remove the file made ahead, if any (its maker has stopped)."""
        cdef MappedFile made = self.made_ahead
        self.made_ahead = None
        if made is not None:
            made.destroy()

    def close(self):
        """The store shuts down (its writers and flush threads stopped): the file made ahead goes
        (never written), the group commit and the replication stream are shown no file, then
        every file is closed (MappedFile.close): no thread keeps an address unmapped under it."""
        cdef MappedFile mf
        with self.making_ahead:
            self.drop_made_ahead()
            files, self.files = self.files, []
            self.publish_files()
            for mf in files:
                mf.close()

    cdef void publish_files(self):
        """The files changed (a roll-over, retention, truncation): show the group commit and the
        replication stream the new ones."""
        if self.group_commit is not None:
            self.group_commit.publish_files(self.files)
        if self.ha_stream is not None:
            self.ha_stream.publish_files(self.files)

    def attach_ha_stream(self, HAStream stream):
        """Show ``stream`` the files from now on (None: no more); the caller holds the put lock."""
        self.ha_stream = stream
        if stream is not None:
            stream.publish_files(self.files)

    cdef object look_message(self, int64_t phy_offset, Py_ssize_t size):
        """The whole stored record at ``phy_offset`` (zero-copy view), or None. ``size`` >= 0 must
        match its TOTALSIZE."""
        cdef MappedFile mf = self.find_by_offset(phy_offset)
        cdef Py_ssize_t pos
        cdef int32_t total
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        if pos + REC_FIXED_OVERHEAD > mf.wrote_position:
            return None
        total = load_be32(mf.base + pos + REC_TOTALSIZE)                          # 1 TOTALSIZE
        if (<uint32_t>load_be32(mf.base + pos + REC_MAGIC) != MESSAGE_MAGIC_CODE      # 2 MAGIC
                or total < REC_FIXED_OVERHEAD or pos + total > mf.wrote_position
                or (size >= 0 and size != total)):
            return None
        return mf.view(pos, total)

    cdef int64_t store_timestamp_at(self, int64_t phy_offset):
        """STORETIMESTAMP of the record at ``phy_offset``, or -1."""
        cdef MappedFile mf = self.find_by_offset(phy_offset)
        cdef Py_ssize_t pos
        if mf is None:
            return -1
        pos = phy_offset - mf.file_from_offset
        if pos + REC_FIXED_OVERHEAD > mf.wrote_position:
            return -1
        return load_be64(mf.base + pos + REC_STORETIMESTAMP)                      # 11 STORETIMESTAMP
