/* ssm.h -- Gaussian-process regression with a state-space kernel (kernel.h):
 * the block-tridiagonal prior precision of the stacked states as one band,
 * the log marginal likelihood with its gradient with respect to every named
 * parameter, and posterior prediction (paper, sections 3.1 and 5.2).
 *
 * MODEL.  Inputs x (n rows, any order; repeated values allowed) are sorted
 * into K distinct states t_0 < ... < t_{K-1}.  Rows with equal x (or, with
 * merge_tol > 0, x within merge_tol of the first x of their group) are
 * several observations of ONE state -- never two states dt = 0 apart.  A row
 * whose y is NAN is a state without an observation.  With d the kernel's state
 * dimension and N = K d,
 *
 *   x_0 ~ N(0, Pinf),  x_k = A_k x_{k-1} + q_k,  q_k ~ N(0, Q_k),
 *   A_k = A(t_k - t_{k-1}),  Q_k = Q(t_k - t_{k-1}),
 *   y_r = H x_{state(r)} + e_r,  e_r ~ N(0, noise.variance).
 *
 * The prior precision (SYMMETRIC band, lower bandwidth 2d - 1, or d - 1 + s
 * when the kernel's state splits into independent blocks of at most s
 * variables, each state's variables then listed block by block: see BLOCKS in
 * ssm.c; gmm_ssm_bandwidth reports it) has diagonal
 * blocks Pinf^-1 + A_1' Q_1^-1 A_1, Q_k^-1 + A_{k+1}' Q_{k+1}^-1 A_{k+1},
 * Q_{K-1}^-1 and sub-diagonal blocks -Q_k^-1 A_k; log|Q_prior| = -log|Pinf|
 * - sum_k log|Q_k| from the d x d blocks.  (A_k, Q_k) are computed once per
 * distinct interval: intervals that differ by less than dt_ulps rounding
 * units of max|x| (below the resolution of the inputs themselves) share one.
 *
 * PARAMETERS.  theta = (kernel parameters in gmm_kernel order, noise
 * variance): names "<leaf>.<kernel>.<param>" and "noise.variance", all on
 * their natural scale and all required positive.
 *
 * ZERO PROCESS NOISE.  Factors with Q = 0 (constant, cosine, periodic) are
 * damped by exp(-|tau| damp) (kernel.h): Q_k is then (1 - exp(-2 damp dt))
 * Pinf for such a factor, a minimal process noise proportional to Pinf, and
 * the model is an exact stationary GP (the regularised kernel), not an
 * approximation inside the algebra.  A damped model is always factorised
 * in the square-root form (FACTORISATION): its precision holds entries ~
 * 1/(damp dt), whose rounding in the Cholesky cost ~1/damp_rel of accuracy
 * and forced the old default (0.4 sqrt(eps K)) to a balance that missed
 * 1e-6 at noise/variance 0.01.  In the square-root form the rounding is
 * negligible (the error stayed proportional to damp_rel from 1e-5 down to
 * 1e-10, 1.4e-9 there) and what is left is the bias of the damped kernel
 * over the data, proportional to damp_rel = damp * span (span = t_{K-1} -
 * t_0).  What a small damping costs instead is the GRADIENT (below): it
 * is chained through the precision's entries, and its rounding grows like
 * K^2 / damp_rel (the rounding bound of FACTORISATION is ~ eps K^2 /
 * damp_rel).  The default balances the two: damp_rel = max(2e-8, 800 eps
 * K^2) (GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2): 2e-8 up to K ~ 340 states,
 * then growing so that the gradient's rounding stays near 1e-2 of log
 * likelihood, where fits converge.  Measured against the UNDAMPED dense GP
 * at n = 300 (tests/bench/bench_ssm_accuracy.c, Table 2;
 * tests/model/test_ssm.c asserts 1e-6 at noise/variance 0.01 and 0.1):
 * worst relative loglik error 2.8e-7 at noise/variance 0.01, 1.1e-7 at 0.1,
 * 1.8e-9 at 1 (the bias grows with the signal-to-noise ratio).  On the CO2
 * training weeks (K = 2075, damp_rel 7.6e-7), `fit --kernel 'matern32 +
 * periodic(period=1, harmonics=3)'` converges, its loglik 1.0e-5 relative
 * from the undamped dense GP's; with damp_rel 2e-8 it stopped on rounding
 * (bound 0.38), with 2.7e-7 it converged too.  A product with a factor
 * that has process noise (periodic * matern32) is not damped and has no
 * bias.
 *
 * FACTORISATION.  The posterior precision P = Q_prior + H'H/noise is
 * factorised either by the banded Cholesky of P assembled in the band (the
 * paper's algorithm, fastest), or in the SQUARE-ROOT FORM: from the rows
 * C_k (x_{k+1} - A_k x_k), C_k = chol(Q_k)^-1, and H/sqrt(noise), never
 * forming P (gmm_marglik_eval_rows; same factor, same gradient code).  The
 * Cholesky is only as accurate as P's stored entries: where they are huge
 * against the information the data add -- inputs close together relative
 * to a lengthscale, a long smooth record -- their rounding alone costs up
 * to eps sum_i P_ii Pinf_ii of log-likelihood (the Cholesky's rounding
 * BOUND; over 300 configurations the error was at most 0.84 of it where
 * it exceeded 1e-6, and below 4e-8 elsewhere).  On
 * the CO2 model fitted to data/co2_train.csv the bound is 9e-4: the
 * Cholesky's loglik is off by 1.3e-4 (dense GP: -957.453203327; Cholesky
 * -957.453074495; square-root form -957.453203331), and `fit` with it stops
 * on rounding unconverged, where the square-root form converges.  The
 * square-root form costs about 3x the Cholesky (2d Householder reflections
 * per state; marglik.h).  GMM_SSM_FACTOR_AUTO (default) takes the Cholesky while its
 * bound is at most GMM_SSM_CHOL_TOL per observation, the inputs are no
 * closer than its spacing limit below and nothing is damped; else the
 * square-root form.  The choice depends on theta only, and where it
 * switches the two differ by less than the Cholesky's bound.
 *
 * CLOSE INPUTS.  Q_k becomes nearly singular when dt << lengthscale (its
 * small eigenvalues scale like dt^(2 nu)).  A(dt) and Q(dt) themselves are
 * computed to a few ulps at any dt (kernel_matern.c), so what limits the
 * Cholesky is the rounding of P's entries ~ (lengthscale/dt)^(2 nu) /
 * variance.  Measured worst relative loglik error against the dense GP
 * over 9 data sets of n = 300 (tests/bench/bench_ssm_accuracy.c, Table 1):
 *
 *   dt/l        1e-1    1e-2    1e-3    1e-4    1e-6    1e-8    1e-10
 *   Cholesky:
 *   matern12    5e-14   2e-13   9e-13   5e-13   1e-11   6e-9    9e-9
 *   matern32    3e-13   8e-10   5e-7    3e-5    --      --      --
 *   matern52    4e-11   9e-6    2e-2    --      --      --      --
 *   square-root form:
 *   matern12    5e-14   2e-13   1e-13   1e-13   3e-12   4e-12   5e-12
 *   matern32    3e-13   3e-13   3e-12   4e-12   3e-12   2e-12   9e-14
 *   matern52    1e-13   7e-13   6e-11   3e-10   3e-11   8e-14   7e-13
 *
 * (every kernel of the table, products and sums included, stays below 4e-9
 * in the square-root form down to 1e-10).  Each kernel type records the
 * smallest dt/l measured accurate to 1e-6 for each form
 * (gmm_kernel_type.min_dt_rel, _rows): Cholesky Matern-3/2 3e-4 (2e-3 in a
 * product with an oscillator), Matern-5/2 2e-2; square-root form 1e-10 for
 * Matern-3/2 and -5/2 (alone or combined) -- not a failure but the end of
 * what was measured -- and none for Matern-1/2 and quasiperiodic, whose
 * precision grows only like l/dt.  Below the Cholesky's limit the automatic choice takes the
 * square-root form; below 1e-10 (or below the Cholesky's limit with
 * GMM_SSM_FACTOR_CHOL) check_spacing refuses the evaluation with GMM_EDOM
 * and a message naming the inputs, the parameter and the remedies (merge
 * near-ties with merge_tol, or a shorter lengthscale) -- never a wrong
 * number.
 *
 * GRADIENT.  The square-root form fixes the log likelihood, not its
 * gradient: the reverse mode is chained through dlogp/dP and the blocks W,
 * W A, A' W A of the precision in both forms, and its rounding grows with
 * the same (lengthscale/dt)^(2 nu) -- measured in log-parameter units at
 * about 0.1 to 10 times the Cholesky's rounding bound (20% of the
 * lengthscale gradient of matern52 at dt/l = 3e-3 on weekly CO2 data).  So
 * a gradient keeps the Cholesky's spacing limits (min_dt_rel) whatever
 * the form: below them gmm_ssm_loglik with grad != NULL fails with GMM_EDOM
 * and a message saying the log likelihood alone is still available.  At
 * those limits the gradient agrees with finite differences to about 1e-4 of
 * max(|gradient|, 1) (tests/model/test_ssm.c, test_gradient_close_inputs),
 * where ordinary spacings give 1e-6.  Damped kernels have no spacing
 * limit; their gradient rounding grows like K^2 / damp_rel, which the
 * default damping holds near 1e-2 of log likelihood beyond K ~ 340 (it
 * was 0.3 for periodic at K = 2000 with damp_rel 2e-8, enough to stop a
 * fit on rounding).  The limit belongs to differentiating through P: in
 * the orthogonal factor of the square-root form the whitened innovations'
 * covariance is Q_G Q_G' (Q_G the rows of Q for G), free of this
 * cancellation, and a reverse mode through it would not share the limit
 * (README, Limitations).
 */
