#ifndef ORDERFLOW_CLIBPQ_SHIM_H
#define ORDERFLOW_CLIBPQ_SHIM_H
#include <libpq-fe.h>

#ifdef __linux__
#include <sys/prctl.h>
/* Names the calling thread (at most 15 bytes are kept). Swift cannot call the variadic prctl,
   and pthread_setname_np is hidden behind _GNU_SOURCE in Swift's Glibc module. */
static inline void orderflow_name_thread(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}
/* The calling thread's name; `buffer` holds at least 16 bytes. */
static inline void orderflow_thread_name(char *buffer) {
    buffer[0] = 0;
    prctl(PR_GET_NAME, buffer, 0, 0, 0);
    buffer[15] = 0;
}

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Whether OpenSSL holds decrypted bytes libpq has not read: they are already off the socket,
   which will not signal them. libpq links OpenSSL itself; only this one function is needed. */
struct ssl_st;
int SSL_pending(const struct ssl_st *ssl);
static inline int orderflow_tls_pending(PGconn *connection) {
    if (!PQsslInUse(connection)) return 0;
    const struct ssl_st *ssl = (const struct ssl_st *)PQsslStruct(connection, "OpenSSL");
    return ssl != NULL && SSL_pending(ssl) > 0;
}
/* `struct epoll_event` is packed on x86-64, which Swift cannot lay out: arm and wait here. */
static inline int orderflow_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/* Watches `fd` for one event (readable, and writable if asked; errors and hang-ups always).
   Returns 0, or the errno of the failure. */
static inline int orderflow_epoll_arm(int epfd, int fd, int writable) {
    struct epoll_event event;
    event.events = EPOLLIN | (writable ? EPOLLOUT : 0) | EPOLLONESHOT;
    event.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event) == 0) return 0;
    if (errno != ENOENT) return errno;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : errno;
}

/* Waits for events, up to `timeout` ms (-1: no limit), and stores the descriptors that have
   one; returns how many (or -1). */
static inline int orderflow_epoll_wait(int epfd, int *fds, int capacity, int timeout) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    int count = epoll_wait(epfd, events, capacity, timeout);
    for (int i = 0; i < count; i++) fds[i] = events[i].data.fd;
    return count;
}

/* An eventfd watched (level-triggered) by `epfd`, to wake its waiter; returns it, or -1. */
static inline int orderflow_epoll_add_doorbell(int epfd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    struct epoll_event event;
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) != 0) { close(fd); return -1; }
    return fd;
}
static inline void orderflow_doorbell_ring(int fd) { eventfd_write(fd, 1); }
static inline void orderflow_doorbell_reset(int fd) { eventfd_t value; eventfd_read(fd, &value); }
#endif
#endif
