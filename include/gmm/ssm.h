/* ssm.h -- the state-space family of latent models (kernel.h): the stacked
 * states of a stationary GP at the sorted inputs, their block-tridiagonal
 * prior precision as one band with its reverse mode, the observation rows
 * f_r = h_r' x_{state(r)}, the exact Gaussian marginal likelihood with its
 * gradient (paper, sections 3.1 and 5.2), the whitening map of the prior
 * (WHITENING, for HMC and VI: section 3.2) and prediction at any input from
 * a Gaussian posterior of the states.  latent.h wraps it as a gmm_latent.
 */
#ifndef GMM_SSM_H
#define GMM_SSM_H

#include <stddef.h>

#include "gmm/kernel.h"
#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/status.h"

/* The automatic choice takes the Cholesky only while its rounding bound
 * stays below this many units of log-likelihood per observation (see
 * FACTORISATION). */
#define GMM_SSM_CHOL_TOL 1e-9
/* ... and, when a gradient is wanted, below this many units of log
 * likelihood in all (see FACTORISATION). */
#define GMM_SSM_CHOL_GRAD_TOL 1e-8

/* The default damping: damp_rel = max(GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2
 * DBL_EPSILON K^2) (see FACTORISATION). */
#define GMM_SSM_DAMP_REL 2e-8
#define GMM_SSM_DAMP_K2 800.0

/* MODEL.  Inputs x (n rows, any order; repeated values allowed) are sorted
 * into K distinct states t_0 < ... < t_{K-1}.  Rows with equal x (or, with
 * merge_tol > 0, x within merge_tol of the first x of their group) are
 * several observations of ONE state -- never two states dt = 0 apart.  A row
 * whose y is NAN is a state without an observation.  With d the kernel's state
 * dimension and N = K d,
 *
 *   x_0 ~ N(0, Pinf),  x_k = A_k x_{k-1} + q_k,  q_k ~ N(0, Q_k),
 *   A_k = A(t_k - t_{k-1}),  Q_k = Q(t_k - t_{k-1}),
 *   f_r = h_r' x_{state(r)}  (h_r = H, or h(t - t_0) for a demodulated
 *                             kernel: gmm_ssm_obs_rows).
 *
 * The prior precision is a SYMMETRIC band (gmm_ssm_bandwidth: 2d - 1, less
 * when the kernel's state splits into independent blocks; its blocks:
 * ssm_prior.c); (A_k, Q_k) are computed once per distinct interval
 * (intervals within dt_ulps rounding units of max|x| share one).
 *
 * PARAMETERS.  theta = the kernel parameters in gmm_kernel order, named
 * "<leaf>.<kernel>.<param>", on their natural scale, all positive.  The
 * Gaussian likelihood's variance is passed separately (gmm_ssm_loglik).
 *
 * FACTORISATION.  Zero-noise factors (constant, cosine, periodic) are
 * damped by exp(-|tau| damp), damp_rel = damp * span = max(GMM_SSM_DAMP_REL,
 * GMM_SSM_DAMP_K2 eps K^2): an exact stationary GP of a regularised kernel.
 * The posterior precision is factorised by the banded Cholesky or in the
 * square-root form (rows C_k (x_{k+1} - A_k x_k), C_k = chol(Q_k)^-1, never
 * forming P); GMM_SSM_FACTOR_AUTO takes the Cholesky while its rounding
 * bound eps sum_i P_ii Pinf_ii is below GMM_SSM_CHOL_TOL per observation
 * (with a gradient, below GMM_SSM_CHOL_GRAD_TOL in all), the inputs are no
 * closer than its spacing limit and nothing is damped.  In the square-root
 * form the gradient comes by Fisher's identity from the posterior moments
 * of the prior's whitened rows (marglik.h, ROW MOMENTS; ROWS GRADIENT in
 * ssm_prior.c).  Inputs closer than a kernel's accuracy limit
 * (gmm_kernel_type.min_dt_rel, _rows) are refused with GMM_EDOM naming
 * them.  Why, and how accurate each form is: docs/accuracy.md. */

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
    size_t work_limit; /* bytes of workspace gmm_ssm_alloc accepts (its estimate,
                          refused with the size it would need before anything
                          large is allocated); 0 (default): 90% of the
                          machine's physical memory */
} gmm_ssm_params;

