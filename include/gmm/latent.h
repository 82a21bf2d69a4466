/* latent.h -- a latent Gaussian Markov field x ~ N(0, Q(theta)^-1) with a
 * banded precision, observed through a sparse linear map f = H x: the one
 * type that state-space models (ssm.h), graph GMRFs (gmrf.h) and stacked
 * latents (stack.h) implement, and that likelihoods, the Laplace
 * approximation, HMC and VI use without telling the families apart.
 * Objects are not thread-safe: one per thread.  Design (the terms, the
 * intrinsic priors, why VI takes square-root rows): src/model/latent.c. */
#ifndef GMM_LATENT_H
#define GMM_LATENT_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/gmrf.h"
#include "gmm/kernel.h"
#include "gmm/marglik.h"
#include "gmm/obsmap.h"
#include "gmm/sparse.h"
#include "gmm/ssm.h"
#include "gmm/status.h"

typedef struct gmm_latent gmm_latent;

/* A state-space latent over the n inputs x (copied; k borrowed, must
 * outlive the object).  Errors as gmm_ssm_alloc. */
gmm_status gmm_latent_ssm_alloc(const gmm_kernel *k, const double *x, size_t n,
                                const gmm_ssm_params *par, gmm_latent **out);
/* A graph latent: data row r observes node row_node[r] (graph numbering,
 * < g->n).  g is borrowed and must outlive the object.  GMM_EINVAL for a
 * node out of range (index = row), GMM_ENOMEM.  A band over
 * GMM_GMRF_BAND_LIMIT is refused by gmm_latent_band_check (the band
 * path's), not here: the sparse prior serves any bandwidth. */
gmm_status gmm_latent_gmrf_alloc(const gmm_gmrf *g, size_t nrows, const size_t *row_node,
                                 gmm_latent **out);
void gmm_latent_free(gmm_latent *l); /* NULL-safe */

/* The state-space model behind a state-space latent (NULL for graphs): for
 * its own diagnostics (merged inputs, intervals, damping). */
gmm_ssm *gmm_latent_ssm(const gmm_latent *l);

/* "state-space" or "graph" (for messages and model files). */
const char *gmm_latent_family(const gmm_latent *l);
/* The latent dimension n and Q's lower bandwidth kl. */
size_t gmm_latent_dim(const gmm_latent *l);
size_t gmm_latent_bandwidth(const gmm_latent *l);
/* Bandwidth of a posterior covariance band that gmm_latent_predict_at and
 * gmm_latent_predict_rows need (>= gmm_latent_bandwidth). */
size_t gmm_latent_cov_bandwidth(const gmm_latent *l);
/* The number of data rows and of linear constraints A x = 0 (0 for a
 * proper prior; an intrinsic prior is proper on {A x = 0}). */
size_t gmm_latent_nrows(const gmm_latent *l);
size_t gmm_latent_nconstr(const gmm_latent *l);
/* The constraints A x = 0: nconstr rows of n, row-major, owned by l (NULL
 * when there are none).  With constraints, gmm_latent_prior's log|Q| is
 * the normaliser on the subspace, log det(V'QV) + log det(AA') (V an
 * orthonormal basis of {A x = 0}), as marglik.h and laplace.h take it. */
const double *gmm_latent_constraints(const gmm_latent *l);
/* nconstr latents S whose values, given the rest, fix the null space of Q
 * (N_S invertible, constr.h), owned by l (NULL when none). */
const size_t *gmm_latent_constraint_pins(const gmm_latent *l);
/* theta's nparam named parameters (names owned by l), each > 0 unless
 * zero_ok or the domain below says otherwise. */
size_t gmm_latent_nparam(const gmm_latent *l);
const char *gmm_latent_param_name(const gmm_latent *l, size_t i);
/* Starting values (the spec's values or defaults); nparam entries. */
const double *gmm_latent_param_start(const gmm_latent *l);
/* Nonzero when parameter i may be 0 (a graph ridge). */
int gmm_latent_param_zero_ok(const gmm_latent *l, size_t i);
/* The domain of parameter i: (0, inf) (a variance), (0, 1) (bym2's phi)
 * or (-1, 1) (a correlation). */
