# The Linux calls the store's C loops make without the GIL (the group commit's flush thread, the
# replication stream, the mapped files), declared once for every .pyx that makes them.
from libc.stdint cimport uint32_t
from posix.time cimport timespec
from posix.uio cimport iovec


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    ctypedef struct pthread_condattr_t:
        pass
    int pthread_mutex_init(pthread_mutex_t* mutex, void* attr)
    int pthread_mutex_destroy(pthread_mutex_t* mutex)
    int pthread_mutex_lock(pthread_mutex_t* mutex)
    int pthread_mutex_unlock(pthread_mutex_t* mutex)
    int pthread_condattr_init(pthread_condattr_t* attr)
    int pthread_condattr_setclock(pthread_condattr_t* attr, int clock_id)
    int pthread_condattr_destroy(pthread_condattr_t* attr)
    int pthread_cond_init(pthread_cond_t* cond, pthread_condattr_t* attr)
    int pthread_cond_destroy(pthread_cond_t* cond)
    int pthread_cond_signal(pthread_cond_t* cond)
    int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex, const timespec* abstime)


cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)
    int EFD_NONBLOCK
    int EFD_CLOEXEC


cdef extern from "<sys/mman.h>" nogil:
    int msync(void* addr, size_t length, int flags)
    int madvise(void* addr, size_t length, int advice)
    int MS_SYNC
    int MADV_NORMAL
    int MADV_RANDOM
    int MADV_WILLNEED


cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        int fd
    cdef struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event* event)
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)
    int EPOLLIN, EPOLLOUT, EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL, EPOLL_CLOEXEC


cdef extern from "<sys/socket.h>" nogil:
    cdef struct msghdr:
        iovec* msg_iov
        size_t msg_iovlen
    ssize_t sendmsg(int fd, const msghdr* msg, int flags)
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    int MSG_NOSIGNAL, MSG_DONTWAIT
