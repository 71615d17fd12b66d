#ifndef ORDERFLOW_CLIBPQ_SHIM_H
#define ORDERFLOW_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
