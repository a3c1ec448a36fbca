# cython: auto_pickle=False
"""The IndexFile: query messages by key (docs/store-format.md#indexfile), byte for byte as RocketMQ 4.x writes it.

One file, all integers big-endian, S = hash slots (default 5,000,000), N = entries (20,000,000):

    offset               size  field
    ------------------------------------------------------------------------------------------
    0                       8  beginTimestamp   store time of the first entry (ms)
    8                       8  endTimestamp     store time of the last entry (ms)
    16                      8  beginPhyOffset   CommitLog offset of the first entry
    24                      8  endPhyOffset     CommitLog offset of the last entry
    32                      4  hashSlotCount    slots in use
    36                      4  indexCount       next entry number; starts at 1 (entry 0 unused)
    ------------------------------------------------------------------------------------------
    40 + 4s                 4  slot s           newest entry number of bucket s (0: empty)
    ------------------------------------------------------------------------------------------
    40 + 4S + 20n           4  keyHash          |String.hashCode("topic#key")|   entry n
                  + 4       8  phyOffset        CommitLog offset of the message
                  + 12      4  timeDiff         seconds from beginTimestamp to the store time
                  + 16      4  prevIndex        older entry of the same bucket (0: end of chain)
    ------------------------------------------------------------------------------------------
    file size = 40 + 4S + 20N (420,000,040 bytes by default), named by creation time
    yyyyMMddHHmmssSSS; a file is full once indexCount reaches N, and the next one is made.

The key hash is Java's String.hashCode of "topic#key" (rmq.includes.hash), Math.abs'd, as RocketMQ's
IndexFile.indexKeyHashMethod does: RocketMQ's own tools can then read our files, and the hash is
stable across processes. It is computed incrementally (topic, "#", key) so no joined string is
built. The hash only picks a bucket and filters the chain: callers re-check the real key.

Files are fallocated at creation (a write through the mapping cannot SIGBUS on a full disk), then
mapped shared; every put writes its entry, then the slot, then the header, so a killed process
leaves a consistent file in the page cache. flush() msyncs, with the GIL released.
"""

import datetime
import logging
import os
import re
import threading

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.errno cimport errno
from libc.stdint cimport INT32_MAX, INT32_MIN, int32_t, int64_t, uint32_t
from libc.string cimport memchr, memset
from posix.mman cimport MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE, mmap, msync, munmap

from rmq.includes.endian cimport load_be32, load_be64, store_be32, store_be64
from rmq.includes.hash cimport java_hash_update, java_string_hash

from rmq.errors import StoreError
from rmq.protocol.message import KEY_SEPARATOR as _KEY_SEPARATOR

log = logging.getLogger(__name__)

# The layout constants of _index.pxd, for the test that checks rmq.store.index mirrors them.
LAYOUT = {
    "INDEX_HEADER_SIZE": INDEX_HEADER_SIZE,
    "HEADER_BEGIN_TIMESTAMP": HEADER_BEGIN_TIMESTAMP,
    "HEADER_END_TIMESTAMP": HEADER_END_TIMESTAMP,
    "HEADER_BEGIN_PHY_OFFSET": HEADER_BEGIN_PHY_OFFSET,
    "HEADER_END_PHY_OFFSET": HEADER_END_PHY_OFFSET,
    "HEADER_HASH_SLOT_COUNT": HEADER_HASH_SLOT_COUNT,
    "HEADER_INDEX_COUNT": HEADER_INDEX_COUNT,
    "HASH_SLOT_SIZE": HASH_SLOT_SIZE,
    "INDEX_ENTRY_SIZE": INDEX_ENTRY_SIZE,
    "ENTRY_KEY_HASH": ENTRY_KEY_HASH,
    "ENTRY_PHY_OFFSET": ENTRY_PHY_OFFSET,
    "ENTRY_TIME_DIFF": ENTRY_TIME_DIFF,
    "ENTRY_PREV_INDEX": ENTRY_PREV_INDEX,
    "INVALID_INDEX": INVALID_INDEX,
    "DEFAULT_MAX_HASH_SLOT_NUM": DEFAULT_MAX_HASH_SLOT_NUM,
    "DEFAULT_MAX_INDEX_NUM": DEFAULT_MAX_INDEX_NUM,
}

