/* vi.c -- precision-parameterised variational inference (vi.h).
 *
 * FORWARD.  With Sigma = (L L')^-1 on the band l' = max(b, width - 1, kl)
 * (gmm_band_chol_selinv), for each observed row r: mu_r = X_r beta + h_r' m_o,
 * s2_r = h_r' Sigma_oo h_r, E_r = E_{N(mu_r, s2_r)} log p(y_r | f) with
 * a_r = dE_r/dmu_r, c_r = dE_r/ds2_r (gmm_lik_expect).  The KL is
 *
 *   KL = 1/2 [tr(Sigma D) + m'Q m - log|Q| + log|L L'|],   D = Q - L L',
 *
 * using tr(Sigma Q) = n + tr(Sigma D) (Sigma L L' = I); D lives on the band
 * max(kl, b).  log|L L'| = 2 sum_j lambda_jj (the stored log-diagonal);
 * log|Q| from the family, or from a banded Cholesky of Q (graphs).
 * Assembled (graphs): D = Q - L L' in double, m'Q m by gmm_band_gemv.
 * Rows (state-space, Q = G'G): D = sum_i g_i g_i' - L L' accumulated in
 * double-double (fma products, TwoSum), rounded once; m'Q m = sum_i r_i^2,
 * r_i = g_i'm in double-double.
 *
 * WHY D.  Near the posterior, L L' ~ Q + H'WH, so D ~ -H'WH has entries of
 * the data's size while Q's grow like (lengthscale / spacing)^(2 nu + 1)
 * (state-space): tr(Sigma Q) is a sum of such entries cancelling to O(n),
 * so any error in Q's entries or in the sum costs eps (l/dt)^(2 nu + 1).
 * The double-double D has no such error beyond the rows' own (G's entries
 * ~ (l/dt)^(nu + 1/2), the square root's digits), and tr(Sigma D) no
 * cancellation.  The gradient in L gains likewise (below: -D/2 in
 * Sigmabar instead of -Q/2, and no -1/L_jj from the entropy to cancel).
 *
 * REVERSE.  ELBO = sum_r E_r - KL.  In Sigma (full-matrix gradient; band.h's
 * symmetric convention doubles the off-diagonals when stored), with D held
 * fixed -- its own dependence on L, -tr(Sigma (dL L' + L dL'))/2 =
 * -sum_j dL_jj / L_jj, cancels the entropy's +sum_j dL_jj / L_jj
 * exactly (L^-1 is lower triangular):
 *
 *   Sigmabar = sum_r c_r h_r h_r'  -  D / 2
 *   mbar     = sum_r a_r h_r       -  Q m            (= - sum_i r_i g_i)
 *   Lbar     = selinv_rev(L, Sigma, Sigmabar)        (gmm_band_chol_selinv_rev)
 *   lambdabar_jj = L_jj Lbar_jj                      (log-diagonal)
 *
 * In the hyperparameters: Qbar = -(Sigma + m m') / 2 on Q's band and
 * log|Q|bar = 1/2, through gmm_latent_prior_rev (and, when the family gives
 * no log|Q|, the Cholesky's reverse mode first); with rows, the prior's
 * terms are E_q[log p(x | theta)] and their gradient comes from the
 * moments of the whitened rows v = G x under q (WHITENED MOMENTS) through
 * gmm_latent_prior_rows_rev_moments; b0bar = sum_r a_r; phibar =
 * sum_r dE_r/dphi; hbar_r = a_r m_o + 2 c_r Sigma_oo h_r through
 * gmm_latent_obs_coef_rev.  Forward saves L, Sigma, D, a_r, c_r (and Q, or
 * the rows' moments computed while the rows are read).
 *
 * WHITENED MOMENTS.  Per segment t of G (the d transition rows v_t = C
 * (x_t - A x_{t-1}), or C0 x_0) the prior's chain (ssm_prior.c, ROWS
 * GRADIENT) needs E_q[v v'] = r r' + Cov(v) and E_q[v x_{t-1}'] = r m' +
 * Cov(v, x_{t-1}), r = G_t m, all of order 1.  Cov(v) = G_t Sigma G_t' from
 * Sigma's band would cancel entries ~ |G|^2 |Sigma| ~ (l/dt)^(2 nu + 1)
 * down to 1 and keep eps (l/dt)^(2 nu + 1) of error (as would a chain
 * through the rows' entries, gmm_latent_prior_rows_rev).  Instead, with J
 * the segment's columns
 * and F the b latents after them, L'(x - m) = e ~ N(0, I) gives x_J - m_J
 * = -L_JJ^-T L_FJ' (x_F - m_F) + L_JJ^-T e_J with e_J independent of x_F,
 * so with Z = G_J L_JJ^-T (a forward solve per row) and U = -Z L_FJ',
 *
 *   Cov(v)          = U Sigma_FF U' + Z Z',
 *   Cov(v, x_J)     = (Z - U Sigma_FF L_FJ) L_JJ^-1,
 *
 * sums of products of order-1 factors (U is small where q follows the
 * prior's dynamics, Z of order 1).  O(d (kl + b)^2) per segment, b = q's
 * bandwidth.  r = G m and the rows' share -G'r of mbar are summed in
 * double-double: G'r cancels terms ~ |G| |r| down to the data's size.
 *
 * CONSTRAINTS (vi.h).  With A x = 0, q's moments are m_c = krig(m) and
 * Sigma_c = Sigma - V V' on the band (constr.h, gmm_constr_krig and
 * gmm_constr_band, no pins: L L' is positive definite), and the above holds
 * with them in place of m and Sigma: tr(Sigma_c L L') = n - k, so tr(Sigma_c
 * Q) - (n - k) = tr(Sigma_c D).  The entropy adds log|A Sigma A'| / 2 to the
 * KL (log det(V'PV) = log|P| + log|A Sigma A'| - log|AA'|, the same
 * convention as the prior's log|Q|_c).  REVERSE: d/dP of -log det(V'PV)/2
 * is -Sigma_c/2 and of tr(Sigma_c P)/2 with Sigma_c fixed +Sigma_c/2, so, as
 * without constraints, the entropy and D's dependence on L cancel, leaving
 * Sigmabar_c = sum_r c_r h_r h_r' - D/2 and m_cbar = sum_r a_r h_r - Q m_c;
 * gmm_band_chol_selinv_rev takes the first through Sigma's band,
 * gmm_constr_rev the rest (through V, G and the kriged mean; constr.c,
 * GRADIENT) and m_cbar back to mbar.  The start's P = Q_p + H'WH may be
 * singular off the subspace (two intrinsic terms read through their sum;
 * the prior start always is): it then gets constr.h's pins.
 *
 * ORDER OF LATENT CALLS.  obs_coef, then prior (or prior_rows); the
 * reverse: prior_rev right after (latent.h pairs them), then obs_coef_rev.
 *
 * ACCURACY (test_vi_close_inputs: matern32, 30 inputs at spacing dt,
 * lengthscale 1, Gaussian noise, q the exact posterior and q with its mean
 * moved 1%; against the ELBO from the same G, L and m in binary128, dense).
 * Relative error of the ELBO:
 *
 *   dt / l                     1e-1    1e-2    1e-3    1e-4    1e-6
 *   rows, double-double D      2e-15   3e-15   1e-14   6e-14   1e-14
 *   rows, D in double          9e-16   2e-13   1e-9    1e-6    1.7 (!)
 *   assembled Q                5e-14   7e-11   7e-8    refused (GMM_EDOM)
 *
 * The m-gradient is the exact one of the rows as stored (within 3e-16 of
 * a binary128 evaluation from the same G at every spacing; in plain double
 * 1e-5 at dt/l = 1e-4 and 0.7 at 1e-6); at the optimum it is nevertheless
 * of size eps (l/dt)^3 |m| (2.7e-7 at 1e-3, 2e2 at 1e-6): Q times the
 * rounding of a mean stored in doubles, which no evaluation removes.  The
 * hyperparameter gradient through the whitened moments is within 5e-10 of
 * max(|g|, 1) of the dense GP's at the posterior down to dt/l = 1e-6 for
 * matern32, 1e-7 at 1e-4 for matern52 (chained through the rows' entries
 * instead: 3.1 and 7.5e2; tests/bench/bench_vi_accuracy.c,
 * docs/accuracy.md).
 *
 * SCALING.  gmm_vi_fit runs L-BFGS on u, lambda = lambda0 + T u, T from the
 * run's starting q (precond_set): m = m0 + L0^-T a and each column of L
 * moved by R_j^-T w_j, R_j R_j' the column's block of the Hessian of the
 * Gaussian ELBO at L0 (Sigma0 on the column's rows).  In u that Hessian is
 * the identity at the Gaussian optimum, whatever the conditioning of Q_p:
 * a diagonal scaling (dm_j by 1 / L_jj, L_ij by L_ii) left the smooth
 * state-space posteriors (the coal series, matern32, lengthscale 21 at
 * unit spacing) ill-conditioned: 2000 iterations without converging, the
 * ELBO creeping -175.965 -> -175.935, where T converges in 6 to -175.924.  A
 * new run with a new T starts when some L_jj has moved by more than a
 * factor 1.5 (learning the hyperparameters moves q far; against a factor
 * 2, coal with its hyperparameters 929 -> 690 iterations and a higher
 * ELBO, Chicago 231 -> 179, influenza 211 -> 224).  Measured against the diagonal scaling: from
 * L = I to the Gaussian posterior (test_vi_gaussian_exact) 68 -> 23
 * iterations, the joint fit of theta (test_vi_learn_hyper) 295 -> 151, the
 * README's Chicago --learn-hyper 656 -> 179; bench_vi's 1e4-point Poisson
 * series 15 -> 6 (the diagonal scaling had stopped on the ELBO's relative
 * change 1.18 below the optimum), its 1e4-node graph 21 -> 10.
 *
 * STOPPING.  In u the Hessian of the Gaussian ELBO is the identity at the
 * run's start, so a unit step is about a posterior standard deviation of q
 * and |g|^2 / 2 is the Newton decrement: the rise of the ELBO a Newton
 * step would still give.  Converged means that, at the returned point,
 * the decrement is at most VI_GAIN (1e-8 nats), or the gradient test |g|
 * <= epsilon max(1, |u|) holds, or |g| is within GNOISE_GAIN times the
 * norm of the gradient's measured rounding noise.  Tests that read the
 * ELBO itself (its relative rise over 3 iterations below tol, or a line
 * search that sees no decrease) stop where the ELBO's changes sink below
 * its rounding, long before q and theta stop moving along flat directions
 * (a graph's lengthscale): such a stop only ends the first phase.  A final
 * run, with T taken at that point, continues without the decrease test and
 * with its gradient test POLISH_TIGHTER below epsilon, for at most as many
 * iterations as came before it (FINAL_MIN_ITER at least), so that the
 * result does not depend on where a test first held (which varies with
 * the BLAS kernel's rounding); when it stops on f or on its budget,
 * infer_lbfgs_polish goes on from its end by the gradient alone, until the
 * gradient's own rounding ends it.  Not converged is reported with the
 * gradient norm that was left.
 */
#include "gmm/vi.h"

#include <lbfgs.h> /* the return codes */
#include "infer_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"

