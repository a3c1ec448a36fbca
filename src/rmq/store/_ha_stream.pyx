# cython: cdivision=True, auto_pickle=False
# The master's replication stream (rmq.store.ha) as a C loop that never takes the GIL, on the thread
# rmq-store-ha-stream: it reads the offset reports of every plain slave and sends each of them
# frames of CommitLog bytes straight from the mappings, so that replicating costs the broker's loop
# thread no GIL hand-off per frame (the HA loop, Python, did: a wake-up every 2 ms under load).
#
#   frame, master -> slave (rmq.protocol.ha)                report, slave -> master
#   +------------------+-------------+--------------+       +------------------+
#   | i64 startOffset  | i32 size    | size bytes   |       | i64 maxOffset    |
#   +------------------+-------------+--------------+       +------------------+
#   0                  8             12 (FRAME_HEADER_SIZE)  0                  8 (REPORT_SIZE)
#   size 0: a heartbeat                                     big-endian, as Java writes them
#
#   HA loop (Python, GIL)                   stream thread (C, no GIL)            put path (GIL)
#   handshake, TLS, cluster auth,           epoll: slaves, wake_fd
#   the first report; then add(fd)    -->   reads reports, checks them,          writes records,
#   closes and logs the slaves whose   <--  sends frames (sendmsg of the          then wrote_position
#   failure notify_fd announced             mappings), heartbeats, drops silent   (release order);
#   TLS slaves: served on the loop          slaves; publishes the best ack    --> an idle stream's
#                                           into the group commit               wake_fd, once
#                                           (SYNC_MASTER)
#
# Every field of StreamState is guarded by its mutex; the thread holds it while it serves the slaves
# and releases it while it waits in epoll. The HA loop and the put path take it without the GIL. The
# thread reads the CommitLog through ``files``, republished by the put path whenever the files
# change (a roll-over, retention, a truncation): a deleted file's mapping stays valid while the
# table holds a view of it, and a table is dropped only once the thread can no longer use it (the
# swap happens under the mutex).
#
# ASYNC_MASTER: while bytes keep coming the thread polls every ``poll_ms`` (a burst of puts costs
# one wake-up, not one each) and reads reports on those polls; after ``idle_polls`` polls that found
# nothing new with every slave caught up it is idle: it watches reports and asks the next put to
# write its wake_fd (``wake_slot``), and wakes at least every ``idle_wait_ms`` (a put that raced
# with going idle is sent then). SYNC_MASTER: the broker's loop writes wake_fd after an iteration
# that stored, reports are watched, each one is published at once.
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset, strerror
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.uio cimport iovec
from posix.unistd cimport close as c_close, read as c_read, write as c_write

from rmq.includes.endian cimport load_be64, store_be32, store_be64
from rmq.includes.system cimport (EFD_CLOEXEC, EFD_NONBLOCK, EPOLL_CLOEXEC, EPOLL_CTL_ADD, EPOLL_CTL_DEL,
                                  EPOLL_CTL_MOD, EPOLLIN, EPOLLOUT, MSG_DONTWAIT, MSG_NOSIGNAL, epoll_create1,
                                  epoll_ctl, epoll_event, epoll_wait, eventfd, msghdr, pthread_mutex_destroy,
                                  pthread_mutex_init, pthread_mutex_lock, pthread_mutex_unlock, recv, sendmsg)
from rmq.store._group_commit cimport (REPLICAS_BEST_SLAVE, REPLICAS_MASTER_ALONE, REPLICAS_SYNC_STATE_SET,
                                     REPLICAS_TOO_FEW, GroupCommit, publish_replicated_to)
from rmq.store._mapped_file cimport MappedFile

# the wire sizes this loop assumes (a test holds them to rmq.protocol.ha's)
FRAME_HEADER_BYTES = FRAME_HEADER_SIZE
REPORT_BYTES = REPORT_SIZE

cdef enum:
    EPOLL_EVENTS = 64
    READ_CHUNK = 4096
    NS_PER_MS = 1000000


cdef inline int64_t now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec


