/* band_prod_impl.h -- the band-band product kernel shared by band_prod.c
 * (gemm) and band_prod_rev.c (gemm_rev, which accumulates into adjoints
 * without a temporary).  Private to src/band/. */
#ifndef GMM_BAND_PROD_IMPL_H
#define GMM_BAND_PROD_IMPL_H

#include "gmm/band.h"

/* C = op(A) op(B) (accumulate == 0) or C += op(A) op(B) (accumulate != 0),
 * restricted to C's stored band.  No validation: callers check n, kinds and
 * that C shares no storage with A or B.  O(n w l), w C's width. */
void gmm_band_gemm_kernel(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                          int accumulate, gmm_band *C);

#endif