/* Defaults as documented on each field. */
void gmm_ssm_params_init(gmm_ssm_params *p);
/* GMM_EINVAL naming the first bad field. */
gmm_status gmm_ssm_params_check(const gmm_ssm_params *p);

typedef struct gmm_ssm gmm_ssm;

/* The symbolic model: sorting, states, distinct intervals, block order and
 * workspaces (sized once; evaluations do not allocate).  k is borrowed and
 * must outlive the model; x (n, finite) is copied.  par NULL: defaults.
 * Errors: GMM_EINVAL (n == 0, a non-finite x, bad params), GMM_ENOMEM
 * (also when the workspace would exceed par->work_limit: the message gives
 * the size).
 * O(n log n + K d^2). */
gmm_status gmm_ssm_alloc(const gmm_kernel *k, const double *x, size_t n,
                         const gmm_ssm_params *par, gmm_ssm **out);
void gmm_ssm_free(gmm_ssm *m);

/* The outcomes of the n rows for the Gaussian marginal likelihood (y NAN:
 * missing; copied).  GMM_EINVAL for an infinite y (index = row).  O(n). */
gmm_status gmm_ssm_set_y(gmm_ssm *m, const double *y);

size_t gmm_ssm_nrows(const gmm_ssm *m);      /* n */
size_t gmm_ssm_nstates(const gmm_ssm *m);    /* K */
size_t gmm_ssm_nobs(const gmm_ssm *m);       /* observed rows of the last set_y */
size_t gmm_ssm_dim(const gmm_ssm *m);        /* d */
size_t gmm_ssm_dimension(const gmm_ssm *m);  /* N = K d, the latent vector */
size_t gmm_ssm_bandwidth(const gmm_ssm *m);  /* lower bandwidth of the precision */
size_t gmm_ssm_nintervals(const gmm_ssm *m); /* distinct cached intervals */
/* Distinct input values merged into an earlier state by merge_tol (0 when
 * only exact ties were joined): a nonzero count is the caller's warning. */
size_t gmm_ssm_nmerged(const gmm_ssm *m);
double gmm_ssm_damp(const gmm_ssm *m);       /* damping rate in use */
/* Of the last gmm_ssm_loglik: whether it used the square-root form, and the
 * Cholesky's rounding bound there (an estimate of its error). */
int gmm_ssm_used_rows(const gmm_ssm *m);
double gmm_ssm_chol_bound(const gmm_ssm *m);
size_t gmm_ssm_nparam(const gmm_ssm *m);     /* kernel parameters */
const char *gmm_ssm_param_name(const gmm_ssm *m, size_t i);
/* State index of input row r, and the first latent its row reads (the
 * state's d variables in band order: row r reads offset .. offset + d - 1). */
size_t gmm_ssm_row_state(const gmm_ssm *m, size_t r);
size_t gmm_ssm_row_offset(const gmm_ssm *m, size_t r);
/* Nonzero when the observation rows depend on the row (demodulated kernel). */
int gmm_ssm_obs_varies(const gmm_ssm *m);
/* The kernel's state variable (gmm_kernel's order) at band position p of
 * every state (p < d; BLOCKS). */
size_t gmm_ssm_state_var(const gmm_ssm *m, size_t p);

/* The prior precision Q(theta) of the N stacked states into Q (SYMMETRIC,
 * N x N, kl = gmm_ssm_bandwidth; every stored slot written) and log|Q| from
 * the d x d blocks into *logdet (may be NULL).  The spacing limit is the
 * Cholesky's (a caller factorises Q).  GMM_EDOM (bad theta, inputs below the
 * limit), GMM_ENOTPD (a Q_k or Pinf), GMM_EDIM (Q's shape).  O(N d^2). */