cdef int64_t commit_log_end(StreamState* st) noexcept nogil:
    cdef StreamFile* last
    if st.n_files == 0:
        return 0
    last = &st.files[st.n_files - 1]
    return last.from_offset + rmq_load_acquire_ssize(last.wrote)


cdef int64_t bytes_at(StreamState* st, int64_t offset, int64_t end, int64_t most,
                      const unsigned char** at) noexcept nogil:
    """The CommitLog bytes from ``offset`` within one file, ``most`` at most: how many (``at``
    their address), 0 when none are written yet, -1 when ``offset`` is no longer in the log."""
    cdef int i
    cdef StreamFile* f
    cdef int64_t position, n
    if offset > end:
        return -1
    if offset == end:
        return 0
    for i in range(st.n_files - 1, -1, -1):    # newest first: a slave is mostly near the end
        f = &st.files[i]
        if offset < f.from_offset:
            continue
        position = offset - f.from_offset
        if position >= f.size:
            return 0    # the end of a full file, the next one not in the table yet
        n = rmq_load_acquire_ssize(f.wrote) - position
        if n < 0:
            return -1   # truncated below it
        # puts go on meanwhile: never past the ``end`` this round saw (its next frame starts there)
        if n > end - offset:
            n = end - offset
        at[0] = f.base + position
        return n if n < most else most
    return -1


cdef void set_events(StreamState* st, Slave* s) noexcept nogil:
    """Watch reports unless an ASYNC stream that polls reads them; room to send while frames wait."""
    cdef epoll_event ev
    cdef uint32_t events = (EPOLLIN if st.sync or st.idle else 0) | (EPOLLOUT if s.want_write else 0)
    if events != s.events:
        s.events = events
        ev.events = events
        ev.data.fd = s.fd
        epoll_ctl(st.epoll_fd, EPOLL_CTL_MOD, s.fd, &ev)


cdef void fail(StreamState* st, Slave* s, int failure, int64_t a, int64_t b) noexcept nogil:
    """Stop serving ``s``; the HA loop logs why and closes it (``take_failures``)."""
    cdef uint64_t one = 1
    s.failure = failure
    s.failure_a = a
    s.failure_b = b
    epoll_ctl(st.epoll_fd, EPOLL_CTL_DEL, s.fd, NULL)
    st.failures += 1
    c_write(st.notify_fd, &one, sizeof(one))


cdef void read_reports(StreamState* st, Slave* s, int64_t end, int64_t now) noexcept nogil:
    cdef unsigned char buf[READ_CHUNK]
    cdef ssize_t got, i
    cdef int64_t offset
    while True:
        got = recv(s.fd, buf, READ_CHUNK, MSG_DONTWAIT)
        if got < 0:
            if errno == EINTR:
                continue
            if errno != EAGAIN:
                fail(st, s, READ_FAILED, errno, 0)
            return
        if got == 0:
            fail(st, s, CLOSED_BY_SLAVE, 0, 0)
            return
        s.last_read_ns = now
        for i in range(got):
            s.report[s.report_len] = buf[i]
            s.report_len += 1
            if s.report_len < REPORT_SIZE:
                continue
            s.report_len = 0
            offset = load_be64(s.report)
            if offset < 0 or offset > end:
                fail(st, s, BEYOND_END, offset, end)
                return
            if offset < s.acked:
                fail(st, s, WENT_BACKWARDS, s.acked, offset)
                return
            if offset > s.sent_to:
                fail(st, s, PAST_SENT, offset, s.sent_to)
                return
            s.acked = offset
        if got < READ_CHUNK:
            return