typedef enum { GMM_PARAM_POSITIVE = 0, GMM_PARAM_UNIT, GMM_PARAM_SIGNED } gmm_param_domain;
gmm_param_domain gmm_latent_param_domain(const gmm_latent *l, size_t i);
/* GMM_OK when every theta[i] is in its domain, else GMM_EDOM naming it. */
gmm_status gmm_latent_theta_check(const gmm_latent *l, const double *theta);

/* ---- observation map ------------------------------------------------------ */

/* Data row r reads width latents from offset[r] with coefficients h_r
 * (graph: width 1, h = 1; state-space: width d, h_r = H, or h(t_r) for a
 * demodulated kernel, varying with theta). */
size_t gmm_latent_obs_width(const gmm_latent *l);
/* First latent read by each data row (nrows, owned by l). */
const size_t *gmm_latent_obs_offset(const gmm_latent *l);
/* Nonzero when the coefficients depend on theta (demodulated kernels). */
int gmm_latent_obs_varies(const gmm_latent *l);
/* Coefficients of every row at theta into coef (nrows x width, row r at
 * coef + r width; zeros where a sparse row has no entry).  Reverse mode:
 * thetabar += d(sum coefbar . coef)/dtheta (nothing when they do not vary).
 * O(nrows width). */
gmm_status gmm_latent_obs_coef(gmm_latent *l, const double *theta, double *coef);
gmm_status gmm_latent_obs_coef_rev(gmm_latent *l, const double *theta, const double *coefbar,
                                   double *thetabar);
/* The map as a view (obsmap.h: dense windows, or sparse rows with their
 * rowptr and pos), valid while l lives; its coef are the constant
 * coefficients, or those of the last theta the family evaluated when they
 * vary.  Sparse maps (a stacked latent's rows, a few latents in a window of
 * up to kl + 1) have constant coefficients. */
gmm_obsmap gmm_latent_obs_map(const gmm_latent *l);
/* The nnz coefficient values at theta into val, in the order of the
 * map's entries (for dense windows the same as gmm_latent_obs_coef; the
 * reverse of either is gmm_latent_obs_coef_rev).  O(nnz). */
gmm_status gmm_latent_obs_values(gmm_latent *l, const double *theta, double *val);

/* ---- prior ---------------------------------------------------------------- */

/* Q(theta) into Q (SYMMETRIC, n x n, kl = gmm_latent_bandwidth; every stored
 * slot written).  *logdet (may be NULL) receives log|Q| where the family
 * knows it without factorising Q (state-space: from the d x d blocks), else
 * NAN (the caller factorises Q).  Errors: GMM_EDOM (theta outside its
 * domain, state-space inputs below the accuracy limit), GMM_ENOTPD, GMM_EDIM.
 * O(n kl) for graphs, O(n d^2 + intervals d^3) for state-space models. */
gmm_status gmm_latent_prior(gmm_latent *l, const double *theta, gmm_band *Q, double *logdet);
/* Reverse mode of the last gmm_latent_prior, with no other call on l in
 * between (it reads the state that call left): thetabar (nparam) += sum
 * over stored (i, j) of Qbar(i, j) dQ_stored(i, j)/dtheta (band.h's
 * symmetric convention) + logdetbar dlog|Q|/dtheta.  logdetbar must be 0
 * when that call returned logdet NAN (GMM_EINVAL otherwise). */
gmm_status gmm_latent_prior_rev(gmm_latent *l, const gmm_band *Qbar, double logdetbar,
                                double *thetabar);

/* ---- prior in sparse storage (the sparse path: sparse.h) ---------------- */

/* Q's pattern, values 0, into *Q (the caller frees it): every entry
 * gmm_latent_prior_sparse may write, diagonal included.  GMM_EINVAL for a
 * family without a sparse prior (state-space models: their band is
 * narrow), GMM_ENOMEM.  O(nnz). */