gmm_status gmm_ssm_prior(gmm_ssm *m, const double *theta, gmm_band *Q, double *logdet);
/* Reverse mode after gmm_ssm_prior on m (nothing else on m in between):
 * thetabar (nparam) += sum_stored Qbar dQ/dtheta + logdetbar dlog|Q|/dtheta.
 * Qbar SYMMETRIC with the model's shape.  O(N d^2 + intervals d^3). */
gmm_status gmm_ssm_prior_rev(gmm_ssm *m, const gmm_band *Qbar, double logdetbar,
                             double *thetabar);
/* SQUARE ROOT of the prior precision (for variational inference; latent.h):
 * Q_prior = G'G for N rows in band order (BLOCKS), row (k + 1) d + p being
 * row p of C_k (x_{k+1} - A_k x_k), C_k = chol(Q_k)^-1, and rows 0 .. d - 1
 * chol(Pinf)^-1 x_0 (the layout: ssm_rows.c), first columns nondecreasing
 * (marglik.h's gmm_prior_rows contract).  G is the inverse of the whitening
 * map (W G = I) and, like it, computed without any inverse of an assembled
 * matrix: there is no spacing limit (no GMM_EDOM for close inputs), which is
 * why variational inference takes these rows rather than the assembled Q
 * when inputs are close relative to a lengthscale.
 *
 * gmm_ssm_prior_rows fills G at theta (nrows N, row callback, ctx owned by m;
 * rows may be read in any order and any number of times while G is valid:
 * until the next call on m other than gmm_ssm_prior_rows_rev and
 * gmm_ssm_prior_rows_rev_moments) and
 * log|Q_prior| into *logdet (may be NULL).
 * The first call allocates the workspace of the reverse mode (O(intervals
 * d^2 + nparam) doubles).  It ends a gmm_ssm_prior/_prior_rev pair.
 * Errors: GMM_EINVAL (NULL), GMM_EDOM (theta), GMM_ENOTPD (a Q_k or Pinf),
 * GMM_ENOMEM.  O(intervals d^3); each row O(kl). */
gmm_status gmm_ssm_prior_rows(gmm_ssm *m, const double *theta, gmm_prior_rows *G,
                              double *logdet);
/* Reverse mode at the theta of the last successful gmm_ssm_prior_rows on m
 * (whatever other calls came in between): thetabar (nparam) += d/dtheta of
 *
 *   sum_i sum_{j < w_i} Gbar[i (kl + 1) + j] G_i[j]  +  logdetbar log|Q_prior|,
 *
 * G_i[j] entry j of row i as the callback writes it (w_i entries from its
 * first column), kl = gmm_ssm_bandwidth; Gbar has N (kl + 1) entries and
 * those with j >= w_i are not read (the chain: ssm_rows.c).  Ends a
 * gmm_ssm_prior/_prior_rev pair.  GMM_EINVAL (NULL, no successful
 * gmm_ssm_prior_rows before).  O(N kl + intervals (d^3 + nparam d^2)). */
gmm_status gmm_ssm_prior_rows_rev(gmm_ssm *m, const double *Gbar, double logdetbar,
                                  double *thetabar);
/* Reverse mode at the theta of the last successful gmm_ssm_prior_rows on m
 * in the rows' moments instead of their entries: for x with any fixed
 * distribution, thetabar (nparam) += d/dtheta E[log N(x | 0, Q_prior^-1)]
 * given, per segment t = 0 .. K - 1 of d rows (v_t = G_t x: v_0 = C0 x_0,
 * v_t = C (x_t - A x_{t-1})), Svv_t = E[v_t v_t'] and, for t >= 1, Svx_t
 * = E[v_t x_{t-1}'] (d x d each, row-major, rows in G's order, x_{t-1} in
 * the latent order, at Svv + t d^2 and Svx + t d^2; Svx's segment 0 is not
 * read).  Only entries within a kernel block count (BLOCKS).  Fisher's
 * chain of the square-root form (ssm_prior.c, ROWS GRADIENT): whitened
 * moments of order 1, nothing formed from the rows' large entries.
 * Recomputes the blocks at that
 * theta (G stays valid).  Ends a gmm_ssm_prior/_prior_rev pair.  GMM_EINVAL
 * (NULL, no successful gmm_ssm_prior_rows before).  O(intervals (d^3 +
 * nparam d^2)). */