cdef void transfer(StreamState* st, Slave* s, int64_t end, int64_t now) noexcept nogil:
    """Send the frame under way, then new frames, until the socket is full, the slave has every
    byte or this wake-up sent its share."""
    cdef iovec iov[2 * MAX_FRAMES_PER_SEND]
    cdef unsigned char headers[MAX_FRAMES_PER_SEND][FRAME_HEADER_SIZE]
    cdef int64_t starts[MAX_FRAMES_PER_SEND]
    cdef int64_t sizes[MAX_FRAMES_PER_SEND]
    cdef int64_t skips[MAX_FRAMES_PER_SEND]
    cdef const unsigned char* data = NULL
    cdef msghdr msg
    cdef int k, j, n_iov
    cdef int64_t next_offset, size, skip, left, total_sent = 0
    cdef ssize_t n
    while total_sent < st.max_bytes_per_wakeup:
        k = 0
        n_iov = 0
        if s.frame_size >= 0:
            starts[0] = s.frame_start
            sizes[0] = s.frame_size
            skips[0] = s.frame_sent
            k = 1
            next_offset = s.frame_start + s.frame_size
        else:
            next_offset = s.sent_to
        while k < st.frames_per_send:
            size = bytes_at(st, next_offset, end, st.batch_size, &data)
            if size < 0:
                fail(st, s, OFFSET_GONE, next_offset, 0)
                return
            if size == 0:
                break
            starts[k] = next_offset
            sizes[k] = size
            skips[k] = 0
            k += 1
            next_offset += size
        if k == 0:
            break
        for j in range(k):
            skip = skips[j]
            if skip < FRAME_HEADER_SIZE:
                store_be64(headers[j], starts[j])
                store_be32(headers[j] + 8, <int32_t>sizes[j])
                iov[n_iov].iov_base = headers[j] + skip
                iov[n_iov].iov_len = FRAME_HEADER_SIZE - skip
                n_iov += 1
                skip = 0
            else:
                skip -= FRAME_HEADER_SIZE
            if sizes[j] > skip:
                if bytes_at(st, starts[j] + skip, end, sizes[j] - skip, &data) != sizes[j] - skip:
                    fail(st, s, OFFSET_GONE, starts[j] + skip, 0)
                    return
                iov[n_iov].iov_base = <void*>data
                iov[n_iov].iov_len = sizes[j] - skip
                n_iov += 1
        memset(&msg, 0, sizeof(msg))
        msg.msg_iov = iov
        msg.msg_iovlen = n_iov
        n = sendmsg(s.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)
        if n < 0:
            if errno == EINTR:
                continue
            if errno != EAGAIN:
                fail(st, s, SEND_FAILED, errno, 0)
                return
            s.want_write = True
            set_events(st, s)
            return
        s.last_write_ns = now
        total_sent += n
        left = n
        s.frame_size = -1
        for j in range(k):
            if left == 0:
                break
            if starts[j] + sizes[j] > s.sent_to:
                s.sent_to = starts[j] + sizes[j]
            if left < FRAME_HEADER_SIZE + sizes[j] - skips[j]:
                s.frame_start = starts[j]
                s.frame_size = sizes[j]
                s.frame_sent = skips[j] + left
                s.want_write = True     # the socket is full: its room resumes the stream
                set_events(st, s)
                return
            left -= FRAME_HEADER_SIZE + sizes[j] - skips[j]
    s.want_write = total_sent >= st.max_bytes_per_wakeup
    set_events(st, s)


cdef inline int set_member(StreamState* st, int64_t broker_id) noexcept nogil:
    """Where ``broker_id`` is in the sync state set, or -1."""
    cdef int i
    if broker_id < 0:
        return -1
    for i in range(st.set_size):
        if st.set_ids[i] == broker_id:
            return i
    return -1


cdef int64_t set_acked(StreamState* st, int* count) noexcept nogil:
    """Controller mode: how far the sync state set's rule says the CommitLog is replicated: the
    ``set_acks_needed``-th best ack of its brokers (each broker's best connection, this stream's and
    the HA loop's), 0 while fewer of them acked; ``count``: how many of them acked."""
    cdef int64_t acked[MAX_SYNC_STATE_SET]
    cdef int i, j, k
    cdef int64_t best
    cdef Slave* s
    for i in range(st.set_size):
        acked[i] = -1
    for i in range(st.n_slots):
        s = &st.slaves[i]
        if s.fd >= 0 and not s.failure and s.acked >= 0 and s.acks_count:
            j = set_member(st, s.broker_id)
            if j >= 0 and s.acked > acked[j]:
                acked[j] = s.acked
    for i in range(st.n_python_named):
        j = set_member(st, st.python_ids[i])
        if j >= 0 and st.python_acked[i] > acked[j]:
            acked[j] = st.python_acked[i]
    count[0] = 0
    for i in range(st.set_size):
        if acked[i] >= 0:
            count[0] += 1
    if st.set_acks_needed <= 0 or count[0] < st.set_acks_needed:
        return 0
    # the k-th best of a handful: pick the best k times
    best = 0
    for k in range(st.set_acks_needed):
        j = 0
        for i in range(1, st.set_size):
            if acked[i] > acked[j]:
                j = i
        best = acked[j]
        acked[j] = -1
    return best


