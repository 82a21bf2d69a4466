/* marglik_rows.c -- the Gaussian marginal likelihood in the square-root
 * form (gmm_marglik_eval_rows): the prior's rows and the observations
 * folded into the posterior factor, and the row moments and row means read
 * back from the recorded fold.  The shared finish is marglik.c's.
 */
#include "marglik_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

/* *p (cap *cap elements of size sz) with room for need: 0, or 1 when it
 * cannot grow.  Doubling: evaluations after the first allocate nothing. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 64;
    while (c < need)
        c *= 2;
    void *q = gmm_realloc(*p, c, sz);
    if (!q)
        return 1;
    *p = q;
    *cap = c;
    return 0;
}

/* Before folding a block of m rows (ROW MOMENTS): its sources and prior
 * rows. */
static gmm_status record_block(gmm_marglik_work *w, size_t m)
{
    size_t g0 = SIZE_MAX, g1 = 0;
    if (grow((void **)&w->rb, &w->rbcap, w->nrb + 1, sizeof *w->rb) ||
        grow((void **)&w->src, &w->srccap, w->nsrc + m, sizeof *w->src))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the square-root form's "
                                     "record");
    for (size_t i = 0; i < m; i++) {
        size_t src = w->bsrc[i];
        w->src[w->nsrc + i] = src;
        if (!(src & OBS_TAG)) {
            g0 = src < g0 ? src : g0;
            g1 = src + 1 > g1 ? src + 1 : g1;
        }
    }
    row_block *b = w->rb + w->nrb++;
    b->spos = w->nsrc;
    b->tpos = w->tape.len;
    b->g0 = g0 == SIZE_MAX ? 0 : g0;
    b->g1 = g0 == SIZE_MAX ? 0 : g1;
    w->nsrc += m;
    return GMM_OK;
}

/* Whether the segment that prior row gi (first column gfirst) starts --
 * up to the next block start -- fits the block being gathered (m rows so
 * far) whole: its prior rows, and every observation from ok on that can
 * start in its columns, counted generously (no later rule may split it).
 * Merging segments nearly halves the fold's sequential reflections: a
 * state's columns are then swept once, by its own rows and its
 * predecessor's remainder together, instead of once by each block. */
static int segment_fits(const gmm_prior_rows *G, const gmm_obs *obs, size_t gi, size_t gfirst,
                        size_t ok, size_t kl, size_t m, size_t seglen)
{
    if (m >= BLOCK_MERGE)
        return 0;
    size_t need = m + 1;
    if (seglen) /* known (read whole by G->rows) */
        need = need + seglen - 1 < BLOCK_MAX ? need + seglen - 1 : BLOCK_MAX;
    for (size_t i = gi + 1;
         !seglen && i < G->nrows && !G->block_start(G->ctx, i) && need < BLOCK_MAX; i++)
        need++;
    for (size_t t = ok; t < obs->nobs && obs->offset[t] <= gfirst + kl && need < BLOCK_MAX; t++)
        need++;
    return need < BLOCK_MAX;
}

/* SQUARE-ROOT FORM.  The rows of [G; E / sqrt(noise)] are merged by first
 * column and folded into L in blocks (gmm_band_chol_add_rows): a block
 * takes the rows that start inside the columns already reached by earlier
 * rows (at least the first row's), so each block's reflections first sweep
 * the filled columns of L, then deposit the block's remainder into the empty
 * ones after them.  For a state-space model that block is one state's
 * observation and its d transition rows: 2d reflections per state, each
 * with one square root, where row-by-row Givens rotations cost ~7d; with
 * segments merged (segment_fits: each block's rows may then also start
 * inside the columns the block itself reaches) a state's columns are swept
 * once by its rows and its predecessor's remainder together: d + d / (the
 * intervals per block) reflections per state (CO2 model: 7.2 instead of
 * 12), and the gradient's row moments have fewer blocks to compress.
 * Reading the rows backwards (the factor of J P J, J the exchange matrix)
 * does not help even though a Markov chain's transition rows, read so, are
 * triangular: the observations have filled the factor's rows they would
 * land in.  Counted on the CO2 model (d = 6): 42 rotations per state in
 * either order row by row, 12 reflections per state in either order by
 * blocks.  G->block_start, when given, marks segments: a block ends
 * before a marked row (and before the observations that start in that
 * row's first column) unless that row's whole segment fits the block
 * (segment_fits), and no block splits a segment. */