gmm_status gmm_ssm_prior_rows_rev_moments(gmm_ssm *m, const double *Svv, const double *Svx,
                                          double *thetabar);

/* The observation row at theta of each of the n data rows into coef (n x d,
 * row r at coef + r d, band order).  Reverse mode: thetabar += d(sum
 * coefbar . coef)/dtheta.  Either ends a gmm_ssm_prior/_prior_rev pair.
 * O(n d + d^3). */
gmm_status gmm_ssm_obs_rows(gmm_ssm *m, const double *theta, double *coef);
gmm_status gmm_ssm_obs_rows_rev(gmm_ssm *m, const double *theta, const double *coefbar,
                                double *thetabar);

/* WHITENING (for HMC and VI; latent.h).  x = W(theta) v maps white noise v
 * ~ N(0, I_N) to the states x ~ N(0, Q_prior^-1), in the band order of the
 * precision, by the innovations form
 *
 *   x_0 = chol(Pinf) v_0,   x_{k+1} = A_k x_k + chol(Q_k) v_{k+1},
 *
 * chol the lower Cholesky factor of each block (BLOCKS) in band order;
 * W W' = Q_prior^-1 whatever the spacing: no spacing limit (ssm_whiten.c).
 *
 * gmm_ssm_whiten_setup computes A_k, chol(Q_k) per interval group and
 * chol(Pinf) at theta (the first call allocates the whitening workspace,
 * O(intervals d^2 + N) doubles); the three others then use that theta,
 * whatever other calls on m come in between.  The setup and whiten_rev end
 * a gmm_ssm_prior/_prior_rev pair (they move the kernel's workspace).
 * Errors: GMM_EDOM (theta), GMM_ENOTPD (a Q_k or Pinf), GMM_ENOMEM; the
 * others GMM_EINVAL without a successful setup.  Setup O(intervals d^3). */
gmm_status gmm_ssm_whiten_setup(gmm_ssm *m, const double *theta);
/* x = W v (N each; v and x may be the same array).  O(N kl). */
gmm_status gmm_ssm_whiten(gmm_ssm *m, const double *v, double *x);
/* v = W^-1 x (the innovations whitened: v_0 = chol(Pinf)^-1 x_0, v_{k+1} =
 * chol(Q_k)^-1 (x_{k+1} - A_k x_k)) at the setup's theta; x and v must not
 * alias.  O(N d). */
gmm_status gmm_ssm_unwhiten(gmm_ssm *m, const double *x, double *v);
/* u = W' g (N each, the adjoint recursion run backwards; g and u may be the
 * same array).  O(N kl). */
gmm_status gmm_ssm_whiten_t(gmm_ssm *m, const double *g, double *u);
/* thetabar (nparam) += d(xbar . W(theta) v)/dtheta at the setup's theta:
 * the gradients of every A_k and chol(Q_k), summed per interval group, and
 * of chol(Pinf), chained through the Cholesky's reverse mode (Murray 2016)
 * to Q_k and Pinf and through the kernel's.  v NULL: the v of the last
 * gmm_ssm_whiten since the setup (its x reused), xbar NULL: the g of the
 * last gmm_ssm_whiten_t since the setup (its adjoint recursion reused);
 * GMM_EINVAL when that call was not made.  O(N kl + intervals (d^3 +
 * nparam d^2)). */
gmm_status gmm_ssm_whiten_rev(gmm_ssm *m, const double *v, const double *xbar,
                              double *thetabar);

