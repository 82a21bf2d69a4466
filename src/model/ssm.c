/* ssm.c -- state-space GP regression: symbolic layout once (sorting, states,
 * distinct intervals, observation map), then per parameter value the d x d
 * blocks, the band of the prior precision, the marginal likelihood
 * (marglik.h) and its reverse mode chained to the kernel parameters.
 *
 * The prior precision is assembled directly in the marginal likelihood's
 * band (gmm_marglik_prior_band; see STATE COLUMNS) and its gradient read
 * where the reverse sweep leaves it (gmm_marglik_grad_view): no band of our
 * own, no copy, no zeroing.
 *
 * REVERSE SWEEP (ssm_grad).  gmm_marglik_grad_view gives Qbar on the STORED
 * entries of the prior precision band (band.h convention).  Per state k the
 * diagonal block D_k has full symmetric gradient Gd_k (stored diagonal as
 * is, stored off-diagonal halved into both triangles); the sub-diagonal
 * block B_k = -W_k A_k (W = Q^-1) is stored whole, so its gradient Gb_k is
 * the stored values.  With D_k = W_k + A_{k+1}' W_{k+1} A_{k+1}, and sums
 * over the intervals of one cached group g (S1 = sum Gd_k over intervals
 * ending at k, S2 = sum Gd_{k-1}, S3 = sum Gb_k):
 *
 *   Wbar_g = S1 + A S2 A' - S3 A',      Abar_g = 2 W A S2 - W S3,
 *   Qbar_g = -W Wbar_g W - (count_g / 2) W      (the last from +1/2 log|Q_prior|),
 *   Pbar   = -W0 Gd_0 W0 - W0 / 2,      W0 = Pinf^-1,
 *
 * then the kernel's reverse mode per group (gmm_kernel_rev).  Forward saves:
 * per group A, W, W A, A' W A; W0.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"
#include "model_dense.h"

struct gmm_ssm {
    const gmm_kernel *k;
    gmm_ssm_params par;
    size_t n, K, d, N, kl, nobs, np;
    double *x, *y;        /* n, caller's row order */
    double *t;            /* K state inputs */
    size_t *row_state;    /* n */
    size_t ng;            /* distinct intervals */
    double *gdt;          /* ng */
    size_t *gcount;       /* ng */
    size_t *ig;           /* K - 1: group of the interval ending at state k + 1 */
    size_t imin;          /* an interval (ending at state imin + 1) of the smallest dt */
    size_t *obs_off;
    double *obs_y, *H, *Hp; /* H in kernel order, and in band order (see BLOCKS) */
    size_t *perm;           /* d: band position p of a state holds variable perm[p] */
    size_t nb, *boff;       /* blocks: band positions boff[b] .. boff[b+1]-1 */
    double *bs;             /* 10 smax^2: per-block scratch */
    gmm_obs obs;
    /* demodulated kernels (kernel.h, DEMODULATION): one observation row per
     * observation, and the posterior for the gradient through them */
    int modulated;
    double *Hobs, *mu;
    gmm_band *cov;
    double damp, noise; /* noise: of the last evaluation */
    size_t nmerged;
    /* numeric */
    gmm_kernel_work *kw;
    double *blk;          /* per group: A, W, WA, AtWA, S1, S2, S3 */
    double *ldQ;          /* ng */
    double *P, *W0, *T;   /* d^2, d^2, 4 d^2 scratch */
    double *C0;           /* d^2: chol(Pinf)^-1 in band order (SQUARE ROOT) */
    size_t *rowstart;     /* d: first band position of each position's block */
    int rows;             /* this evaluation uses the square-root form */
    double bound;         /* the Cholesky's rounding bound at the last theta */
    double *tpl;          /* d (kl + 1): one state's band columns (see STATE COLUMNS) */
    double ldP;
    gmm_marglik_work *mw; /* the prior precision is assembled in its band */
    /* objective */
    char **oname;
    double *oval;
    int *opos, *ofix;
};

/* Per group: A, W = Q^-1, W A, A' W A, the gradient sums S1..S3, and for
 * the square-root form C = chol(Q)^-1 and C A (SQUARE ROOT), these two in
 * band order. */
enum { B_A, B_W, B_WA, B_AWA, B_S1, B_S2, B_S3, B_C, B_CA, B_N };

static double *blk(const gmm_ssm *m, size_t g, int which)
{
    return m->blk + (g * B_N + (size_t)which) * m->d * m->d;
}

void gmm_ssm_params_init(gmm_ssm_params *p)
{
    p->merge_tol = 0.0;
    p->damp = NAN;
    p->damp_rel = NAN;
    p->dt_ulps = 8.0;
    p->check_spacing = 1;
    p->factor = GMM_SSM_FACTOR_AUTO;
}

gmm_status gmm_ssm_params_check(const gmm_ssm_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "gmm_ssm_params: NULL");
    if (!(p->merge_tol >= 0.0) || !isfinite(p->merge_tol))
        return gmm_error(GMM_EINVAL, "merge_tol = %g must be finite and >= 0", p->merge_tol);
    if (!isnan(p->damp) && (!(p->damp >= 0.0) || !isfinite(p->damp)))
        return gmm_error(GMM_EINVAL, "damp = %g must be finite and >= 0 (or NAN: automatic)",
                         p->damp);
    if (!isnan(p->damp_rel) && (!(p->damp_rel > 0.0) || !isfinite(p->damp_rel)))
        return gmm_error(GMM_EINVAL,
                         "damp_rel = %g must be positive and finite (or NAN: automatic)",
                         p->damp_rel);
    if (!(p->dt_ulps >= 0.0) || !isfinite(p->dt_ulps))
        return gmm_error(GMM_EINVAL, "dt_ulps = %g must be finite and >= 0", p->dt_ulps);
    if (p->factor != GMM_SSM_FACTOR_AUTO && p->factor != GMM_SSM_FACTOR_CHOL &&
        p->factor != GMM_SSM_FACTOR_ROWS)
        return gmm_error(GMM_EINVAL, "factor = %d is not a gmm_ssm_factor", (int)p->factor);
    return GMM_OK;
}

void gmm_ssm_free(gmm_ssm *m)
{
    if (!m)
        return;
    gmm_free(m->x);
    gmm_free(m->y);
    gmm_free(m->t);
    gmm_free(m->row_state);
    gmm_free(m->gdt);
    gmm_free(m->gcount);
    gmm_free(m->ig);
    gmm_free(m->obs_off);
    gmm_free(m->obs_y);
    gmm_free(m->H);
    gmm_free(m->Hp);
    gmm_free(m->perm);
    gmm_free(m->boff);
    gmm_free(m->bs);
    gmm_free(m->Hobs);
    gmm_free(m->mu);
    gmm_band_free(m->cov);
    gmm_kernel_work_free(m->kw);
    gmm_free(m->blk);
    gmm_free(m->ldQ);
    gmm_free(m->P);
    gmm_free(m->rowstart);
    gmm_free(m->tpl);
    gmm_marglik_work_free(m->mw);
    gmm_free(m->oname);
    gmm_free(m->oval);
    gmm_free(m->opos);
    gmm_free(m->ofix);
    gmm_free(m);
}

