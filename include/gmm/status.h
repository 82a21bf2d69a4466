/* status.h -- one status enum for the whole library, with a last-error record.
 *
 * Library code never prints and never exits: every fallible function returns a
 * gmm_status and, on failure, records a human-readable reason (and, where it
 * applies, an index such as the failing row) with gmm_error().  The record is
 * thread-local, so concurrent callers do not see each other's errors.  Only the
 * CLI layer turns a status into a message and an exit code.
 */
#ifndef GMM_STATUS_H
#define GMM_STATUS_H

#include <stddef.h>

typedef enum {
    GMM_OK = 0,
    GMM_EINVAL,   /* invalid argument (NULL where not allowed, bad option value) */
    GMM_EDIM,     /* mismatched sizes, bandwidths or matrix kinds: a programming error */
    GMM_ENOMEM,   /* allocation failed */
    GMM_ENOTPD,   /* matrix not positive definite; gmm_error_index() is the row */
    GMM_EDOM,     /* numerical failure: non-finite value, singular system */
    GMM_EIO,      /* file could not be opened, read or written */
    GMM_EPARSE,   /* malformed input (CSV, JSON, spec); message names the place */
    GMM_ENOCONV,  /* an iterative method did not converge */
    GMM_ECANCEL,  /* cancelled by a progress callback */
    GMM_ECHECK,   /* a user-requested check failed (gradcheck) */
    GMM_EINCONCLUSIVE, /* a user-requested check could not decide (gradcheck) */
    GMM_NSTATUS
} gmm_status;

/* Fixed description of a status code, never NULL. */
const char *gmm_strerror(gmm_status s);

/* Record a failure: printf-style reason, stored in a thread-local buffer
 * (truncated at GMM_ERROR_MAX bytes).  Returns s so callers can write
 * `return gmm_error(GMM_EDIM, "...")`.  The index is reset to GMM_NO_INDEX. */
#define GMM_ERROR_MAX 512
#define GMM_NO_INDEX ((size_t)-1)
gmm_status gmm_error(gmm_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* As gmm_error, also recording an index (row of a failed pivot, ...). */
gmm_status gmm_error_at(gmm_status s, size_t index, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The last recorded failure of this thread: its status, message ("" when
 * none) and index (GMM_NO_INDEX when none). */
gmm_status gmm_error_status(void);
const char *gmm_error_message(void);
size_t gmm_error_index(void);
/* Forget the last failure (status GMM_OK, empty message). */
void gmm_error_clear(void);

#endif
