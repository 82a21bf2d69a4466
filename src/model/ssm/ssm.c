/* ssm.c -- the state-space model's symbolic layout: sorting the inputs into
 * states, the distinct intervals, the block order of the state variables
 * and the observation map.  Numeric work per parameter value is in
 * ssm_prior.c, prediction in ssm_predict.c. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"
#include "../model_dense.h"

#include "ssm_impl.h"

void gmm_ssm_params_init(gmm_ssm_params *p)
{
    p->merge_tol = 0.0;
    p->damp = NAN;
    p->damp_rel = NAN;
    p->dt_ulps = 8.0;
    p->check_spacing = 1;
    p->work_limit = 0;
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
    gmm_free(m->xl);
    gmm_free(m->Hobs);
    gmm_free(m->dblk);
    gmm_free(m->lbuf);
    gmm_free(m->lrow);
    gmm_free(m->mu);
    gmm_band_free(m->cov);
    gmm_kernel_work_free(m->kw);
    gmm_free(m->blk);
    gmm_free(m->ldQ);
    gmm_free(m->P);
    gmm_free(m->rowstart);
    gmm_free(m->tpl);
    gmm_free(m->rtpl);
    gmm_marglik_work_free(m->mw);
    gmm_free(m->order);
    gmm_free(m->wbuf);
    gmm_free(m->rbuf);
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

/* States from sorted inputs. */
static void layout_states(gmm_ssm *m, const keyed *s)
{
    size_t K = 0;
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
        m->order[r] = s[r].i;
    }
    m->K = K;
}