typedef struct {
    double v;
    size_t i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *p = a, *q = b;
    if (p->v != q->v)
        return p->v < q->v ? -1 : 1;
    return (p->i > q->i) - (p->i < q->i);
}

/* States from sorted inputs; observation map. */
static gmm_status layout_states(gmm_ssm *m, const keyed *s)
{
    size_t K = 0, nobs = 0;
    double first = 0.0;
    for (size_t r = 0; r < m->n; r++) {
        double xv = s[r].v;
        if (K == 0 || xv > first + m->par.merge_tol) {
            first = xv;
            m->t[K++] = xv;
        } else if (xv != s[r - 1].v) {
            m->nmerged++;
        }
        m->row_state[s[r].i] = K - 1;
        if (!isnan(m->y[s[r].i]))
            nobs++;
    }
    m->K = K;
    m->nobs = nobs;
    m->obs_off = gmm_malloc(nobs ? nobs : 1, sizeof *m->obs_off);
    m->obs_y = gmm_malloc(nobs ? nobs : 1, sizeof *m->obs_y);
    if (!m->obs_off || !m->obs_y)
        return gmm_error(GMM_ENOMEM, "out of memory for the observation map");
    size_t o = 0;
    for (size_t r = 0; r < m->n; r++) {
        size_t row = s[r].i;
        if (isnan(m->y[row]))
            continue;
        m->obs_off[o] = m->row_state[row] * m->d;
        m->obs_y[o++] = m->y[row];
    }
    return GMM_OK;
}

/* Group the K - 1 intervals into distinct values (within the resolution of
 * the inputs) so each (A, Q) is computed once. */
static gmm_status layout_intervals(gmm_ssm *m)
{
    size_t ni = m->K - 1;
    m->ig = gmm_malloc(ni ? ni : 1, sizeof *m->ig);
    m->gdt = gmm_malloc(ni ? ni : 1, sizeof *m->gdt);
    m->gcount = gmm_calloc(ni ? ni : 1, sizeof *m->gcount);
    keyed *s = gmm_malloc(ni ? ni : 1, sizeof *s);
    if (!m->ig || !m->gdt || !m->gcount || !s) {
        gmm_free(s);
        return gmm_error(GMM_ENOMEM, "out of memory for the interval table");
    }
    double xmax = fmax(fabs(m->t[0]), fabs(m->t[m->K - 1]));
    double tol = m->par.dt_ulps * DBL_EPSILON * xmax;
    for (size_t k = 0; k < ni; k++) {
        s[k].v = m->t[k + 1] - m->t[k];
        s[k].i = k;
    }
    qsort(s, ni, sizeof *s, cmp_keyed);
    size_t ng = 0;
    for (size_t k = 0; k < ni; k++) {
        if (ng == 0 || s[k].v > m->gdt[ng - 1] + tol)
            m->gdt[ng++] = s[k].v;
        m->ig[s[k].i] = ng - 1;
        m->gcount[ng - 1]++;
    }
    m->ng = ng;
    m->imin = ni ? s[0].i : 0;
    gmm_free(s);
    return GMM_OK;
}

/* BLOCKS.  The kernel's state splits into independent blocks
 * (gmm_kernel_blocks): A, Q and Pinf -- hence W, W A and A' W A -- vanish
 * between them.  Within each state the band lists the blocks one after the
 * other (perm), so the sub-diagonal block B_{k+1} = -W A couples row
 * (k+1) d + i only to columns k d + j of i's own block, and every row of the
 * precision starts at most d - 1 + smax columns left of its diagonal (smax
 * the largest block; the observation row couples within a state, less than
 * d).  By the envelope theorem the Cholesky factor fills no further, so the
 * band of lower bandwidth d - 1 + smax holds the precision and its factor
 * exactly -- 7 instead of 11 for the CO2 kernel matern32 + quasiperiodic
 * (three blocks of 2), at about (8/12)^2 of the factorisation cost.  The
 * d x d algebra per interval runs block by block too (s^3 instead of d^3):
 * W, W A and A' W A are block-diagonal, and so are the parts of the
 * gradients that reach the kernel (its dA, dQ vanish off the blocks). */
static gmm_status block_order(gmm_ssm *m, size_t *smax)
{
    size_t d = m->d, nb, *blk = gmm_malloc(d, sizeof *blk);
    if (!blk)
        return gmm_error(GMM_ENOMEM, "out of memory for the model workspace");
    gmm_status st = gmm_kernel_blocks(m->k, blk, &nb);
    if (st == GMM_OK) {
        size_t p = 0;
        *smax = 0;
        m->nb = nb;
        for (size_t b = 0; b < nb; b++) {
            m->boff[b] = p;
            for (size_t i = 0; i < d; i++)
                if (blk[i] == b)
                    m->perm[p++] = i;
            if (p - m->boff[b] > *smax)
                *smax = p - m->boff[b];
        }
        m->boff[nb] = p;
    }
    gmm_free(blk);
    return st;
}