#ifndef GMM_SSM_H
#define GMM_SSM_H

#include <stddef.h>

#include "gmm/kernel.h"
#include "gmm/objective.h"
#include "gmm/status.h"

/* The automatic choice takes the Cholesky only while its rounding bound
 * stays below this many units of log-likelihood per observation (see
 * FACTORISATION). */
#define GMM_SSM_CHOL_TOL 1e-9

/* The default damping: damp_rel = max(GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2
 * DBL_EPSILON K^2) (see ZERO PROCESS NOISE). */
#define GMM_SSM_DAMP_REL 2e-8
#define GMM_SSM_DAMP_K2 800.0

/* Which factorisation of the posterior precision (see FACTORISATION). */
typedef enum {
    GMM_SSM_FACTOR_AUTO = 0, /* Cholesky unless the inputs are closer than its limit */
    GMM_SSM_FACTOR_CHOL = 1, /* always the Cholesky of the assembled precision */
    GMM_SSM_FACTOR_ROWS = 2  /* always the square-root form */
} gmm_ssm_factor;

typedef struct {
    double merge_tol;  /* >= 0: inputs within merge_tol (units of x) of the first
                          input of their group share one state (at that first x).
                          Default 0: exact ties only. */
    double damp;       /* >= 0: damping rate of zero-noise factors; NAN (default):
                          damp_rel / span (damp_rel per unit x if span = 0) */
    double damp_rel;   /* > 0, or NAN (default): max(GMM_SSM_DAMP_REL,
                          GMM_SSM_DAMP_K2 DBL_EPSILON K^2) */
    double dt_ulps;    /* >= 0, default 8 */
    int check_spacing; /* default 1 */
    gmm_ssm_factor factor; /* default GMM_SSM_FACTOR_AUTO */
} gmm_ssm_params;

