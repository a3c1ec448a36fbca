/* LD_PRELOAD shim for perf/power_loss.py: keeps a "disk" copy of a store that holds only what
 * the process made durable.
 *
 * With RMQ_SHADOW_SRC (the store's root, absolute) and RMQ_SHADOW_DST (the disk copy's root) set,
 * every call that makes file data durable copies that data, as it is at the call, into the file of
 * the same relative path under RMQ_SHADOW_DST:
 *
 *   msync(addr, len)              the synced part of a shared writable mapping of a store file
 *                                 (mappings are recorded at mmap and forgotten at munmap)
 *   fsync(fd) / fdatasync(fd)     the whole file (the store fsyncs small files only: configs,
 *                                 the checkpoint); a directory's fsync copies nothing
 *   sync_file_range(fd, off, n)   that range
 *   rename / renameat / renameat2 the same rename in the copy (names are durable at once)
 *
 * Nothing else reaches the copy: a write through a mapping, write(), pwrite() stay "in the page
 * cache" until one of the calls above covers them. perf/power_loss.py's docstring states the model
 * and its limits. Without the two variables the shim only passes calls on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_MAPPINGS 4096
#define COPY_CHUNK (1 << 20)

struct mapping {
    char *addr;
    size_t length;
    off_t offset;     /* of the mapping in its file */
    int shadow_fd;    /* the file's copy, open for writing; -1: a free slot */
};

static struct mapping mappings[MAX_MAPPINGS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char src_root[PATH_MAX], dst_root[PATH_MAX];
static size_t src_len;
static int active;

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);
static int (*real_msync)(void *, size_t, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_sync_file_range)(int, off_t, off_t, unsigned int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);

__attribute__((constructor)) static void init(void) {
    real_mmap = dlsym(RTLD_NEXT, "mmap");
    real_munmap = dlsym(RTLD_NEXT, "munmap");
    real_msync = dlsym(RTLD_NEXT, "msync");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_sync_file_range = dlsym(RTLD_NEXT, "sync_file_range");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_renameat = dlsym(RTLD_NEXT, "renameat");
    real_renameat2 = dlsym(RTLD_NEXT, "renameat2");
    for (int i = 0; i < MAX_MAPPINGS; i++) mappings[i].shadow_fd = -1;
    const char *src = getenv("RMQ_SHADOW_SRC"), *dst = getenv("RMQ_SHADOW_DST");
    if (src && dst && realpath(src, src_root) && strlen(dst) < PATH_MAX) {
        strcpy(dst_root, dst);
        src_len = strlen(src_root);
        active = 1;
    }
}

/* The copy's path of an absolute path under the store, or 0 when the path is not under it. */
static int shadow_path(const char *path, char *out) {
    if (strncmp(path, src_root, src_len) != 0 || (path[src_len] != '/' && path[src_len] != 0)) return 0;
    return snprintf(out, PATH_MAX, "%s%s", dst_root, path + src_len) < PATH_MAX;
}

static void make_parents(char *path) {
    for (char *p = path + strlen(dst_root) + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    }
}

static int open_shadow_of_fd(int fd) {
    char link[64], path[PATH_MAX], shadow[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return -1;
    path[n] = 0;
    if (!shadow_path(path, shadow)) return -1;
    make_parents(shadow);
    return open(shadow, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
}

static void write_all(int fd, const char *data, size_t n, off_t at) {
    while (n > 0) {
        ssize_t w = pwrite(fd, data, n, at);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) continue;
            fprintf(stderr, "power_loss_shim: writing the disk copy failed: %s\n", strerror(errno));
            abort();  /* a copy that silently misses data would prove nothing */
        }
        data += w;
        n -= (size_t)w;
        at += w;
    }
}

static void copy_range(int fd, off_t start, off_t end) {
    int shadow = open_shadow_of_fd(fd);
    if (shadow < 0) return;
    /* The file again, for reading: ``fd`` may be open for writing only. */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int reader = open(link, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (reader >= 0 && fstat(reader, &st) == 0 && S_ISREG(st.st_mode)) {
        if (end < 0 || end > st.st_size) end = st.st_size;
        char *buffer = malloc(COPY_CHUNK);
        for (off_t at = start; at < end;) {
            size_t want = (size_t)(end - at) < COPY_CHUNK ? (size_t)(end - at) : COPY_CHUNK;
            ssize_t got = pread(reader, buffer, want, at);
            if (got <= 0) break;
            write_all(shadow, buffer, (size_t)got, at);
            at += got;
        }
        free(buffer);
    }
    if (reader >= 0) close(reader);
    close(shadow);
}

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
    void *result = real_mmap(addr, length, prot, flags, fd, offset);
    if (!active || result == MAP_FAILED || fd < 0 || !(flags & MAP_SHARED) || !(prot & PROT_WRITE)) return result;
    int shadow = open_shadow_of_fd(fd);
    if (shadow < 0) return result;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < MAX_MAPPINGS && mappings[i].shadow_fd >= 0) i++;
    if (i == MAX_MAPPINGS) {
        fprintf(stderr, "power_loss_shim: more than %d mappings\n", MAX_MAPPINGS);
        abort();
    }
    mappings[i] = (struct mapping){result, length, offset, shadow};
    pthread_mutex_unlock(&lock);
    return result;
}
void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
    __attribute__((alias("mmap")));