gmm_status gmm_ssm_alloc(const gmm_kernel *k, const double *x, const double *y, size_t n,
                         const gmm_ssm_params *par, gmm_ssm **out)
{
    gmm_status st = GMM_OK;
    gmm_ssm *m = NULL;
    keyed *s = NULL;
    if (!out || !k || !x || !y)
        return gmm_error(GMM_EINVAL, "gmm_ssm_alloc: NULL argument");
    *out = NULL;
    if (n == 0)
        return gmm_error(GMM_EINVAL, "no inputs");
    gmm_ssm_params dflt;
    gmm_ssm_params_init(&dflt);
    if (!par)
        par = &dflt;
    if ((st = gmm_ssm_params_check(par)))
        return st;
    for (size_t r = 0; r < n; r++) {
        if (!isfinite(x[r]))
            return gmm_error_at(GMM_EINVAL, r, "input x[%zu] = %g is not finite", r, x[r]);
        if (isinf(y[r]))
            return gmm_error_at(GMM_EINVAL, r, "output y[%zu] = %g is not finite", r, y[r]);
    }
    m = gmm_calloc(1, sizeof *m);
    if (!m)
        return gmm_error(GMM_ENOMEM, "out of memory for the model");
    m->k = k;
    m->par = *par;
    m->n = n;
    m->d = gmm_kernel_dim(k);
    m->np = gmm_kernel_nparam(k);
    m->x = gmm_malloc(n, sizeof *m->x);
    m->y = gmm_malloc(n, sizeof *m->y);
    m->t = gmm_malloc(n, sizeof *m->t);
    m->row_state = gmm_malloc(n, sizeof *m->row_state);
    s = gmm_malloc(n, sizeof *s);
    if (!m->x || !m->y || !m->t || !m->row_state || !s) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model");
        goto done;
    }
    memcpy(m->x, x, n * sizeof *x);
    for (size_t r = 0; r < n; r++) {
        m->y[r] = isnan(y[r]) ? NAN : y[r];
        s[r].v = x[r];
        s[r].i = r;
    }
    qsort(s, n, sizeof *s, cmp_keyed);
    if ((st = layout_states(m, s)) || (st = layout_intervals(m)))
        goto done;
    size_t d = m->d, dd = d * d;
    m->N = m->K * d;
    double span = m->t[m->K - 1] - m->t[0];
    /* ZERO PROCESS NOISE in ssm.h: the bias floor, or the damping that keeps
     * the gradient's rounding (~ K^2 / damp_rel) at a fit's tolerance */
    double kk = (double)m->K;
    double rel = isnan(par->damp_rel)
                     ? fmax(GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2 * DBL_EPSILON * kk * kk)
                     : par->damp_rel;
    m->damp = !isnan(par->damp) ? par->damp : rel / (span > 0.0 ? span : 1.0);
    m->H = gmm_malloc(d, sizeof *m->H);
    m->kw = gmm_kernel_work_alloc(k);
    /* zeroed: W, W A and A' W A are only ever written on their blocks */
    m->blk = gmm_calloc((m->ng ? m->ng : 1) * B_N * dd, sizeof *m->blk);
    m->ldQ = gmm_malloc(m->ng ? m->ng : 1, sizeof *m->ldQ);
    m->Hp = gmm_malloc(d, sizeof *m->Hp);
    m->perm = gmm_malloc(d, sizeof *m->perm);
    m->boff = gmm_malloc(d + 1, sizeof *m->boff);
    m->P = gmm_malloc(7 * dd, sizeof *m->P);
    m->rowstart = gmm_malloc(d, sizeof *m->rowstart);
    if (!m->H || !m->Hp || !m->perm || !m->boff || !m->kw || !m->blk || !m->ldQ || !m->P ||
        !m->rowstart) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model workspace");
        goto done;
    }
    size_t smax = d;
    if ((st = block_order(m, &smax)))
        goto done;
    m->kl = d - 1 + smax < m->N ? d - 1 + smax : m->N - 1; /* as band.h clamps */
    m->tpl = gmm_malloc(d * (m->kl + 1), sizeof *m->tpl);
    m->bs = gmm_malloc(10 * smax * smax, sizeof *m->bs);
    if (!m->tpl || !m->bs) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model workspace");
        goto done;
    }
    m->W0 = m->P + dd;
    m->T = m->W0 + dd;
    m->C0 = m->T + 4 * dd;
    for (size_t b = 0; b < m->nb; b++)
        for (size_t q = m->boff[b]; q < m->boff[b + 1]; q++)
            m->rowstart[q] = m->boff[b];
    m->mw = gmm_marglik_work_alloc(m->N, m->kl);
    if (!m->mw) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the marginal-likelihood workspace");
        goto done;
    }
    m->obs.n = m->N;
    m->obs.nobs = m->nobs;
    m->obs.width = d;
    m->obs.offset = m->obs_off;
    m->obs.coef = m->Hp;
    m->obs.coef_stride = 0;
    m->obs.y = m->obs_y;
    m->modulated = gmm_kernel_modulated(k);
    if (m->modulated) {
        m->Hobs = gmm_malloc(m->nobs ? m->nobs * d : 1, sizeof *m->Hobs);
        m->mu = gmm_malloc(m->N, sizeof *m->mu);
        m->cov = gmm_band_alloc(m->N, m->kl, 0, GMM_BAND_SYMMETRIC);
        if (!m->Hobs || !m->mu || !m->cov) {
            st = gmm_error(GMM_ENOMEM, "out of memory for the model workspace");
            goto done;
        }
        m->obs.coef = m->Hobs;
        m->obs.coef_stride = d;
    }
done:
    gmm_free(s);
    if (st)
        gmm_ssm_free(m);
    else
        *out = m;
    return st;
}

size_t gmm_ssm_nstates(const gmm_ssm *m) { return m->K; }
size_t gmm_ssm_nobs(const gmm_ssm *m) { return m->nobs; }
size_t gmm_ssm_dim(const gmm_ssm *m) { return m->d; }
size_t gmm_ssm_bandwidth(const gmm_ssm *m) { return m->kl; }
size_t gmm_ssm_nintervals(const gmm_ssm *m) { return m->ng; }
size_t gmm_ssm_nmerged(const gmm_ssm *m) { return m->nmerged; }
double gmm_ssm_damp(const gmm_ssm *m) { return m->damp; }
int gmm_ssm_used_rows(const gmm_ssm *m) { return m->rows; }
double gmm_ssm_chol_bound(const gmm_ssm *m) { return m->bound; }
size_t gmm_ssm_nparam(const gmm_ssm *m) { return m->np + 1; }
size_t gmm_ssm_row_state(const gmm_ssm *m, size_t r) { return m->row_state[r]; }

const char *gmm_ssm_param_name(const gmm_ssm *m, size_t i)
{
    return i < m->np ? gmm_kernel_param_name(m->k, i) : i == m->np ? "noise.variance" : NULL;
}

/* ---- forward ------------------------------------------------------------------ */

/* the slack keeps a grid built as i * (limit) from tripping on rounding */
#define SPACING_SLACK (1.0 - 1e-9)

/* Refuses spacings below the accuracy limit of the factorisations allowed
 * (the square-root form's unless the Cholesky is forced) or, for a
 * gradient, below the Cholesky's limit whatever the form (GRADIENT in
 * ssm.h, CLOSE INPUTS). */