/* Defaults as documented on each field. */
void gmm_ssm_params_init(gmm_ssm_params *p);
/* GMM_EINVAL naming the first bad field. */
gmm_status gmm_ssm_params_check(const gmm_ssm_params *p);

typedef struct gmm_ssm gmm_ssm;

/* The symbolic model: sorting, states, distinct intervals, observation map,
 * band and workspaces (sized once; evaluations do not allocate).  k is
 * borrowed and must outlive the model; x (n, finite) and y (n; NAN =
 * missing, else finite) are copied.  par NULL: defaults.  Errors: GMM_EINVAL
 * (n == 0, a non-finite x, an infinite y, bad params), GMM_ENOMEM.
 * O(n log n + K d^2). */
gmm_status gmm_ssm_alloc(const gmm_kernel *k, const double *x, const double *y, size_t n,
                         const gmm_ssm_params *par, gmm_ssm **out);
void gmm_ssm_free(gmm_ssm *m);

size_t gmm_ssm_nstates(const gmm_ssm *m);    /* K */
size_t gmm_ssm_nobs(const gmm_ssm *m);       /* observed rows */
size_t gmm_ssm_dim(const gmm_ssm *m);        /* d */
size_t gmm_ssm_bandwidth(const gmm_ssm *m);  /* lower bandwidth of the precision */
size_t gmm_ssm_nintervals(const gmm_ssm *m); /* distinct cached intervals */
/* Distinct input values merged into an earlier state by merge_tol (0 when
 * only exact ties were joined): a nonzero count is the caller's warning. */