cdef void publish_acks(StreamState* st, GroupCommit group_commit) noexcept nogil:
    """The slaves' acks (the HA loop's included) into the group commit, SYNC_MASTER only: an
    ASYNC_MASTER's sends wait for no slave, and each ack that moved would wake the completer for
    nothing (an eventfd write every poll; under SYNC_FLUSH the broker's loop, which then takes the
    GIL to complete nothing). Without a sync state set the best ack; with one, what its rule says."""
    cdef int i, count = st.python_count
    cdef int64_t best = st.python_best if st.python_count else 0
    cdef int64_t published
    cdef Slave* s
    for i in range(st.n_slots):
        s = &st.slaves[i]
        if s.fd >= 0 and not s.failure and s.acked >= 0 and s.acks_count:
            count += 1
            if s.acked > best:
                best = s.acked
    published = best
    if st.set_rule != REPLICAS_BEST_SLAVE:
        published = set_acked(st, &count)
    if st.sync and (published != st.published_best or count != st.published_count
                    or st.set_rule != st.published_rule):
        st.published_best = published
        st.published_count = count
        st.published_rule = st.set_rule
        publish_replicated_to(group_commit.state, published, count, st.set_rule)
    # the lag of a slave is timed from the oldest sample past its ack: older ones serve no one
    while st.sample_count > 1 and st.sample_offset[st.sample_first] <= best:
        st.sample_first = (st.sample_first + 1) % LAG_SAMPLES
        st.sample_count -= 1


cdef void add_sample(StreamState* st, int64_t end, int64_t now) noexcept nogil:
    cdef int last
    if st.sample_count:
        last = (st.sample_first + st.sample_count - 1) % LAG_SAMPLES
        if st.sample_offset[last] >= end:
            return
    if st.sample_count == LAG_SAMPLES:
        st.sample_first = (st.sample_first + 1) % LAG_SAMPLES
        st.sample_count -= 1
    last = (st.sample_first + st.sample_count) % LAG_SAMPLES
    st.sample_offset[last] = end
    st.sample_ns[last] = now
    st.sample_count += 1


cdef inline void track_catch_up(Slave* s, int64_t end, int64_t now) noexcept nogil:
    """After ``s``'s reports were read: when it last held everything this CommitLog held. An ack
    of the end seen now proves it for now; one of the end a pending check saw proves it for then
    (under steady puts the end moves on before each ack comes back, so the check, not the end,
    is what a slave that keeps up reaches). A new check is armed once the last one was met."""
    if s.acked >= end:
        s.caught_up_ns = now
        s.check_ns = 0
        return
    if s.check_ns and s.acked >= s.check_end:
        if s.check_ns > s.caught_up_ns:
            s.caught_up_ns = s.check_ns
        s.check_ns = 0
    if not s.check_ns:
        s.check_end = end
        s.check_ns = now


cdef void serve(StreamState* st, GroupCommit group_commit) noexcept nogil:
    cdef int64_t now = now_ns(), end = commit_log_end(st)
    cdef int i
    cdef bint caught_up = True
    cdef Slave* s
    if st.n_slaves:
        add_sample(st, end, now)
    for i in range(st.n_slots):
        s = &st.slaves[i]
        if s.fd < 0 or s.failure:
            continue
        read_reports(st, s, end, now)
        if s.failure:
            continue
        track_catch_up(s, end, now)
        if now - s.last_read_ns > st.housekeeping_ns:
            fail(st, s, SILENT, 0, 0)
            continue
        if s.frame_size < 0 and s.sent_to >= end and now - s.last_write_ns >= st.heartbeat_ns:
            s.frame_start = s.sent_to
            s.frame_size = 0    # a heartbeat: a header alone
            s.frame_sent = 0
        transfer(st, s, end, now)
        if not s.failure and (s.frame_size >= 0 or s.sent_to < end):
            caught_up = False
    publish_acks(st, group_commit)
    if st.sync:
        return
    if end != st.last_end or not caught_up:
        st.quiet_polls = 0
        st.last_end = end
        if st.idle:
            set_idle(st, False)
        return
    st.quiet_polls += 1
    if st.quiet_polls >= st.idle_polls and not st.idle:
        # idle first, then look again: a put after that look finds the slot set and wakes this
        # thread, one before it is seen here
        set_idle(st, True)
        rmq_full_fence()    # the other half of wake_on_put's
        if commit_log_end(st) != end:
            set_idle(st, False)