static gmm_status check_spacing(gmm_ssm *m, const double *theta, int grad)
{
    size_t j;
    double dt = m->ng ? m->gdt[0] : INFINITY;
    if (!m->par.check_spacing || m->ng == 0)
        return GMM_OK;
    int rows = m->par.factor != GMM_SSM_FACTOR_CHOL && !grad;
    double lim = gmm_kernel_spacing_limit(m->k, theta, rows, &j);
    if (dt >= lim * SPACING_SLACK)
        return GMM_OK;
    return gmm_error(GMM_EDOM,
                     "inputs x = %.15g and %.15g are only %g apart, below the accuracy limit %g "
                     "at %s = %g: the state-space %s would not be accurate there. Merge inputs "
                     "closer than that (a merge tolerance of %g coarsens them), or keep %s below "
                     "%g",
                     m->t[m->imin], m->t[m->imin + 1], dt, lim, gmm_kernel_param_name(m->k, j),
                     theta[j],
                     grad && m->par.factor != GMM_SSM_FACTOR_CHOL
                         ? "gradient (the log likelihood alone is computed to 1e-6 far below "
                           "this limit)"
                         : "likelihood",
                     lim, gmm_kernel_param_name(m->k, j), dt * theta[j] / lim);
}

/* CHOICE OF FACTORISATION (ssm.h, FACTORISATION).  The bound on the
 * Cholesky's rounding: eps sum_i P_ii Pinf_ii over the states, P the
 * assembled posterior precision -- a stored entry's rounding, eps P_ii,
 * moves log det P by up to eps P_ii Sigma_ii, and the posterior variance
 * Sigma_ii is at most the prior's. */
static double chol_rounding_bound(const gmm_ssm *m)
{
    size_t d = m->d;
    double s = 0.0, h = 0.0;
    for (size_t p = 0; p < d; p++) {
        size_t v = m->perm[p];
        double pv = m->P[v * d + v], t = m->W0[v * d + v];
        for (size_t g = 0; g < m->ng; g++)
            t += (double)m->gcount[g] * (blk(m, g, B_W)[v * d + v] + blk(m, g, B_AWA)[v * d + v]);
        s += t * pv;
        h += m->Hp[p] * m->Hp[p] * pv;
    }
    s += (double)m->nobs * h / m->noise;
    return DBL_EPSILON * s;
}

static int choose_rows(gmm_ssm *m, const double *theta)
{
    m->bound = chol_rounding_bound(m);
    if (m->par.factor != GMM_SSM_FACTOR_AUTO)
        return m->par.factor == GMM_SSM_FACTOR_ROWS;
    double dt = m->ng ? m->gdt[0] : INFINITY;
    return gmm_kernel_damped(m->k) ||
           dt < gmm_kernel_spacing_limit(m->k, theta, 0, NULL) * SPACING_SLACK ||
           m->bound > GMM_SSM_CHOL_TOL * fmax(1.0, (double)m->nobs);
}

/* out (s x s) = M[idx, idx], M d x d row-major; and back. */
static void gather(size_t d, const double *M, const size_t *idx, size_t s, double *out)
{
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            out[i * s + j] = M[idx[i] * d + idx[j]];
}

static void scatter(size_t d, double *M, const size_t *idx, size_t s, const double *in)
{
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            M[idx[i] * d + idx[j]] = in[i * s + j];
}

/* One interval group: A, W = Q^-1, W A, A' W A and log|Q| block by block
 * (BLOCKS).  Q (d x d) is scratch. */
static gmm_status group_forward(gmm_ssm *m, size_t g, double *Q)
{
    gmm_status st;
    size_t d = m->d;
    double *A = blk(m, g, B_A);
    if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], A, Q)))
        return st;
    double ld = 0.0;
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b], ss = s * s;
        double *Lb = m->bs, *Wb = Lb + ss, *Ab = Wb + ss, *WAb = Ab + ss, *AWAb = WAb + ss;
        double *X = AWAb + ss;
        gather(d, Q, idx, s, Lb);
        if (md_chol(s, Lb))
            return gmm_error(GMM_ENOTPD,
                             "transition noise Q(dt = %g) is not positive definite at these "
                             "parameters",
                             m->gdt[g]);
        ld += md_chol_logdet(s, Lb);
        md_chol_inverse(s, Lb, Wb, X); /* leaves X = Lb^-1 */
        gather(d, A, idx, s, Ab);
        md_gemm(s, 0, 0, 1.0, Wb, Ab, 0.0, WAb);
        md_gemm(s, 1, 0, 1.0, Ab, WAb, 0.0, AWAb);
        md_symmetrise(s, AWAb);
        scatter(d, blk(m, g, B_W), idx, s, Wb);
        scatter(d, blk(m, g, B_WA), idx, s, WAb);
        scatter(d, blk(m, g, B_AWA), idx, s, AWAb);
        /* C and C A for the square root, in band order (block b sits at
         * positions boff[b] ..) */
        double *C = blk(m, g, B_C), *CA = blk(m, g, B_CA);
        size_t o = m->boff[b];
        md_mul(s, s, s, X, Ab, WAb); /* C A, reusing WAb */
        for (size_t i = 0; i < s; i++)
            for (size_t j = 0; j < s; j++) {
                C[(o + i) * d + o + j] = j <= i ? X[i * s + j] : 0.0;
                CA[(o + i) * d + o + j] = WAb[i * s + j];
            }
    }
    m->ldQ[g] = ld;
    return GMM_OK;
}

/* STATE COLUMNS.  State k owns band columns kd .. kd + d - 1; slot s of its
 * column j (s = 0 .. kl) is entry (kd + j + s, kd + j) of the precision:
 * the lower part of the diagonal block D_k for s < d - j, then column j of
 * the sub-diagonal block B_{k+1} = -W_{k+1} A_{k+1} (rows of state k + 1)
 * for d - j <= s < 2d - j, then structural zeros.  D_k = W_k + A_{k+1}'
 * W_{k+1} A_{k+1} depends only on the groups of the intervals before and
 * after state k: key_before (ng for state 0, whose W is Pinf^-1) and
 * key_after (ng for the last state, which has no interval after it). */
static size_t key_before(const gmm_ssm *m, size_t k) { return k == 0 ? m->ng : m->ig[k - 1]; }
static size_t key_after(const gmm_ssm *m, size_t k) { return k + 1 < m->K ? m->ig[k] : m->ng; }

/* The d columns (stride kl + 1) of a state with interval groups g1, g2, in
 * band order (BLOCKS).  Entries of B beyond the band are zero by the block
 * structure; one that is not would be lost, so it is an error. */
static gmm_status state_template(const gmm_ssm *m, size_t g1, size_t g2, double *t)
{
    size_t d = m->d, ld = m->kl + 1;
    const size_t *P = m->perm;
    const double *W = g1 < m->ng ? blk(m, g1, B_W) : m->W0;
    const double *AWA = g2 < m->ng ? blk(m, g2, B_AWA) : NULL;
    const double *WA = g2 < m->ng ? blk(m, g2, B_WA) : NULL;
    for (size_t j = 0; j < d; j++) {
        double *c = t + j * ld;
        size_t s = 0, pj = P[j];
        for (size_t i = j; i < d; i++, s++)
            c[s] = W[P[i] * d + pj] + (AWA ? AWA[P[i] * d + pj] : 0.0);
        for (size_t i = 0; i < d && WA; i++, s++) {
            double v = -WA[P[i] * d + pj];
            if (s < ld)
                c[s] = v;
            else if (v != 0.0)
                return gmm_error(GMM_EINVAL, "internal: the kernel's declared block structure "
                                             "does not hold (W A(%zu,%zu) = %g)",
                                 P[i], pj, -v);
        }
        for (; s < ld; s++)
            c[s] = 0.0;
    }
    return GMM_OK;
}