size_t gmm_ssm_nmerged(const gmm_ssm *m);
double gmm_ssm_damp(const gmm_ssm *m);       /* damping rate in use */
/* Of the last evaluation (after a successful gmm_ssm_loglik): whether it
 * used the square-root form, and the Cholesky's rounding bound there (an
 * estimate of its log-likelihood error; see FACTORISATION). */
int gmm_ssm_used_rows(const gmm_ssm *m);
double gmm_ssm_chol_bound(const gmm_ssm *m);
size_t gmm_ssm_nparam(const gmm_ssm *m);     /* kernel parameters + 1 */
const char *gmm_ssm_param_name(const gmm_ssm *m, size_t i);
/* State index of input row r (rows in the caller's order). */
size_t gmm_ssm_row_state(const gmm_ssm *m, size_t r);

/* log p(y | theta) into *loglik and, when grad != NULL, its gradient
 * (nparam, natural scale, OVERWRITTEN) from the reverse modes of the
 * marginal likelihood, the block assembly and the kernel.  O(N d^2 + (number
 * of distinct intervals) d^3).  Errors (an ordinary outcome during a line
 * search): GMM_EDOM for a parameter not positive/finite or spacing below the
 * accuracy limit (of the gradient when grad != NULL: GRADIENT), GMM_ENOTPD
 * when a Q_k, Pinf or the posterior precision is
 * not numerically positive definite. */
gmm_status gmm_ssm_loglik(gmm_ssm *m, const double *theta, double *loglik, double *grad);

/* Fill obj for fit/gradcheck: names, a copy of theta0 as starting values
 * (NULL: the kernel's stored values and noise 1), all positive, none fixed;
 * eval = gmm_ssm_loglik.  The arrays are owned by m (valid until
 * gmm_ssm_free); the caller may edit value and fixed. */
gmm_status gmm_ssm_objective(gmm_ssm *m, const double *theta0, gmm_objective *obj);

/* Posterior mean and variance of the latent f at nq query inputs xq (any
 * order, inside or outside the data range, repeats allowed; mean and var
 * have nq entries).  The queries are NOT added to the model: it is
 * evaluated once at theta on its own data (a copy of m, same kernel and
 * damping), and the posterior of the data states (gmm_marglik_posterior:
 * mean and the Takahashi band of the covariance, lower bandwidth 2d - 1,
 * i.e. the blocks (k, k) and (k+1, k)) gives each query exactly by the
 * Markov property: at a state, that state's posterior; between states k and
 * k + 1, the bridge x(t) | x_k, x_{k+1} of the two sub-intervals (only
 * Q(t_{k+1} - t_k), an interval of the model, is factorised); beyond the
 * last state, A x + q; before the first, the stationary prior conditioned on
 * the first state.  f(t) = h(t)' x(t) with the model's own row (rotating
 * coordinates included).  So a query may be at ANY distance from an input or
 * from another query (no spacing check: a query 1e-9 lengthscales from an
 * input is as accurate as the posterior at that input); queries are
 * independent marginals.  A query within the model's merge_tol of an input
 * gets that input's state.  Allocates a copy of the model and the posterior
 * for the call.  O(n log n + N d^2 + nq (d^3 + log K)).  Errors as
 * gmm_ssm_loglik on the data alone (a bad theta, data inputs closer than
 * the accuracy limit, GMM_ENOTPD), GMM_EINVAL for a NULL argument or a
 * non-finite query (index in gmm_error_index()), GMM_ENOMEM. */
gmm_status gmm_ssm_predict(const gmm_ssm *m, const double *theta, const double *xq, size_t nq,
                           double *mean, double *var);

#endif