/* The Gaussian likelihood y_r ~ N(f_r, noise) on the rows of the last
 * gmm_ssm_set_y: log p(y | theta, noise) into *loglik and, when grad !=
 * NULL, its gradient in theta (nparam, OVERWRITTEN) and in noise (*noisebar,
 * may be NULL).  O(N d^2 + intervals d^3); the square-root form's gradient
 * keeps a record of its fold (about 2d (d + 8) doubles per state, grown by
 * the first gradient and kept: marglik.h, gmm_marglik_rows_record).  Errors
 * (an ordinary outcome in a line search): GMM_EDOM for a parameter not
 * positive/finite or spacing below the accuracy limit, GMM_ENOTPD
 * when a Q_k, Pinf or the posterior precision is not positive definite;
 * GMM_EINVAL without gmm_ssm_set_y. */
gmm_status gmm_ssm_loglik(gmm_ssm *m, const double *theta, double noise, double *loglik,
                          double *grad, double *noisebar);

/* After a successful gmm_ssm_loglik: the exact posterior of the states,
 * mean (N, or NULL) and covariance band (SYMMETRIC, bandwidth >= the
 * model's, or NULL).  O(N kl^2). */
gmm_status gmm_ssm_posterior(gmm_ssm *m, double *mean, gmm_band *cov);

/* Posterior mean and variance of the latent f at nq query inputs xq (any
 * order, inside or outside the data range, repeats allowed) from a Gaussian
 * posterior of the states: mean mu (N) and the band of its covariance (cov
 * SYMMETRIC, bandwidth >= 2d - 1: the blocks (k, k) and (k+1, k)), by the
 * Markov property (ssm_predict.c): at a state, that state's posterior;
 * between states, the bridge of the two sub-intervals; beyond the data, the
 * prior dynamics.  Queries need no spacing; a query within merge_tol of an
 * input gets that input's state.  Errors: GMM_EINVAL (NULL, a non-finite
 * query, index in gmm_error_index()), GMM_EDIM, GMM_ENOTPD, GMM_ENOMEM.
 * O(nq (d^3 + log K)). */
gmm_status gmm_ssm_predict_post(gmm_ssm *m, const double *theta, const double *mu,
                                const gmm_band *cov, const double *xq, size_t nq, double *mean,
                                double *var);
/* A callback gmm_ssm_predict_post calls every 262144 queries with the
 * number done and the total; a nonzero return cancels (GMM_ECANCEL).  NULL
 * (default): none. */
void gmm_ssm_set_progress(gmm_ssm *m, int (*fn)(void *user, size_t done, size_t total),
                          void *user);
/* The same under the exact Gaussian posterior given the rows of the last
 * gmm_ssm_set_y with noise variance `noise`.  Errors as gmm_ssm_loglik and
 * gmm_ssm_predict_post.  O(N d^2 + nq (d^3 + log K)). */
gmm_status gmm_ssm_predict(gmm_ssm *m, const double *theta, double noise, const double *xq,
                           size_t nq, double *mean, double *var);