gmm_status gmm_latent_prior_pattern(const gmm_latent *l, gmm_sparse **Q);
/* Q(theta) into Q, whose pattern contains gmm_latent_prior_pattern's
 * (entries outside it set to 0), and *logdet as gmm_latent_prior's (NAN:
 * the caller factorises; with constraints the normaliser on the subspace,
 * from a sparse factorisation of Q with the pins).  Errors as
 * gmm_latent_prior's, GMM_EDIM for a pattern that misses an entry.  No
 * band of the latent's bandwidth is formed. */
gmm_status gmm_latent_prior_sparse(gmm_latent *l, const double *theta, gmm_sparse *Q,
                                   double *logdet);
/* Reverse mode of the last gmm_latent_prior_sparse, as gmm_latent_prior_rev
 * (Qbar: any pattern containing Q's, sparse.h's symmetric convention: an
 * off-diagonal entry stands for (i, j) and (j, i) together). */
gmm_status gmm_latent_prior_rev_sparse(gmm_latent *l, const gmm_sparse *Qbar, double logdetbar,
                                       double *thetabar);

/* GMM_OK when a band of Q's bandwidth may be allocated (within the
 * family's limit, GMM_GMRF_BAND_LIMIT unless the model was built with
 * another), else GMM_ENOMEM naming n, the bandwidth and the bytes: what
 * the band path checks before it allocates, the sparse path never.  O(1). */
gmm_status gmm_latent_band_check(const gmm_latent *l);

/* ---- square root of the prior (for VI) ------------------------------------- */

/* Rows of a square root G of the prior precision, Q = G'G, at theta into
 * *G, in the order marglik.h's gmm_prior_rows documents (row i: w_i <= kl +
 * 1 entries from column first_i, first_i nondecreasing; nrows =
 * gmm_latent_prior_nrows), and log|Q| into *logdet (may be NULL).  The
 * callback's ctx is owned by l; the rows may be read in any order, any
 * number of times, until the next call on l other than the _rev functions.
 * State-space: the transition rows (gmm_ssm_prior_rows); a stack in the
 * square-root form: its merged rows (stack.h); graphs: none.  The first
 * call allocates the reverse mode's workspace; ends a
 * gmm_latent_prior/_prior_rev pair.  Errors: GMM_EINVAL (NULL, no square
 * root), GMM_EDOM (theta), GMM_ENOTPD, GMM_ENOMEM.  State-space:
 * O(intervals d^3), then O(kl) per row. */
gmm_status gmm_latent_prior_rows(gmm_latent *l, const double *theta, gmm_prior_rows *G,
                                 double *logdet);
/* Reverse mode at the theta of the last gmm_latent_prior_rows on l, which
 * must have succeeded (whatever other calls came in between):
 *
 *   thetabar (nparam) += d/dtheta [ sum_i sum_{j < w_i} Gbar[i (kl + 1) + j] G_i[j]
 *                                   + logdetbar log|Q| ],
 *
 * G_i[j] the j-th entry of row i exactly as the callback writes it (column
 * first_i + j; structural zeros inside the row included, with derivative
 * 0).  Gbar: nrows (kl + 1) doubles, row-major with stride kl + 1 whatever
 * w_i; the slots j >= w_i are not read.  Ends a gmm_latent_prior/_prior_rev
 * pair.  Errors: GMM_EINVAL (NULL, no square root, the last
 * gmm_latent_prior_rows failed or none ran), GMM_ENOTPD.  State-space: O(N kl +
 * intervals (d^3 + nparam d^2)). */
gmm_status gmm_latent_prior_rows_rev(gmm_latent *l, const double *Gbar, double logdetbar,
                                     double *thetabar);
