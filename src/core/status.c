/* status.c -- status strings and the thread-local last-error record. */
#include "gmm/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local gmm_status last_status = GMM_OK;
static _Thread_local size_t last_index = GMM_NO_INDEX;
static _Thread_local char last_msg[GMM_ERROR_MAX];

const char *gmm_strerror(gmm_status s)
{
    switch (s) {
    case GMM_OK: return "success";
    case GMM_EINVAL: return "invalid argument";
    case GMM_EDIM: return "size or bandwidth mismatch";
    case GMM_ENOMEM: return "out of memory";
    case GMM_ENOTPD: return "matrix not positive definite";
    case GMM_EDOM: return "numerical failure";
    case GMM_EIO: return "input/output error";
    case GMM_EPARSE: return "malformed input";
    case GMM_ENOCONV: return "did not converge";
    case GMM_ECANCEL: return "cancelled";
    case GMM_ECHECK: return "check failed";
    case GMM_EINCONCLUSIVE: return "check inconclusive";
    case GMM_NSTATUS: break;
    }
    return "unknown status";
}

static gmm_status record(gmm_status s, size_t index, const char *fmt, va_list ap)
{
    last_status = s;
    last_index = index;
    if (fmt) {
        /* through a copy: callers prefix the last message to itself
         * ("'%s': %s", name, gmm_error_message()) */
        char buf[GMM_ERROR_MAX];
        vsnprintf(buf, sizeof buf, fmt, ap);
        snprintf(last_msg, sizeof last_msg, "%s", buf);
    } else
        snprintf(last_msg, sizeof last_msg, "%s", gmm_strerror(s));
    return s;
}

gmm_status gmm_error(gmm_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(s, GMM_NO_INDEX, fmt, ap);
    va_end(ap);
    return s;
}

gmm_status gmm_error_at(gmm_status s, size_t index, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(s, index, fmt, ap);
    va_end(ap);
    return s;
}

gmm_status gmm_error_status(void) { return last_status; }
const char *gmm_error_message(void) { return last_msg; }
size_t gmm_error_index(void) { return last_index; }

void gmm_error_clear(void)
{
    last_status = GMM_OK;
    last_index = GMM_NO_INDEX;
    last_msg[0] = '\0';
}