gmm_status gmm_marglik_eval_rows(const gmm_prior_rows *G, const gmm_obs *obs, double noise,
                                 double prior_logdet, gmm_marglik_work *w, double *loglik)
{
    gmm_status st;
    if (w) {
        w->valid = 0;
        w->recorded = 0;
    }
    if (!G || !G->row || !obs || !w || !loglik)
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    if (w->con && !(w->rows_tau >= 0.0))
        return gmm_error(GMM_EINVAL, "marglik: constraints in the square-root form need the "
                                     "pins among the rows (gmm_marglik_rows_pinned)");
    if ((st = marglik_check_obs_map(obs, noise, w)) != GMM_OK)
        return st;
    if (!isfinite(prior_logdet))
        return gmm_error(GMM_EINVAL, "marglik: supplied log|Q| is not finite");
    for (size_t k = 1; k < obs->nobs; k++)
        if (obs->offset[k] < obs->offset[k - 1])
            return gmm_error_at(GMM_EINVAL, k, "marglik: observation offsets must be "
                                               "nondecreasing for the square-root form");

    size_t n = w->n, kl = w->kl, ld = kl + 1, nobs = obs->nobs, wd = obs->width;
    if ((st = gmm_band_set_kind(&w->L, GMM_BAND_LOWER)) != GMM_OK)
        return st;
    gmm_band_set_zero(&w->L);
    double yy = marglik_obs_rhs(obs, w->r), sn = 1.0 / sqrt(noise);
    const double *gv = w->work; /* the prior row gi, read and not yet taken (have) */
    size_t gi = 0, ok = 0, gfirst = 0, gwidth = 0, filled = 0;
    /* G->rows: qn rows read ahead, the next at qi; qlen: the segment's
     * length when they are all of it (else 0) */
    size_t qn = 0, qi = 0, qlen = 0;
    int have = 0, gstart = 0, record = w->record;
    w->tape.len = 0;
    w->nrb = w->nsrc = 0;
    while (have || gi < G->nrows || ok < nobs) {
        size_t m = 0, lim = 0, reach = filled, opener = SIZE_MAX, lastpf = SIZE_MAX;
        size_t merged = SIZE_MAX; /* the last segment start merged into this block */
        for (;;) {
            if (!have && gi < G->nrows) {
                size_t f;
                int seg0 = 1; /* may start a segment */
                if (G->rows) {
                    if (qi == qn) {
                        size_t cap = G->nrows - gi < QCAP ? G->nrows - gi : QCAP;
                        qn = G->rows(G->ctx, gi, cap, w->qfirst, w->qwidth, w->qv, ld);
                        if (qn == 0 || qn > cap)
                            return gmm_error_at(GMM_EINVAL, gi, "marglik: the prior's row "
                                                                "reader gave %zu rows from "
                                                                "row %zu (1 .. %zu)",
                                                qn, gi, cap);
                        /* the segment's length, when the read ended
                         * at its end (one question; a short read leaves
                         * segment_fits to ask row by row) */
                        qlen = gi + qn == G->nrows ||
                                       (G->block_start && G->block_start(G->ctx, gi + qn))
                                   ? qn
                                   : 0;
                        qi = 0;
                    }
                    seg0 = qi == 0;
                    f = w->qfirst[qi];
                    gv = w->qv + qi * ld;
                    gwidth = w->qwidth[qi];
                    qi++;
                } else {
                    gwidth = G->row(G->ctx, gi, &f, w->work);
                }
                if (gwidth == 0 || gwidth > kl + 1 || f > n || gwidth > n - f)
                    return gmm_error_at(GMM_EDIM, gi, "marglik: prior row %zu (columns %zu, "
                                                      "width %zu) does not fit the band",
                                        gi, f, gwidth);
                if (gi > 0 && f < gfirst) /* named: the row that comes too early */
                    return gmm_error_at(GMM_EINVAL, gi - 1, "marglik: prior row %zu starts at "
                                                            "column %zu, after row %zu (%zu)",
                                        gi - 1, gfirst, gi, f);
                gfirst = f;
                have = 1;
                gstart = G->block_start && seg0 && G->block_start(G->ctx, gi);
            }
            int bstart = have && gstart;
            if (m == 0 && bstart)
                opener = gi; /* this block is the one gi starts */
            if (m > 0 && bstart && gi != opener && gi != merged)
                merged = segment_fits(G, obs, gi, gfirst, ok, kl, m, qi == 1 ? qlen : 0)
                             ? gi
                             : SIZE_MAX;
            if (merged != SIZE_MAX && reach > lim)
                lim = reach; /* a merged segment's rows start inside the block's reach */
            size_t ofirst = ok < nobs ? obs->offset[ok] : 0;
            int take_obs = ok < nobs && (!have || ofirst <= gfirst);
            if (!take_obs && !have)
                break;
            size_t f = take_obs ? ofirst : gfirst, wdt = take_obs ? wd : gwidth;
            if (m > 0 && f >= lim)
                break;
            if (!G->block_start) {
                if (m == BLOCK_MAX)
                    break;
            } else if (m == w->bcap || (m >= BLOCK_MAX && (take_obs || gfirst != lastpf)) ||
                       (m > 0 && bstart && gi != opener && gi != merged &&
                        (!take_obs || ofirst >= gfirst))) {
                break;
            }
            double *v = w->bv + m * ld;
            if (take_obs) {
                const double *c = obs->coef + ok * obs->coef_stride;
                for (size_t b = 0; b < wd; b++)
                    v[b] = c[b] * sn;
                w->bsrc[m] = OBS_TAG | ok;
                ok++;
            } else {
                memcpy(v, gv, gwidth * sizeof *v);
                w->bsrc[m] = gi;
                lastpf = gfirst;
                gi++;
                have = 0;
            }
            for (size_t t = wdt; t < ld; t++)
                v[t] = 0.0;
            w->bfirst[m] = f;
            if (m == 0)
                lim = filled > f + 1 ? filled : f + 1;
            if (f + wdt > reach)
                reach = f + wdt;
            m++;
        }
        if (record && (st = record_block(w, m)) != GMM_OK)
            return st;
        st = record ? gmm_band_chol_add_rows_tape(&w->L, m, w->bfirst, w->bv, ld, w->bwork,
                                                  &w->tape)
                    : gmm_band_chol_add_rows(&w->L, m, w->bfirst, w->bv, ld, w->bwork);
        if (st != GMM_OK) {
            char msg[GMM_ERROR_MAX];
            size_t src = st == GMM_ENOMEM ? SIZE_MAX : w->bsrc[gmm_error_index()];
            snprintf(msg, sizeof msg, "%s", gmm_error_message());
            if (src == SIZE_MAX)
                return gmm_error(st, "marglik: %s", msg);
            if (src & OBS_TAG)
                return gmm_error(st, "marglik: an observation row: %s", msg);
            return gmm_error_at(st, src, "marglik: prior row %zu: %s", src, msg);
        }
        filled = reach;
    }
    if (gmm_band_chol_rows_check(&w->L) != GMM_OK) {
        size_t j = gmm_error_index();
        return gmm_error_at(GMM_ENOTPD, j,
                            "posterior precision (square-root form) not positive definite: "
                            "column %zu is not determined by the prior rows and the data",
                            j);
    }
    st = w->con ? marglik_finish_constrained(w, obs, noise, prior_logdet, yy, w->rows_tau, loglik)
                : marglik_finish(w, obs, noise, prior_logdet, yy, loglik);
    if (st != GMM_OK)
        return st;
    w->prior_here = 0;
    w->recorded = record;
    return GMM_OK;
}

