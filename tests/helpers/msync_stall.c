/* LD_PRELOAD shim for the overload tests (tests.helpers.overload): a disk that stops answering.
 *
 * With RMQ_STALL_MSYNC set to a path, every msync() waits while that file exists, then does the
 * real msync: the test creates the file to stall the broker's flushes and deletes it to let them
 * finish. Without the variable the shim only passes calls on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int msync(void *addr, size_t length, int flags)
{
    static int (*real_msync)(void *, size_t, int);
    const char *stall = getenv("RMQ_STALL_MSYNC");
    struct stat st;
    if (real_msync == NULL)
        real_msync = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    if (stall != NULL)
        while (stat(stall, &st) == 0)
            usleep(2000);
    return real_msync(addr, length, flags);
}
