/* factor_impl.h -- what an implementation of gmm_factor provides.  Private. */
#ifndef GMM_FACTOR_IMPL_H
#define GMM_FACTOR_IMPL_H

#include "gmm/factor.h"

/* One implementation: its name and its operations (factor.h's contracts),
 * each on the implementation's own state.  An operation the implementation
 * does not have is NULL (factor.c answers GMM_EINVAL). */
typedef struct {
    const char *name;
    gmm_status (*decomp)(void *state, const gmm_band *Q);
    gmm_status (*decomp_sparse)(void *state, const gmm_sparse *Q);
    gmm_status (*set_chol)(void *state, const gmm_band *L);
    gmm_status (*mul_lt)(const void *state, const double *x, double *y);
    gmm_status (*solve_l)(const void *state, double *x);
    gmm_status (*solve_lt)(const void *state, double *x);
    gmm_status (*solve_many)(const void *state, double *X, size_t ncol); /* or NULL */
    double (*logdet)(const void *state);
    gmm_status (*selinv)(const void *state, gmm_band *S);
    gmm_status (*selinv_sparse)(const void *state, gmm_sparse *S);
    gmm_status (*selinv_sparse_rev)(const void *state, const gmm_sparse *S,
                                    const gmm_sparse *Sbar, gmm_sparse *Qbar);
    void (*cost)(const void *state, double *flops, double *bytes);
    double (*nnz)(const void *state);
    const char *(*ordering)(const void *state);
    const gmm_band *(*band_chol)(const void *state);
    void (*free)(void *state);
} factor_type;

struct gmm_factor {
    const factor_type *type;
    void *state;
    size_t n;
    int ready; /* a factorisation succeeded since the last failure */
};

#endif