struct gmm_vi {
    gmm_problem *prob;
    gmm_latent *lat;
    gmm_vi_params par;
    gmm_lik lik;              /* values of the current evaluation */
    size_t n, kl, b, sk, dk, width, nrows, nobs, nl, np, nparam, nvar, nrowsG;
    size_t ncoef, c0;         /* coefficients: theta[c0 ..] (problem.h) */
    double *offs, *oshift;    /* X beta at every row (nrows; also its adjoint), observed */
    int varies, rows, have_start;
    const char *start;
    /* observed rows in the latent's row order; oord sorts them by offset.
     * Their coefficients as the latent's map keeps them (latent.h): row i's
     * entries orowptr[i] .. orowptr[i + 1] of ocoef, reading latents ooff[i]
     * + opos[k] (opos NULL: dense windows, ooff[i] + k - orowptr[i]);
     * coef_all and coefbar_all every row's (nnz). */
    size_t *orow, *ooff, *oord, *orowptr, *opos;
    const size_t *rowptr, *pos;
    size_t nnz;
    double *oy, *oe, *ocoef, *coef_all, *coefbar_all;
    double *mu, *s2, *ea, *ec; /* per observed row */
    unsigned char *rule;      /* Gauss-Hermite points per row / 4 (adaptive) */
    int freeze;               /* use rule[] as is (inside a line search) */
    double *dpar;             /* np, summed */
    gmm_band *L, *Lbar, *S, *Sbar;
    gmm_band *D, *Dlo;        /* Q_p - L L' (rows: with its low part) */
    gmm_band *Q, *Qbar;       /* assembled prior (NULL with rows) */
    gmm_band *K, *Kbar;       /* chol of Q (family without log|Q|) or of P */
    double *grow, *Sg, *work; /* kl + 1 each, 4 (kl + 1) */
    double *cwork;            /* K's Cholesky's and its reverse's panels */
    size_t seg;               /* rows: rows per segment of G */
    double *Smo;              /* rows: per segment E[v v'] (N seg), then E[v x'] (N seg) */
    int qrev;                 /* rows: the family's reverse from q's moments (latent.h) */
    double *rw;               /* rows: one segment's rows and window (seg_moments) */
    size_t *rfirst;           /* rows: the segment's first columns, then widths */
    double *mlo;              /* rows: n, the low parts of the rows' share of mbar */
    double *lambda, *theta, *thbar, *tmp;
    int logdet_here;          /* log|Q| from K in the last evaluation */
    gmm_constr *con;          /* A x = 0 (NULL: none), conditioned under q's P (no pins) */
    gmm_band *Sc;             /* Sigma_c's band (sk) */
    double *mc, *mcbar;       /* m_c = krig(m) and its adjoint (n) */
    double ldq;               /* log|L L'| = 2 sum of the log-diagonal (unpack) */
};

/* ---- parameters ------------------------------------------------------------ */

void gmm_vi_params_init(gmm_vi_params *p)
{
    memset(p, 0, sizeof *p);
    p->bandwidth = GMM_VI_BANDWIDTH_PRIOR;
    p->max_iter = 2000;
    p->tol = 1e-9;
    p->epsilon = 1e-6;
    p->memory = 10;
    p->nquad = 0;
    p->learn_hyper = 0;
    p->prior = GMM_VI_PRIOR_AUTO;
}

gmm_status gmm_vi_params_check(const gmm_vi_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "vi: no parameters");
    if (!(p->tol >= 0.0) || !isfinite(p->tol))
        return gmm_error(GMM_EINVAL, "vi: tol must be finite and >= 0, got %g", p->tol);
    if (!(p->epsilon > 0.0) || !isfinite(p->epsilon))
        return gmm_error(GMM_EINVAL, "vi: epsilon must be finite and > 0, got %g", p->epsilon);
    if (p->max_iter > 100000000)
        return gmm_error(GMM_EINVAL, "vi: max_iter must be at most 1e8, got %zu", p->max_iter);
    if (p->memory < 1 || p->memory > 1000)
        return gmm_error(GMM_EINVAL, "vi: memory must be in 1..1000, got %zu", p->memory);
    if (p->nquad > GMM_LIK_QUAD_MAX)
        return gmm_error(GMM_EINVAL, "vi: nquad must be 0 (automatic) or 1..%d, got %zu",
                         GMM_LIK_QUAD_MAX, p->nquad);
    if (p->prior != GMM_VI_PRIOR_AUTO && p->prior != GMM_VI_PRIOR_ROWS &&
        p->prior != GMM_VI_PRIOR_ASSEMBLED)
        return gmm_error(GMM_EINVAL, "vi: prior must be AUTO, ROWS or ASSEMBLED, got %d",
                         (int)p->prior);
    return GMM_OK;
}

/* ---- allocation ------------------------------------------------------------ */

void gmm_vi_free(gmm_vi *v)
{
    if (!v)
        return;
    gmm_band *bands[] = {v->L,   v->Lbar, v->S, v->Sbar, v->D,  v->Dlo,
                         v->Q,   v->Qbar, v->K, v->Kbar, v->Sc};
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
        gmm_band_free(bands[i]);
    void *arr[] = {v->orow, v->ooff, v->oord, v->orowptr, v->opos, v->oy, v->oe, v->ocoef,
                   v->coef_all, v->coefbar_all, v->mu, v->s2, v->ea, v->offs, v->oshift,
                   v->ec, v->rule, v->dpar, v->Smo, v->rw, v->rfirst, v->mlo,
                   v->grow, v->Sg, v->work, v->cwork, v->lambda, v->theta, v->thbar, v->tmp,
                   v->mc, v->mcbar};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        gmm_free(arr[i]);
    gmm_constr_free(v->con);
    gmm_free(v);
}

static size_t smax(size_t a, size_t b) { return a > b ? a : b; }

/* Row r's first entry in the map's coefficients (latent.h). */
static size_t row_lo(const gmm_vi *v, size_t r)
{
    return v->rowptr ? v->rowptr[r] : r * v->width;
}

/* The latent read by entry k of observed row i. */
static size_t entry_at(const gmm_vi *v, size_t i, size_t k)
{
    return v->ooff[i] + (v->opos ? v->opos[k] : k - v->orowptr[i]);
}

/* The observed rows' coefficients from every row's (coef_all). */
static void gather_coef(gmm_vi *v)
{
    for (size_t i = 0; i < v->nobs; i++)
        memcpy(v->ocoef + v->orowptr[i], v->coef_all + row_lo(v, v->orow[i]),
               (v->orowptr[i + 1] - v->orowptr[i]) * sizeof *v->ocoef);
}

/* oord: the observed rows in nondecreasing offset, stably (a counting sort:
 * offsets are below n). */
static gmm_status sort_by_offset(gmm_vi *v)
{
    size_t *count = gmm_calloc(v->n + 1, sizeof *count);
    if (!count)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for %zu latents", v->n);
    for (size_t i = 0; i < v->nobs; i++)
        count[v->ooff[i] + 1]++;
    for (size_t j = 0; j < v->n; j++)
        count[j + 1] += count[j];
    for (size_t i = 0; i < v->nobs; i++)
        v->oord[count[v->ooff[i]]++] = i;
    gmm_free(count);
    return GMM_OK;
}