/* Reverse mode in the rows' moments rather than their entries (state-space
 * only; GMM_EINVAL otherwise), at the theta of the last successful
 * gmm_latent_prior_rows: thetabar (nparam) += d/dtheta E[log N(x | 0,
 * Q^-1)] with the distribution of x held fixed, given per segment t of s =
 * gmm_latent_prior_segment rows (v_t = G_t x, segments t = 0 ..
 * nrows / s - 1) the moments Svv_t = E[v_t v_t'] and Svx_t = E[v_t
 * x_{t-1}'] (latents (t - 1) s .. t s - 1; t >= 1), s x s row-major at
 * Svv + t s^2 and Svx + t s^2 (gmm_ssm_prior_rows_rev_moments).  Errors as
 * gmm_latent_prior_rows_rev.  O(intervals (d^3 + nparam d^2)). */
gmm_status gmm_latent_prior_rows_rev_moments(gmm_latent *l, const double *Svv,
                                             const double *Svx, double *thetabar);
/* Nonzero when l has gmm_latent_prior_rows_rev_q (a stack in the
 * square-root form, stack.h). */
int gmm_latent_has_rows_rev_q(const gmm_latent *l);
/* With constraints, the last gmm_latent_prior_rows' rows may hold pins: G'G
 * = Q + tau E_S E_S' (S: gmm_latent_constraint_pins), tau returned here (0:
 * none), so that a caller takes D = G'G - tau E_S E_S' - L L'. */
double gmm_latent_prior_rows_pins(const gmm_latent *l);
/* Reverse mode from q's moments rather than the rows', at the theta of the
 * last successful gmm_latent_prior_rows:
 *
 *   thetabar (nparam) += d/dtheta E_q[log N(x | 0, Q(theta)^-1)],
 *
 * q = N(m, (L L')^-1) with S (SYMMETRIC, bandwidth >= D's) its
 * covariance's band and D = Q - L L' on D's band (bandwidth >= the
 * latent's), both at that theta.  Errors: GMM_EINVAL (NULL, no such
 * reverse, no prior_rows before). */
gmm_status gmm_latent_prior_rows_rev_q(gmm_latent *l, const gmm_band *S, const double *m,
                                       const gmm_band *D, double *thetabar);
/* Rows of the square root (state-space: N = gmm_latent_dim), 0 for a
 * family without one. */
size_t gmm_latent_prior_nrows(const gmm_latent *l);
/* Rows per segment of the square root (state-space: the state dimension d;
 * segment t's rows read latents from (t - 1) d, or 0 for t = 0, to t d + d -
 * 1), 0 for a family without one. */
size_t gmm_latent_prior_segment(const gmm_latent *l);

/* ---- Gaussian likelihood, exact ----------------------------------------- */

/* log p(y | theta, noise) for y_r ~ N(f_r, noise) (y: nrows, NAN =
 * missing) with its gradient in theta (thetabar, nparam, OVERWRITTEN; NULL:
 * value only) and noise (*noisebar).  The family's own fastest accurate
 * path (state-space: Cholesky or square-root form, ssm.h).  Errors as
 * gmm_latent_prior plus GMM_ENOTPD of the posterior precision. */
gmm_status gmm_latent_gaussian(gmm_latent *l, const double *theta, const double *y, double noise,
                               double *loglik, double *thetabar, double *noisebar);
/* After gmm_latent_gaussian: the exact posterior of x, mean (n, or NULL)
 * and covariance band (SYMMETRIC, bandwidth >= gmm_latent_bandwidth, or
 * NULL).  O(n kl^2). */
gmm_status gmm_latent_gaussian_posterior(gmm_latent *l, double *mean, gmm_band *cov);
/* After a successful gmm_latent_gaussian: v <- Sigma v (n), Sigma the
 * posterior covariance (conditioned on the constraints when there are
 * any).  Two banded triangular solves, O(n kl + n k).  GMM_EINVAL where the
 * family keeps no factor (only the stacked latent does) or before an
 * evaluation. */
gmm_status gmm_latent_gaussian_posterior_solve(gmm_latent *l, double *v);

