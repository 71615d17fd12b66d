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
#endif
#endif