void gmm_marglik_rows_pinned(gmm_marglik_work *w, double tau)
{
    if (w)
        w->rows_tau = tau;
}

void gmm_marglik_rows_record(gmm_marglik_work *w, int on)
{
    if (w)
        w->record = on != 0;
}

/* ROW MOMENTS (gmm_marglik_rows_moments).  The fold is recorded
 * (band.h, TAPE) and gmm_band_chol_rows_moments gives each block's rows'
 * posterior moments (z = R mu = L^-1 E'y / noise, the forward solve's r /
 * noise); here they are sorted by source.  Prior rows v = G_block x pass on
 * E[v v'] - I and E[v x_J']; an observation row o = c'x / s (s =
 * sqrt(noise)) gives E[(y - c'x)^2] = (y - s E[o])^2 + noise Var(o), Var(o) =
 * E[o^2] - E[o]^2, for the noise gradient by Fisher's identity:
 * dlogp/dnoise = -nobs / (2 noise) + sum E[(y - c'x)^2] / (2 noise^2). */
typedef struct {
    gmm_marglik_work *w;
    gmm_rows_moments_fn fn;
    void *ctx;
    double ey;
} moments_ctx;

static gmm_status moments_block(void *ctx, size_t block, const gmm_band_block_moments *bm)
{
    moments_ctx *mc = ctx;
    gmm_marglik_work *w = mc->w;
    const row_block *rb = w->rb + (w->nrb - 1 - block); /* block counts back from the last */
    const size_t *src = w->src + rb->spos;
    const gmm_obs *obs = w->obs;
    double s = sqrt(w->noise);
    size_t np = rb->g1 - rb->g0, lw = bm->lw;
    if (grow((void **)&w->vbuf, &w->vcap, np * lw + 1, sizeof *w->vbuf))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row moments");
    for (size_t i = 0; i < bm->m; i++) {
        const double *a = bm->rows + i * lw;
        if (src[i] & OBS_TAG) {
            /* Var(o) = E[o^2] - E[o]^2 */
            double e = obs->y[src[i] & ~OBS_TAG] - s * a[bm->r];
            double var = 1.0 + gmm_band_moment(bm, a, a) - a[bm->r] * a[bm->r];
            mc->ey += e * e + w->noise * var;
            if (w->ovar)
                w->ovar[src[i] & ~OBS_TAG] = w->noise * var;
        } else {
            memcpy(w->vbuf + (src[i] - rb->g0) * lw, a, lw * sizeof *a);
        }
    }
    if (np == 0 || !mc->fn)
        return GMM_OK;
    gmm_rows_moments mo = {rb->g0, np, bm->c0, bm->nj, {bm->c0, np, bm->nj, lw, bm->r,
                                                         w->vbuf, bm->xj}};
    return mc->fn(mc->ctx, &mo);
}