/* v <- Sigma v (n entries) for a posterior's covariance Sigma. */
typedef gmm_status (*gmm_cov_solve_fn)(void *ctx, double *v);
/* The moments of nq sparse linear forms a_q'x of a Gaussian x with mean
 * (n) and covariance Sigma: form q's entries ptr[q] .. ptr[q + 1] - 1 (ptr:
 * nq + 1) at latents idx with weights w (distinct latents per form).
 * fmean[q] = a_q'mean; fvar[q] = a_q' Sigma a_q, from cov (SYMMETRIC n x n,
 * exact entries of Sigma on its band, e.g. Takahashi's inverse subset) when
 * every pair of the form's latents lies within its bandwidth, else from one
 * solve(ctx, v) with v = a_q: O(nnz^2) per form inside the band, the
 * solve's cost (O(n kl) for a banded factor) per form outside it.  work: n
 * doubles.  Errors: GMM_EINVAL (NULL, a latent >= n), GMM_EDIM (cov), the
 * solve's. */
gmm_status gmm_latent_forms_moments(size_t n, const double *mean, const gmm_band *cov,
                                    gmm_cov_solve_fn solve, void *ctx, size_t nq,
                                    const size_t *ptr, const size_t *idx, const double *w,
                                    double *work, double *fmean, double *fvar);
/* After gmm_latent_gaussian: how the posterior precision was factorised
 * ("cholesky" or "square-root") and the Cholesky's rounding bound (0 when
 * not estimated). */
const char *gmm_latent_factorisation(const gmm_latent *l, double *bound);

/* ---- weighted smoothing in the square-root form (for Laplace) ------------- */

/* The Newton step of the Laplace approximation as a Gaussian smoothing
 * problem y_r ~ N(f_r, 1 / wt_r) solved from the square root of the prior
 * (arrays over the nrows data rows, y NAN where unobserved).  Each function
 * is its family's (state-space: gmm_ssm_wls_rows .. gmm_ssm_wls_rowcov,
 * ssm.h, WEIGHTED SMOOTHING, which state the contracts); a family without
 * the form returns GMM_EINVAL. */
/* Nonzero when the family has the weighted smoothing below. */
int gmm_latent_has_wls(const gmm_latent *l);
/* Zero for a latent whose prior exists only in the square-root form (a
 * stack with a damped kernel, stack.h): gmm_latent_prior refuses it, so
 * does everything built on P's Cholesky (the Laplace map, its draws). */
int gmm_latent_assembled(const gmm_latent *l);
/* Whether the family takes the square-root form at theta (by its
 * factorisation rule, observations of total weight obs_prec) into *rows; 0
 * for a family without one (graphs). */
gmm_status gmm_latent_wls_rows(gmm_latent *l, const double *theta, double obs_prec, int *rows);
/* The weighted log likelihood and posterior mean (n, or NULL); theta NULL:
 * the last call's; record: keep the fold for the calls below. */
gmm_status gmm_latent_wls(gmm_latent *l, const double *theta, const double *y, const double *wt,
                          int record, double *loglik, double *mean);
/* x' Q x at the last gmm_latent_wls's theta, without assembling Q. */
gmm_status gmm_latent_wls_quad(gmm_latent *l, const double *x, double *q);
/* After a recorded gmm_latent_wls: the posterior variance of each observed
 * f_r (NAN elsewhere). */
gmm_status gmm_latent_wls_var(gmm_latent *l, double *fvar);
/* Then: zeta = P^-1 sum_r rw_r h_r, u_r = h_r' zeta, and thetabar += the
 * gradient at fixed data and weights plus the Laplace implicit term. */
gmm_status gmm_latent_wls_adjoint(gmm_latent *l, const double *rw, double *u, double *thetabar);
/* Then, for rows that vary with theta (gmm_latent_obs_varies): the
 * adjoint's zeta (n) and Sigma h_r at each entry of row r, laid out as
 * gmm_latent_obs_values (0 where r is unobserved). */
gmm_status gmm_latent_wls_rowcov(gmm_latent *l, double *zeta, double *sh);

/* ---- prediction from a Gaussian posterior of x ---------------------------- */