/* The time-varying observation rows of a demodulated kernel (X: d scratch). */
static gmm_status modulated_rows(gmm_ssm *m, double *X)
{
    gmm_status st;
    size_t d = m->d, last = SIZE_MAX;
    for (size_t o = 0; o < m->nobs; o++) {
        size_t sk = m->obs_off[o] / d;
        if (sk != last && (st = gmm_kernel_obs(m->k, m->kw, m->t[sk] - m->t[0], X)))
            return st;
        last = sk;
        for (size_t p = 0; p < d; p++)
            m->Hobs[o * d + p] = X[m->perm[p]];
    }
    return GMM_OK;
}

/* SQUARE ROOT.  The prior precision is G'G for the rows
 *   C0 x_0                      (d rows, C0 = chol(Pinf)^-1),
 *   C_k (x_{k+1} - A_k x_k)     (d rows per interval, C_k = chol(Q_k)^-1),
 * each in band order and block by block (C_k, A_k block-diagonal): row p of
 * interval k reads positions rowstart[p] .. d - 1 of state k (-C A) and
 * rowstart[p] .. p of state k + 1 (C), a width d + p + 1 - rowstart[p] <=
 * kl + 1, starting at column k d + rowstart[p] -- nondecreasing in (k, p).
 * gmm_marglik_eval_rows folds them with the observations into L. */
typedef struct {
    const gmm_ssm *m;
    size_t next, k, p; /* row next is row p of interval k (no division per row) */
} prior_cursor;

static size_t prior_row(void *ctx, size_t i, size_t *first, double *v)
{
    prior_cursor *c = ctx;
    const gmm_ssm *m = c->m;
    size_t d = m->d;
    if (i < d) {
        *first = 0;
        for (size_t q = 0; q <= i; q++)
            v[q] = m->C0[i * d + q];
        return i + 1;
    }
    if (i != c->next) {
        c->k = i / d - 1;
        c->p = i % d;
    }
    size_t k = c->k, p = c->p, r0 = m->rowstart[p], w = 0;
    c->next = i + 1;
    if (++c->p == d) {
        c->p = 0;
        c->k++;
    }
    const double *C = blk(m, m->ig[k], B_C) + p * d, *CA = blk(m, m->ig[k], B_CA) + p * d;
    for (size_t q = r0; q < d; q++)
        v[w++] = -CA[q];
    for (size_t q = 0; q <= p; q++)
        v[w++] = C[q];
    *first = k * d + r0;
    return w;
}

/* Everything up to (and including) the marginal likelihood at theta; grad:
 * a gradient will follow (its spacing limit applies: check_spacing). */
static gmm_status ssm_forward(gmm_ssm *m, const double *theta, double *loglik, int grad)
{
    gmm_status st;
    size_t d = m->d, dd = d * d, K = m->K;
    double noise = theta[m->np];
    if (!(noise > 0.0) || !isfinite(noise))
        return gmm_error(GMM_EDOM, "noise.variance = %g must be positive and finite", noise);
    m->noise = noise;
    if ((st = gmm_kernel_stat(m->k, theta, m->damp, m->kw, m->P, m->H)))
        return st;
    for (size_t p = 0; p < d; p++)
        m->Hp[p] = m->H[m->perm[p]];
    if ((st = check_spacing(m, theta, grad)))
        return st;
    /* Pinf factorised in band order, where the inverse of its factor is C0,
     * the first rows of the square root (SQUARE ROOT); W0 = Pinf^-1 goes
     * back to kernel order. */
    double *L = m->T, *X = m->T + dd, *Wp = m->T + 2 * dd;
    gather(d, m->P, m->perm, d, L);
    if (md_chol(d, L))
        return gmm_error(GMM_ENOTPD,
                         "stationary covariance Pinf is not positive definite at these "
                         "parameters (a periodic harmonic with zero weight? use fewer harmonics)");
    m->ldP = md_chol_logdet(d, L);
    md_chol_inverse(d, L, Wp, X); /* leaves X = L^-1 */
    scatter(d, m->W0, m->perm, d, Wp);
    memcpy(m->C0, X, dd * sizeof *X);
    for (size_t g = 0; g < m->ng; g++)
        if ((st = group_forward(m, g, L)))
            return st;
    m->rows = choose_rows(m, theta);
    double logdet = -m->ldP;
    for (size_t g = 0; g < m->ng; g++)
        logdet -= (double)m->gcount[g] * m->ldQ[g];
    if (m->modulated && (st = modulated_rows(m, X)))
        return st;
    if (m->rows) {
        prior_cursor cur = {m, SIZE_MAX, 0, 0};
        gmm_prior_rows G = {m->N, prior_row, &cur};
        return gmm_marglik_eval_rows(&G, &m->obs, noise, logdet, m->mw, loglik);
    }
    /* Assemble in the marginal likelihood's own band (no copy of Q there):
     * each state's columns from a template, rebuilt only when the state's
     * pair of intervals changes -- once for a regular grid. */
    gmm_band *Q = gmm_marglik_prior_band(m->mw);
    size_t ld = m->kl + 1, key1 = SIZE_MAX, key2 = SIZE_MAX;
    for (size_t k = 0; k < K; k++) {
        size_t g1 = key_before(m, k), g2 = key_after(m, k);
        if (g1 != key1 || g2 != key2) {
            if ((st = state_template(m, g1, g2, m->tpl)))
                return st;
            key1 = g1;
            key2 = g2;
        }
        if ((st = gmm_band_cols_set(Q, k * d, d, m->tpl, ld)))
            return st;
    }
    return gmm_marglik_eval(Q, &m->obs, noise, &logdet, m->mw, loglik);
}

/* ---- reverse ------------------------------------------------------------------ */

/* Gradient through the time-varying observation rows (Fisher's identity):
 * dlogp/dh_r = [(y_r - h_r' mu_s) mu_s - Sigma_ss h_r] / noise for row r
 * reading state s, mu and Sigma the posterior mean and covariance. */
