/* summary.h -- posterior summaries of MCMC draws: the columns of the R
 * package posterior's summarise_draws() (version 1.4), computed as it
 * computes them (the definitions: src/infer/summary.c), for one variable at
 * a time; and the summaries of one prediction.  Draws of one variable from
 * C chains of S iterations each are a chain-major array, draws[c*S + s].
 */
#ifndef GMM_SUMMARY_H
#define GMM_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "gmm/draws.h"
#include "gmm/likelihood.h"
#include "gmm/status.h"

typedef struct {
    double mean, median, sd, mad;
    double q5, q95;   /* 5% and 95% quantiles (type 7) */
    double rhat;      /* max of rank-normalised split bulk and tail R-hat */
    double ess_bulk;  /* rank-normalised split ESS */
    double ess_tail;  /* min ESS of the 5% and 95% quantile indicators */
} gmm_summary;

/* Scratch space for nchain x niter draws: 3 CS doubles and CS (double,
 * size_t) pairs, plus GSL FFT tables and a buffer of length
 * 2 nextn(niter / 2).  nchain and
 * niter must be >= 1 and their product must fit in memory: GMM_EINVAL
 * otherwise, GMM_ENOMEM when allocation fails (*out NULL on failure). */
typedef struct gmm_summary_work gmm_summary_work;
gmm_status gmm_summary_work_alloc(size_t nchain, size_t niter, gmm_summary_work **out);
void gmm_summary_work_free(gmm_summary_work *w); /* NULL-safe */

/* Every measure of the draws (draws[c*niter + s], nchain*niter values)
 * into *out.  w: a workspace allocated for exactly (nchain, niter)
 * (GMM_EDIM otherwise), or NULL to allocate one for this call (then
 * GMM_ENOMEM is possible).  GMM_EINVAL for NULL draws or out, or a zero
 * size.  Never fails on the values: where posterior returns NA the field is
 * NAN --
 *   - any NaN among the draws: every field NAN;
 *   - a constant variable (max - min < DBL_EPSILON, an absolute tolerance
 *     as posterior's): rhat, ess_bulk, ess_tail, ess_mean NAN (mean,
 *     median, quantiles the value; sd and mad 0); for draws of tiny but
 *     varying magnitude ess_tail and ess_mean are NAN while rhat and
 *     ess_bulk, computed from ranks, are not;
 *   - sd for CS = 1; rhat for S < 4 (split chains of fewer than 2
 *     draws); an ESS for S < 6 (split chains of fewer than 3 draws);
 *   - an indicator that is constant (ess_tail NAN).
 * Infinite draws follow R's arithmetic: the rank-based rhat and ess_bulk
 * stay finite unless folding meets inf - inf; ess_tail and ess_mean are
 * NAN; mean and sd are inf or NAN.
 *
 * Cost: one sort of the CS draws for the quantiles and one per rank
 * normalisation (three), one real FFT pair of length 2 nextn(S/2) per
 * split chain per ESS (five ESS for compute), O(CS log CS) in all; no
 * allocation when a workspace is given.  Results agree with posterior to
 * rounding (tests/infer/test_summary.c checks 1e-8 relative on fixtures
 * made by scripts/make-summary-fixtures.R). */
gmm_status gmm_summary_compute(const double *draws, size_t nchain, size_t niter,
                               gmm_summary_work *w, gmm_summary *out);

/* One measure at a time, with the same arguments and errors (each sorts
 * and transforms again; compute shares that work). */
gmm_status gmm_summary_rhat(const double *draws, size_t nchain, size_t niter,
                            gmm_summary_work *w, double *rhat);
gmm_status gmm_summary_ess_bulk(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess);
gmm_status gmm_summary_ess_tail(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess);
gmm_status gmm_summary_ess_mean(const double *draws, size_t nchain, size_t niter,
                                gmm_summary_work *w, double *ess);

/* The summary of every variable of draws d as CSV on f: the header
 * variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail, then a row per
 * variable (numbers %.17g, NA, Inf: gmm_csv_put_number).  stop (may be
 * NULL) is asked before each variable: nonzero cancels (GMM_ECANCEL
 * "interrupted").  The workspace's errors; the stream is the caller's to
 * check. */
gmm_status gmm_summary_write(FILE *f, const gmm_draws *d, int (*stop)(void));

/* R's quantile type 7 of n >= 1 sorted values at probability p in [0, 1]
 * (NAN for n = 0 or p outside [0, 1]).  O(1). */
double gmm_summary_quantile_sorted(const double *sorted, size_t n, double p);

/* ---- predictions ----------------------------------------------------------
 *
 * The posterior of one prediction as predict and vi --posterior print it:
 * the linear predictor f and the response r = E[y | f] at exposure 1 (the
 * rate exp(f) for a log link, the probability for bernoulli, f itself for
 * gaussian), each with a central interval at probability `level` in (0, 1)
 * (0.9: the 5% and 95% quantiles, as q5 and q95 above).  The inverse link is
 * increasing, so r's interval is f's mapped through it. */
typedef struct {
    double mean, var;            /* of f */
    double lower, upper;         /* f's central interval at the level */
    double resp;                 /* the posterior mean of r */
    double resp_lower, resp_upper; /* r's interval: lik's mean at lower, upper */
} gmm_summary_pred;

/* Under f ~ N(mu, s2): lower, upper = mu -/+ z sd with z = Phi^-1((1 +
 * level) / 2); resp as gmm_lik_response.  GMM_EINVAL for NULL lik or out,
 * level outside (0, 1), s2 < 0 or a non-finite mu or s2. */
gmm_status gmm_summary_pred_normal(const gmm_lik *lik, double mu, double s2, double level,
                                   gmm_summary_pred *out);

/* From n >= 1 draws of f (f[0..n), sorted in place: pass a copy to keep
 * the order): mean and var (denominator n - 1; 0 for n = 1) as
 * gmm_summary_compute's mean and sd^2, lower and upper R's type 7 quantiles
 * at (1 -/+ level) / 2, resp the mean over the draws of lik's mean; every
 * field NAN when a draw is NaN (as gmm_summary_compute).  GMM_EINVAL for
 * NULL arguments, n = 0 or level outside (0, 1).  O(n log n). */
gmm_status gmm_summary_pred_draws(const gmm_lik *lik, double *f, size_t n, double level,
                                  gmm_summary_pred *out);

#endif
