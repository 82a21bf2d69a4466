/* alloc.h -- every allocation in the library goes through these wrappers.
 *
 * They exist so tests can inject out-of-memory failures (a count-down
 * allocator, as CSparse's Tcov does) and prove that every error path returns
 * cleanly and leaks nothing.  They never print, never abort.
 */
#ifndef GMM_ALLOC_H
#define GMM_ALLOC_H

#include <stddef.h>

/* malloc/calloc/realloc with overflow-checked sizes; NULL on failure (no
 * error is recorded: callers record GMM_ENOMEM with their own context).
 * Blocks of 4 MB and more are advised transparent huge pages (alloc.c). */
void *gmm_malloc(size_t nmemb, size_t size);
void *gmm_calloc(size_t nmemb, size_t size);
void *gmm_realloc(void *p, size_t nmemb, size_t size);
/* free(); NULL-safe. */
void gmm_free(void *p);
/* Advise the whole 2 MB pages of [p, p + bytes) MADV_HUGEPAGE (memory not
 * yet touched gains most); advice only, nothing reported. */
void gmm_advise_huge(void *p, size_t bytes);
/* A copy of the string s from gmm_malloc; NULL for NULL s or no memory. */
char *gmm_strdup(const char *s);

/* Testing hook: after `k` more successful allocations every allocation
 * fails; k < 0 (the default) disables injection.  Not thread-safe. */
void gmm_alloc_fail_after(long k);

#endif