cdef void set_idle(StreamState* st, bint idle) noexcept nogil:
    cdef int i
    st.idle = idle
    st.quiet_polls = 0
    rmq_store_int(&st.wake_slot, st.wake_fd if idle else -1)
    for i in range(st.n_slots):
        if st.slaves[i].fd >= 0 and not st.slaves[i].failure:
            set_events(st, &st.slaves[i])


cdef void close_descriptors(StreamState* st) noexcept nogil:
    """Close the epoll and the eventfds: -1 from now on, so that a late wake or notify reaches no
    descriptor that reused the number; the file table is emptied with them."""
    cdef int fds[3]
    cdef int i
    pthread_mutex_lock(&st.mutex)
    fds[0], fds[1], fds[2] = st.epoll_fd, st.wake_fd, st.notify_fd
    st.epoll_fd = st.wake_fd = st.notify_fd = -1
    rmq_store_int(&st.wake_slot, -1)
    st.n_files = 0
    pthread_mutex_unlock(&st.mutex)
    for i in range(3):
        if fds[i] >= 0:
            c_close(fds[i])


cdef int wait_ms(StreamState* st) noexcept nogil:
    cdef int64_t housekeeping = (st.heartbeat_ns if st.heartbeat_ns < st.housekeeping_ns
                                 else st.housekeeping_ns) // 2 // NS_PER_MS + 1
    if st.n_slaves == 0:
        return -1
    if st.sync:
        return <int>housekeeping
    if st.idle:
        return <int>(st.idle_wait_ms if st.idle_wait_ms < housekeeping else housekeeping)
    return st.poll_ms


cdef void run_stream(StreamState* st, GroupCommit group_commit) noexcept nogil:
    cdef epoll_event events[EPOLL_EVENTS]
    cdef int n, i, timeout
    cdef uint64_t counter
    pthread_mutex_lock(&st.mutex)
    while not st.stopping:
        timeout = wait_ms(st)
        pthread_mutex_unlock(&st.mutex)
        n = epoll_wait(st.epoll_fd, events, EPOLL_EVENTS, timeout)
        pthread_mutex_lock(&st.mutex)
        for i in range(n):
            if events[i].data.fd == st.wake_fd:
                rmq_store_int(&st.wake_pending, 0)
                c_read(st.wake_fd, &counter, sizeof(counter))
        if not st.stopping:
            serve(st, group_commit)
    pthread_mutex_unlock(&st.mutex)


