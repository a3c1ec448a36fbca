/* The SYNC_FLUSH architecture with no Python in it: what the design alone costs against Redis.
 *
 * A RESP server that answers XADD-like commands only once their bytes are durable, in C, in one
 * of two shapes:
 *
 *   inline  one thread, as Redis with appendfsync always: read every command there is, append
 *           them, make them durable, write the answers, wait for more (the loop waits for the disk);
 *   thread  rmq's shape: the loop appends and asks a flush thread (mutex + condition variable),
 *           which makes the bytes durable and writes an eventfd the loop polls; the loop then
 *           writes the answers (the loop never waits for the disk).
 *
 * and one of three ways to append: `mmap` (memcpy into a mapped, fallocated file whose next 1 MiB
 * chunk is prefaulted, then msync: rmq's CommitLog), `write` (write() at the end of a growing file,
 * then fdatasync: Redis's AOF) or `pwrite` (one pwrite per command into the fallocated file, as a
 * put path that copies each record in would, then fdatasync; `pwrite-sparse`: the same into a file
 * sized by ftruncate, not fallocated).
 *
 * Driven by `redis-benchmark -c 1 -P N` exactly as Redis is (perf/arch_probe.py runs the
 * comparison). Build: cc -O2 -pthread -o arch_probe perf/arch_probe.c
 * Run:   arch_probe PORT DIR inline|thread mmap|write|pwrite|pwrite-sparse
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define FILE_SIZE (256L << 20)
#define BUF_SIZE (1 << 20)

static int use_mmap, use_pwrite, use_sparse, use_thread, data_fd, event_fd;
static char *base;
static long written, appended_total;

/* flush thread state, guarded by mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static long requested, flushed, flushed_from;
static int idle;

static void die(const char *what) { perror(what); exit(1); }

static long parse_n(const char *p, long n, long *commands, long max);
static long parse_one(const char *p, long n) { long c; return parse_n(p, n, &c, 1); }

/* one command's bytes, pwrite mode: each command is its own pwrite at the end of what is written */
static void append_one(const char *p, long n) {
    if (written + n > FILE_SIZE) written = 0;
    long at = written;
    while (n > 0) { ssize_t w = pwrite(data_fd, p, n, at); if (w < 0) die("pwrite"); p += w; n -= w; at += w; }
    written = at;
}

static void append(const char *p, long n) {
    if (use_pwrite) {  /* command by command, as a put path without batching would */
        long used = 0;
        while (used < n) { long one = parse_one(p + used, n - used); append_one(p + used, one); used += one; }
        return;
    }
    if (use_mmap) {
        if (written + n > FILE_SIZE) written = 0;  /* wrap: a probe, not a store */
        if ((written + n) >> 20 != written >> 20 && ((written >> 20) + 2) << 20 <= FILE_SIZE) {
            /* into the next 1 MiB chunk: fault the one after it in now, as rmq's CommitLog does */
            char *chunk = base + (((written >> 20) + 1) << 20);
            madvise(chunk, 1 << 20, MADV_RANDOM);
            madvise(chunk, 1 << 20, 23 /* MADV_POPULATE_WRITE */);
            madvise(chunk, 1 << 20, MADV_NORMAL);
        }
        memcpy(base + written, p, n);
    } else {
        if (written + n > FILE_SIZE) { if (ftruncate(data_fd, 0)) die("ftruncate"); lseek(data_fd, 0, SEEK_SET); written = 0; }
        while (n > 0) { ssize_t w = write(data_fd, p, n); if (w < 0) die("write"); p += w; n -= w; written += w; }
        return;
    }
    written += n;
}

/* durable [from, to) of the current file */
static void make_durable(long from, long to) {
    if (use_mmap) {
        if (to < from) from = 0;
        long lo = from & ~4095L;
        if (to > lo && msync(base + lo, to - lo, MS_SYNC)) die("msync");
    } else if (fdatasync(data_fd)) die("fdatasync");  /* write and pwrite */
}

static void *flusher(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (requested == flushed) { idle = 1; pthread_cond_wait(&wake, &mu); idle = 0; }
        long from = flushed_from, to = requested;
        pthread_mutex_unlock(&mu);
        make_durable(from, to);
        pthread_mutex_lock(&mu);
        flushed = to; flushed_from = to;
        pthread_mutex_unlock(&mu);
        uint64_t one = 1;
        if (write(event_fd, &one, 8) < 0) die("eventfd write");
        pthread_mutex_lock(&mu);
    }
    return NULL;
}

