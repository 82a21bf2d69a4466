/* loo.h -- Pareto-smoothed importance-sampling leave-one-out cross-validation
 * (PSIS-LOO) and WAIC from pointwise log-likelihood draws, as the R package
 * loo (2.5.1) computes loo::loo(ll, r_eff = loo::relative_eff(exp(ll))) and
 * loo::waic(ll) (the definitions: src/infer/loo.c).  The draws of one
 * observation are ll[c*niter + s] for chain c and iteration s (chain-major,
 * as draws.h), S = nchain niter.
 */
#ifndef GMM_LOO_H
#define GMM_LOO_H

#include <stddef.h>

#include "gmm/draws.h"
#include "gmm/status.h"

typedef struct {
    double elpd_loo, p_loo, looic;
    double mcse_elpd_loo;
    double pareto_k;      /* INFINITY when no tail could be fitted */
    double r_eff;         /* relative efficiency of exp(ll) */
    double elpd_waic, p_waic, waic;
} gmm_loo_point;

typedef struct {
    size_t nobs, ndraw;
    double elpd_loo, se_elpd_loo, p_loo, se_p_loo, looic, se_looic;
    double mcse_elpd_loo; /* NAN when some k > 0.7 */
    double elpd_waic, se_elpd_waic, p_waic, se_p_waic, waic, se_waic;
    size_t k_good, k_ok, k_bad, k_very_bad;
} gmm_loo;

/* Scratch space for nchain x niter draws of one observation (4 S + 2000
 * doubles, S indices and GSL FFT tables of length 2 nextn(niter)).  GMM_EINVAL
 * unless nchain >= 1, niter >= 2 (loo's ESS needs two draws per chain) and
 * the sizes fit in memory; GMM_ENOMEM (*out NULL on failure). */
typedef struct gmm_loo_work gmm_loo_work;
gmm_status gmm_loo_work_alloc(size_t nchain, size_t niter, gmm_loo_work **out);
void gmm_loo_work_free(gmm_loo_work *w); /* NULL-safe */

/* The pointwise measures of one observation from its nchain x niter
 * log-likelihood draws ll (not modified) into *out, with a workspace
 * allocated for (nchain, niter) (GMM_EDIM otherwise).  GMM_EINVAL for NULL
 * arguments; GMM_EDOM for a NaN or infinite draw (loo refuses them too).
 * Cost: one sort of S values, one FFT pair of length 2 nextn(niter) per
 * chain, (30 + sqrt(M_tail)) M_tail log1p for the Pareto fit and 1000 logs
 * for the MCSE.  Results agree with R's to rounding (tests/infer/test_loo.c
 * checks 1e-8 relative on fixtures made by scripts/make-loo-fixtures.R). */
gmm_status gmm_loo_point_compute(const double *ll, size_t nchain, size_t niter, gmm_loo_work *w,
                                 gmm_loo_point *out);

/* Totals of nobs >= 1 pointwise results (from draws of ndraw = S draws,
 * recorded in *out): estimates, SEs (NAN for nobs = 1, as R's var) and
 * the Pareto k counts (loo 2.5.1's cut points: good k <= 0.5, ok <= 0.7,
 * bad <= 1, very bad above).  GMM_EINVAL for NULL arguments or nobs = 0;
 * GMM_ENOMEM. */
gmm_status gmm_loo_totals(const gmm_loo_point *point, size_t nobs, size_t ndraw, gmm_loo *out);

/* PSIS-LOO and WAIC from draws d: point[i] for the log-likelihood variable
 * var[i] of d (nchain x niter each), i < nobs, and their totals in *out.
 * stop (may be NULL) is asked before each variable: nonzero cancels
 * (GMM_ECANCEL "interrupted").  A variable's error is prefixed with its
 * name ("log_lik[3]: ..."); gmm_loo_totals's; GMM_ENOMEM. */
gmm_status gmm_loo_draws(const gmm_draws *d, const size_t *var, size_t nobs, int (*stop)(void),
                         gmm_loo_point *point, gmm_loo *out);

#endif