cdef class HAStream:
    """The stream's state and the calls the HA service (rmq.store.ha) makes on it; ``run`` is the
    thread's body. ``group_commit`` takes the acks; the other arguments are ha.py's constants and
    the store's settings (haTransferBatchSize, haSendHeartbeatInterval, haHousekeepingInterval)."""

    def __cinit__(self):
        self.state = NULL

    def __init__(self, GroupCommit group_commit not None, *, bint sync, Py_ssize_t batch_size,
                 Py_ssize_t max_bytes_per_wakeup, int frames_per_send, double poll, int idle_polls,
                 double idle_wait, double heartbeat_interval, double housekeeping_interval):
        cdef StreamState* st = <StreamState*>realloc(NULL, sizeof(StreamState))
        cdef epoll_event ev
        if st == NULL:
            raise MemoryError()
        memset(st, 0, sizeof(StreamState))
        st.epoll_fd = st.wake_fd = st.notify_fd = st.wake_slot = -1
        self.state = st
        pthread_mutex_init(&st.mutex, NULL)
        st.epoll_fd = epoll_create1(EPOLL_CLOEXEC)
        st.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        st.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if st.epoll_fd < 0 or st.wake_fd < 0 or st.notify_fd < 0:
            raise OSError(errno, f"cannot set up the replication stream: {strerror(errno).decode()}")
        ev.events = EPOLLIN
        ev.data.fd = st.wake_fd
        epoll_ctl(st.epoll_fd, EPOLL_CTL_ADD, st.wake_fd, &ev)
        self.group_commit = group_commit
        self._file_refs = []
        st.sync = sync
        st.batch_size = batch_size
        st.max_bytes_per_wakeup = max_bytes_per_wakeup
        st.frames_per_send = max(1, min(frames_per_send, MAX_FRAMES_PER_SEND))
        st.poll_ms = max(1, <int>(poll * 1000 + 0.5))
        st.idle_polls = idle_polls
        st.idle_wait_ms = max(1, <int>(idle_wait * 1000 + 0.5))
        st.heartbeat_ns = <int64_t>(heartbeat_interval * 1e9)
        st.housekeeping_ns = <int64_t>(housekeeping_interval * 1e9)
        st.last_end = -1
        # the first publish happens whatever it says: the group commit may hold an older stream's
        # watermark and rule (a master demoted, then promoted again)
        st.published_rule = -1

    def __dealloc__(self):
        cdef StreamState* st = self.state
        if st == NULL:
            return
        close_descriptors(st)
        pthread_mutex_destroy(&st.mutex)
        free(st.files)
        free(st.slaves)
        free(st)

    def close(self):
        """Once ``run`` has returned (its thread joined) and every slave was removed: close the
        epoll and the eventfds and let go of the CommitLog's mappings. Idempotent."""
        with nogil:
            close_descriptors(self.state)
        self._file_refs = []

    @property
    def notify_fd(self):
        """Readable (an eventfd) when slaves failed: then call ``take_failures``."""
        return self.state.notify_fd

    @property
    def idle(self):
        """ASYNC: every slave has had every byte for a while, nothing polls."""
        return self.state.idle

    def run(self):
        """The thread's body, without the GIL, until ``stop``."""
        with nogil:
            run_stream(self.state, self.group_commit)

    def stop(self):
        """Make ``run`` return."""
        with nogil:
            pthread_mutex_lock(&self.state.mutex)
            self.state.stopping = True
            pthread_mutex_unlock(&self.state.mutex)
        self._wake()

    cdef void _wake(self) noexcept:
        cdef uint64_t one = 1
        c_write(self.state.wake_fd, &one, sizeof(one))

    def notify(self):
        """New CommitLog bytes (SYNC_MASTER: the broker's loop after an iteration that stored)."""
        cdef StreamState* st = self.state
        cdef uint64_t one = 1
        if st.n_slaves and rmq_exchange_int(&st.wake_pending, 1) == 0:
            c_write(st.wake_fd, &one, sizeof(one))

    cdef void publish_files(self, list files):
        """The CommitLog's files, after any change (under the store's put lock): the table the
        thread reads them by. Each entry holds a view of its mapping, so a file retention deletes
        stays readable until the next table replaces this one."""
        cdef Py_ssize_t n = len(files), i
        cdef StreamFile* table = <StreamFile*>realloc(NULL, max(n, 1) * sizeof(StreamFile))
        cdef StreamFile* old
        cdef MappedFile mf
        cdef list refs = []
        if table == NULL:
            raise MemoryError()
        for i in range(n):
            mf = files[i]
            refs.append((mf, mf.view(0, mf.file_size)))
            table[i].base = mf.base
            table[i].from_offset = mf.file_from_offset
            table[i].size = mf.file_size
            table[i].wrote = &mf.wrote_position
        with nogil:
            pthread_mutex_lock(&self.state.mutex)
            old = self.state.files
            self.state.files = table
            self.state.n_files = <int>n
            pthread_mutex_unlock(&self.state.mutex)
        free(old)
        self._file_refs = refs

    def add(self, int fd, int64_t start, int64_t acked, bint acks_count, bytes pending_report=b"",
            int64_t broker_id=-1, int64_t caught_up_ns=0):
        """Serve the plain slave on socket ``fd`` (non-blocking) from here: its first report taken
        (``acked``), frames start at ``start``; ``pending_report``: the first bytes of its next report;
        ``broker_id``: the id it named (-1: none); ``caught_up_ns``: when it last held everything
        (CLOCK_MONOTONIC ns, 0: never)."""
        cdef StreamState* st = self.state
        cdef Slave* grown
        cdef Slave* s = NULL
        cdef epoll_event ev
        cdef int i, rc
        cdef int64_t now = now_ns()
        if len(pending_report) >= REPORT_SIZE:
            raise ValueError(f"{len(pending_report)} bytes of a report pending: a whole one is {REPORT_SIZE}")
        with nogil:
            pthread_mutex_lock(&st.mutex)
        try:
            for i in range(st.n_slots):
                if st.slaves[i].fd < 0:
                    s = &st.slaves[i]
                    break
            if s == NULL:
                grown = <Slave*>realloc(st.slaves, (st.n_slots * 2 + 4) * sizeof(Slave))
                if grown == NULL:
                    raise MemoryError()
                st.slaves = grown
                for i in range(st.n_slots, st.n_slots * 2 + 4):
                    st.slaves[i].fd = -1
                s = &st.slaves[st.n_slots]
                st.n_slots = st.n_slots * 2 + 4
            memset(s, 0, sizeof(Slave))
            s.acks_count = acks_count
            s.acked = acked
            s.broker_id = broker_id
            s.caught_up_ns = caught_up_ns
            s.frame_size = -1
            s.sent_to = start
            s.report_len = <int>len(pending_report)
            memcpy(s.report, <const char*>pending_report, s.report_len)
            s.last_read_ns = s.last_write_ns = now
            s.events = EPOLLIN
            ev.events = EPOLLIN     # the first serve sets what it watches from then on
            ev.data.fd = fd
            rc = epoll_ctl(st.epoll_fd, EPOLL_CTL_ADD, fd, &ev)
            if rc != 0:
                raise OSError(errno, f"cannot watch the slave's socket: {strerror(errno).decode()}")
            s.fd = fd
            st.n_slaves += 1
            if st.idle:
                set_idle(st, False)
        finally:
            pthread_mutex_unlock(&st.mutex)
        self._wake()

    def remove(self, int fd):
        """Stop serving the slave on ``fd`` (before its socket is closed): whether it was served."""
        cdef StreamState* st = self.state
        cdef int i
        cdef bint found = False
        with nogil:
            pthread_mutex_lock(&st.mutex)
            for i in range(st.n_slots):
                if st.slaves[i].fd == fd:
                    if st.slaves[i].failure:
                        st.failures -= 1
                    else:
                        epoll_ctl(st.epoll_fd, EPOLL_CTL_DEL, fd, NULL)
                    st.slaves[i].fd = -1
                    st.n_slaves -= 1
                    found = True
                    publish_acks(st, self.group_commit)
                    break
            pthread_mutex_unlock(&st.mutex)
        return found

    def take_failures(self):
        """The slaves the thread gave up on since the last call: (fd, Failure, a, b) each (the
        codes' meanings: _ha_stream.pxd). They stay out of service until ``remove``."""
        cdef StreamState* st = self.state
        cdef uint64_t counter
        cdef int i
        cdef list found = []
        c_read(st.notify_fd, &counter, sizeof(counter))
        with nogil:
            pthread_mutex_lock(&st.mutex)
        for i in range(st.n_slots):
            if st.slaves[i].fd >= 0 and st.slaves[i].failure:
                found.append((st.slaves[i].fd, st.slaves[i].failure, st.slaves[i].failure_a, st.slaves[i].failure_b))
        pthread_mutex_unlock(&st.mutex)
        return found

    def publish_python_acks(self, int64_t best, int count, named=()):
        """The acks of the slaves the HA loop serves itself, published with the stream's: the best,
        how many, and (broker id, ack) of those that named a broker of the sync state set."""
        cdef StreamState* st = self.state
        cdef int64_t ids[MAX_SYNC_STATE_SET]
        cdef int64_t acks[MAX_SYNC_STATE_SET]
        cdef int n = 0
        for broker_id, ack in named:
            if n == MAX_SYNC_STATE_SET:
                break   # only members are named, and a set has at most that many
            ids[n] = broker_id
            acks[n] = ack
            n += 1
        with nogil:
            pthread_mutex_lock(&st.mutex)
            st.python_best = best
            st.python_count = count
            memcpy(st.python_ids, ids, n * sizeof(int64_t))
            memcpy(st.python_acked, acks, n * sizeof(int64_t))
            st.n_python_named = n
            publish_acks(st, self.group_commit)
            pthread_mutex_unlock(&st.mutex)

    def set_sync_state_set(self, broker_ids, int acks_needed, int rule):
        """Controller mode: the sync state set's brokers, how many of its slaves must ack a put and
        the rule (ReplicaRule; REPLICAS_BEST_SLAVE and no brokers: back to the best slave's ack);
        the group commit gets what it says at once."""
        cdef StreamState* st = self.state
        cdef int64_t ids[MAX_SYNC_STATE_SET]
        cdef int n = 0
        if len(broker_ids) > MAX_SYNC_STATE_SET:
            raise ValueError(f"a sync state set of {len(broker_ids)} brokers: at most {MAX_SYNC_STATE_SET}")
        if rule not in (REPLICAS_BEST_SLAVE, REPLICAS_SYNC_STATE_SET, REPLICAS_MASTER_ALONE, REPLICAS_TOO_FEW):
            raise ValueError(f"no replica rule {rule}")
        for broker_id in broker_ids:
            ids[n] = broker_id
            n += 1
        with nogil:
            pthread_mutex_lock(&st.mutex)
            memcpy(st.set_ids, ids, n * sizeof(int64_t))
            st.set_size = n
            st.set_acks_needed = acks_needed
            st.set_rule = rule
            publish_acks(st, self.group_commit)
            pthread_mutex_unlock(&st.mutex)

    def in_sync(self, double window):
        """The broker ids of the slaves it serves that held everything this CommitLog held within the
        last ``window`` seconds (haMaxTimeSlaveNotCatchup), or hold it now; those that named none
        or whose acks do not count are left out."""
        cdef StreamState* st = self.state
        cdef int i
        cdef Slave* s
        cdef int64_t now = now_ns(), end
        cdef int64_t window_ns = <int64_t>(window * 1e9)
        cdef int64_t ids[MAX_SYNC_STATE_SET]
        cdef int n = 0
        with nogil:
            pthread_mutex_lock(&st.mutex)
            end = commit_log_end(st)
            for i in range(st.n_slots):
                s = &st.slaves[i]
                if s.fd < 0 or s.failure or s.broker_id < 0 or not s.acks_count or s.acked < 0:
                    continue
                if s.check_ns and s.acked >= s.check_end and s.check_ns > s.caught_up_ns:
                    s.caught_up_ns = s.check_ns
                if (s.acked >= end or (s.caught_up_ns and now - s.caught_up_ns <= window_ns)) and n < MAX_SYNC_STATE_SET:
                    ids[n] = s.broker_id
                    n += 1
            pthread_mutex_unlock(&st.mutex)
        return [ids[i] for i in range(n)]

    def status(self, int fd):
        """(acked offset, ms it lags) of the slave on ``fd``, or None when the stream does not serve it."""
        cdef StreamState* st = self.state
        cdef int i, j
        cdef int64_t acked = -1, since = -1, now = now_ns()
        cdef bint found = False
        with nogil:
            pthread_mutex_lock(&st.mutex)
            for i in range(st.n_slots):
                if st.slaves[i].fd == fd:
                    found = True
                    acked = st.slaves[i].acked
                    # the oldest offset it has not acked: since when it lags
                    for j in range(st.sample_count):
                        if st.sample_offset[(st.sample_first + j) % LAG_SAMPLES] > acked:
                            since = st.sample_ns[(st.sample_first + j) % LAG_SAMPLES]
                            break
                    break
            pthread_mutex_unlock(&st.mutex)
        if not found:
            return None
        return acked, 0 if since < 0 else (now - since) // NS_PER_MS