static gmm_status obs_grad(gmm_ssm *m, double *grad)
{
    gmm_status st;
    size_t d = m->d;
    double noise = m->noise, *Hb = m->T, *Sh = m->T + d, *Hk = m->T + 2 * d;
    if ((st = gmm_marglik_posterior(m->mw, m->mu, m->cov)))
        return st;
    for (size_t o = 0; o < m->nobs;) {
        size_t sk = m->obs_off[o] / d, b = sk * d;
        const double *h = m->Hobs + o * d, *mu = m->mu + b;
        for (size_t i = 0; i < d; i++) {
            double v = 0.0;
            for (size_t j = 0; j < d; j++)
                v += gmm_band_get(m->cov, b + i, b + j) * h[j];
            Sh[i] = v;
        }
        md_zero(d, Hb);
        for (; o < m->nobs && m->obs_off[o] == b; o++) {
            double r = m->obs_y[o] - md_dot(d, h, mu);
            for (size_t i = 0; i < d; i++)
                Hb[i] += (r * mu[i] - Sh[i]) / noise;
        }
        for (size_t p = 0; p < d; p++) /* band order -> kernel order */
            Hk[m->perm[p]] = Hb[p];
        if ((st = gmm_kernel_obs_rev(m->k, m->kw, m->t[sk] - m->t[0], Hk, grad)))
            return st;
    }
    return GMM_OK;
}

/* Add a run of summed state columns (template layout, groups g1, g2) into
 * the group sums: its D part, as a full symmetric gradient (stored
 * off-diagonals halved into both triangles), to S1[g1] (Pbar0 for the first
 * state) and S2[g2]; its B part to S3[g2]. */
static void flush_run(gmm_ssm *m, size_t g1, size_t g2, const double *run, double *Pbar0)
{
    size_t d = m->d, ld = m->kl + 1;
    const size_t *P = m->perm;
    double *S1 = g1 < m->ng ? blk(m, g1, B_S1) : Pbar0;
    double *S2 = g2 < m->ng ? blk(m, g2, B_S2) : NULL;
    double *S3 = g2 < m->ng ? blk(m, g2, B_S3) : NULL;
    for (size_t j = 0; j < d; j++) {
        const double *c = run + j * ld;
        size_t pj = P[j];
        S1[pj * d + pj] += c[0];
        if (S2)
            S2[pj * d + pj] += c[0];
        for (size_t i = j + 1; i < d; i++) {
            double v = 0.5 * c[i - j];
            size_t pi = P[i];
            S1[pi * d + pj] += v;
            S1[pj * d + pi] += v;
            if (S2) {
                S2[pi * d + pj] += v;
                S2[pj * d + pi] += v;
            }
        }
        /* B entries beyond the band are structurally zero (BLOCKS): no
         * gradient to pass on */
        for (size_t i = 0; S3 && i < d && d - j + i < ld; i++)
            S3[P[i] * d + pj] += c[d - j + i];
    }
}

/* One interval group's gradient (formulas in the file comment) block by
 * block, then the kernel's reverse mode.  Abar, Qbar: d x d scratch. */
static gmm_status group_grad(gmm_ssm *m, size_t g, double *Qbar, double *Abar, double *grad)
{
    gmm_status st;
    size_t d = m->d;
    md_zero(d * d, Abar);
    md_zero(d * d, Qbar);
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b], ss = s * s;
        double *A = m->bs, *W = A + ss, *WA = W + ss, *S1 = WA + ss, *S2 = S1 + ss;
        double *S3 = S2 + ss, *G = S3 + ss, *Wb = G + ss, *Ab = Wb + ss, *T = Ab + ss;
        gather(d, blk(m, g, B_A), idx, s, A);
        gather(d, blk(m, g, B_W), idx, s, W);
        gather(d, blk(m, g, B_WA), idx, s, WA);
        gather(d, blk(m, g, B_S1), idx, s, S1);
        gather(d, blk(m, g, B_S2), idx, s, S2);
        gather(d, blk(m, g, B_S3), idx, s, S3);
        /* Wbar = S1 + A S2 A' - S3 A' */
        md_gemm(s, 0, 0, 1.0, A, S2, 0.0, G);
        memcpy(Wb, S1, ss * sizeof *Wb);
        md_gemm(s, 0, 1, 1.0, G, A, 1.0, Wb);
        md_gemm(s, 0, 1, -1.0, S3, A, 1.0, Wb);
        /* Abar = 2 W A S2 - W S3 */
        md_gemm(s, 0, 0, 2.0, WA, S2, 0.0, Ab);
        md_gemm(s, 0, 0, -1.0, W, S3, 1.0, Ab);
        /* Qbar = -W Wbar W - count/2 W (into G) */
        md_gemm(s, 0, 0, 1.0, W, Wb, 0.0, T);
        md_gemm(s, 0, 0, -1.0, T, W, 0.0, G);
        md_axpy(ss, -0.5 * (double)m->gcount[g], W, G);
        scatter(d, Abar, idx, s, Ab);
        scatter(d, Qbar, idx, s, G);
    }
    if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], NULL, NULL)))
        return st;
    return gmm_kernel_rev(m->k, m->kw, Abar, Qbar, NULL, grad);
}

static gmm_status ssm_grad(gmm_ssm *m, double *grad)
{
    gmm_status st;
    size_t d = m->d, dd = d * d, K = m->K, ld = m->kl + 1;
    double noisebar = 0.0;
    const gmm_band *Qb;
    if ((st = gmm_marglik_grad_view(m->mw, &Qb, &noisebar)))
        return st;
    for (size_t i = 0; i < m->np + 1; i++)
        grad[i] = 0.0;
    grad[m->np] = noisebar;
    for (size_t g = 0; g < m->ng; g++) {
        md_zero(dd, blk(m, g, B_S1));
        md_zero(dd, blk(m, g, B_S2));
        md_zero(dd, blk(m, g, B_S3));
    }
    double *G = m->T, *Pbar = m->T + dd, *Wbar = m->T + 2 * dd, *Abar = m->T + 3 * dd;
    double *run = m->tpl;
    md_zero(dd, Pbar);
    /* Sum the state columns over runs of states with the same pair of
     * groups (one run for the interior of a regular grid), so the per-state
     * work is one vector addition of the columns. */
    size_t key1 = SIZE_MAX, key2 = SIZE_MAX;
    for (size_t k = 0; k < K; k++) {
        size_t g1 = key_before(m, k), g2 = key_after(m, k);
        if (g1 != key1 || g2 != key2) {
            if (k > 0)
                flush_run(m, key1, key2, run, Pbar);
            md_zero(d * ld, run);
            key1 = g1;
            key2 = g2;
        }
        if ((st = gmm_band_cols_acc(Qb, k * d, d, run, ld)))
            return st;
    }
    flush_run(m, key1, key2, run, Pbar);
    for (size_t g = 0; g < m->ng; g++)
        if ((st = group_grad(m, g, Wbar, Abar, grad)))
            return st;
    /* Pinf: W0 = Pinf^-1 gives -W0 Gd_0 W0; log|Q_prior| gives -W0/2 */
    md_gemm(d, 0, 0, 1.0, m->W0, Pbar, 0.0, G);
    md_gemm(d, 0, 0, -1.0, G, m->W0, 0.0, Pbar);
    md_axpy(dd, -0.5, m->W0, Pbar);
    if ((st = gmm_kernel_rev(m->k, m->kw, NULL, NULL, Pbar, grad)))
        return st;
    return m->modulated ? obs_grad(m, grad) : GMM_OK;
}