/* WEIGHTED SMOOTHING: the Newton step of the Laplace approximation in the
 * square-root form (laplace.h, gmm_laplace_eval_sqrt).  Rows r with y_r not
 * NAN observe y_r ~ N(f_r, 1 / w_r), w_r > 0; the fold takes sqrt(w_r)
 * h_r' with datum sqrt(w_r) y_r (ssm_wls.c), so P = Q_prior + H'WH is never
 * formed.  A demodulated kernel's rows h_r = h(t_r) are taken at theta.
 *
 * gmm_ssm_wls_rows: whether the Laplace approximation takes the square-root
 * form at theta -- GMM_SSM_FACTOR_ROWS yes, _CHOL no, _AUTO the Gaussian
 * path's rule (FACTORISATION) with observations of total weight obs_prec
 * and the gradient's tolerance -- into *rows; the
 * bound is then gmm_ssm_chol_bound's.  Errors: GMM_EDOM, GMM_ENOTPD (theta).
 *
 * gmm_ssm_wls: the weighted Gaussian log likelihood log N(y; 0, H
 * Q_prior^-1 H' + W^-1) into *loglik and the posterior mean (N, or NULL);
 * y and wt have the n rows (wt read where y is not NAN: GMM_EDOM naming a
 * row whose weight is not positive and finite); theta NULL: the last
 * gmm_ssm_wls's, its blocks reused (no other call on m in between: the
 * Newton iterations of one evaluation).  record: keep the fold for
 * the three below.  Replaces gmm_ssm_set_y's rows (call it again before
 * gmm_ssm_loglik).  gmm_ssm_posterior then gives this posterior.  Errors as
 * gmm_ssm_loglik.  O(N d^2 + intervals d^3).
 *
 * gmm_ssm_wls_quad: x' Q_prior x (x: N) at the last gmm_ssm_wls's theta, by
 * the whitening map (no assembled Q).  O(N d).
 *
 * After a recorded gmm_ssm_wls, in this order: gmm_ssm_wls_var writes the
 * posterior variance of f_r for every observed row (fvar: n; NAN for the
 * others), from the fold's row moments, and starts the gradient of the
 * weighted log likelihood at fixed data and weights; gmm_ssm_wls_adjoint
 * takes per-row weights rw (n, read at observed rows), solves zeta = P^-1
 * sum_r rw_r h_r, writes u_r = h_r' zeta (n; NAN at unobserved rows) and
 * adds to thetabar (nparam) that gradient plus d(-zeta' Q_prior(theta)
 * mu)/dtheta at fixed zeta and mu (mu the posterior mean), the Laplace
 * approximation's implicit term (ssm_wls.c, ADJOINT).  GMM_EINVAL without a
 * recorded gmm_ssm_wls; GMM_ENOMEM.  O(the fold's work).
 *
 * Then, for a demodulated kernel (rows that vary with theta: the Laplace
 * gradient in them), gmm_ssm_wls_rowcov writes the adjoint's zeta (N) and,
 * for each observed row r, Sigma h_r over the latents of r's state at sh + r
 * d (sh: n x d, zero at unobserved rows), Sigma the posterior covariance
 * (ssm_wls.c, ROWS THAT VARY).  GMM_EINVAL without a recorded gmm_ssm_wls
 * or for a kernel whose rows do not vary.  O(N d^2). */
gmm_status gmm_ssm_wls_rows(gmm_ssm *m, const double *theta, double obs_prec, int *rows);
gmm_status gmm_ssm_wls(gmm_ssm *m, const double *theta, const double *y, const double *wt,
                       int record, double *loglik, double *mean);
gmm_status gmm_ssm_wls_quad(gmm_ssm *m, const double *x, double *q);
gmm_status gmm_ssm_wls_var(gmm_ssm *m, double *fvar);
gmm_status gmm_ssm_wls_adjoint(gmm_ssm *m, const double *rw, double *u, double *thetabar);
gmm_status gmm_ssm_wls_rowcov(gmm_ssm *m, double *zeta, double *sh);

/* DAMPED BLOCKS (ssm_damped.c).  The state splits into independent blocks
 * (gmm_kernel_blocks; gmm_ssm_nblocks of them, band positions of a state
 * in order: gmm_ssm_var_block(m, p) is position p's, 0 <= p < d).  A block
 * of terms made of damped zero-noise factors only has A = rho I, Q = (1 -
 * rho^2) p I and Pinf = p I, its prior precision R / p with R free of
 * theta (kernel.h, gmm_kernel_var_damped): theta reaches it through p.
 *
 * gmm_ssm_damped_blocks: per block, damped[b] and p (pvar[b]; for other
 * blocks Pinf's first diagonal entry there) at theta.  The flags are found
 * and the damped blocks' structure verified once, at the first call
 * (GMM_EINVAL "internal" otherwise; O(intervals d^3)); later calls O(d^2).
 *
 * gmm_ssm_damped_rev: thetabar += sum_b pbar[b] dp_b/dtheta (pbar: one per
 * block, read for damped ones; others 0).  O(d^3 + nparam d^2). */
size_t gmm_ssm_nblocks(const gmm_ssm *m);
size_t gmm_ssm_var_block(const gmm_ssm *m, size_t p);
gmm_status gmm_ssm_damped_blocks(gmm_ssm *m, const double *theta, int *damped, double *pvar);
gmm_status gmm_ssm_damped_rev(gmm_ssm *m, const double *theta, const double *pbar,
                              double *thetabar);

#endif