gmm_status gmm_vi_alloc(gmm_problem *p, const gmm_vi_params *par, gmm_vi **out)
{
    gmm_status st;
    if (!p || !out)
        return gmm_error(GMM_EINVAL, "gmm_vi_alloc: NULL argument");
    *out = NULL;
    if ((st = gmm_vi_params_check(par)))
        return st;
    gmm_latent *lat = gmm_problem_latent_eval(p);
    size_t ncon = gmm_latent_nconstr(lat);
    int rows = par->prior == GMM_VI_PRIOR_ROWS ||
               (par->prior == GMM_VI_PRIOR_AUTO && gmm_latent_prior_nrows(lat) > 0);
    if (rows && gmm_latent_prior_nrows(lat) == 0)
        return gmm_error(GMM_EINVAL, "vi: the %s family has no square root of its prior "
                                     "precision (use the assembled prior)",
                         gmm_latent_family(lat));
    if (rows && ncon && !gmm_latent_has_rows_rev_q(lat))
        return gmm_error(GMM_EINVAL, "vi: the prior's square root does not take constraints "
                                     "(use the assembled prior)");
    gmm_vi *v = gmm_calloc(1, sizeof *v);
    if (!v)
        return gmm_error(GMM_ENOMEM, "vi: out of memory");
    const gmm_objective *obj = gmm_problem_objective(p);
    v->prob = p;
    v->lat = lat;
    v->par = *par;
    v->lik = *gmm_problem_lik(p);
    v->n = gmm_latent_dim(lat);
    v->kl = gmm_latent_bandwidth(lat);
    v->width = gmm_latent_obs_width(lat);
    v->nrows = gmm_latent_nrows(lat);
    v->nl = gmm_latent_nparam(lat);
    v->np = v->lik.type->nparam;
    v->nparam = obj->nparam;
    v->ncoef = gmm_problem_ncoef(p);
    v->c0 = v->nparam - v->ncoef;
    v->varies = gmm_latent_obs_varies(lat);
    v->rows = rows;
    v->qrev = rows && gmm_latent_has_rows_rev_q(lat);
    v->nrowsG = rows ? gmm_latent_prior_nrows(lat) : 0;
    size_t n = v->n, kl = v->kl, w = v->width, nm1 = n ? n - 1 : 0;
    v->b = par->bandwidth == GMM_VI_BANDWIDTH_PRIOR ? kl : par->bandwidth;
    if (v->b > nm1)
        v->b = nm1;
    v->sk = smax(smax(v->b, w - 1), kl);
    if (v->sk > nm1)
        v->sk = nm1;
    v->dk = smax(v->b, kl);
    if (v->dk > nm1)
        v->dk = nm1;
    v->nvar = n + gmm_band_size(n, v->b, 0);
    const double *y = gmm_problem_y(p), *e = gmm_problem_exposure(p);
    for (size_t r = 0; r < v->nrows; r++)
        v->nobs += !isnan(y[r]);
    size_t no = v->nobs ? v->nobs : 1, nr = v->nrows ? v->nrows : 1;
    size_t npar = v->nparam ? v->nparam : 1, k1 = kl + 1;
    v->orow = gmm_malloc(no, sizeof *v->orow);
    v->ooff = gmm_malloc(no, sizeof *v->ooff);
    v->oord = gmm_malloc(no, sizeof *v->oord);
    v->oy = gmm_malloc(no, sizeof *v->oy);
    v->oe = gmm_malloc(no, sizeof *v->oe);
    v->nnz = gmm_latent_obs_nnz(lat);
    v->rowptr = gmm_latent_obs_rowptr(lat);
    v->pos = gmm_latent_obs_pos(lat);
    size_t onz = 0;
    for (size_t r = 0; r < v->nrows; r++)
        if (!isnan(y[r]))
            onz += v->rowptr ? v->rowptr[r + 1] - v->rowptr[r] : w;
    v->orowptr = gmm_malloc(no + 1, sizeof *v->orowptr);
    v->opos = v->pos ? gmm_malloc(onz ? onz : 1, sizeof *v->opos) : NULL;
    v->ocoef = gmm_malloc(onz ? onz : 1, sizeof *v->ocoef);
    v->coef_all = gmm_malloc(v->nnz ? v->nnz : 1, sizeof *v->coef_all);
    v->coefbar_all = v->varies ? gmm_malloc(v->nnz ? v->nnz : 1, sizeof *v->coefbar_all) : NULL;
    v->mu = gmm_malloc(no, sizeof *v->mu);
    v->s2 = gmm_malloc(no, sizeof *v->s2);
    v->ea = gmm_malloc(no, sizeof *v->ea);
    v->offs = gmm_calloc(nr, sizeof *v->offs);
    v->oshift = gmm_calloc(no, sizeof *v->oshift);
    v->ec = gmm_malloc(no, sizeof *v->ec);
    v->rule = gmm_calloc(no, sizeof *v->rule);
    v->dpar = gmm_calloc(GMM_LIK_MAXPARAM, sizeof *v->dpar);
    v->lambda = gmm_calloc(v->nvar, sizeof *v->lambda);
    v->theta = gmm_malloc(npar, sizeof *v->theta);
    v->thbar = gmm_malloc(npar, sizeof *v->thbar);
    v->tmp = gmm_malloc(n, sizeof *v->tmp);
    v->grow = gmm_malloc(k1, sizeof *v->grow);
    v->Sg = gmm_malloc(k1, sizeof *v->Sg);
    v->work = gmm_malloc(4 * k1, sizeof *v->work);
    v->cwork = gmm_malloc(gmm_band_chol_work_size(kl), sizeof *v->cwork);
    v->L = gmm_band_alloc(n, v->b, 0, GMM_BAND_LOWER);
    v->Lbar = gmm_band_alloc(n, v->b, 0, GMM_BAND_LOWER);
    v->S = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
    v->Sbar = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
    v->K = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    v->Kbar = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    v->D = gmm_band_alloc(n, v->dk, 0, GMM_BAND_SYMMETRIC);
    int ok = v->orow && v->ooff && v->oord && v->orowptr && (v->opos || !v->pos) && v->oy &&
             v->oe && v->ocoef && v->coef_all && (v->coefbar_all || !v->varies) && v->mu &&
             v->s2 && v->ea && v->offs && v->oshift && v->ec && v->rule && v->dpar &&
             v->lambda && v->theta && v->thbar && v->tmp && v->grow && v->Sg && v->work &&
             v->cwork && v->L && v->Lbar && v->S && v->Sbar && v->K && v->Kbar && v->D;
    if (ok && rows) {
        size_t sg = gmm_latent_prior_segment(lat), nJ = k1 + sg; /* >= a window's width */
        v->seg = sg;
        v->Smo = gmm_malloc(2 * v->nrowsG * (sg ? sg : 1), sizeof *v->Smo);
        v->rw = gmm_malloc(sg * k1 + 2 * sg + nJ * nJ + v->b * nJ + sg * nJ + sg * v->b + v->b +
                               nJ + v->b * v->b + 1,
                           sizeof *v->rw);
        v->rfirst = gmm_malloc(2 * (sg ? sg : 1), sizeof *v->rfirst);
        v->mlo = gmm_malloc(n ? n : 1, sizeof *v->mlo);
        v->Dlo = gmm_band_alloc(n, v->dk, 0, GMM_BAND_SYMMETRIC);
        ok = v->Smo && v->rw && v->rfirst && v->mlo && v->Dlo;
    } else if (ok) {
        v->Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        v->Qbar = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        ok = v->Q && v->Qbar;
    }
    if (ok && ncon) {
        v->con = gmm_constr_alloc(n, ncon, gmm_latent_constraints(lat),
                                  gmm_latent_constraint_pins(lat));
        v->Sc = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
        v->mc = gmm_malloc(n, sizeof *v->mc);
        v->mcbar = gmm_malloc(n, sizeof *v->mcbar);
        ok = v->con && v->Sc && v->mc && v->mcbar;
    }
    if (!ok) {
        st = gmm_error(GMM_ENOMEM, "vi: out of memory for %zu latents (bandwidth %zu, "
                                   "covariance band %zu)",
                       n, v->b, v->sk);
        gmm_vi_free(v);
        return st;
    }
    memcpy(v->theta, obj->value, v->nparam * sizeof *v->theta);
    const size_t *off = gmm_latent_obs_offset(lat);
    v->orowptr[0] = 0;
    for (size_t r = 0, o = 0; r < v->nrows; r++) {
        if (isnan(y[r]))
            continue;
        size_t lo = row_lo(v, r), hi = v->rowptr ? v->rowptr[r + 1] : lo + w;
        v->orow[o] = r;
        v->ooff[o] = off[r];
        v->oy[o] = y[r];
        v->oe[o] = e ? e[r] : 1.0;
        v->orowptr[o + 1] = v->orowptr[o] + (hi - lo);
        if (v->pos)
            memcpy(v->opos + v->orowptr[o], v->pos + lo, (hi - lo) * sizeof *v->opos);
        o++;
    }
    if ((st = sort_by_offset(v))) {
        gmm_vi_free(v);
        return st;
    }
    if (!v->varies) {
        if ((st = gmm_latent_obs_values(lat, v->theta, v->coef_all))) {
            gmm_vi_free(v);
            return st;
        }
        gather_coef(v);
    }
    v->start = "given";
    *out = v;
    return GMM_OK;
}

size_t gmm_vi_dim(const gmm_vi *v) { return v->n; }
size_t gmm_vi_bandwidth(const gmm_vi *v) { return v->b; }
size_t gmm_vi_nvar(const gmm_vi *v) { return v->nvar; }
size_t gmm_vi_nparam(const gmm_vi *v) { return v->nparam; }
int gmm_vi_uses_rows(const gmm_vi *v) { return v->rows; }
const double *gmm_vi_theta(const gmm_vi *v) { return v->theta; }
const double *gmm_vi_lambda(const gmm_vi *v) { return v->lambda; }
const double *gmm_vi_mean(const gmm_vi *v) { return v->lambda; }

/* ---- one evaluation ----------------------------------------------------------- */

/* The likelihood's parameters and the coefficients at theta. */
static gmm_status set_hyper(gmm_vi *v, const double *theta)
{
    gmm_status st;
    v->lik = *gmm_problem_lik(v->prob);
    for (size_t k = 0; k < v->np; k++) {
        double t = theta[v->nl + k];
        if (!isfinite(t) || !(t > 0.0))
            return gmm_error_at(GMM_EDOM, v->nl + k, "%s = %g must be positive and finite",
                                gmm_problem_objective(v->prob)->name[v->nl + k], t);
        v->lik.par[k] = t;
    }
    for (size_t k = v->c0; k < v->nparam; k++)
        if (!isfinite(theta[k]))
            return gmm_error_at(GMM_EDOM, k, "%s = %g is not finite",
                                gmm_problem_objective(v->prob)->name[k], theta[k]);
    if (v->ncoef) {
        gmm_problem_offsets(v->prob, theta, v->offs);
        for (size_t i = 0; i < v->nobs; i++)
            v->oshift[i] = v->offs[v->orow[i]];
    }
    if ((st = gmm_latent_theta_check(v->lat, theta)))
        return st;
    if (v->varies) {
        if ((st = gmm_latent_obs_values(v->lat, theta, v->coef_all)))
            return st;
        gather_coef(v);
    }
    return GMM_OK;
}

/* L from lambda: the band copied, its log-diagonal exponentiated. */
static gmm_status unpack(gmm_vi *v, const double *lambda)
{
    memcpy(v->L->data, lambda + v->n, gmm_band_size(v->n, v->b, 0) * sizeof *lambda);
    v->ldq = 0.0;
    for (size_t j = 0; j < v->n; j++) {
        double *d = gmm_band_ptr(v->L, j, j), t = exp(*d);
        v->ldq += 2.0 * *d;
        if (!(t >= DBL_MIN) || !isfinite(t))
            return gmm_error_at(GMM_EDOM, j, "vi: L(%zu, %zu) = exp(%g) is not a positive "
                                             "normal double",
                                j, j, *d);
        *d = t;
    }
    return GMM_OK;
}

/* The automatic rule's points at variance s2 (vi.h, EXPECTATIONS). */
static size_t auto_rule(double s2) { return s2 <= 0.4 ? 20 : s2 <= 1.0 ? 40 : 100; }

/* Gauss-Hermite points for row i at variance s2 (vi.h, EXPECTATIONS). */
static size_t rule_of(gmm_vi *v, size_t i, double s2)
{
    if (v->par.nquad)
        return v->par.nquad;
    if (!v->freeze || !v->rule[i])
        v->rule[i] = (unsigned char)(auto_rule(s2) / 4);
    return 4 * (size_t)v->rule[i];
}

/* The expectations: sum_r E_r into *sum; mu, s2, a, c per row and the
 * summed parameter derivatives.  With gl, Sigmabar += c_r h h' and lambar's
 * m part += a_r h. */
static gmm_status expectations(gmm_vi *v, const gmm_band *S, const double *m, double *sum,
                               double *mbar, int gl)
{
    double out[3], dp[GMM_LIK_MAXPARAM], acc = 0.0;
    memset(v->dpar, 0, GMM_LIK_MAXPARAM * sizeof *v->dpar);
    for (size_t i = 0; i < v->nobs; i++) {
        size_t k0 = v->orowptr[i], k1 = v->orowptr[i + 1];
        const double *h = v->ocoef;
        double mu = v->oshift[i], s2 = 0.0;
        for (size_t a = k0; a < k1; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = entry_at(v, i, a);
            mu += h[a] * m[ia];
            double t = 0.0;
            for (size_t c = k0; c < k1; c++)
                t += gmm_band_get(S, ia, entry_at(v, i, c)) * h[c];
            s2 += h[a] * t;
        }
        if (s2 < 0.0) /* rounding of a variance that is ~0 against Sigma's entries */
            s2 = 0.0;
        gmm_status st = gmm_lik_expect(&v->lik, v->oy[i], v->oe[i], mu, s2, rule_of(v, i, s2), out,
                                       v->np ? dp : NULL);
        if (st)
            return st;
        v->mu[i] = mu;
        v->s2[i] = s2;
        v->ea[i] = out[1];
        v->ec[i] = out[2];
        acc += out[0];
        for (size_t k = 0; k < v->np; k++)
            v->dpar[k] += dp[k];
        if (!gl)
            continue;
        for (size_t a = k0; a < k1; a++) { /* entries in increasing latent */
            if (h[a] == 0.0)
                continue;
            size_t ia = entry_at(v, i, a);
            mbar[ia] += out[1] * h[a];
            *gmm_band_ptr(v->Sbar, ia, ia) += out[2] * h[a] * h[a];
            for (size_t c = k0; c < a; c++)
                *gmm_band_ptr(v->Sbar, ia, entry_at(v, i, c)) += 2.0 * out[2] * h[a] * h[c];
        }
    }
    *sum = acc;
    return GMM_OK;
}

/* (hi, lo) += a c exactly up to the low part's rounding: the product split
 * by fma (TwoProduct), the sum by Knuth's TwoSum. */
static inline void dd_add_prod(double *hi, double *lo, double a, double c)
{
    double p = a * c, pe = fma(a, c, -p);
    double t = *hi + p, z = t - *hi;
    *lo += ((*hi - (t - z)) + (p - z)) + pe;
    *hi = t;
}

