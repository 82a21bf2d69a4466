/* alloc.c -- allocation wrappers with a count-down failure injector, and
 * transparent huge pages for the memory they hand out.
 *
 * HUGE PAGES.  Memory first touched on 4 KB pages costs a page fault per
 * page: 47 000 faults, a quarter of a 300 x 300 lattice loglik's time,
 * whose factors, selected inverses, CHOLMOD's workspace and the tables
 * are tens of MB.  Advised MADV_HUGEPAGE (the kernel's transparent_hugepage
 * "madvise", as Debian's, or "always") such memory faults once per 2 MB.
 * Two kinds are advised here: each block of GMM_HUGE_MIN bytes or more
 * (glibc maps the largest on their own), and the heap above the break
 * each allocation finds, so that what glibc's heap grows by -- for any
 * allocator in the process, CHOLMOD's included -- is advised before it is
 * touched (the CLI pads each growth, M_TOP_PAD, so that most is).  The
 * loglik above then takes 7 700 faults and 1.1 s of CPU, not 1.5 s, in
 * 6 MB more.  Advice only: a kernel without it leaves the pages as they
 * were, and nothing is reported. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE, sbrk */
#include "gmm/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define GMM_HUGE_MIN ((size_t)4 << 20)

void gmm_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1),
              hi = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (p && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* The heap up to here is advised (0: not yet looked at). */
static _Atomic uintptr_t heap_advised;

static void *huge(void *p, size_t bytes)
{
    uintptr_t top = (uintptr_t)sbrk(0), done = atomic_load(&heap_advised);
    if (top != (uintptr_t)-1 && top > done + HUGE_PAGE &&
        atomic_compare_exchange_strong(&heap_advised, &done, top & ~(HUGE_PAGE - 1)) && done)
        gmm_advise_huge((void *)done, top - done); /* the heap's growth since */
    if (p && bytes >= GMM_HUGE_MIN)
        gmm_advise_huge(p, bytes);
    return p;
}

static long fail_countdown = -1;

void gmm_alloc_fail_after(long k) { fail_countdown = k; }

/* True when this allocation must fail (injection armed and exhausted). */
static int injected_failure(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown == 0)
        return 1;
    fail_countdown--;
    return 0;
}

void *gmm_malloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    size_t bytes = nmemb * size;
    return huge(malloc(bytes ? bytes : 1), bytes);
}

void *gmm_calloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    return huge(calloc(nmemb ? nmemb : 1, size ? size : 1), nmemb * size);
}

void *gmm_realloc(void *p, size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    size_t bytes = nmemb * size;
    return huge(realloc(p, bytes ? bytes : 1), bytes);
}

void gmm_free(void *p) { free(p); }

char *gmm_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = gmm_malloc(n, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}
