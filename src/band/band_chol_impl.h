/* band_chol_impl.h -- private to the banded Cholesky and its reverse: the
 * forward's blocked threshold and the block width both blocked paths use,
 * kept in one place so the two and the workspace size stay in step when
 * they are re-tuned. */
#ifndef GMM_BAND_CHOL_IMPL_H
#define GMM_BAND_CHOL_IMPL_H

#include <stddef.h>

/* Bandwidth from which the forward's blocked path is used (band_chol.c's
 * table; a -D override exists for re-tuning).  Here because
 * gmm_band_chol_work_size (band_chol_rev.c) sizes the panels of both. */
#ifndef CHOL_BLOCKED_MIN
#define CHOL_BLOCKED_MIN 48
#endif

/* Narrow blocks win: OpenBLAS's dsyrk per column costs about the same for
 * k = 16 as for k = 32 at these sizes, while the dtrsm and the unblocked
 * diagonal block grow with nb.  Only for wide bands (l ~ 200 and more) does
 * nb = 32 pay. */
static inline size_t chol_block_width(size_t l)
{
    size_t nb = l < 192 ? 16 : 32;
    return nb < l ? nb : l;
}

#endif