/* Whole RESP arrays in [p, p+n), at most max: how many bytes they take, and how many there are. */
static long parse_n(const char *p, long n, long *commands, long max) {
    long at = 0;
    *commands = 0;
    while (*commands < max) {
        long i = at;
        if (i >= n || p[i] != '*') return at;
        char *end; long items = strtol(p + i + 1, &end, 10);
        const char *nl = memchr(p + i, '\n', n - i); if (!nl) return at;
        i = nl - p + 1;
        for (long k = 0; k < items; k++) {
            if (i >= n || p[i] != '$') return at;
            nl = memchr(p + i, '\n', n - i); if (!nl) return at;
            long len = strtol(p + i + 1, &end, 10);
            i = nl - p + 1 + len + 2;
            if (i > n) return at;
        }
        at = i; (*commands)++;
    }
    return at;
}

static long parse(const char *p, long n, long *commands) { return parse_n(p, n, commands, 1L << 62); }

static const char ANSWER[] = "$15\r\n1700000000000-0\r\n";

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s PORT DIR inline|thread mmap|write|pwrite|pwrite-sparse\n", argv[0]); return 2; }
    use_thread = !strcmp(argv[3], "thread");
    use_mmap = !strcmp(argv[4], "mmap");
    use_pwrite = !strcmp(argv[4], "pwrite") || !strcmp(argv[4], "pwrite-sparse");
    use_sparse = !strcmp(argv[4], "pwrite-sparse");
    char path[4096]; snprintf(path, sizeof path, "%s/probe.log", argv[2]);
    data_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | (use_mmap || use_pwrite ? 0 : O_APPEND), 0644);
    if (data_fd < 0) die("open");
    if (use_mmap || use_pwrite) {
        if (use_sparse ? ftruncate(data_fd, FILE_SIZE) : posix_fallocate(data_fd, 0, FILE_SIZE)) die("fallocate");
        base = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
        if (base == MAP_FAILED) die("mmap");
    }
    event_fd = eventfd(0, EFD_NONBLOCK);
    int ls = socket(AF_INET, SOCK_STREAM, 0), on = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 16)) die("listen");
    if (use_thread) { pthread_t t; pthread_create(&t, NULL, flusher, NULL); }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    ev.data.fd = event_fd; epoll_ctl(ep, EPOLL_CTL_ADD, event_fd, &ev);
    printf("listening\n"); fflush(stdout);
    static char in[BUF_SIZE]; long in_len = 0;
    static char out[BUF_SIZE];
    int client = -1; long waiting = 0; long waiting_end = 0;
    for (;;) {
        struct epoll_event got[4];
        int n = epoll_wait(ep, got, 4, -1);
        for (int e = 0; e < n; e++) {
            int fd = got[e].data.fd;
            if (fd == ls) {
                int c = accept(ls, NULL, NULL);
                if (c < 0) continue;
                if (client >= 0) { close(c); continue; }  /* one connection at a time */
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
                client = c; in_len = 0; waiting = 0;
                ev.data.fd = c; epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
            } else if (fd == event_fd) {
                uint64_t v; if (read(event_fd, &v, 8) < 0) continue;
                pthread_mutex_lock(&mu); long done = flushed; pthread_mutex_unlock(&mu);
                if (waiting && done >= waiting_end && client >= 0) {
                    long k = 0; for (long i = 0; i < waiting; i++, k += sizeof ANSWER - 1) memcpy(out + k, ANSWER, sizeof ANSWER - 1);
                    if (write(client, out, k) < 0) {}
                    waiting = 0;
                }
            } else {
                ssize_t r = read(fd, in + in_len, BUF_SIZE - in_len);
                if (r <= 0) { epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL); close(fd); client = -1; continue; }
                in_len += r;
                long commands, used = parse(in, in_len, &commands);
                if (!commands) continue;
                long from = written;
                append(in, used);
                appended_total += commands;
                memmove(in, in + used, in_len - used); in_len -= used;
                if (use_thread) {
                    waiting += commands; waiting_end = written;
                    pthread_mutex_lock(&mu);
                    int signal = idle && requested == flushed;
                    if (requested == flushed) flushed_from = from;
                    requested = written;
                    pthread_mutex_unlock(&mu);
                    if (signal) pthread_cond_signal(&wake);
                } else {
                    make_durable(from, written);
                    long k = 0; for (long i = 0; i < commands; i++, k += sizeof ANSWER - 1) memcpy(out + k, ANSWER, sizeof ANSWER - 1);
                    if (write(fd, out, k) < 0) {}
                }
            }
        }
    }
}