/* One segment's moments of the whitened rows under q (WHITENED MOMENTS):
 * the segment's rows (rw, width w[a] from first[a], ldr = kl + 1), their
 * values r at m (double-double, rh + rl), into Svv (seg x seg) and Svx
 * (seg x seg, E[v x_{prev}'], prev the latents from pcol; NULL: none). */
static void seg_moments(gmm_vi *v, const double *rows, const size_t *first, const size_t *w,
                        const double *rh, const double *m, size_t pcol, double *Svv,
                        double *Svx)
{
    size_t s = v->seg, n = v->n, b = v->b, ldr = v->kl + 1;
    size_t j0 = first[0], j1 = 0;
    for (size_t a = 0; a < s; a++)
        if (first[a] + w[a] - 1 > j1)
            j1 = first[a] + w[a] - 1;
    size_t nJ = j1 - j0 + 1, nF = j1 + 1 + b <= n - 1 ? b : n - 1 - j1;
    double *LJ = v->rw + s * ldr + 2 * s, *LF = LJ + nJ * nJ, *Z = LF + b * nJ;
    double *U = Z + s * nJ, *SU = U + s * b, *wv = SU + b, *SF = wv + nJ;
    for (size_t c = 0; c < nJ; c++) { /* L_JJ, L_FJ (row-major) from L's columns */
        const double *lc = gmm_band_col(v->L, j0 + c);
        for (size_t a = 0; a < nJ; a++)
            LJ[a * nJ + c] = c <= a && a - c <= b ? lc[j0 + a] : 0.0;
        for (size_t f = 0; f < nF; f++)
            LF[f * nJ + c] = j1 + 1 + f - (j0 + c) <= b ? lc[j1 + 1 + f] : 0.0;
    }
    for (size_t f = 0; f < nF; f++) { /* Sigma_FF */
        const double *sc = gmm_band_col(v->S, j1 + 1 + f);
        for (size_t e = f; e < nF; e++)
            SF[f * nF + e] = SF[e * nF + f] = sc[j1 + 1 + e];
    }
    for (size_t a = 0; a < s; a++) {
        double *z = Z + a * nJ, *u = U + a * b;
        for (size_t c = 0; c < nJ; c++) { /* L_JJ z = g_a on J */
            double t = first[a] <= j0 + c && j0 + c < first[a] + w[a]
                           ? rows[a * ldr + (j0 + c - first[a])]
                           : 0.0;
            for (size_t e = 0; e < c; e++)
                t -= LJ[c * nJ + e] * z[e];
            z[c] = t / LJ[c * nJ + c];
        }
        for (size_t f = 0; f < nF; f++) { /* u = -L_FJ z */
            double t = 0.0;
            for (size_t c = 0; c < nJ; c++)
                t -= LF[f * nJ + c] * z[c];
            u[f] = t;
        }
    }
    for (size_t a = 0; a < s; a++) {
        const double *za = Z + a * nJ, *ua = U + a * b;
        for (size_t f = 0; f < nF; f++) { /* SU = Sigma_FF u_a */
            double t = 0.0;
            for (size_t e = 0; e < nF; e++)
                t += SF[f * nF + e] * ua[e];
            SU[f] = t;
        }
        for (size_t c = 0; c <= a; c++) {
            const double *zc = Z + c * nJ, *uc = U + c * b;
            double t = 0.0;
            for (size_t e = 0; e < nJ; e++)
                t += za[e] * zc[e];
            for (size_t f = 0; f < nF; f++)
                t += uc[f] * SU[f];
            Svv[a * s + c] = Svv[c * s + a] = t + rh[a] * rh[c];
        }
        if (!Svx)
            continue;
        /* Cov(v_a, x_J) = (z_a - L_FJ' Sigma_FF u_a)' L_JJ^-1 */
        for (size_t c = 0; c < nJ; c++) {
            double t = za[c];
            for (size_t f = 0; f < nF; f++)
                t -= LF[f * nJ + c] * SU[f];
            wv[c] = t;
        }
        for (size_t c = nJ; c-- > 0;) {
            double t = wv[c];
            for (size_t f = c + 1; f < nJ; f++)
                t -= LJ[f * nJ + c] * wv[f];
            wv[c] = t / LJ[c * nJ + c];
        }
        for (size_t q = 0; q < s; q++) {
            size_t col = pcol + q;
            Svx[a * s + q] = rh[a] * m[col] + (col >= j0 && col <= j1 ? wv[col - j0] : 0.0);
        }
    }
}

/* The prior's terms from its rows: D = G'G in double-double (D, Dlo), m'Q m
 * and the rows' share of mbar from r_i = g_i'm in double-double (gl), the
 * whitened moments per segment into Smo (gt). */
static void rows_terms(gmm_vi *v, const gmm_prior_rows *G, const double *m, double *mqm,
                       double *mbar, int gl, int gt)
{
    size_t s = v->seg, ldr = v->kl + 1, nseg = G->nrows / s, ss = s * s;
    double *rows = v->rw, *rh = rows + s * ldr, *rl = rh + s, q = 0.0;
    size_t *first = v->rfirst, *w = first + s;
    gmm_band_set_zero(v->D);
    gmm_band_set_zero(v->Dlo);
    if (gl) {
        memset(v->tmp, 0, v->n * sizeof *v->tmp);
        memset(v->mlo, 0, v->n * sizeof *v->mlo);
    }
    for (size_t t = 0; t < nseg; t++) {
        for (size_t a = 0; a < s; a++) {
            size_t i = t * s + a, f;
            double *g = rows + a * ldr;
            size_t wi = w[a] = G->row(G->ctx, i, &f, g);
            first[a] = f;
            double th = 0.0, tl = 0.0;
            for (size_t c = 0; c < wi; c++) {
                dd_add_prod(&th, &tl, g[c], m[f + c]);
                double *dh = gmm_band_col(v->D, f + c), *dl = gmm_band_col(v->Dlo, f + c);
                for (size_t e = c; e < wi; e++) /* (f + e, f + c), e >= c */
                    dd_add_prod(dh + f + e, dl + f + e, g[e], g[c]);
            }
            /* (th, tl) renormalised: r_i to double-double */
            rh[a] = th + tl;
            rl[a] = tl - (rh[a] - th);
            q += rh[a] * rh[a] + 2.0 * rh[a] * rl[a];
            if (gl)
                for (size_t c = 0; c < wi; c++) { /* -G'r, its cancellation in double-double */
                    dd_add_prod(v->tmp + f + c, v->mlo + f + c, g[c], -rh[a]);
                    v->mlo[f + c] -= g[c] * rl[a];
                }
        }
        if (gt && !v->qrev)
            seg_moments(v, rows, first, w, rh, m, t ? (t - 1) * s : 0, v->Smo + t * ss,
                        t ? v->Smo + (nseg + t) * ss : NULL);
    }
    if (gl)
        for (size_t j = 0; j < v->n; j++)
            mbar[j] += v->tmp[j] + v->mlo[j];
    *mqm = q;
}

/* D -= L L' on D's band: in double-double into (D, Dlo) and rounded into D
 * (rows), or in double (assembled, D = Q on entry).  O(n b^2). */
static void sub_llt(gmm_vi *v)
{
    size_t n = v->n, b = v->b;
    for (size_t k = 0; k < n; k++) {
        const double *l = gmm_band_col(v->L, k);
        size_t imax = k + b < n ? k + b : n - 1;
        for (size_t j = k; j <= imax; j++) {
            double *dh = gmm_band_col(v->D, j), lj = -l[j];
            if (v->rows) {
                double *dl = gmm_band_col(v->Dlo, j);
                for (size_t i = j; i <= imax; i++) /* (i, j), i >= j */
                    dd_add_prod(dh + i, dl + i, l[i], lj);
            } else {
                for (size_t i = j; i <= imax; i++)
                    dh[i] += l[i] * lj;
            }
        }
    }
    if (!v->rows)
        return;
    for (size_t j = 0; j < n; j++) {
        double *dh = gmm_band_col(v->D, j);
        const double *dl = gmm_band_col(v->Dlo, j);
        size_t imax = j + v->dk < n ? j + v->dk : n - 1;
        for (size_t i = j; i <= imax; i++)
            dh[i] += dl[i];
    }
}

/* Sigma_c = Sigma - V V' loses about log10(Sigma_jj / Sigma_c,jj) digits
 * to the subtraction; q's with more than this ratio at some j (P nearly
 * singular off the subspace, along directions that do not move the
 * conditioned q) are outside the ELBO's domain (CONSTRAINTS). */
#define CANCEL_MAX 1e6

/* q's moments on the subspace from L: Sigma's band into S, Sigma_c's into
 * Sc (constr.h, no pins); GMM_EDOM when the subtraction cancels beyond
 * CANCEL_MAX. */
static gmm_status constrained_band(gmm_vi *v)
{
    gmm_status st;
    if ((st = gmm_constr_factor(v->con, v->L, 0.0)) || (st = gmm_band_copy(v->Sc, v->S)))
        return st;
    gmm_constr_band(v->con, v->Sc);
    for (size_t j = 0; j < v->n; j++) {
        double s = gmm_band_get(v->S, j, j), sc = gmm_band_get(v->Sc, j, j);
        if (!(sc * CANCEL_MAX >= s))
            return gmm_error_at(GMM_EDOM, j, "vi: q's precision is nearly singular off the "
                                             "constrained subspace (variance of latent %zu "
                                             "%g, %g conditioned)",
                                j, s, sc);
    }
    return GMM_OK;
}

