/* factor_sparse_huge.c -- transparent huge pages for the sparse factor's
 * large arrays (factor_sparse_impl.h).
 *
 * L's values and the selected inverse's arrays (each nnz(L) doubles: 40 MB
 * and more on a 300 x 300 lattice) are fresh mmapped memory that the first
 * factorisation or inversion touches page by page: the page faults were
 * 17% of a loglik's CPU samples there.  Advised MADV_HUGEPAGE (where the
 * kernel's transparent_hugepage is "madvise" or "always"), they fault once
 * per 2 MB.  Advice only: a kernel without it leaves the pages as they
 * were, and nothing is reported. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <stdint.h>
#include <sys/mman.h>

#include "factor_sparse_impl.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

void gmm_factor_impl_sparse_huge(void *p, size_t bytes)
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