/* Posterior mean and variance of f at each data row, f_r = h_r' x, from
 * x's posterior mean (n) and covariance band (SYMMETRIC, bandwidth >=
 * gmm_latent_cov_bandwidth), at theta (for varying coefficients).  O(nrows
 * width^2). */
gmm_status gmm_latent_predict_rows(gmm_latent *l, const double *theta, const double *mean,
                                   const gmm_band *cov, double *fmean, double *fvar);
/* Nonzero when the family predicts at new inputs (state-space). */
int gmm_latent_has_inputs(const gmm_latent *l);
/* f at nq new inputs xq (state-space only: GMM_EINVAL otherwise); see
 * gmm_ssm_predict_post. */
gmm_status gmm_latent_predict_at(gmm_latent *l, const double *theta, const double *mean,
                                 const gmm_band *cov, const double *xq, size_t nq, double *fmean,
                                 double *fvar);
/* Graph latents: latent index (RCM row) of graph node v; state-space:
 * GMM_NO_INDEX. */
size_t gmm_latent_node_index(const gmm_latent *l, size_t v);

/* ---- whitening (for HMC and VI) ------------------------------------------- */

/* x = W(theta) v with v ~ N(0, I) giving x ~ N(0, Q^-1) (on {A x = 0} with
 * constraints), its transpose u = W' g and their reverse modes in theta;
 * the maps per family: latent.c, WHITENING.  Call gmm_latent_whiten_setup
 * at theta first (the first call allocates the workspace); the others then
 * use that theta, whatever other calls on l come in between (but the setup
 * and whiten_rev end a gmm_latent_prior/_prior_rev pair).  Vectors have n
 * entries; v and x (g and u) may be the same array.  Errors: setup as
 * gmm_latent_prior (GMM_EDOM, GMM_ENOTPD) and GMM_ENOMEM; the others
 * GMM_EINVAL without a successful setup.  O(n kl) per whiten and whiten_t
 * after the setup. */
gmm_status gmm_latent_whiten_setup(gmm_latent *l, const double *theta);
gmm_status gmm_latent_whiten(gmm_latent *l, const double *v, double *x);
gmm_status gmm_latent_whiten_t(gmm_latent *l, const double *g, double *u);
/* v = W^-1 x (to start a sampler at a given latent, e.g. the Laplace mode);
 * x and v must not alias.  O(n kl). */
gmm_status gmm_latent_unwhiten(gmm_latent *l, const double *x, double *v);
/* thetabar (nparam) += d(xbar . W(theta) v)/dtheta.  v NULL: the v of the
 * last gmm_latent_whiten since the setup; xbar NULL: the g of the last
 * gmm_latent_whiten_t since the setup (their work reused; graphs: equal to
 * rounding, state-space: to the bit); GMM_EINVAL when that call was not
 * made.  Graphs O(n kl^2); state-space O(n kl + intervals (d^3 + nparam
 * d^2)). */
gmm_status gmm_latent_whiten_rev(gmm_latent *l, const double *v, const double *xbar,
                                 double *thetabar);
/* The setup of the same whitening from a sparse factorisation of Q (the
 * stacked latent; no band of Q is formed): whiten, whiten_t and unwhiten
 * then as above at O(nnz(L)); whiten_rev is GMM_EINVAL.  GMM_EINVAL for a
 * latent without it. */
gmm_status gmm_latent_whiten_setup_sparse(gmm_latent *l, const double *theta);

/* SCALE BLOCKS.  Nonzero when the prior is a sum of blocks on disjoint
 * latents, each divided by one variance parameter of theta and otherwise
 * fixed -- Q(theta) = sum_k S_k / theta[p_k] (the stacked latent's iid,
 * rw1, rw2 and besag terms without groups, a graph's lone iid precision) --
 * par (n, may be NULL) then receiving each latent's p_k; 0 for any other
 * prior.  What the average information of a Gaussian problem needs
 * (problem_info.c). */
int gmm_latent_scale_blocks(const gmm_latent *l, size_t *par);

#endif