gmm_status gmm_vi_elbo(gmm_vi *v, const double *theta, const double *lambda, double *elbo,
                       double *lambar, double *thetabar)
{
    gmm_status st;
    if (!v || !theta || !lambda || !elbo)
        return gmm_error(GMM_EINVAL, "gmm_vi_elbo: NULL argument");
    size_t n = v->n;
    int gl = lambar != NULL, gt = thetabar != NULL;
    const double *m = lambda;
    double ldp = NAN, tr, mqm, sumE;
    double *mbar = lambar;
    gmm_prior_rows G;
    if ((st = set_hyper(v, theta)) || (st = unpack(v, lambda)))
        return st;
    /* the prior at theta */
    v->logdet_here = 0;
    if (v->rows) {
        if ((st = gmm_latent_prior_rows(v->lat, theta, &G, &ldp)))
            return st;
    } else {
        if ((st = gmm_latent_prior(v->lat, theta, v->Q, &ldp)))
            return st;
        if (isnan(ldp)) {
            if ((st = gmm_band_copy(v->K, v->Q)) ||
                (st = gmm_band_chol_decomp_work(v->K, v->K, v->cwork)))
                return st;
            ldp = gmm_band_chol_logdet(v->K);
            v->logdet_here = 1;
        }
    }
    if ((st = gmm_band_chol_selinv(v->L, v->S)))
        return st;
    /* q's moments on the subspace (CONSTRAINTS): mq, Sq and mqbar */
    const gmm_band *Sq = v->S;
    const double *mq = m;
    double *mqbar = mbar, ldg = 0.0;
    if (v->con) {
        if ((st = constrained_band(v)))
            return st;
        memcpy(v->mc, m, n * sizeof *m);
        gmm_constr_krig(v->con, v->mc);
        ldg = gmm_constr_logdet(v->con);
        Sq = v->Sc;
        mq = v->mc;
        mqbar = v->mcbar;
    }
    if (gl) {
        memset(mqbar, 0, n * sizeof *mqbar);
        gmm_band_set_zero(v->Sbar);
    }
    if ((st = expectations(v, Sq, mq, &sumE, mqbar, gl)))
        return st;
    if (v->rows) {
        rows_terms(v, &G, mq, &mqm, mqbar, gl, gt);
        /* rows that hold the pins (Q + tau E_S E_S', constraints: latent.h,
         * gmm_latent_prior_rows_pins) give D, m'Qm and -Qm without them */
        double tau = v->con ? gmm_latent_prior_rows_pins(v->lat) : 0.0;
        const size_t *pin = gmm_latent_constraint_pins(v->lat);
        for (size_t i = 0; tau > 0.0 && i < gmm_latent_nconstr(v->lat); i++) {
            size_t s = pin[i];
            *gmm_band_ptr(v->D, s, s) -= tau;
            mqm -= tau * mq[s] * mq[s];
            if (gl)
                mqbar[s] += tau * mq[s];
        }
    } else {
        if ((st = gmm_band_copy_band(v->D, v->Q)) ||
            (st = gmm_band_gemv(GMM_NOTRANS, 1.0, v->Q, mq, 0.0, v->tmp)))
            return st;
        mqm = 0.0;
        for (size_t j = 0; j < n; j++)
            mqm += mq[j] * v->tmp[j];
        if (gl)
            for (size_t j = 0; j < n; j++)
                mqbar[j] -= v->tmp[j];
        if (gt) {
            gmm_band_set_zero(v->Qbar);
            if ((st = gmm_band_dot_rev(Sq, v->Q, -0.5, NULL, v->Qbar)))
                return st;
        }
    }
    /* tr(Sigma_c Q) - (n - k) = tr(Sigma_c D), D = Q - L L' (ACCURACY,
     * CONSTRAINTS) */
    sub_llt(v);
    tr = gmm_band_dot(Sq, v->D);
    if (gl && (st = gmm_band_dot_rev(Sq, v->D, -0.5, v->Sbar, NULL)))
        return st;
    double kl = 0.5 * (tr + mqm - ldp + v->ldq + ldg), val = sumE - kl;
    if (!isfinite(val))
        return gmm_error(GMM_EDOM, "vi: ELBO not finite (expectations %g, KL %g)", sumE, kl);
    if (gl) {
        gmm_band_set_zero(v->Lbar);
        if (v->con) {
            memset(mbar, 0, n * sizeof *mbar);
            if ((st = gmm_constr_rev(v->con, v->L, m, v->mc, v->mcbar, v->Sbar, v->Lbar, mbar)))
                return st;
        }
        if ((st = gmm_band_chol_selinv_rev(v->L, v->S, v->Sbar, v->Lbar)))
            return st;
        memcpy(lambar + n, v->Lbar->data, gmm_band_size(n, v->b, 0) * sizeof *lambar);
        gmm_band lb;
        if ((st = gmm_band_view(&lb, lambar + n, n, v->b, 0, GMM_BAND_LOWER)))
            return st;
        for (size_t j = 0; j < n; j++) {
            double *d = gmm_band_ptr(&lb, j, j);
            *d *= *gmm_band_ptr(v->L, j, j);
        }
    }
    if (gt) {
        memset(thetabar, 0, v->nparam * sizeof *thetabar);
        if (v->rows && v->qrev) {
            if ((st = gmm_latent_prior_rows_rev_q(v->lat, Sq, mq, v->D, thetabar)))
                return st;
        } else if (v->rows) {
            size_t nseg = v->nrowsG / v->seg;
            if ((st = gmm_latent_prior_rows_rev_moments(
                     v->lat, v->Smo, v->Smo + nseg * v->seg * v->seg, thetabar)))
                return st;
        } else {
            if ((st = gmm_band_outer(-0.5, 1, mq, n, mq, n, v->Qbar)))
                return st;
            if (v->logdet_here) {
                gmm_band_set_zero(v->Kbar);
                if ((st = gmm_band_chol_logdet_rev(v->K, 0.5, v->Kbar)) ||
                    (st = gmm_band_chol_decomp_rev_work(v->K, v->Kbar, v->Qbar, v->cwork)))
                    return st;
            }
            if ((st = gmm_latent_prior_rev(v->lat, v->Qbar, v->logdet_here ? 0.0 : 0.5,
                                           thetabar)))
                return st;
        }
        for (size_t k = 0; k < v->np; k++)
            thetabar[v->nl + k] = v->dpar[k];
        if (v->ncoef) {
            memset(v->offs, 0, v->nrows * sizeof *v->offs);
            for (size_t i = 0; i < v->nobs; i++)
                v->offs[v->orow[i]] = v->ea[i];
            gmm_problem_offsets_rev(v->prob, v->offs, thetabar);
        }
        if (v->varies) {
            memset(v->coefbar_all, 0, v->nnz * sizeof *v->coefbar_all);
            for (size_t i = 0; i < v->nobs; i++) {
                size_t k0 = v->orowptr[i], k1 = v->orowptr[i + 1];
                const double *h = v->ocoef;
                double *hb = v->coefbar_all + row_lo(v, v->orow[i]) - k0;
                for (size_t a = k0; a < k1; a++) {
                    size_t ia = entry_at(v, i, a);
                    double s = 0.0;
                    for (size_t c = k0; c < k1; c++)
                        s += gmm_band_get(Sq, ia, entry_at(v, i, c)) * h[c];
                    hb[a] = v->ea[i] * mq[ia] + 2.0 * v->ec[i] * s;
                }
            }
            if ((st = gmm_latent_obs_coef_rev(v->lat, theta, v->coefbar_all, thetabar)))
                return st;
        }
    }
    *elbo = val;
    return GMM_OK;
}

/* ---- state ----------------------------------------------------------------------- */

/* lambda's band from v->L (its diagonal to logs). */
static void pack(gmm_vi *v)
{
    gmm_band lb;
    memcpy(v->lambda + v->n, v->L->data, gmm_band_size(v->n, v->b, 0) * sizeof *v->lambda);
    gmm_band_view(&lb, v->lambda + v->n, v->n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < v->n; j++) {
        double *d = gmm_band_ptr(&lb, j, j);
        *d = log(*d);
    }
}

/* With constraints, the state's m replaced by q's mean m_c = krig(m) (the
 * same q: krig(m_c) = m_c), so that gmm_vi_mean is q's mean. */
static gmm_status canonical(gmm_vi *v)
{
    gmm_status st;
    if (!v->con)
        return GMM_OK;
    if ((st = unpack(v, v->lambda)) || (st = gmm_constr_factor(v->con, v->L, 0.0)))
        return st;
    gmm_constr_krig(v->con, v->lambda);
    return GMM_OK;
}

static gmm_status theta_check(gmm_vi *v, const double *theta)
{
    gmm_status st = gmm_latent_theta_check(v->lat, theta);
    for (size_t k = 0; st == GMM_OK && k < v->np; k++) {
        double t = theta[v->nl + k];
        if (!isfinite(t) || !(t > 0.0))
            st = gmm_error_at(GMM_EINVAL, v->nl + k, "vi: likelihood parameter %zu = %g must be "
                                                     "positive and finite",
                              k, t);
    }
    for (size_t k = v->c0; st == GMM_OK && k < v->nparam; k++)
        if (!isfinite(theta[k]))
            st = gmm_error(GMM_EINVAL, "vi: coefficient %g is not finite", theta[k]);
    return st == GMM_EDOM ? GMM_EINVAL : st;
}

gmm_status gmm_vi_set_state(gmm_vi *v, const double *theta, const double *m, const gmm_band *L)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_set_state: NULL argument");
    if (theta && (st = theta_check(v, theta)))
        return st;
    if (L && (L->n != v->n || L->kind != GMM_BAND_LOWER))
        return gmm_error(GMM_EDIM, "gmm_vi_set_state: L must be LOWER %zu x %zu", v->n, v->n);
    for (size_t j = 0; L && j < v->n; j++) {
        double d = gmm_band_get(L, j, j);
        if (!(d > 0.0) || !isfinite(d))
            return gmm_error_at(GMM_EINVAL, j, "gmm_vi_set_state: L(%zu, %zu) = %g is not "
                                               "positive and finite",
                                j, j, d);
    }
    if (theta)
        memcpy(v->theta, theta, v->nparam * sizeof *theta);
    if (m)
        memcpy(v->lambda, m, v->n * sizeof *m);
    else
        memset(v->lambda, 0, v->n * sizeof *v->lambda);
    if (L) {
        if ((st = gmm_band_copy_band(v->L, L)))
            return st;
    } else {
        gmm_band_set_zero(v->L);
        for (size_t j = 0; j < v->n; j++)
            *gmm_band_ptr(v->L, j, j) = 1.0;
    }
    pack(v);
    if ((st = canonical(v)))
        return st;
    v->have_start = 1;
    v->start = "given";
    return GMM_OK;
}

gmm_status gmm_vi_set_state_from(gmm_vi *v, const double *theta, gmm_vi *src)
{
    if (!v || !src)
        return gmm_error(GMM_EINVAL, "gmm_vi_set_state_from: NULL argument");
    gmm_band *L = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_LOWER);
    if (!L)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for q's factor");
    gmm_status st = gmm_vi_factor(src, L);
    if (st == GMM_OK)
        st = gmm_vi_set_state(v, theta, gmm_vi_mean(src), L);
    gmm_band_free(L);
    return st;
}

/* K = chol(Q_p + sum_i w_i h_i h_i') (w NULL: the prior alone) at v->theta,
 * the coefficients set (set_hyper); with pin, + tau E_S E_S' (constr.h's
 * pins: positive definite when Q_p is intrinsic). */
static gmm_status factor_start(gmm_vi *v, const double *w, int pin)
{
    gmm_status st;
    size_t wd = v->width;
    if (v->rows) {
        /* fold the prior's rows and sqrt(w_i) h_i, merged by first column */
        gmm_prior_rows G;
        if ((st = gmm_latent_prior_rows(v->lat, v->theta, &G, NULL)))
            return st;
        if ((st = gmm_band_set_kind(v->K, GMM_BAND_LOWER)))
            return st;
        gmm_band_set_zero(v->K);
        size_t io = 0, first = 0, gw = 0;
        double *hv = v->Sg;
        for (size_t i = 0; i < G.nrows || (w && io < v->nobs);) {
            if (i < G.nrows && gw == 0)
                gw = G.row(G.ctx, i, &first, v->grow);
            size_t o = w && io < v->nobs ? v->oord[io] : 0;
            if (w && io < v->nobs && (i == G.nrows || v->ooff[o] < first)) {
                io++;
                if (!(w[o] > 0.0))
                    continue;
                double sw = sqrt(w[o]);
                memset(hv, 0, wd * sizeof *hv);
                for (size_t k = v->orowptr[o]; k < v->orowptr[o + 1]; k++)
                    hv[entry_at(v, o, k) - v->ooff[o]] = sw * v->ocoef[k];
                if ((st = gmm_band_chol_add_row(v->K, v->ooff[o], wd, hv, v->work)))
                    return st;
                continue;
            }
            if ((st = gmm_band_chol_add_row(v->K, first, gw, v->grow, v->work)))
                return st;
            i++;
            gw = 0;
        }
        return gmm_band_chol_rows_check(v->K);
    }
    if ((st = gmm_latent_prior(v->lat, v->theta, v->Q, NULL)))
        return st;
    if ((st = gmm_band_copy(v->K, v->Q)))
        return st;
    if (pin)
        gmm_constr_pin(v->con, gmm_constr_tau(v->con, v->Q), v->K);
    for (size_t i = 0; w && i < v->nobs; i++) {
        const double *h = v->ocoef;
        for (size_t a = v->orowptr[i]; a < v->orowptr[i + 1]; a++)
            for (size_t c = v->orowptr[i]; c <= a; c++)
                *gmm_band_ptr(v->K, entry_at(v, i, a), entry_at(v, i, c)) += w[i] * h[a] * h[c];
    }
    return gmm_band_chol_decomp_work(v->K, v->K, v->cwork);
}

