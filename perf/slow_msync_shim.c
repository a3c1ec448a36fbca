/* LD_PRELOAD shim for perf/bench_sync_puller.py: a slow disk. With RMQ_SLOW_MSYNC_US set, every
 * msync() sleeps that many microseconds before the real one (a device whose flushes queue behind
 * other work); without it the shim only passes calls on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int msync(void *addr, size_t length, int flags)
{
    static int (*real_msync)(void *, size_t, int);
    const char *slow = getenv("RMQ_SLOW_MSYNC_US");
    if (real_msync == NULL)
        real_msync = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    if (slow != NULL)
        usleep((useconds_t)atoi(slow));
    return real_msync(addr, length, flags);
}
