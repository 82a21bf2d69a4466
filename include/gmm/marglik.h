/* marglik.h -- the Gaussian marginal likelihood of a GMRF observed through a
 * sparse linear map with Gaussian noise (paper, section 3.1, eq. 2), its
 * reverse mode, and the Gaussian posterior it implies.  Shared by state-space
 * models (each observation reads one d-block through H) and graph GMRFs (each
 * observation reads one node).  All matrix work goes through band.h.
 */
#ifndef GMM_MARGLIK_H
#define GMM_MARGLIK_H

#include <stddef.h>

#include "gmm/band.h"

/* The model and its marginal likelihood:
 *
 *   f ~ N(0, Q^{-1}),   y_k = sum_m h_k[m] f[offset_k + m] + e_k,
 *   e_k ~ N(0, noise),  k = 0..nobs-1.
 *
 *   log p(y) = -nobs/2 log(2 pi) - log|L| + log|L_Q| - nobs/2 log(noise)
 *              - y'y/(2 noise) + |L^{-1} E'y|^2 / (2 noise^2),
 *   L L' = Q + E'E / noise,  L_Q L_Q' = Q. */

/* The observation map E (nobs x n) and the data.  Row k of E holds
 * coef[k*coef_stride .. k*coef_stride + width) at columns offset[k] ..
 * offset[k] + width - 1 (coef_stride 0: every row shares coef[0..width)).
 * The band of Q must cover a row's span: width - 1 <= Q->kl.  Several rows
 * may read the same columns (repeated inputs). */
typedef struct {
    size_t n;              /* latent dimension (columns of E) */
    size_t nobs;           /* observations (rows of E) */
    size_t width;
    const size_t *offset;  /* nobs */
    const double *coef;
    size_t coef_stride;
    const double *y;       /* nobs, finite */
} gmm_obs;

typedef struct gmm_marglik_work gmm_marglik_work;

/* Workspace for latent dimension n and prior lower bandwidth kl: three band
 * arrays of (kl + 1) n doubles, three vectors of n, ~130 (kl + 1) doubles
 * for the square-root form's row blocks and the band Cholesky's panels
 * (gmm_band_chol_work_size).  Sized once, so repeated evaluations (line
 * searches) do not allocate.  NULL + GMM_ENOMEM on failure. */
gmm_marglik_work *gmm_marglik_work_alloc(size_t n, size_t kl);
void gmm_marglik_work_free(gmm_marglik_work *w);

/* log p(y | Q, noise) into *loglik.  Q SYMMETRIC n x n with the workspace's
 * kl.  prior_logdet: when non-NULL, log|Q| supplied by the caller (a
 * state-space model knows it from its d x d blocks), so Q is not factorised
 * and gmm_marglik_grad leaves that term's gradient to the caller; when NULL,
 * Q is factorised here.  Returns GMM_ENOTPD (row in gmm_error_index()) when Q
 * or the posterior precision is not positive definite, GMM_EDIM on shape
 * errors, GMM_EINVAL for noise <= 0.  The workspace keeps what the reverse
 * mode and the posterior need. */
gmm_status gmm_marglik_eval(const gmm_band *Q, const gmm_obs *obs, double noise,
                            const double *prior_logdet, gmm_marglik_work *w, double *loglik);

/* A square root of the prior precision, Q = G'G, given row by row: row i
 * (0 <= i < nrows) has its entries in columns first .. first + width - 1,
 * 1 <= width <= kl + 1, and the rows come in nondecreasing order of their
 * FIRST column.  The callback writes first and the width entries into v
 * (room for kl + 1) and returns width.  It is called once per row, from the
 * first row to the last -- unless rows (below) is given, which then reads
 * them all (row is still required).  Zero-initialise the struct: members
 * added later are optional and NULL means none. */
typedef struct {
    size_t nrows;
    size_t (*row)(void *ctx, size_t i, size_t *first, double *v);
    void *ctx;
    /* Optional (NULL: none): nonzero when row i starts a new segment of
     * the square-root form's fold.  A block of the fold holds whole
     * segments: one, or several in a row while they fit (marglik.c,
     * segment_fits), and never part of one; the block of a segment's first
     * row holds no earlier prior row of another block, nor an observation
     * starting in a column before that row's first.  For
     * gmm_marglik_rows_moments: a state-space model starts a segment at
     * each interval's transition rows, so each block's moments belong to
     * whole intervals. */
    int (*block_start)(void *ctx, size_t i);
    /* Optional (NULL: row by row): rows i, i + 1, ... at once -- at least
     * one, at most cap, and never past the end of row i's segment (rows
     * after the first of a read are taken as inside it); best all of it --
     * each written as row would write it, zero-padded to ldv = kl + 1
     * entries at v + t ldv, its first column in first[t] and the width row
     * would return in width[t]; returns how many.  Rows come by the
     * thousand: one call and one copy per segment instead of a call per
     * row. */
    size_t (*rows)(void *ctx, size_t i, size_t cap, size_t *first, size_t *width, double *v,
                   size_t ldv);
} gmm_prior_rows;