gmm_status gmm_ssm_loglik(gmm_ssm *m, const double *theta, double *loglik, double *grad)
{
    if (!m || !theta || !loglik)
        return gmm_error(GMM_EINVAL, "gmm_ssm_loglik: NULL argument");
    gmm_status st = ssm_forward(m, theta, loglik, grad != NULL);
    if (st || !grad)
        return st;
    return ssm_grad(m, grad);
}

/* ---- objective ---------------------------------------------------------------- */

static gmm_status obj_eval(void *ctx, const double *theta, double *f, double *grad)
{
    return gmm_ssm_loglik(ctx, theta, f, grad);
}

gmm_status gmm_ssm_objective(gmm_ssm *m, const double *theta0, gmm_objective *obj)
{
    size_t np = m->np + 1;
    if (!m->oname) {
        m->oname = gmm_calloc(np, sizeof *m->oname);
        m->oval = gmm_calloc(np, sizeof *m->oval);
        m->opos = gmm_calloc(np, sizeof *m->opos);
        m->ofix = gmm_calloc(np, sizeof *m->ofix);
        if (!m->oname || !m->oval || !m->opos || !m->ofix)
            return gmm_error(GMM_ENOMEM, "out of memory for the objective");
    }
    for (size_t i = 0; i < np; i++) {
        m->oname[i] = (char *)gmm_ssm_param_name(m, i);
        m->oval[i] = theta0 ? theta0[i] : i < m->np ? gmm_kernel_values_const(m->k)[i] : 1.0;
        m->opos[i] = 1;
        m->ofix[i] = 0;
    }
    obj->nparam = np;
    obj->name = m->oname;
    obj->value = m->oval;
    obj->positive = m->opos;
    obj->fixed = m->ofix;
    obj->eval = obj_eval;
    obj->ctx = m;
    return GMM_OK;
}

/* ---- prediction ---------------------------------------------------------------- */

/* PREDICTION FROM THE DATA STATES.  The queries never become states: the
 * posterior of the data states (mean mu, covariance band Sigma covering the
 * blocks (k, k) and (k+1, k)) and the Markov property give the posterior of
 * the state x(t) at any t, so no interval shorter than the data's own is
 * ever factorised and queries need no spacing.  For each query the row
 * h = h(t - t_0) (gmm_kernel_obs: the representation of the model, rotating
 * coordinates included) reduces everything to a coefficient vector g on one
 * or two neighbouring states z, and an independent conditional part e:
 *
 *   f(t) = g' z + h' e,   mean = g' mu_z,   var = g' Sigma_z g + var(h' e).
 *
 * Between t_k and t_{k+1} (d1 = t - t_k, d2 = t_{k+1} - t), with
 * S = A2 Q1 A2' + Q2 = Q(D) (D = d1 + d2, an interval of the model) and
 * J = Q1 A2' S^-1:  x(t) = (A1 - J A2 A1) x_k + J x_{k+1} + e, and
 *
 *   w = J' h = S^-1 A2 Q1 h,   u = (I - J A2)' h = h - A2' w,
 *   g = [A1' u; w],            var(h' e) = u' Q1 u + w' Q2 w,
 *
 * the last the Joseph form of Q1 - J A2 Q1: a sum of two nonnegative terms,
 * so a tiny Q1 or Q2 (a query next to a state) loses no sign and nothing is
 * cancelled.  Only S is factorised; Q1 and Q2 are only multiplied.  Before
 * t_0 (A = A(t_0 - t), stationary prior): w = Pinf^-1 A Pinf h, u = h - A' w,
 * g = w, var(h' e) = u' Pinf u + w' Q w (Joseph form of Pinf - G A Pinf, G =
 * Pinf A' Pinf^-1).  After t_{K-1}: g = A(t - t_{K-1})' h, var(h' e) = h' Q h. */

typedef struct {
    double *A1, *Q1, *A2, *Q2, *S, *T; /* d x d */
    double *h, *v, *w, *u, *g;         /* d, d, d, d, 2d */
} pred_work;

#define PRED_WORK_SIZE(d) (6 * (d) * (d) + 6 * (d))

/* Carve p out of buf (PRED_WORK_SIZE(d) doubles). */
static void pred_work_init(pred_work *p, double *buf, size_t d)
{
    double **mat[] = {&p->A1, &p->Q1, &p->A2, &p->Q2, &p->S, &p->T};
    double **vec[] = {&p->h, &p->v, &p->w, &p->u};
    for (size_t i = 0; i < sizeof mat / sizeof mat[0]; i++, buf += d * d)
        *mat[i] = buf;
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++, buf += d)
        *vec[i] = buf;
    p->g = buf;
}

