/* testutil.h -- shared test support: random inputs, dense oracles, gradient
 * checks.  Dense matrices here are test-only (never in src/). */
#ifndef GMM_TESTUTIL_H
#define GMM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/band.h"
#include "gmm/objective.h"

/* Small deterministic PRNG (splitmix64) so every run sees the same inputs. */
typedef struct {
    uint64_t s;
} tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
double tu_uniform(tu_rng *r);          /* in [0, 1) */
double tu_normal(tu_rng *r);           /* standard normal */

/* Fill every stored slot of b with N(0,1) draws. */
void tu_band_fill_random(gmm_band *b, tu_rng *r);
/* Make a SYMMETRIC band positive definite: random band plus a diagonal that
 * dominates each row (condition number modest). */
void tu_band_fill_spd(gmm_band *b, tu_rng *r);
/* Fill a LOWER band with a well-conditioned Cholesky-like factor (positive
 * diagonal in [1, 2], off-diagonals N(0, 0.3^2)). */
void tu_band_fill_lower(gmm_band *b, tu_rng *r);

/* Dense column-major copy (n*n doubles, caller frees with free()) of the full
 * matrix b represents (both triangles for SYMMETRIC). */
double *tu_band_to_dense(const gmm_band *b);
/* max |a_i - b_i| / max(1, max |b_i|) over m entries. */
double tu_max_rel_diff(const double *a, const double *b, size_t m);
/* Same, comparing band b's stored slots against dense column-major D. */
double tu_band_vs_dense(const gmm_band *b, const double *D);


/* Central finite-difference check: for each of the m entries p[i] of a
 * parameter array that f(ctx) reads, compare analytic[i] with
 * (f(p + h e_i) - f(p - h e_i)) / 2h, h = step * max(1, |p_i|).  Returns the
 * largest relative error |a - fd| / max(abs_floor, |a|, |fd|) and restores p.
 * The index of the worst entry goes to *worst when non-NULL. */
typedef double (*tu_scalar_fn)(void *ctx);
double tu_fd_check(double *p, size_t m, const double *analytic, tu_scalar_fn f, void *ctx,
                   double step, double abs_floor, size_t *worst);

/* As tu_fd_check, over at most nsample entries of p drawn with r (every
 * entry, in order, when m <= nsample): for large parameter arrays whose full
 * check would dominate the suite's run time. */
double tu_fd_check_sample(double *p, size_t m, const double *analytic, tu_scalar_fn f,
                          void *ctx, double step, double abs_floor, size_t nsample, tu_rng *r,
                          size_t *worst);
/* As tu_fd_check over the stored slots (i, j) of band P (corner slots are
 * skipped), with Pbar (P's shape) holding the analytic derivatives: at most
 * nsample slots drawn with r, or all of them when there are no more.  The
 * worst slot goes to *wi, *wj when non-NULL. */
double tu_fd_check_band(gmm_band *P, const gmm_band *Pbar, tu_scalar_fn f, void *ctx,
                        double step, double abs_floor, size_t nsample, tu_rng *r, size_t *wi,
                        size_t *wj);

/* As tu_fd_check, with the fourth-order central difference
 * (8 (f(p+h) - f(p-h)) - (f(p+2h) - f(p-2h))) / 12h: truncation O(h^4), so a
 * larger step (1e-3 .. 1e-2) keeps the rounding error of f small too (four
 * evaluations per entry). */
double tu_fd_check4(double *p, size_t m, const double *analytic, tu_scalar_fn f, void *ctx,
                    double step, double abs_floor, size_t *worst);

/* Standard errors of the log-parameters at a maximum theta (natural scale,
 * o->nparam values) of o->eval: the observed information I on u = log p
 * over the free entries of o (o->fixed[i] == 0; all must be positive), from
 * central differences (step h in u) of the analytic gradient, symmetrised
 * and inverted with a dense Cholesky.  se[i] (o->nparam) gets sqrt of the
 * diagonal of I^-1 for free entries and 0 for fixed ones.  *decrement (may
 * be NULL) gets the Newton decrement g' I^-1 g / 2 of the gradient g on u at
 * theta: the loglik still to gain by a Newton step, i.e. how far theta is
 * from the exact maximum.  With truth (o->nparam values) non-NULL, *wald
 * gets the Wald statistic (u - u_truth)' I (u - u_truth) over the free
 * entries (chi-square with (free count) degrees of freedom asymptotically):
 * a joint test that also sees a shift along a well-determined combination
 * of parameters that are each poorly determined.  Returns 0, or -1 when an
 * evaluation fails or I is not positive definite (theta is then not a
 * maximum).  Cost 2 (free count) + 1 evaluations. */
int tu_objective_log_se(const gmm_objective *o, const double *theta, double h, double *se,
                        double *decrement, const double *truth, double *wald);

/* ---- bounds for stochastic checks ------------------------------------------
 *
 * Every check on random draws states its false-failure probability, at most
 * 1e-6 per test.  tu_t_bound(p, m, nu): the b at which m statistics, each
 * Student t with nu degrees of freedom (nu = 0: standard normal), exceed |b|
 * with total probability at most p (a union bound: the quantile at
 * 1 - p / 2m).  tu_chisq_bounds(p, m, nu, lo, hi): [lo, hi] that m
 * statistics, each chi-square(nu) / nu, leave with total probability at most
 * p (p / 2m in each tail).
 *
 * A Monte Carlo z-score (mean - truth) / sqrt(var / ESS) whose ESS is
 * estimated from the same n draws has a heavier tail than the normal's, the
 * ESS estimate being itself uncertain (Geyer's sum over 2M + 1 lags has
 * relative variance ~ 2 (2M + 1) / n).  Taken as Student t with
 * TU_NU_MEAN(n) = n / 20 degrees of freedom for the mean of a variable and
 * TU_NU_SQUARE(n) = n / 60 for a mean of squares (a variance), which also
 * covers that mean's skew: over 100 seeds of test_hmc.c's chains (n = 1000,
 * 13900 z-scores of each kind) the means' |z| had a normal tail to 4.7, the
 * squares' |z| exceeded 4 in 8e-4 of them (t_17: 9e-4). */
/* The seed of a stochastic test: s, plus 1000003 K when the environment
 * sets GMM_TEST_SEED=K -- to check that no test depends on its stream
 * (GMM_TEST_SEED=3 build/release/tests/run).  Far apart, for tu_rng_seed(s +
 * 1) is the stream of s shifted by one draw. */
uint64_t tu_seed(uint64_t s);
#define TU_NU_MEAN(n) ((double)(n) / 20.0)
#define TU_NU_SQUARE(n) ((double)(n) / 60.0)
double tu_t_bound(double p, size_t m, double nu);
void tu_chisq_bounds(double p, size_t m, double nu, double *lo, double *hi);

/* Recovery of parameters from simulated data by maximum likelihood, a false
 * failure of at most 5e-7 per fit: each of the nfree log-parameters within
 * tu_fit_z_bound(nfree) observed-information standard errors of the truth
 * (4e-7 over them, normal, with the standard errors taken as 1.25 times too
 * small: over 40 seeds the estimates' spread reached 1.23 times their mean
 * SE, test_fit_ssm.c), and the Wald statistic below tu_fit_wald_bound(nfree)
 * (1e-7: the chi-square quantile times 1.25^2). */
double tu_fit_z_bound(size_t nfree);
double tu_fit_wald_bound(size_t nfree);

#endif