/* L from K (restricted to b); with constraints, when K came without pins
 * and is singular off the subspace in rounding (constrained_band), K and L
 * again with the pins: an intrinsic Q_p is always singular there, and so
 * is Q_p + H'WH when two intrinsic terms are read only through their sum. */
static gmm_status start_factor(gmm_vi *v, const double *w)
{
    gmm_status st;
    int pin = v->con && !w;
    st = factor_start(v, w, pin);
    if (st == GMM_ENOTPD && v->con && !pin)
        st = factor_start(v, w, pin = 1);
    if (st || (st = gmm_band_copy_band(v->L, v->K)))
        return st;
    if (!v->con || pin)
        return GMM_OK;
    if ((st = gmm_band_chol_selinv(v->L, v->S)))
        return st;
    st = constrained_band(v);
    if (st != GMM_EDOM && st != GMM_ENOTPD)
        return st;
    if ((st = factor_start(v, w, 1)))
        return st;
    return gmm_band_copy_band(v->L, v->K);
}

gmm_status gmm_vi_start_laplace(gmm_vi *v, const char **start)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_start_laplace: NULL argument");
    double *m = v->lambda;
    int laplace = 1;
    st = gmm_problem_posterior(v->prob, v->theta, m, NULL);
    if (st == GMM_EDOM || st == GMM_ENOTPD || st == GMM_ENOCONV) {
        laplace = 0;
        memset(m, 0, v->n * sizeof *m);
    } else if (st) {
        return st;
    }
    if ((st = set_hyper(v, v->theta)))
        return st;
    double *w = NULL;
    if (laplace) {
        w = v->ec; /* scratch: -d2 log p at the mode */
        double out[4];
        for (size_t i = 0; i < v->nobs; i++) {
            double f = v->oshift[i];
            for (size_t a = v->orowptr[i]; a < v->orowptr[i + 1]; a++)
                f += v->ocoef[a] * m[entry_at(v, i, a)];
            gmm_lik_eval(&v->lik, v->oy[i], v->oe[i], f, out, NULL);
            w[i] = -out[2];
        }
    }
    if ((st = start_factor(v, w)))
        return st;
    pack(v);
    if ((st = canonical(v)))
        return st;
    v->have_start = 1;
    v->start = laplace ? "laplace" : "prior";
    if (start)
        *start = v->start;
    return GMM_OK;
}

/* ---- q as a posterior --------------------------------------------------------------- */

gmm_status gmm_vi_factor(gmm_vi *v, gmm_band *L)
{
    gmm_status st;
    if (!v || !L)
        return gmm_error(GMM_EINVAL, "gmm_vi_factor: NULL argument");
    if (L->n != v->n || L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "gmm_vi_factor: L must be LOWER %zu x %zu", v->n, v->n);
    if ((st = unpack(v, v->lambda)))
        return st;
    return gmm_band_copy_band(L, v->L);
}

gmm_status gmm_vi_quad_error(gmm_vi *v, size_t nquad, double *err)
{
    gmm_status st;
    double elbo, out[3], ref[3];
    if (!v || !err)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_error: NULL argument");
    if (nquad > GMM_LIK_QUAD_MAX)
        return gmm_error(GMM_EINVAL, "vi: nquad must be 0 (automatic) or 1..%d, got %zu",
                         GMM_LIK_QUAD_MAX, nquad);
    if (!v->have_start)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_error: no state set");
    *err = 0.0;
    v->freeze = 0;
    if ((st = gmm_vi_elbo(v, v->theta, v->lambda, &elbo, NULL, NULL)))
        return st;
    for (size_t i = 0; i < v->nobs; i++) {
        size_t k = nquad ? nquad : auto_rule(v->s2[i]);
        size_t kr = k == GMM_LIK_QUAD_MAX ? k / 2 : 2 * k < GMM_LIK_QUAD_MAX ? 2 * k
                                                                            : GMM_LIK_QUAD_MAX;
        if ((st = gmm_lik_expect(&v->lik, v->oy[i], v->oe[i], v->mu[i], v->s2[i], k, out,
                                 NULL)) ||
            (st = gmm_lik_expect(&v->lik, v->oy[i], v->oe[i], v->mu[i], v->s2[i], kr, ref,
                                 NULL)))
            return st;
        *err += fabs(out[0] - ref[0]);
    }
    return GMM_OK;
}

gmm_status gmm_vi_posterior(gmm_vi *v, double *mean, gmm_band *cov)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_posterior: NULL argument");
    if (mean)
        memcpy(mean, v->lambda, v->n * sizeof *mean);
    if (!cov)
        return GMM_OK;
    if (cov->n != v->n || cov->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_vi_posterior: cov must be SYMMETRIC %zu x %zu", v->n,
                         v->n);
    if ((st = unpack(v, v->lambda)))
        return st;
    if (cov->kl >= v->b)
        st = gmm_band_chol_selinv(v->L, cov);
    else if ((st = gmm_band_chol_selinv(v->L, v->S)) == GMM_OK)
        st = gmm_band_copy_band(cov, v->S);
    if (st || !v->con)
        return st;
    if ((st = gmm_constr_factor(v->con, v->L, 0.0)))
        return st;
    gmm_constr_band(v->con, cov);
    return GMM_OK;
}