gmm_status gmm_marglik_rows_moments(gmm_marglik_work *w, gmm_rows_moments_fn fn, void *ctx,
                                    double *noisebar)
{
    gmm_status st;
    if (!w || !w->valid || !w->recorded)
        return gmm_error(GMM_EINVAL, "marglik: row moments without a recorded square-root "
                                     "evaluation (gmm_marglik_rows_record)");
    /* z = R mu = r / noise, into work */
    for (size_t i = 0; i < w->n; i++)
        w->work[i] = w->r[i] / w->noise;
    moments_ctx mc = {w, fn, ctx, 0.0};
    st = gmm_band_chol_rows_moments(&w->tape, w->work, w->n, moments_block, &mc, &w->mwork);
    w->ovar = NULL;
    if (st)
        return st;
    if (noisebar)
        *noisebar += -0.5 * (double)w->obs->nobs / w->noise + mc.ey / (2.0 * w->noise * w->noise);
    return GMM_OK;
}

void gmm_marglik_rows_obs_var(gmm_marglik_work *w, double *var)
{
    if (w)
        w->ovar = var;
}

/* ROW MEANS (gmm_marglik_rows_solve).  A mean needs none of the moments'
 * covariance lanes: R's rows' values R x (x = mu, and x = P^-1 b, whose R
 * x = L' P^-1 b = L^-1 b is one forward solve) carried back block by block
 * through the tape's inverse maps give every row's a'x as the fold saw it
 * -- G_a x for a prior row without a product with G_a's (possibly huge)
 * entries.  Four lanes: mu, P^-1 b, two unused. */
gmm_status gmm_marglik_rows_solve(gmm_marglik_work *w, const double *b, double *x, double *gx)
{
    gmm_status st;
    if (!w || !b || !x || !gx)
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    if (!w->valid || !w->recorded)
        return gmm_error(GMM_EINVAL, "marglik: row means without a recorded square-root "
                                     "evaluation (gmm_marglik_rows_record)");
    size_t n = w->n, lw = 4, cap = (n + w->bcap + w->kl + 1) * lw;
    if (grow((void **)&w->ubuf, &w->ucap, cap, sizeof *w->ubuf))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row means");
    memcpy(x, b, n * sizeof *x);
    if ((st = gmm_band_tri_solve_vec(&w->L, GMM_NOTRANS, x)))
        return st;
    double *U = w->ubuf, *S = w->ubuf + n * lw;
    for (size_t j = 0; j < n; j++) {
        U[j * lw] = w->r[j] / w->noise;
        U[j * lw + 1] = x[j];
        U[j * lw + 2] = U[j * lw + 3] = 0.0;
    }
    if ((st = gmm_band_tri_solve_vec(&w->L, GMM_TRANS, x)))
        return st;
    for (size_t bi = w->nrb; bi-- > 0;) {
        const row_block *rb = w->rb + bi;
        size_t c0, m, cend, next;
        if ((st = gmm_band_tape_block(&w->tape, rb->tpos, &c0, &m, &cend, &next, NULL)))
            return st;
        size_t nR = cend - c0;
        if ((n + nR + m) * lw > w->ucap) {
            if (grow((void **)&w->ubuf, &w->ucap, (n + nR + m) * lw, sizeof *w->ubuf))
                return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row means");
            U = w->ubuf;
            S = w->ubuf + n * lw;
        }
        memcpy(S, U + c0 * lw, nR * lw * sizeof *S);
        memset(S + nR * lw, 0, m * lw * sizeof *S);
        if ((st = gmm_band_chol_rows_unfold(&w->tape, rb->tpos, nR, S, lw, lw)))
            return st;
        memcpy(U + c0 * lw, S, nR * lw * sizeof *S);
        const size_t *src = w->src + rb->spos;
        for (size_t i = 0; i < m; i++) {
            if (src[i] & OBS_TAG)
                continue;
            gx[2 * src[i]] = S[(nR + i) * lw];
            gx[2 * src[i] + 1] = S[(nR + i) * lw + 1];
        }
    }
    return GMM_OK;
}