/* As gmm_marglik_eval with the prior given by a square root G instead of Q
 * (and log|Q| supplied, as prior_logdet there): the factor comes from the
 * rows of [G; E / sqrt(noise)] (band.h section 6), never from P = G'G +
 * E'E/noise itself (why: docs/accuracy.md, Which factorisation), by
 * Householder reflections on blocks of rows (marglik.c, SQUARE-ROOT FORM).
 * gmm_marglik_grad, _grad_view (dlogp/dQ, as if Q had
 * been given) and _posterior work unchanged.  Observation offsets must be
 * nondecreasing (GMM_EINVAL naming the observation), rows ordered as above
 * (GMM_EINVAL naming the earlier of two rows out of order) and fit the band
 * (GMM_EDIM).  GMM_ENOTPD (column in gmm_error_index()) when the rows and
 * data leave a column undetermined.  O(n l^2). */
gmm_status gmm_marglik_eval_rows(const gmm_prior_rows *G, const gmm_obs *obs, double noise,
                                 double prior_logdet, gmm_marglik_work *w, double *loglik);
/* ROW MOMENTS.  The posterior second moments of the prior rows, for a
 * gradient by Fisher's identity that never forms P's cancellation-prone
 * pieces (marglik.c, ROW MOMENTS).  With v_a = G_a x (row a of G) and x ~
 * N(mu, P^-1) the posterior, per block of the fold: its prior rows row0 ..
 * row0 + nrows - 1 and the columns col0 .. col0 + ncols - 1 that earlier
 * blocks had already reached (J: for a state-space model whose blocks
 * start at each interval's transition rows, the state the interval leaves;
 * ncols may be 0), as lanes (band.h, gmm_band_chol_rows_moments):
 *
 *   E[v_a v_b] - [a == b] = gmm_band_moment(&mo->lanes, rows + a lw, rows + b lw),
 *   E[v_a x_c]            = gmm_band_moment(&mo->lanes, rows + a lw, xj + c lw),
 *
 * rows = mo->lanes.rows (nrows rows), xj = mo->lanes.xj (ncols rows), lw =
 * mo->lanes.lw, c counted from col0.  Accurate to rounding relative to
 * their own size (whitened quantities of order 1) however ill-conditioned
 * P is.  The pointers are valid during the callback only. */
typedef struct {
    size_t row0, nrows, col0, ncols;
    gmm_band_block_moments lanes;
} gmm_rows_moments;
typedef gmm_status (*gmm_rows_moments_fn)(void *ctx, const gmm_rows_moments *mo);

/* on: the next gmm_marglik_eval_rows on w records its fold (its reflections
 * and per block the rows' sources and R's rows it pivots on: about (2 +
 * active rows) doubles per column swept and |J|^2 per block, grown as
 * needed and kept for later evaluations) for gmm_marglik_rows_moments. */
void gmm_marglik_rows_record(gmm_marglik_work *w, int on);
/* After a recorded gmm_marglik_eval_rows on w: fn(ctx, block) for each
 * block with prior rows, from the last block to the first (fn's nonzero
 * status stops the sweep and is returned; fn may be NULL), and *noisebar
 * += dlogp/dnoise (may be NULL): -nobs / (2 noise) + sum_k E[(y_k -
 * e_k'x)^2] / (2 noise^2).  GMM_EINVAL without a recorded evaluation,
 * GMM_ENOMEM.  O(the fold's work); scratch grown as needed and kept. */
gmm_status gmm_marglik_rows_moments(gmm_marglik_work *w, gmm_rows_moments_fn fn, void *ctx,
                                    double *noisebar);

/* The next gmm_marglik_rows_moments on w also writes each observation's
 * posterior variance Var(e_k'x) into var (nobs; NULL: none), from the same
 * lanes (accurate relative to noise whatever the conditioning of P). */
void gmm_marglik_rows_obs_var(gmm_marglik_work *w, double *var);
/* ROW MEANS.  After a recorded gmm_marglik_eval_rows on w: x = P^-1 b (b
 * and x: n) and, for every prior row a, gx[2a] = G_a mu (mu the posterior
 * mean) and gx[2a + 1] = G_a x, carried back through the fold's orthogonal
 * map (marglik.c, ROW MEANS): accurate relative to the whitened scale
 * however large G_a's entries (a product G_a x would lose digits as
 * |G_a| |x| / |G_a x|).  gx: 2 nrows of G.  GMM_EINVAL without a recorded
 * evaluation, GMM_ENOMEM.  O(the fold's work on 4 lanes). */