gmm_status gmm_vi_predict_rows(gmm_vi *v, double *mean, double *var)
{
    gmm_status st;
    if (!v || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_rows: NULL argument");
    if ((st = gmm_vi_posterior(v, NULL, v->S)) ||
        (st = gmm_latent_predict_rows(v->lat, v->theta, v->lambda, v->S, mean, var)))
        return st;
    if (v->ncoef) {
        gmm_problem_offsets(v->prob, v->theta, v->offs);
        for (size_t r = 0; r < v->nrows; r++)
            mean[r] += v->offs[r];
    }
    return GMM_OK;
}

gmm_status gmm_vi_predict_latent(gmm_vi *v, const double *xq, size_t nq, double *mean,
                                 double *var)
{
    gmm_status st;
    if (!v || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_latent: NULL argument");
    int inputs = gmm_latent_has_inputs(v->lat);
    if (inputs && nq && !xq)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_latent: NULL inputs");
    if (!inputs && gmm_latent_node_index(v->lat, 0) == GMM_NO_INDEX)
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(v->lat));
    if (!inputs) {
        if ((st = gmm_vi_posterior(v, NULL, v->S)))
            return st;
        for (size_t j = 0; j < v->n; j++) {
            size_t r = gmm_latent_node_index(v->lat, j);
            mean[j] = v->lambda[r];
            var[j] = gmm_band_get(v->S, r, r);
        }
        return GMM_OK;
    }
    gmm_band *cov = gmm_band_alloc(v->n, smax(gmm_latent_cov_bandwidth(v->lat), v->b), 0,
                                   GMM_BAND_SYMMETRIC);
    if (!cov)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for the covariance band");
    st = gmm_vi_posterior(v, NULL, cov);
    if (st == GMM_OK)
        st = gmm_latent_predict_at(v->lat, v->theta, v->lambda, cov, xq, nq, mean, var);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_vi_predict_nodes(gmm_vi *v, double *mean, double *var)
{
    if (v && gmm_latent_has_inputs(v->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(v->lat));
    gmm_status st = gmm_vi_predict_latent(v, NULL, 0, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(v->prob, v->theta, v->n, mean) : st;
}

gmm_status gmm_vi_predict_at(gmm_vi *v, const double *xq, size_t nq, double *mean, double *var)
{
    if (!v || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_at: NULL argument");
    if (!gmm_latent_has_inputs(v->lat))
        return gmm_error(GMM_EINVAL, "a %s model predicts at its nodes, not at new inputs",
                         gmm_latent_family(v->lat));
    gmm_status st = gmm_vi_predict_latent(v, xq, nq, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(v->prob, v->theta, nq, mean) : st;
}

/* ---- L-BFGS ---------------------------------------------------------------------------- */

/* One run over u = (lambda, free hyperparameters on their optimisation
 * scale); minimises -ELBO.  Trial points where the ELBO is not defined are
 * answered as fit.c does (fit.h, DOMAIN FAILURES). */
typedef struct {
    gmm_vi *v;
    size_t nvar, nfree, nu;
    size_t *idx;          /* free hyperparameter k is theta[idx[k]] */
    const gmm_objective *obj; /* the problem's: names and scales */
    double *th, *thbar;   /* trial theta, its gradient */
    infer_lbfgs lb;       /* the run, its anchor (the last accepted iterate) */
    double *ulast;        /* the last evaluated point (adaptive rules) */
    double *lam;          /* lambda at the trial point (nvar) */
    double *lam0;         /* lambda at the run's start (nvar): lambda = lam0 + T u */
    double *tu;           /* nvar doubles of workspace */
    gmm_band *L0, *S0;    /* the start's L and the band b of its inverse */
    double *R;            /* per column of L: the lower Cholesky factor of
                           * its metric block, nb x nb each (nb = b + 1), or
                           * with full = 0 the square roots of the blocks'
                           * diagonals, nb each */
    double *wk;           /* nb doubles of workspace */
    int full;
    int rescale;          /* L's diagonal moved away from the start's */
    size_t evals;
    size_t iter0;         /* iterations of the earlier runs */
    int cancelled, have_last;
    gmm_status fail_status, fatal; /* fatal: GMM_ENOMEM in an evaluation */
    char fatal_msg[GMM_ERROR_MAX];
} run_ctx;

/* lambda = lam0 + T u (SCALING): m = m0 + L0^-T a; column j of L moves by
 * R_j^-T w_j, its diagonal slot holding log L(j, j) by that / L0(j, j). */
static void precond_apply(run_ctx *c, const double *u, double *lam)
{
    gmm_vi *v = c->v;
    size_t n = v->n, nb = v->b + 1;
    gmm_band ub, lb;
    memcpy(lam, u, n * sizeof *u);
    gmm_band_tri_solve_vec(c->L0, GMM_TRANS, lam);
    for (size_t j = 0; j < n; j++)
        lam[j] += c->lam0[j];
    memcpy(lam + n, c->lam0 + n, (c->nvar - n) * sizeof *lam); /* and the unused corner */
    gmm_band_view(&ub, (double *)u + n, n, v->b, 0, GMM_BAND_LOWER);
    gmm_band_view(&lb, lam + n, n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        const double *R = c->R + j * (c->full ? nb * nb : nb);
        double *x = c->wk;
        for (size_t i = 0; i < k; i++)
            x[i] = gmm_band_get(&ub, j + i, j);
        for (size_t i = k; i-- > 0;) { /* R' x = w */
            if (c->full) {
                for (size_t r = i + 1; r < k; r++)
                    x[i] -= R[i * nb + r] * x[r];
                x[i] /= R[i * nb + i];
            } else {
                x[i] /= R[i];
            }
        }
        x[0] /= gmm_band_get(c->L0, j, j);
        for (size_t i = 0; i < k; i++)
            *gmm_band_ptr(&lb, j + i, j) += x[i];
    }
}

/* g <- T' g in place (nvar entries; 0 at the unused corner). */
static void precond_grad(run_ctx *c, double *g)
{
    gmm_vi *v = c->v;
    size_t n = v->n, nb = v->b + 1;
    gmm_band gb;
    gmm_band_tri_solve_vec(c->L0, GMM_NOTRANS, g);
    gmm_band_view(&gb, g + n, n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        const double *R = c->R + j * (c->full ? nb * nb : nb);
        double *y = c->wk;
        for (size_t i = 0; i < k; i++)
            y[i] = gmm_band_get(&gb, j + i, j);
        y[0] /= gmm_band_get(c->L0, j, j);
        for (size_t i = 0; i < k; i++) { /* R y = g */
            if (c->full) {
                for (size_t r = 0; r < i; r++)
                    y[i] -= R[r * nb + i] * y[r];
                y[i] /= R[i * nb + i];
            } else {
                y[i] /= R[i];
            }
        }
        for (size_t i = 0; i < k; i++)
            *gmm_band_ptr(&gb, j + i, j) = y[i];
    }
}

/* theta's free entries from u (objective.h, SCALES); 0 (and fail_status
 * set) when one leaves its domain in floating point. */
static int map_theta(run_ctx *c, const double *u)
{
    for (size_t k = 0; k < c->nfree; k++) {
        size_t i = c->idx[k];
        gmm_scale s = c->obj->scale[i];
        double x = gmm_scale_from_u(s, u[c->nvar + k]);
        if (!gmm_scale_inside(s, x)) {
            c->fail_status = gmm_error(GMM_EDOM, "%s = %g (u = %g on its %s scale) must be %s",
                                       c->obj->name[i], x, u[c->nvar + k], gmm_scale_name(s),
                                       gmm_scale_domain(s));
            return 0;
        }
        c->th[i] = x;
    }
    return 1;
}

/* -ELBO and its gradient at u; 0 on a domain failure. */
static int eval_min(run_ctx *c, const double *u, double *f, double *g)
{
    gmm_vi *v = c->v;
    double elbo;
    c->evals++;
    c->have_last = 0;
    if (!map_theta(c, u))
        return 0;
    precond_apply(c, u, c->lam);
    gmm_status st = gmm_vi_elbo(v, c->th, c->lam, &elbo, g, c->nfree ? c->thbar : NULL);
    if (st) {
        c->fail_status = st;
        return 0;
    }
    precond_grad(c, g);
    for (size_t j = 0; j < c->nvar; j++)
        g[j] = -g[j];
    for (size_t k = 0; k < c->nfree; k++) {
        size_t i = c->idx[k];
        g[c->nvar + k] = -c->thbar[i] * gmm_scale_dp_du(c->obj->scale[i], c->th[i]);
    }
    for (size_t j = 0; j < c->nu; j++)
        if (!isfinite(g[j])) {
            c->fail_status = gmm_error(GMM_EDOM, "vi: gradient not finite");
            return 0;
        }
    memcpy(c->ulast, u, c->nu * sizeof *u);
    c->have_last = 1;
    *f = -elbo;
    return 1;
}

/* Start a new run with a new T when an L(j, j) moved by more than a factor
 * 1.5 from the run's start (SCALING). */
#define RESCALE_LOG 0.4054651081081644

static int evaluate(void *ctx, const double *x, double *f, double *g, double step)
{
    run_ctx *c = ctx;
    /* the starting point chooses each row's rule; line searches keep them */
    c->v->freeze = step != 0.0;
    int ok = !c->fatal && eval_min(c, x, f, g);
    c->v->freeze = 1;
    if (!ok && !c->fatal && c->fail_status == GMM_ENOMEM) {
        c->fatal = GMM_ENOMEM; /* not a domain failure: end the run */
        snprintf(c->fatal_msg, sizeof c->fatal_msg, "%s", gmm_error_message());
    }
    return ok;
}

static int accepted(void *ctx, const double *x, double f, double gnorm)
{
    run_ctx *c = ctx;
    gmm_vi *v = c->v;
    if (c->fatal)
        return 1;
    /* each row's rule from its variance at the accepted iterate */
    if (!v->par.nquad && c->have_last && !memcmp(c->ulast, x, c->nu * sizeof *x)) {
        v->freeze = 0;
        for (size_t i = 0; i < v->nobs; i++)
            rule_of(v, i, v->s2[i]);
        v->freeze = 1;
    }
    if (v->par.progress) {
        gmm_vi_progress p = {c->iter0 + c->lb.iter, c->evals, -f, gnorm};
        if (v->par.progress(v->par.user, &p)) {
            c->cancelled = 1;
            return 1;
        }
    }
    return 0;
}

/* After the decrease test: a new run when L's diagonal left the start's
 * scale. */
static int after(void *ctx, const double *x)
{
    run_ctx *c = ctx;
    gmm_vi *v = c->v;
    precond_apply(c, x, c->tu);
    for (size_t j = 0; j < v->n; j++) {
        size_t d = v->n + (size_t)(gmm_band_ptr(c->L0, j, j) - c->L0->data);
        if (fabs(c->tu[d] - c->lam0[d]) > RESCALE_LOG) {
            c->rescale = 1;
            return 1;
        }
    }
    return 0;
}

/* The preconditioner T of a run, from its starting point (SCALING): the
 * second-order expansion of the ELBO for a Gaussian likelihood at its
 * optimum is -|L0' dm|^2 / 2 - (|L0^-1 dL|_F^2 + sum_j (dL_jj / L0_jj)^2)
 * / 2, whose L part splits by columns: column j's metric is the block of
 * Sigma0 = (L0 L0')^-1 on its rows plus 1 / L0_jj^2 at its diagonal, M_j
 * = R_j R_j'.  In u the expansion is -|u|^2 / 2.  Blocks are kept when
 * they take no more memory than L-BFGS's own history (nb <= 2 memory),
 * else (and for a block whose Cholesky fails in rounding) their
 * diagonals.  O(n b^3). */
static gmm_status precond_set(gmm_vi *v, run_ctx *c)
{
    gmm_status st;
    size_t n = v->n, nb = v->b + 1;
    memcpy(c->lam0, v->lambda, c->nvar * sizeof *c->lam0);
    if ((st = unpack(v, v->lambda)) || (st = gmm_band_copy(c->L0, v->L)) ||
        (st = gmm_band_chol_selinv(c->L0, c->S0)))
        return st;
    for (size_t j = 0; j < n; j++) {
        size_t k = (v->b < n - 1 - j ? v->b : n - 1 - j) + 1;
        double d = gmm_band_get(c->L0, j, j), dd = 1.0 / (d * d);
        if (!c->full) {
            double *R = c->R + j * nb;
            for (size_t i = 0; i < k; i++)
                R[i] = sqrt(gmm_band_get(c->S0, j + i, j + i) + (i ? 0.0 : dd));
            continue;
        }
        double *R = c->R + j * nb * nb; /* column-major, lower */
        int ok = 1;
        for (size_t a = 0; a < k; a++)
            for (size_t r = a; r < k; r++)
                R[a * nb + r] = gmm_band_get(c->S0, j + r, j + a) + (r || a ? 0.0 : dd);
        for (size_t a = 0; a < k && ok; a++) {
            double p = R[a * nb + a];
            for (size_t t = 0; t < a; t++)
                p -= R[t * nb + a] * R[t * nb + a];
            if (!(p > 0.0) || !isfinite(p)) {
                ok = 0;
                break;
            }
            R[a * nb + a] = p = sqrt(p);
            for (size_t r = a + 1; r < k; r++) {
                double x = R[a * nb + r];
                for (size_t t = 0; t < a; t++)
                    x -= R[t * nb + r] * R[t * nb + a];
                R[a * nb + r] = x / p;
            }
        }
        if (!ok)
            for (size_t a = 0; a < k; a++)
                for (size_t r = a; r < k; r++)
                    R[a * nb + r] = r == a ? sqrt(gmm_band_get(c->S0, j + a, j + a) +
                                                  (a ? 0.0 : dd))
                                           : 0.0;
    }
    return GMM_OK;
}

/* The norm of the gradient's rounding noise at the anchor (STOPPING):
 * ECnoise (infer_impl.h) of each of up to GNOISE_SAMPLE evenly spaced
 * components of g along the gradient's direction d, g_j(u0 + k h d) for k
 * = -4 .. 4, h = GNOISE_STEP max(1, |u0|_inf) (u's unit is about a
 * posterior sd: the smooth part is negligible in those differences), the
 * sum of their squares scaled to all components.  8 evaluations, rules
 * frozen.  GMM_ENOMEM; an evaluation that fails gives noise 0. */
#define GNOISE_STEP 1e-6
#define GNOISE_SAMPLE 1024
#define GNOISE_GAIN 4.0

static gmm_status grad_noise(run_ctx *c, double *noise)
{
    size_t n = c->nu, m = n < GNOISE_SAMPLE ? n : GNOISE_SAMPLE;
    const double *u0 = c->lb.u0, *g0 = c->lb.g0;
    double gn = infer_lbfgs_gnorm(&c->lb), scale = 1.0, f;
    *noise = 0.0;
    if (!(gn > 0.0))
        return GMM_OK;
    double *x = gmm_malloc(2 * n + 9 * m, sizeof *x);
    if (!x)
        return gmm_error(GMM_ENOMEM, "vi: out of memory (%zu variables)", n);
    double *g = x + n, *phi = g + n; /* phi[i * 9 + k + 4]: component i's at k */
    for (size_t k = 0; k < n; k++)
        scale = fmax(scale, fabs(u0[k]));
    double h = GNOISE_STEP * scale;
    int ok = 1;
    for (int j = -4; j <= 4 && ok; j++) {
        const double *gj = g0;
        if (j) {
            for (size_t k = 0; k < n; k++)
                x[k] = u0[k] - j * h * g0[k] / gn;
            ok = c->lb.eval(c->lb.ctx, x, &f, g, 1.0);
            gj = g;
        }
        for (size_t i = 0; i < m; i++)
            phi[i * 9 + (size_t)(j + 4)] = gj[i * n / m];
    }
    c->v->freeze = 0;
    double ss = 0.0;
    for (size_t i = 0; ok && i < m; i++) {
        double s = infer_ecnoise(phi + i * 9);
        ss += s * s;
    }
    if (ok)
        *noise = sqrt(ss * (double)n / (double)m);
    gmm_free(x);
    return GMM_OK;
}

/* STOPPING: in u the Hessian is about the identity, so |g|^2 / 2 is the
 * Newton decrement, the rise of the ELBO a Newton step would still give;
 * at most VI_GAIN nats counts as converged. */
#define VI_GAIN 1e-8

/* The polish (STOPPING) may leave the ELBO POLISH_FTOL relative below the
 * run's end (its rounding) and take POLISH_MAX_ITER iterations. */
#define POLISH_TIGHTER 1e-3
#define POLISH_FTOL 1e-12
#define POLISH_MAX_ITER 200
/* The final run's line searches: near the optimum a failing one (the
 * ELBO's rounding) is answered by the polish, not by 40 evaluations. */
#define FINAL_LINESEARCH 10
/* The final run's iterations: at most those of the runs before it, or
 * FINAL_MIN_ITER when more. */
#define FINAL_MIN_ITER 100

gmm_status gmm_vi_fit(gmm_vi *v, gmm_vi_result *res)
{
    gmm_status st = GMM_OK;
    if (!v || !res)
        return gmm_error(GMM_EINVAL, "gmm_vi_fit: NULL argument");
    memset(res, 0, sizeof *res);
    if (!v->have_start && (st = gmm_vi_start_laplace(v, NULL)))
        return st;
    res->start = v->start;
    const gmm_objective *obj = gmm_problem_objective(v->prob);
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.nvar = v->nvar;
    c.obj = obj;
    if (v->par.learn_hyper)
        for (size_t i = 0; i < v->nparam; i++)
            c.nfree += !obj->fixed[i];
    c.nu = c.nvar + c.nfree;
    if (c.nu > (size_t)0x7fffffff)
        return gmm_error(GMM_EINVAL, "vi: too many variables (%zu)", c.nu);
    c.idx = gmm_malloc(c.nfree ? c.nfree : 1, sizeof *c.idx);
    c.th = gmm_malloc(v->nparam ? v->nparam : 1, sizeof *c.th);
    c.thbar = gmm_malloc(v->nparam ? v->nparam : 1, sizeof *c.thbar);
    double *u = gmm_malloc(c.nu, sizeof *u);
    c.ulast = gmm_malloc(c.nu, sizeof *c.ulast);
    size_t nb = v->b + 1;
    c.full = nb <= 2 * v->par.memory;
    c.lam = gmm_malloc(c.nvar, sizeof *c.lam);
    c.lam0 = gmm_malloc(c.nvar, sizeof *c.lam0);
    c.tu = gmm_malloc(c.nvar, sizeof *c.tu);
    c.wk = gmm_malloc(nb, sizeof *c.wk);
    c.R = gmm_malloc(v->n * (c.full ? nb : 1), nb * sizeof *c.R);
    c.L0 = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_LOWER);
    c.S0 = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_SYMMETRIC);
    if ((st = infer_lbfgs_alloc(&c.lb, c.nu, 3)) != GMM_OK) {
        st = gmm_error(st, "vi: %s", gmm_error_message());
        goto done;
    }
    c.lb.memory = v->par.memory;
    c.lb.epsilon = v->par.epsilon;
    c.lb.max_linesearch = 40;
    c.lb.delta = v->par.tol;
    c.lb.eval = evaluate;
    c.lb.accepted = accepted;
    c.lb.after = after;
    c.lb.ctx = &c;
    if (!c.idx || !c.th || !c.thbar || !u || !c.ulast || !c.lam || !c.lam0 ||
        !c.tu || !c.wk || !c.R || !c.L0 || !c.S0) {
        st = gmm_error(GMM_ENOMEM, "vi: out of memory for the optimiser (%zu variables)", c.nu);
        goto done;
    }
    for (size_t i = 0, k = 0; v->par.learn_hyper && i < v->nparam; i++) {
        if (obj->fixed[i])
            continue;
        if (!gmm_scale_inside(obj->scale[i], v->theta[i])) {
            st = gmm_error(GMM_EINVAL, "vi: start value of '%s' must be %s, got %g",
                           obj->name[i], gmm_scale_domain(obj->scale[i]), v->theta[i]);
            goto done;
        }
        c.idx[k++] = i;
    }
    size_t iters = 0;
    int ret, final = 0;
    for (;;) { /* runs, each with the scale of its start */
        memcpy(c.th, v->theta, v->nparam * sizeof *c.th);
        if ((st = precond_set(v, &c)))
            goto done;
        memset(u, 0, c.nvar * sizeof *u);
        for (size_t k = 0; k < c.nfree; k++) {
            size_t i = c.idx[k];
            u[c.nvar + k] = gmm_scale_to_u(obj->scale[i], v->theta[i]);
        }
        c.lb.max_iterations = v->par.max_iter ? v->par.max_iter - iters : 0;
        if (final) { /* STOPPING: the final run's budget */
            size_t budget = iters > FINAL_MIN_ITER ? iters : FINAL_MIN_ITER;
            if (!c.lb.max_iterations || c.lb.max_iterations > budget)
                c.lb.max_iterations = budget;
        }
        c.iter0 = iters;
        c.rescale = 0;
        gmm_status lst = infer_lbfgs_run(&c.lb, u, "vi");
        ret = c.lb.ret;
        v->freeze = 0;
        if (c.fatal) {
            st = gmm_error(c.fatal, "vi: %s", c.fatal_msg);
            goto done;
        }
        if (c.lb.start_failed) {
            st = gmm_error(c.fail_status ? c.fail_status : GMM_EDOM, "vi: starting point: %s",
                           c.lb.fail_msg);
            goto done;
        }
        if ((st = lst) != GMM_OK)
            goto done;
        /* the last accepted iterate */
        precond_apply(&c, c.lb.u0, v->lambda);
        map_theta(&c, c.lb.u0);
        memcpy(v->theta, c.th, v->nparam * sizeof *c.th);
        if ((st = canonical(v)))
            goto done;
        iters += c.lb.iter;
        if (v->par.max_iter && iters >= v->par.max_iter)
            break;
        if (!c.rescale && !c.cancelled && !final &&
            (c.lb.stopped_delta || infer_lbfgs_line_search_stop(ret))) {
            final = 1; /* STOPPING: on by the gradient, scaled here */
            c.lb.delta = 0.0;
            c.lb.epsilon = v->par.epsilon * POLISH_TIGHTER;
            c.lb.max_linesearch = FINAL_LINESEARCH;
            if (infer_lbfgs_gnorm(&c.lb) <= c.lb.epsilon * fmax(1.0, infer_lbfgs_unorm(&c.lb)))
                break;
        } else if (!c.rescale) {
            break;
        }
        res->restarts++;
    }
    /* STOPPING: a final run that stopped on f goes on by the gradient. */
    if (final && !c.cancelled && !c.rescale &&
        (c.lb.stopped_delta || ret == LBFGSERR_MAXIMUMITERATION || infer_lbfgs_line_search_stop(ret))) {
        size_t pit = 0;
        double gtol = v->par.epsilon * POLISH_TIGHTER * fmax(1.0, infer_lbfgs_unorm(&c.lb));
        double f0 = c.lb.f0;
        if ((st = infer_lbfgs_polish(&c.lb, gtol, POLISH_FTOL * fmax(1.0, fabs(f0)),
                                     POLISH_MAX_ITER, &pit)))
            goto done;
        v->freeze = 0;
        if (c.fatal) {
            st = gmm_error(c.fatal, "vi: %s", c.fatal_msg);
            goto done;
        }
        iters += pit;
        precond_apply(&c, c.lb.u0, v->lambda);
        map_theta(&c, c.lb.u0);
        memcpy(v->theta, c.th, v->nparam * sizeof *c.th);
        if ((st = canonical(v)))
            goto done;
    }
    res->evaluations = c.evals;
    res->elbo = -c.lb.f0;
    res->grad_norm = infer_lbfgs_gnorm(&c.lb);
    res->grad_limit = v->par.epsilon * fmax(1.0, infer_lbfgs_unorm(&c.lb));
    res->iterations = iters;
    if (c.cancelled) {
        res->message = "cancelled";
        st = gmm_error(GMM_ECANCEL, "vi: cancelled by the progress callback");
    } else if (c.rescale) {
        res->message = "stopped: maximum number of iterations reached";
    } else if (final) {
        res->converged = res->grad_norm <= res->grad_limit;
        res->message = "converged: gradient norm below epsilon";
        if (!res->converged && 0.5 * res->grad_norm * res->grad_norm <= VI_GAIN) {
            res->converged = 1;
            res->message = "converged: a Newton step would raise the ELBO by less than 1e-8";
        } else if (!res->converged) {
            double noise;
            if ((st = grad_noise(&c, &noise)))
                goto done;
            res->grad_noise = noise;
            res->converged = res->grad_norm <= GNOISE_GAIN * noise;
            res->message = res->converged ? "converged at the gradient's resolution: its norm "
                                            "within 4 times that of its rounding noise"
                           : ret == LBFGSERR_MAXIMUMITERATION
                               ? "stopped: the final run's iteration budget was spent"
                               : "stopped at the ELBO's resolution: gradient norm above epsilon "
                                 "and above its rounding noise where neither the ELBO nor its "
                                 "gradient improves";
        }
    } else {
        res->converged = infer_lbfgs_converged(ret);
        res->message = infer_lbfgs_message(ret);
    }
    v->have_start = 1;
    v->start = "given";
done:
    gmm_free(c.idx);
    gmm_free(c.th);
    gmm_free(c.thbar);
    gmm_free(u);
    infer_lbfgs_free(&c.lb);
    gmm_free(c.ulast);
    gmm_free(c.lam);
    gmm_free(c.lam0);
    gmm_free(c.tu);
    gmm_free(c.wk);
    gmm_free(c.R);
    gmm_band_free(c.L0);
    gmm_band_free(c.S0);
    return st;
}

gmm_status gmm_vi_quad_check(gmm_vi *v, size_t nquad, double *err, double *limit)
{
    double elbo;
    gmm_status s;
    if (!err || !limit)
        return gmm_error(GMM_EINVAL, "gmm_vi_quad_check: NULL argument");
    if ((s = gmm_vi_quad_error(v, nquad, err)) != GMM_OK ||
        (s = gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &elbo, NULL, NULL)) != GMM_OK)
        return s;
    *limit = GMM_VI_QUAD_RTOL * fmax(1.0, fabs(elbo));
    return GMM_OK;
}

/* v <- Sigma v = L^-T L^-1 v with q's factor (unpacked in v->L); with
 * constraints Sigma_c v (constr.h, factorised by gmm_vi_posterior). */
static gmm_status q_solve(void *ctx, double *x)
{
    gmm_vi *v = ctx;
    if (v->con)
        return gmm_constr_solve(v->con, v->L, x);
    gmm_status st = gmm_band_tri_solve_vec(v->L, GMM_NOTRANS, x);
    return st ? st : gmm_band_tri_solve_vec(v->L, GMM_TRANS, x);
}

gmm_status gmm_vi_predict_forms(gmm_vi *v, size_t nq, const size_t *ptr, const size_t *idx,
                                const double *w, double *mean, double *var)
{
    gmm_status st;
    if (!v || !ptr || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_forms: NULL argument");
    double *work = gmm_malloc(v->n ? v->n : 1, sizeof *work);
    if (!work)
        return gmm_error(GMM_ENOMEM, "out of memory");
    if (!(st = gmm_vi_posterior(v, NULL, v->S)) && !(st = unpack(v, v->lambda)))
        st = gmm_latent_forms_moments(v->n, v->lambda, v->S, q_solve, v, nq, ptr, idx, w, work,
                                      mean, var);
    gmm_free(work);
    return st;
}