/* Number of states with t_k <= t (the first state after t). */
static size_t states_upto(const gmm_ssm *m, double t)
{
    size_t lo = 0, hi = m->K;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->t[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A query within merge_tol of a state (on either side) is predicted at that
 * state, as an input there would have been merged into it. */
static double snap(const gmm_ssm *m, double xq)
{
    double tol = m->par.merge_tol;
    if (tol <= 0.0)
        return xq;
    size_t lo = states_upto(m, xq);
    if (lo > 0 && xq - m->t[lo - 1] <= tol)
        return m->t[lo - 1];
    if (lo < m->K && m->t[lo] - xq <= tol)
        return m->t[lo];
    return xq;
}

/* y = M x (trans 0) or M' x (trans 1), d x d row-major. */
static void mat_vec(size_t d, int trans, const double *M, const double *x, double *y)
{
    for (size_t i = 0; i < d; i++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += (trans ? M[j * d + i] : M[i * d + j]) * x[j];
        y[i] = s;
    }
}

static double quad_form(size_t d, const double *M, const double *x)
{
    double s = 0.0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            s += x[i] * M[i * d + j] * x[j];
    return s;
}

/* g' Sigma[b .. b+w) g and g' mu[b .. b+w) from the posterior band; g (w =
 * d or 2d) is in the kernel's order state by state, the band in its own
 * (BLOCKS): band position i of a state pairs with g's variable perm[i]. */
static void band_moments(const gmm_ssm *a, const gmm_band *cov, const double *mu, size_t b,
                         size_t w, const double *g, double *mean, double *var)
{
    size_t d = a->d;
    double mq = 0.0, vq = 0.0;
    for (size_t i = 0; i < w; i++) {
        double gi = g[i / d * d + a->perm[i % d]];
        if (gi == 0.0)
            continue;
        mq += gi * mu[b + i];
        double s = 0.0;
        for (size_t j = 0; j < w; j++)
            s += gmm_band_get(cov, b + i, b + j) * g[j / d * d + a->perm[j % d]];
        vq += gi * s;
    }
    *mean = mq;
    *var = vq;
}

/* x = (L L')^-1 x in place, L lower (as left by md_chol). */
static void chol_solve_vec(size_t d, const double *L, double *x)
{
    for (size_t i = 0; i < d; i++) {
        double s = x[i];
        for (size_t j = 0; j < i; j++)
            s -= L[i * d + j] * x[j];
        x[i] = s / L[i * d + i];
    }
    for (size_t i = d; i-- > 0;) {
        double s = x[i];
        for (size_t j = i + 1; j < d; j++)
            s -= L[j * d + i] * x[j];
        x[i] = s / L[i * d + i];
    }
}

/* Posterior mean and variance of f(t) in the evaluated model a (mu, cov its
 * data-state posterior); see PREDICTION FROM THE DATA STATES. */
static gmm_status predict_one(gmm_ssm *a, const double *mu, const gmm_band *cov, double t,
                              pred_work *p, double *mean, double *var)
{
    gmm_status st;
    size_t d = a->d, dd = d * d, K = a->K, lo = states_upto(a, t);
    double ve = 0.0;
    if ((st = gmm_kernel_obs(a->k, a->kw, t - a->t[0], p->h)))
        return st;
    if (lo > 0 && a->t[lo - 1] == t) { /* at a state */
        band_moments(a, cov, mu, (lo - 1) * d, d, p->h, mean, var);
        return GMM_OK;
    }
    if (lo == K) { /* after the last state */
        if ((st = gmm_kernel_disc(a->k, a->kw, t - a->t[K - 1], p->A1, p->Q1)))
            return st;
        mat_vec(d, 1, p->A1, p->h, p->g);
        ve = quad_form(d, p->Q1, p->h);
        band_moments(a, cov, mu, (K - 1) * d, d, p->g, mean, var);
    } else if (lo == 0) { /* before the first state */
        if ((st = gmm_kernel_disc(a->k, a->kw, a->t[0] - t, p->A1, p->Q1)))
            return st;
        mat_vec(d, 0, a->P, p->h, p->v);
        mat_vec(d, 0, p->A1, p->v, p->u);
        mat_vec(d, 0, a->W0, p->u, p->w);
        mat_vec(d, 1, p->A1, p->w, p->u);
        for (size_t i = 0; i < d; i++)
            p->u[i] = p->h[i] - p->u[i];
        ve = quad_form(d, a->P, p->u) + quad_form(d, p->Q1, p->w);
        band_moments(a, cov, mu, 0, d, p->w, mean, var);
    } else { /* between states lo - 1 and lo */
        size_t k = lo - 1;
        if ((st = gmm_kernel_disc(a->k, a->kw, t - a->t[k], p->A1, p->Q1))
            || (st = gmm_kernel_disc(a->k, a->kw, a->t[k + 1] - t, p->A2, p->Q2)))
            return st;
        md_gemm(d, 0, 0, 1.0, p->A2, p->Q1, 0.0, p->T);
        md_gemm(d, 0, 1, 1.0, p->T, p->A2, 0.0, p->S);
        md_axpy(dd, 1.0, p->Q2, p->S);
        md_symmetrise(d, p->S);
        if (md_chol(d, p->S))
            return gmm_error(GMM_ENOTPD,
                             "transition noise Q(dt = %g) between inputs x = %.15g and %.15g is "
                             "not positive definite at these parameters",
                             a->t[k + 1] - a->t[k], a->t[k], a->t[k + 1]);
        mat_vec(d, 0, p->Q1, p->h, p->v);
        mat_vec(d, 0, p->A2, p->v, p->w);
        chol_solve_vec(d, p->S, p->w);
        mat_vec(d, 1, p->A2, p->w, p->u);
        for (size_t i = 0; i < d; i++)
            p->u[i] = p->h[i] - p->u[i];
        mat_vec(d, 1, p->A1, p->u, p->g);
        memcpy(p->g + d, p->w, d * sizeof *p->g);
        ve = quad_form(d, p->Q1, p->u) + quad_form(d, p->Q2, p->w);
        band_moments(a, cov, mu, k * d, 2 * d, p->g, mean, var);
    }
    *var += ve;
    return GMM_OK;
}

gmm_status gmm_ssm_predict(const gmm_ssm *m, const double *theta, const double *xq, size_t nq,
                           double *mean, double *var)
{
    gmm_status st = GMM_OK;
    gmm_ssm *a = NULL;
    gmm_band *cov = NULL;
    double *mu = NULL, *buf = NULL, ll;
    pred_work p;
    if (!m || !theta || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_ssm_predict: NULL argument");
    for (size_t q = 0; q < nq; q++)
        if (!isfinite(xq[q]))
            return gmm_error_at(GMM_EINVAL, q, "query x[%zu] = %g is not finite", q, xq[q]);
    /* m is const: evaluate a model of the same data, kernel and damping */
    gmm_ssm_params par = m->par;
    par.damp = m->damp;
    if ((st = gmm_ssm_alloc(m->k, m->x, m->y, m->n, &par, &a)))
        goto done;
    mu = gmm_malloc(a->N, sizeof *mu);
    /* bandwidth 2d - 1 (at least the precision's, BLOCKS) covers the blocks (k, k)
     * and (k+1, k) whatever the order of the variables within the states */
    cov = gmm_band_alloc(a->N, 2 * a->d - 1, 0, GMM_BAND_SYMMETRIC);
    buf = gmm_malloc(PRED_WORK_SIZE(a->d), sizeof *buf);
    if (!mu || !cov || !buf) {
        st = gmm_error(GMM_ENOMEM, "out of memory for prediction");
        goto done;
    }
    pred_work_init(&p, buf, a->d);
    if ((st = ssm_forward(a, theta, &ll, 0)) || (st = gmm_marglik_posterior(a->mw, mu, cov)))
        goto done;
    for (size_t q = 0; q < nq; q++)
        if ((st = predict_one(a, mu, cov, snap(a, xq[q]), &p, mean + q, var + q)))
            goto done;
done:
    gmm_free(mu);
    gmm_free(buf);
    gmm_band_free(cov);
    gmm_ssm_free(a);
    return st;
}