gmm_status gmm_marglik_rows_solve(gmm_marglik_work *w, const double *b, double *x, double *gx);

/* Reverse mode of the last successful eval on w: Qbar (SYMMETRIC, Q's shape,
 * symmetric convention of band.h) += dlogp/dQ and *noisebar += dlogp/dnoise.
 * Either may be NULL.  O(n l^2).  The obs given to that eval (the struct and
 * its arrays) must still be alive and unchanged: the noise gradient reads
 * E again rather than keeping a copy of E'E.  GMM_EINVAL when w holds no
 * successful eval (none yet, or the last one failed). */
gmm_status gmm_marglik_grad(gmm_marglik_work *w, gmm_band *Qbar, double *noisebar);

/* The workspace's own n x n SYMMETRIC band (kl) in which P is formed and
 * factorised.  A caller may assemble Q directly into it (every stored slot)
 * and pass it as Q to gmm_marglik_eval: no copy of Q is then made.  Its
 * contents are destroyed by that eval (they become the factor), so Q must
 * be assembled again before each eval.  Calling this invalidates the last
 * eval (grad and posterior refuse until the next one).  NULL + GMM_EINVAL
 * for a NULL w. */
gmm_band *gmm_marglik_prior_band(gmm_marglik_work *w);

/* As gmm_marglik_grad, but dlogp/dQ is not added into a caller's band: it is
 * left in the workspace and *Qbar points at it (SYMMETRIC, Q's shape,
 * band.h's convention; valid until the next eval, grad or grad_view on w).
 * Saves zeroing and adding a band of (kl + 1) n doubles per evaluation.
 * Only for an eval given prior_logdet (the prior term is then the
 * caller's); GMM_EINVAL otherwise or without a successful eval. */
gmm_status gmm_marglik_grad_view(gmm_marglik_work *w, const gmm_band **Qbar, double *noisebar);

/* LINEAR CONSTRAINTS A x = 0 (k rows of n, row-major, linearly
 * independent) for the evals on w that follow (k = 0 removes them; A and
 * pin are copied): the prior is the Gaussian on the subspace with
 * precision Q there, Q possibly singular off it (intrinsic GMRFs; pin: k
 * latents S with N_S invertible for a basis N of Q's null space,
 * constr.h).  gmm_marglik_eval then needs prior_logdet = log det(V'QV) +
 * log det(AA') (V an orthonormal basis of the subspace) and returns log
 * p(y) under the conditioned prior, even when Q + E'E/noise is singular
 * along directions the constraints remove; gmm_marglik_grad,
 * gmm_marglik_grad_view and gmm_marglik_posterior give the conditioned
 * quantities.  gmm_marglik_eval_rows takes them when its rows hold the
 * pins: the caller folds Q + tau E_S E_S' (tau from gmm_marglik_constr_tau
 * of Q) and says so with gmm_marglik_rows_pinned(w, tau) (GMM_EINVAL
 * otherwise); tau < 0 or NAN withdraws it.
 * Errors: GMM_EINVAL, GMM_ENOMEM; the eval adds GMM_ENOTPD (dependent
 * constraints, or a direction neither prior nor data determine).  Each
 * eval costs 2k more banded solves and its gradient an inverse subset. */
gmm_status gmm_marglik_constrain(gmm_marglik_work *w, size_t k, const double *A,
                                 const size_t *pin);
/* constr.h's tau for the prior Q (the largest Q(s, s) over the pins, 1 when
 * none is positive); 0 without constraints. */
double gmm_marglik_constr_tau(const gmm_marglik_work *w, const gmm_band *Q);
void gmm_marglik_rows_pinned(gmm_marglik_work *w, double tau);

/* Posterior of f after the last eval: mean (length n, or NULL) and the band
 * of the posterior covariance (SYMMETRIC, kl >= Q->kl, or NULL) from the
 * Takahashi inverse subset -- its diagonal gives marginal variances, its d x d
 * diagonal blocks the state covariances.  O(n l^2). */
gmm_status gmm_marglik_posterior(gmm_marglik_work *w, double *mean, gmm_band *cov);
/* After the last eval: v <- Sigma v (n), Sigma the posterior covariance
 * (conditioned on the constraints: constr.h's kriging and pin terms).  Two
 * banded triangular solves, O(n kl + n k).  GMM_EINVAL without a successful
 * eval of the assembled form. */
gmm_status gmm_marglik_posterior_solve(gmm_marglik_work *w, double *v);

#endif