FILE_NAME_FORMAT = "%Y%m%d%H%M%S"   # + 3 digits of milliseconds
_FILE_NAME = re.compile(r"^\d{17}$")
cdef unsigned char KEY_SEPARATOR_BYTE = ord(_KEY_SEPARATOR)   # between the keys of KEYS


def index_file_size(int32_t hash_slot_num, int32_t index_num):
    """Bytes of an IndexFile with these slot and entry counts."""
    return INDEX_HEADER_SIZE + <int64_t>hash_slot_num * HASH_SLOT_SIZE + <int64_t>index_num * INDEX_ENTRY_SIZE


def java_hash(str text):
    """Java's String.hashCode of ``text`` (signed 32-bit), computed by rmq.includes.hash over its UTF-8."""
    cdef bytes data = text.encode()
    return java_string_hash(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline uint32_t topic_hash_prefix(const unsigned char* topic, Py_ssize_t topic_len) noexcept nogil:
    # the running String.hashCode state after "topic#", continued with each key ('#' is ASCII, so
    # one String.hashCode step with its code)
    return java_hash_update(0, topic, topic_len) * 31 + <unsigned char>c'#'


cdef inline uint32_t finish_key_hash(uint32_t h) noexcept nogil:
    # Math.abs(int), and Math.abs(Integer.MIN_VALUE) stays negative: RocketMQ maps it to 0
    cdef int32_t signed = <int32_t>h
    if signed < 0:
        signed = -signed if signed != INT32_MIN else 0
    return <uint32_t>signed


cdef uint32_t index_key_hash_bytes(bytes topic, bytes key):
    cdef uint32_t h = topic_hash_prefix(<const unsigned char*>PyBytes_AS_STRING(topic),
                                        PyBytes_GET_SIZE(topic))
    return finish_key_hash(java_hash_update(h, <const unsigned char*>PyBytes_AS_STRING(key),
                                            PyBytes_GET_SIZE(key)))


def index_key_hash(str topic, str key):
    """The keyHash stored for ``key`` of ``topic``: abs(String.hashCode("topic#key")), 0 for MIN_VALUE."""
    return index_key_hash_bytes(topic.encode(), key.encode())


cdef class IndexFile:
    """One mapped IndexFile. Use IndexService; this class is exposed for tools and tests."""

    def __cinit__(self):
        self.base = NULL

    def __init__(self, str path, int32_t hash_slot_num, int32_t index_num, bint create=False,
                 int64_t carried_phy_offset=0, int64_t carried_timestamp=0):
        """Map ``path`` (``create``: a new file, whose empty header carries the previous file's end)."""
        cdef int fd
        cdef void* addr
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.size = index_file_size(hash_slot_num, index_num)
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        else:
            fd = os.open(path, os.O_RDWR)
        try:
            if create:
                try:
                    os.posix_fallocate(fd, 0, self.size)
                except OSError:
                    os.unlink(path)
                    raise
            elif os.fstat(fd).st_size != self.size:
                raise ValueError(f"index file {path} is {os.fstat(fd).st_size} bytes, expected "
                                 f"{self.size} for {hash_slot_num} slots and {index_num} entries")
            addr = mmap(NULL, <size_t>self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            if addr == MAP_FAILED:
                raise OSError(errno, f"mmap of index file {path} failed: {os.strerror(errno)}")
            self.base = <unsigned char*>addr
        finally:
            os.close(fd)
        if create:
            # new files continue where the previous one ended, so the re-dispatch check and the
            # time filter work before the first put (RocketMQ's IndexFile constructor does the same)
            self.begin_phy_offset = self.end_phy_offset = carried_phy_offset
            self.begin_timestamp = self.end_timestamp = carried_timestamp
            self.hash_slot_count = 0
            self.index_count = 1
            self.flushed_index_count = 0
            self.write_header()
        else:
            self.read_header()
            self.flushed_index_count = self.index_count

    def __dealloc__(self):
        self.close()

    cdef void write_header(self) noexcept nogil:
        store_be64(self.base + HEADER_BEGIN_TIMESTAMP, self.begin_timestamp)
        store_be64(self.base + HEADER_END_TIMESTAMP, self.end_timestamp)
        store_be64(self.base + HEADER_BEGIN_PHY_OFFSET, self.begin_phy_offset)
        store_be64(self.base + HEADER_END_PHY_OFFSET, self.end_phy_offset)
        store_be32(self.base + HEADER_HASH_SLOT_COUNT, self.hash_slot_count)
        store_be32(self.base + HEADER_INDEX_COUNT, self.index_count)

    cdef read_header(self):
        self.begin_timestamp = load_be64(self.base + HEADER_BEGIN_TIMESTAMP)
        self.end_timestamp = load_be64(self.base + HEADER_END_TIMESTAMP)
        self.begin_phy_offset = load_be64(self.base + HEADER_BEGIN_PHY_OFFSET)
        self.end_phy_offset = load_be64(self.base + HEADER_END_PHY_OFFSET)
        self.hash_slot_count = load_be32(self.base + HEADER_HASH_SLOT_COUNT)
        self.index_count = load_be32(self.base + HEADER_INDEX_COUNT)
        if self.index_count == 0:
            self.index_count = 1   # a file made but never written (RocketMQ's IndexHeader.load)
        if not (1 <= self.index_count <= self.index_num
                and 0 <= self.hash_slot_count <= self.hash_slot_num
                and self.begin_timestamp <= self.end_timestamp
                and self.begin_phy_offset <= self.end_phy_offset):
            raise ValueError(
                f"index file {self.path} has an inconsistent header: indexCount {self.index_count} "
                f"(expected 1..{self.index_num}), hashSlotCount {self.hash_slot_count} (expected "
                f"0..{self.hash_slot_num}), timestamps {self.begin_timestamp}..{self.end_timestamp}, "
                f"offsets {self.begin_phy_offset}..{self.end_phy_offset}")

    cdef inline unsigned char* slot_at(self, uint32_t key_hash) noexcept nogil:
        return self.base + INDEX_HEADER_SIZE + <Py_ssize_t>(key_hash % <uint32_t>self.hash_slot_num) * HASH_SLOT_SIZE

    cdef inline unsigned char* entry_at(self, int32_t n) noexcept nogil:
        return (self.base + INDEX_HEADER_SIZE + <Py_ssize_t>self.hash_slot_num * HASH_SLOT_SIZE
                + <Py_ssize_t>n * INDEX_ENTRY_SIZE)

    @property
    def is_full(self):
        return self.index_count >= self.index_num

    cdef bint put(self, uint32_t key_hash, int64_t phy_offset, int64_t store_timestamp) noexcept nogil:
        """Add one entry; False when the file is full (the caller rolls over)."""
        cdef int32_t n = self.index_count
        cdef int64_t time_diff
        if n >= self.index_num or self.base == NULL:
            return False
        cdef unsigned char* slot = self.slot_at(key_hash)
        cdef int32_t prev = load_be32(slot)
        if prev <= INVALID_INDEX or prev >= n:
            prev = INVALID_INDEX
        if n == 1:
            # the first entry defines the file's start; its own timeDiff is then 0 (RocketMQ sets
            # the begin only after writing the entry, so its first timeDiff is against the
            # previous file's end: a quirk not worth copying)
            self.begin_timestamp = store_timestamp
            self.begin_phy_offset = phy_offset
        time_diff = (store_timestamp - self.begin_timestamp) // 1000
        if time_diff < 0:
            time_diff = 0
        elif time_diff > INT32_MAX:
            time_diff = INT32_MAX
        cdef unsigned char* entry = self.entry_at(n)
        store_be32(entry + ENTRY_KEY_HASH, <int32_t>key_hash)
        store_be64(entry + ENTRY_PHY_OFFSET, phy_offset)
        store_be32(entry + ENTRY_TIME_DIFF, <int32_t>time_diff)
        store_be32(entry + ENTRY_PREV_INDEX, prev)
        store_be32(slot, n)
        if prev == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = n + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self.write_header()
        return True

    cdef bint is_time_matched(self, int64_t begin_ms, int64_t end_ms) noexcept nogil:
        # the file's [begin, end] and the query's overlap
        return begin_ms <= self.end_timestamp and end_ms >= self.begin_timestamp

    cdef Py_ssize_t select_phy_offsets(self, uint32_t key_hash, int64_t* out, Py_ssize_t found,
                                       Py_ssize_t max_num, int64_t begin_ms, int64_t end_ms) noexcept nogil:
        """Add to out[found:max_num] the offsets of entries with this hash stored in [begin, end],
        newest first; returns the new ``found``. Touches no Python object, so no other thread can
        unmap the file during the walk."""
        if self.base == NULL:
            return found
        cdef const unsigned char* entry
        cdef int32_t n = load_be32(self.slot_at(key_hash))
        cdef int32_t prev, time_diff
        cdef int64_t stored_at
        while INVALID_INDEX < n < self.index_count and found < max_num:
            entry = self.entry_at(n)
            time_diff = load_be32(entry + ENTRY_TIME_DIFF)
            if time_diff < 0:
                break
            stored_at = self.begin_timestamp + <int64_t>time_diff * 1000
            if <uint32_t>load_be32(entry + ENTRY_KEY_HASH) == key_hash and begin_ms <= stored_at <= end_ms:
                out[found] = load_be64(entry + ENTRY_PHY_OFFSET)
                found += 1
            if stored_at < begin_ms:
                break
            prev = load_be32(entry + ENTRY_PREV_INDEX)
            # a chain only ever points to older entries; anything else is a torn or foreign file,
            # and stopping there also rules out loops (RocketMQ only checks prev != self)
            if prev >= n:
                break
            n = prev
        return found

    cdef int msync(self) except -1:
        cdef int rc
        cdef int32_t count = self.index_count
        if self.base == NULL or count == self.flushed_index_count:
            return 0
        with nogil:
            rc = msync(self.base, <size_t>self.size, MS_SYNC)
        if rc != 0:
            raise OSError(errno, f"msync of index file {self.path} failed: {os.strerror(errno)}")
        self.flushed_index_count = count
        return 0

    cdef void close(self) noexcept:
        if self.base != NULL:
            munmap(self.base, <size_t>self.size)
            self.base = NULL

    def destroy(self):
        """Unmap and delete the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


cdef object parse_file_name(str name):
    """The creation time a file name encodes, or None if it is not a yyyyMMddHHmmssSSS name."""
    if not _FILE_NAME.match(name):
        return None
    try:
        created = datetime.datetime.strptime(name[:14], FILE_NAME_FORMAT)
    except ValueError:
        return None
    return created.replace(microsecond=int(name[14:]) * 1000)


cdef str format_file_name(object created):
    return created.strftime(FILE_NAME_FORMAT) + f"{created.microsecond // 1000:03d}"


cdef class IndexService:
    """The IndexFiles of a store, oldest first: put keys of stored messages, query offsets by key.

    build_index (from C), put_key and query hold the GIL throughout and never release it, so they
    are atomic with respect to each other; flush releases it around msync, and together with
    delete_expired_files and shutdown (the only places that unmap) is serialized by ``files_lock``.
    """

    def __init__(self, str store_path, int32_t max_hash_slot_num=DEFAULT_MAX_HASH_SLOT_NUM,
                 int32_t max_index_num=DEFAULT_MAX_INDEX_NUM):
        if max_hash_slot_num < 1 or max_index_num < 2:
            raise StoreError(f"index files need at least 1 hash slot and 2 entries (entry 0 is "
                             f"unused), got {max_hash_slot_num} slots and {max_index_num} entries")
        os.makedirs(store_path, exist_ok=True)
        self.store_path = store_path
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self.index_files = []
        self.files_lock = threading.Lock()

    def load(self, bint last_exit_ok, int64_t index_checkpoint_ms=0):
        """Map the existing files, oldest first. After a crash (not ``last_exit_ok``) the files that
        end after the checkpoint are deleted: they may have lost entries, and re-dispatch of the
        CommitLog from the checkpoint rebuilds them. Unusable files are removed, never fatal."""
        cdef IndexFile f
        self.shutdown()
        for name in sorted(os.listdir(self.store_path)):
            path = os.path.join(self.store_path, name)
            if parse_file_name(name) is None or not os.path.isfile(path):
                log.warning("ignoring %s in the index directory: not an index file name "
                            "(yyyyMMddHHmmssSSS)", path)
                continue
            try:
                f = IndexFile(path, self.max_hash_slot_num, self.max_index_num)
            except ValueError as exc:
                log.warning("removing unusable index file: %s", exc)
                try:
                    os.unlink(path)
                except OSError as unlink_exc:
                    log.warning("could not remove %s: %s", path, unlink_exc)
                continue
            except OSError as exc:
                log.warning("skipping index file %s: %s", path, exc)
                continue
            if f.index_count <= 1:
                log.info("removing index file %s: it holds no entry", path)
                f.destroy()
            elif not last_exit_ok and f.end_timestamp > index_checkpoint_ms:
                log.warning("removing index file %s after a crash: it ends at %d, after the "
                            "checkpoint %d; re-dispatch rebuilds it", path, f.end_timestamp,
                            index_checkpoint_ms)
                f.destroy()
            else:
                self.index_files.append(f)

    cdef IndexFile create_file(self):
        cdef IndexFile prev = self.index_files[-1] if self.index_files else None
        created = datetime.datetime.now()
        created = created.replace(microsecond=created.microsecond // 1000 * 1000)
        if prev is not None:
            # names order the files: a second file in the same millisecond (or after the clock
            # stepped back) takes the next free millisecond
            prev_created = parse_file_name(os.path.basename(prev.path))
            if created <= prev_created:
                created = prev_created + datetime.timedelta(milliseconds=1)
        path = os.path.join(self.store_path, format_file_name(created))
        f = IndexFile(path, self.max_hash_slot_num, self.max_index_num, create=True,
                      carried_phy_offset=prev.end_phy_offset if prev is not None else 0,
                      carried_timestamp=prev.end_timestamp if prev is not None else 0)
        self.index_files.append(f)
        log.info("created index file %s", path)
        return f

    cdef IndexFile writable_file(self):
        if self.index_files:
            return self.index_files[-1]
        return self.create_file()

    cdef int put_hashed(self, uint32_t key_hash, int64_t phy_offset, int64_t store_timestamp) except -1:
        if not self.writable_file().put(key_hash, phy_offset, store_timestamp):
            # full: a new file always takes at least one entry
            self.create_file().put(key_hash, phy_offset, store_timestamp)
        return 0

    cdef bint has_room(self, Py_ssize_t entries) noexcept:
        cdef IndexFile newest
        if not self.index_files:
            return False
        newest = <IndexFile>self.index_files[-1]
        # an empty file has room: a message with more keys than a file holds rolls over in put_hashed
        return newest.index_count + entries <= newest.index_num or newest.index_count <= 1

    cdef int build_index(self, const unsigned char* topic, Py_ssize_t topic_len,
                         const unsigned char* uniq_key, Py_ssize_t uniq_key_len,
                         const unsigned char* keys, Py_ssize_t keys_len,
                         int64_t phy_offset, int64_t store_timestamp) except -1:
        cdef IndexFile newest
        cdef uint32_t prefix
        cdef const unsigned char* token
        cdef const unsigned char* token_end
        cdef const unsigned char* keys_end = keys + keys_len
        if self.index_files:
            newest = self.index_files[-1]
            # RocketMQ skips only offsets below endPhyOffset, so re-dispatching the last indexed
            # message indexes it twice. Here a file's end is the last message indexed, in it or,
            # for a file still empty (a put made it before writing), in the file before: an equal
            # offset is already indexed. Only the first file, empty, has indexed nothing.
            if phy_offset <= newest.end_phy_offset and (newest.index_count > 1 or len(self.index_files) > 1):
                return 0
        prefix = topic_hash_prefix(topic, topic_len)
        if uniq_key_len > 0:
            self.put_hashed(finish_key_hash(java_hash_update(prefix, uniq_key, uniq_key_len)),
                            phy_offset, store_timestamp)
        token = keys
        while token < keys_end:
            token_end = <const unsigned char*>memchr(token, KEY_SEPARATOR_BYTE, keys_end - token)
            if token_end == NULL:
                token_end = keys_end
            if token_end > token:
                self.put_hashed(finish_key_hash(java_hash_update(prefix, token, token_end - token)),
                                phy_offset, store_timestamp)
            token = token_end + 1
        return 0

    def build_index_py(self, bytes topic, bytes uniq_key, bytes keys, int64_t phy_offset,
                       int64_t store_timestamp):
        """build_index from Python (tests, tools): ``uniq_key`` and ``keys`` may be empty."""
        self.build_index(<const unsigned char*>PyBytes_AS_STRING(topic), PyBytes_GET_SIZE(topic),
                         <const unsigned char*>PyBytes_AS_STRING(uniq_key), PyBytes_GET_SIZE(uniq_key),
                         <const unsigned char*>PyBytes_AS_STRING(keys), PyBytes_GET_SIZE(keys),
                         phy_offset, store_timestamp)

    def build_index_batch(self, bytes topic, list uniq_keys, int64_t first_phy_offset,
                          int64_t phy_offset_step, int64_t store_timestamp):
        """build_index for one message per entry of ``uniq_keys`` (bytes), message i at
        first_phy_offset + i * phy_offset_step: the store's dispatch path, minus Python calls,
        for benchmarks."""
        cdef bytes key
        cdef int64_t phy_offset = first_phy_offset
        for key in uniq_keys:
            self.build_index(<const unsigned char*>PyBytes_AS_STRING(topic), PyBytes_GET_SIZE(topic),
                             <const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                             NULL, 0, phy_offset, store_timestamp)
            phy_offset += phy_offset_step

    def put_key(self, str topic, str key, int64_t phy_offset, int64_t store_timestamp):
        """Index ``topic#key`` at ``phy_offset`` (no re-dispatch check); rolls over when full."""
        self.put_hashed(index_key_hash_bytes(topic.encode(), key.encode()), phy_offset, store_timestamp)
        return True

    def query(self, str topic, str key, int max_num, int64_t begin_ms, int64_t end_ms):
        """Up to ``max_num`` offsets of messages stored in [begin_ms, end_ms] whose key hash matches
        ``topic#key``, newest first. The hash may collide: the caller re-checks the real key.
        Entries keep their store time to the second (from the file's beginTimestamp), so the
        range is as coarse at its edges, as in RocketMQ."""
        cdef IndexFile f
        cdef int64_t* found_offsets
        cdef Py_ssize_t found = 0
        cdef Py_ssize_t entries = 0
        cdef uint32_t key_hash = index_key_hash_bytes(topic.encode(), key.encode())
        files = list(self.index_files)
        for f in files:
            entries += f.index_count - 1
        if max_num > entries:
            max_num = entries
        if max_num <= 0 or begin_ms > end_ms:
            return []
        found_offsets = <int64_t*>PyMem_Malloc(max_num * sizeof(int64_t))
        if found_offsets == NULL:
            raise MemoryError()
        try:
            for f in reversed(files):
                if f.is_time_matched(begin_ms, end_ms):
                    found = f.select_phy_offsets(key_hash, found_offsets, found, max_num, begin_ms, end_ms)
                # older files end before this one begins
                if found >= max_num or f.begin_timestamp < begin_ms:
                    break
            return [found_offsets[i] for i in range(found)]
        finally:
            PyMem_Free(found_offsets)

    def flush(self):
        """msync every file written since its last flush; returns the endTimestamp all of the index
        up to then covers (the store's checkpoint indexMsgTimestamp), 0 when there is no file."""
        cdef IndexFile f
        with self.files_lock:
            files = list(self.index_files)
            if not files:
                return 0
            # puts made while msync runs (GIL released) are left for the next flush
            covered = files[-1].end_timestamp
            for f in files:
                f.msync()
            return covered

    def delete_expired_files(self, int64_t min_phy_offset):
        """Delete the oldest files wholly below ``min_phy_offset`` (the CommitLog's min offset),
        never the newest one; returns how many went."""
        cdef IndexFile f
        cdef Py_ssize_t expired = 0
        with self.files_lock:
            for f in self.index_files[:-1]:
                if f.end_phy_offset >= min_phy_offset:
                    break
                expired += 1
            for f in self.index_files[:expired]:
                log.info("deleting index file %s: it ends at offset %d, below the CommitLog's "
                         "min offset %d", f.path, f.end_phy_offset, min_phy_offset)
                f.destroy()
            del self.index_files[:expired]
        return expired

    def truncate_to(self, int64_t phy_offset):
        """Forget the entries of messages at or past CommitLog offset ``phy_offset`` (the store cut
        its CommitLog there): files holding only such entries go, the newest kept file loses its
        tail. Entries are in offset order, so only that one file is cut; each dropped entry hands its
        hash slot back to the older entry it chained to. Returns how many entries went."""
        cdef IndexFile f
        cdef int32_t n, keep, prev
        cdef uint32_t key_hash
        cdef unsigned char* entry
        cdef unsigned char* slot
        cdef Py_ssize_t dropped = 0
        with self.files_lock:
            while self.index_files:
                f = self.index_files[-1]
                keep = f.index_count
                while keep > 1 and load_be64(f.entry_at(keep - 1) + ENTRY_PHY_OFFSET) >= phy_offset:
                    keep -= 1
                if keep == f.index_count:
                    break
                dropped += f.index_count - keep
                if keep == 1:
                    log.info("deleting index file %s: every entry is past offset %d", f.path, phy_offset)
                    f.destroy()
                    self.index_files.pop()
                    continue
                # newest first: a slot pointing at a dropped entry falls back along its chain
                for n in range(f.index_count - 1, keep - 1, -1):
                    entry = f.entry_at(n)
                    key_hash = <uint32_t>load_be32(entry + ENTRY_KEY_HASH)
                    slot = f.slot_at(key_hash)
                    if load_be32(slot) == n:
                        prev = load_be32(entry + ENTRY_PREV_INDEX)
                        store_be32(slot, prev)
                        if prev == INVALID_INDEX:
                            f.hash_slot_count -= 1
                    memset(entry, 0, INDEX_ENTRY_SIZE)
                entry = f.entry_at(keep - 1)
                f.index_count = keep
                f.end_phy_offset = load_be64(entry + ENTRY_PHY_OFFSET)
                # to the second, as entries keep their time
                f.end_timestamp = f.begin_timestamp + <int64_t>load_be32(entry + ENTRY_TIME_DIFF) * 1000
                f.write_header()
                f.flushed_index_count = 0
                break
        return dropped

    def shutdown(self):
        """Flush and unmap every file. The service may be loaded again."""
        cdef IndexFile f
        with self.files_lock:
            files, self.index_files = self.index_files, []
            for f in files:
                f.msync()
                f.close()

    @property
    def max_phy_offset(self):
        """endPhyOffset of the newest file: messages up to there are indexed (0: nothing is)."""
        cdef IndexFile newest
        if not self.index_files:
            return 0
        newest = self.index_files[-1]
        return newest.end_phy_offset

    @property
    def files(self):
        """Paths of the index files, oldest first."""
        return [f.path for f in self.index_files]

    def __repr__(self):
        return f"IndexService({self.store_path!r}, {len(self.index_files)} files, max_phy_offset={self.max_phy_offset})"