gmm_status gmm_ssm_set_y(gmm_ssm *m, const double *y)
{
    if (!m || !y)
        return gmm_error(GMM_EINVAL, "gmm_ssm_set_y: NULL argument");
    for (size_t r = 0; r < m->n; r++)
        if (isinf(y[r]))
            return gmm_error_at(GMM_EINVAL, r, "output y[%zu] = %g is not finite", r, y[r]);
    size_t o = 0;
    for (size_t i = 0; i < m->n; i++) { /* in state order: offsets nondecreasing */
        size_t row = m->order[i];
        m->y[row] = isnan(y[row]) ? NAN : y[row];
        if (isnan(y[row]))
            continue;
        m->obs_off[o] = m->row_state[row] * m->d;
        m->obs_y[o++] = y[row];
    }
    m->nobs = o;
    m->obs.nobs = o;
    m->obs.coef = m->modulated ? m->Hobs : m->Hp; /* after gmm_ssm_wls's weighted rows */
    m->obs.coef_stride = m->modulated ? m->d : 0;
    m->ydata = 1;
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

/* The workspace limit in bytes: the caller's, or the machine's memory. */
static double work_limit(const gmm_ssm_params *par)
{
    if (par->work_limit > 0)
        return (double)par->work_limit;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? 0.9 * (double)pages * (double)size : 16e9;
}

static gmm_status too_big(const gmm_ssm *m, double need, double limit)
{
    return gmm_error(GMM_ENOMEM,
                     "the state-space model would need about %.3g GB of workspace (state "
                     "dimension %zu, %zu states, %zu distinct intervals), over the limit of "
                     "%.3g GB: use fewer kernel terms, factors or harmonics, or fewer inputs",
                     need / 1e9, m->d, m->K, m->ng, limit / 1e9);
}

gmm_status gmm_ssm_alloc(const gmm_kernel *k, const double *x, size_t n,
                         const gmm_ssm_params *par, gmm_ssm **out)
{
    gmm_status st = GMM_OK;
    gmm_ssm *m = NULL;
    keyed *s = NULL;
    if (!out || !k || !x)
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
    m->order = gmm_malloc(n, sizeof *m->order);
    m->obs_off = gmm_malloc(n, sizeof *m->obs_off);
    m->obs_y = gmm_malloc(n, sizeof *m->obs_y);
    s = gmm_malloc(n, sizeof *s);
    if (!m->x || !m->y || !m->t || !m->row_state || !m->order || !m->obs_off || !m->obs_y ||
        !s) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model");
        goto done;
    }
    memcpy(m->x, x, n * sizeof *x);
    for (size_t r = 0; r < n; r++) {
        m->y[r] = NAN;
        s[r].v = x[r];
        s[r].i = r;
    }
    qsort(s, n, sizeof *s, cmp_keyed);
    layout_states(m, s);
    if ((st = layout_intervals(m)))
        goto done;
    /* refuse before allocating (estimates in doubles: no overflow): first
     * the d x d work -- B_N blocks per interval group and the kernel's --,
     * then, once the block order gives the bandwidth, the bands */
    double limit = work_limit(par);
    {
        double dd_ = (double)m->d * (double)m->d;
        double need = 8.0 * ((double)(m->ng ? m->ng : 1) * B_N * dd_ + 40.0 * dd_);
        if (need > limit) {
            st = too_big(m, need, limit);
            goto done;
        }
    }
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
    m->P = gmm_malloc(8 * dd, sizeof *m->P);
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
    m->rtpl = gmm_malloc((m->ng + 1) * d * (m->kl + 1), sizeof *m->rtpl);
    m->bs = gmm_malloc(10 * smax * smax, sizeof *m->bs);
    if (!m->tpl || !m->rtpl || !m->bs) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model workspace");
        goto done;
    }
    m->W0 = m->P + dd;
    m->T = m->W0 + dd;
    m->C0 = m->T + 4 * dd;
    m->L0 = m->C0 + dd;
    for (size_t b = 0; b < m->nb; b++)
        for (size_t q = m->boff[b]; q < m->boff[b + 1]; q++)
            m->rowstart[q] = m->boff[b];
    {
        /* the marginal likelihood's three bands and its posterior's, the
         * vectors, the prediction's wider covariance band, and the
         * square-root form's record for its gradient (marglik.h, ROW
         * MOMENTS: ~2d (d + 8) + d^2 per state, i.e. 3d + 16 per latent);
         * per interval group its blocks and its square-root rows (as many
         * groups as intervals on an irregular grid) */
        double need = 8.0 * (5.0 * ((double)m->kl + 1.0) + 5.0 * (double)d + 24.0) *
                      (double)m->N;
        need += 8.0 * ((double)m->ng + 1.0) * ((double)(B_N * dd) + (double)d * (m->kl + 1.0));
        if (need > limit) {
            st = too_big(m, need, limit);
            goto done;
        }
    }
    m->mw = gmm_marglik_work_alloc(m->N, m->kl);
    if (!m->mw) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the marginal-likelihood workspace");
        goto done;
    }
    m->obs.n = m->N;
    m->obs.nobs = 0;
    m->obs.width = d;
    m->obs.offset = m->obs_off;
    m->obs.coef = m->Hp;
    m->obs.coef_stride = 0;
    m->obs.y = m->obs_y;
    m->modulated = gmm_kernel_modulated(k);
    if (m->modulated) {
        m->Hobs = gmm_malloc(n * d, sizeof *m->Hobs);
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
size_t gmm_ssm_nparam(const gmm_ssm *m) { return m->np; }
size_t gmm_ssm_nrows(const gmm_ssm *m) { return m->n; }
size_t gmm_ssm_dimension(const gmm_ssm *m) { return m->N; }
size_t gmm_ssm_row_offset(const gmm_ssm *m, size_t r) { return m->row_state[r] * m->d; }
int gmm_ssm_obs_varies(const gmm_ssm *m) { return m->modulated; }
size_t gmm_ssm_state_var(const gmm_ssm *m, size_t p) { return m->perm[p]; }
size_t gmm_ssm_row_state(const gmm_ssm *m, size_t r) { return m->row_state[r]; }

const char *gmm_ssm_param_name(const gmm_ssm *m, size_t i)
{
    return i < m->np ? gmm_kernel_param_name(m->k, i) : NULL;
}

/* ---- forward ------------------------------------------------------------------ */