int munmap(void *addr, size_t length) {
    if (active) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < MAX_MAPPINGS; i++) {
            if (mappings[i].shadow_fd >= 0 && mappings[i].addr == addr) {
                close(mappings[i].shadow_fd);
                mappings[i].shadow_fd = -1;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return real_munmap(addr, length);
}

int msync(void *addr, size_t length, int flags) {
    int rc = real_msync(addr, length, flags);
    if (!active || rc != 0 || !(flags & MS_SYNC)) return rc;
    char *start = addr;
    /* The mapping stays mapped while its msync runs (the caller holds it), so the copy reads the
     * bytes msync just made durable; the lock keeps munmap of another mapping out meanwhile. */
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        struct mapping *m = &mappings[i];
        if (m->shadow_fd < 0 || start < m->addr || start >= m->addr + m->length) continue;
        size_t n = length;
        if (start + n > m->addr + m->length) n = (size_t)(m->addr + m->length - start);
        write_all(m->shadow_fd, start, n, m->offset + (start - m->addr));
        break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int fsync(int fd) {
    int rc = real_fsync(fd);
    if (active && rc == 0) copy_range(fd, 0, -1);
    return rc;
}

int fdatasync(int fd) {
    int rc = real_fdatasync(fd);
    if (active && rc == 0) copy_range(fd, 0, -1);
    return rc;
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags) {
    int rc = real_sync_file_range(fd, offset, nbytes, flags);
    if (active && rc == 0) copy_range(fd, offset, nbytes ? offset + nbytes : -1);
    return rc;
}

/* The absolute path of ``path`` (relative to ``dirfd``), its last component not resolved. */
static int absolute(int dirfd, const char *path, char *out) {
    char dir[PATH_MAX], base[PATH_MAX], resolved[PATH_MAX];
    if (strlen(path) >= PATH_MAX) return 0;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        strcpy(base, slash + 1);
        if (slash == dir) strcpy(dir, "/"); else *slash = 0;
    } else {
        strcpy(base, path);
        strcpy(dir, ".");
    }
    if (dir[0] != '/' && dirfd != AT_FDCWD) {
        char link[64], at[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, at, sizeof at - 1);
        if (n <= 0) return 0;
        at[n] = 0;
        char joined[PATH_MAX];
        if (snprintf(joined, sizeof joined, "%s/%s", at, dir) >= PATH_MAX) return 0;
        strcpy(dir, joined);
    }
    if (!realpath(dir, resolved)) return 0;
    return snprintf(out, PATH_MAX, "%s/%s", resolved, base) < PATH_MAX;
}

static void shadow_rename(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    char old_abs[PATH_MAX], new_abs[PATH_MAX], old_shadow[PATH_MAX], new_shadow[PATH_MAX];
    if (!absolute(olddirfd, oldpath, old_abs) || !absolute(newdirfd, newpath, new_abs)) return;
    if (!shadow_path(old_abs, old_shadow) || !shadow_path(new_abs, new_shadow)) return;
    make_parents(new_shadow);
    /* A source never synced has no copy: the new name then holds none of its data (zeros once the
     * crash gives it its size), not what the old file at that name held. */
    if (real_rename(old_shadow, new_shadow) != 0 && errno == ENOENT) unlink(new_shadow);
}

int rename(const char *oldpath, const char *newpath) {
    int rc = real_rename(oldpath, newpath);
    if (active && rc == 0) shadow_rename(AT_FDCWD, oldpath, AT_FDCWD, newpath);
    return rc;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    int rc = real_renameat(olddirfd, oldpath, newdirfd, newpath);
    if (active && rc == 0) shadow_rename(olddirfd, oldpath, newdirfd, newpath);
    return rc;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    int rc = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
    if (active && rc == 0) shadow_rename(olddirfd, oldpath, newdirfd, newpath);
    return rc;
}
