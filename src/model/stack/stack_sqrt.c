/* stack_sqrt.c -- the square-root form of a stacked latent with a damped
 * kernel (stack.h): its exact Gaussian likelihood and the weighted
 * smoothing of the Laplace approximation (latent.h), never factorising
 * the assembled precision.
 *
 * SQUARE-ROOT FORM.  With a damped kernel the joint posterior precision is
 * folded from rows (the kernel's transition rows, the other components'
 * Cholesky rows, the data's), never assembled: the exact Gaussian
 * likelihood and the Laplace approximation's smoothing (latent.h, wls) take
 * it, with their gradients, constraints included (the pins among the rows);
 * a demodulated oscillator's rows h(t) vary with theta
 * (gmm_latent_obs_varies), and so do new rows' (gmm_latent_stack_row).  The
 * whitening is block diagonal: the other components' as in the assembled
 * form (stack_whiten.c), each damped kernel's innovations form.  The
 * prior's square root is the merged rows, one per latent, the pins among
 * them with constraints (gmm_latent_prior_rows, gmm_latent_prior_rows_pins;
 * VI), with the reverse from q's moments (gmm_latent_prior_rows_rev_q).
 * The assembled prior (gmm_latent_prior, hence the Laplace map) and
 * gmm_latent_stack_logdet refuse it with GMM_EINVAL and the reason
 * (gmm_latent_assembled says so beforehand).
 *
 * ROWS.  A damped zero-noise factor's precision has entries ~ 1 / (p damp
 * dt) (kernel.h, ZERO PROCESS NOISE): beside the other components and the
 * data in one Cholesky it loses eps / (damp dt) of the information.  So P
 * is folded from rows (marglik.h, gmm_marglik_eval_rows): for the other
 * components the rows of L_r', L_r L_r' = Q_r, Q_r their precision with the
 * damped kernels' latents replaced by the identity's (a permuted block
 * diagonal: its factor has no entry between components, and the identity
 * rows are left out); for each damped kernel its own square root's rows
 * (gmm_ssm_prior_rows, the transition rows C (x_{k+1} - A x_k)) moved to
 * the stacked numbering; then the data's rows.  log|Q| = log|Q_r| + the
 * kernels' log|Q_k| from their blocks.
 *
 * GRADIENT (Fisher's identity, -1/2 tr((Sigma + mu mu') dQ) + 1/2 dlog|Q|).
 * The other components and the kernels' undamped blocks chain marglik's
 * dlogp/dQ (gmm_marglik_grad_view) through their entries, which are of
 * moderate size.  A damped block b has Q_b = R_b / p_b with R_b free of
 * theta (ssm.h, DAMPED BLOCKS), so its part is (dp_b / 2 p_b) T_b with T_b =
 * E[x_b' Q_b x_b] = tr(Q_b Sigma) + mu_b' Q_b mu_b, and tr(Q_b Sigma) =
 * |b| - sum_{i in b} (E'WE Sigma)_ii because (P Sigma)_ii = 1 and no other
 * component's precision reaches b's latents: first-order quantities only
 * (Sigma's band from the fold's factor is accurate to eps |Sigma|; a
 * product of Q_b's entries with it would lose eps / (damp dt)).  mu_b' Q_b
 * mu_b is |G_b mu|^2 from the rows.  The Laplace approximation's implicit
 * term -zeta' dQ mu is (dp_b / p_b) (G_b zeta) . (G_b mu) on a damped
 * block, the chain through the entries elsewhere.
 *
 * The weighted smoothing and the prior's rows are stack_sqrt_wls.c's, the
 * whitening stack_whiten.c's (stack_sq_whiten_setup). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"
#include "stack_sqrt_impl.h"

void stack_sq_free(struct stack_sq *s)
{
    if (!s)
        return;
    gmm_band_free(s->Qr);
    gmm_band_free(s->S);
    gmm_band_free(s->Qb);
    gmm_band_free(s->Sr);
    gmm_marglik_work_free(s->w);
    gmm_free(s->kern);
    gmm_free(s->bdamp);
    gmm_free(s->bp);
    gmm_free(s->gsrc);
    gmm_free(s->lblk);
    gmm_free(s->order);
    gmm_free(s->ocoef);
    gmm_free(s->mu);
    gmm_free(s->theta);
    gmm_free(s);
}

/* ---- the rows ---------------------------------------------------------------- */

size_t stack_sq_merged_row(void *ctx, size_t i, size_t *first, double *v)
{
    stack_impl *c = ctx;
    struct stack_sq *s = c->sqrt_work;
    size_t kl = s->kl, src = s->gsrc[i];
    if (src < s->n) {
        size_t w = s->n - src < kl + 1 ? s->n - src : kl + 1;
        for (size_t q = 0; q < w; q++)
            v[q] = gmm_band_get(s->Qr, src + q, src);
        *first = src;
        return w;
    }
    size_t q = s->gker[i], lf, f = s->gfirst[i], hi = f;
    const stack_comp *m = &c->comp[s->kern[q].k];
    size_t w = kern_row(s, q, s->grow[i], &lf, s->vloc);
    for (size_t a = 0; a <= kl; a++)
        v[a] = 0.0;
    for (size_t a = 0; a < w; a++) {
        size_t g = c->iperm[m->off + lf + a];
        v[g - f] = s->vloc[a];
        hi = g > hi ? g : hi;
    }
    *first = f;
    return hi - f + 1;
}

typedef struct {
    size_t first, id;
} row_key;

static int cmp_key(const void *a, const void *b)
{
    const row_key *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The merged order, once the kernels' rows are known (their windows are
 * structural). */
static gmm_status merge_rows(stack_impl *c)
{
    struct stack_sq *s = c->sqrt_work;
    size_t n = s->n, nrest = 0;
    int *dmp = gmm_calloc(n ? n : 1, sizeof *dmp);
    if (!dmp)
        return gmm_error(GMM_ENOMEM, "out of memory for the square-root form");
    for (size_t k = 0; k < c->ncomp; k++)
        if (c->comp[k].damped)
            for (size_t j = 0; j < c->comp[k].n; j++)
                dmp[c->iperm[c->comp[k].off + j]] = 1;
    for (size_t j = 0; j < n; j++)
        nrest += !dmp[j];
    size_t total = nrest;
    for (size_t q = 0; q < s->nk; q++)
        total += s->kern[q].G.nrows;
    row_key *key = gmm_malloc(total ? total : 1, sizeof *key);
    s->gsrc = gmm_malloc(4 * (total ? total : 1), sizeof *s->gsrc);
    if (!key || !s->gsrc) {
        gmm_free(dmp);
        gmm_free(key);
        gmm_free(s->gsrc);
        s->gsrc = NULL;
        return gmm_error(GMM_ENOMEM, "out of memory for the square-root form");
    }
    s->gker = s->gsrc + total;
    s->grow = s->gker + total;
    s->gfirst = s->grow + total;
    size_t t = 0;
    for (size_t j = 0; j < n; j++)
        if (!dmp[j]) {
            s->gsrc[t] = j;
            s->gfirst[t] = j;
            key[t] = (row_key){j, t};
            t++;
        }
    gmm_status st = GMM_OK;
    for (size_t q = 0; q < s->nk && !st; q++) {
        const stack_comp *m = &c->comp[s->kern[q].k];
        for (size_t i = 0; i < s->kern[q].G.nrows; i++, t++) {
            size_t lf, w = kern_row(s, q, i, &lf, s->vloc), lo = SIZE_MAX, hi = 0;
            for (size_t a = 0; a < w; a++) {
                size_t g = c->iperm[m->off + lf + a];
                lo = g < lo ? g : lo;
                hi = g > hi ? g : hi;
            }
            if (hi - lo > s->kl) {
                st = gmm_error(GMM_EINVAL, "internal: a kernel's row spans %zu columns of the "
                                           "stacked band %zu",
                               hi - lo + 1, s->kl + 1);
                break;
            }
            s->gsrc[t] = n + t;
            s->gker[t] = q;
            s->grow[t] = i;
            s->gfirst[t] = lo;
            key[t] = (row_key){lo, t};
        }
    }
    if (!st) {
        qsort(key, total, sizeof *key, cmp_key);
        size_t *tmp = gmm_malloc(4 * (total ? total : 1), sizeof *tmp);
        if (!tmp) {
            st = gmm_error(GMM_ENOMEM, "out of memory for the square-root form");
        } else {
            for (size_t i = 0; i < total; i++) {
                size_t id = key[i].id;
                tmp[i] = s->gsrc[id];
                tmp[total + i] = s->gker[id];
                tmp[2 * total + i] = s->grow[id];
                tmp[3 * total + i] = s->gfirst[id];
            }
            gmm_free(s->gsrc);
            s->gsrc = tmp;
            s->gker = tmp + total;
            s->grow = tmp + 2 * total;
            s->gfirst = tmp + 3 * total;
            s->nG = total;
        }
    }
    if (st) { /* the order is built whole or not at all */
        gmm_free(s->gsrc);
        s->gsrc = NULL;
    }
    gmm_free(dmp);
    gmm_free(key);
    if (st) { /* built on the next call, not taken half-built (stack_sq_eval_prior) */
        gmm_free(s->gsrc);
        s->gsrc = NULL;
    }
    return st;
}

/* ---- workspace ---------------------------------------------------------------- */

/* A workspace that failed to build is freed, so that the next call builds
 * it again instead of taking it for a built one. */
static void sq_drop(stack_impl *c)
{
    stack_sq_free(c->sqrt_work);
    c->sqrt_work = NULL;
}

gmm_status stack_sq_alloc(stack_impl *c, const gmm_latent *l)
{
    gmm_status st;
    if (c->sqrt_work)
        return GMM_OK;
    if ((st = stack_band_check(c)))
        return st;
    struct stack_sq *s = gmm_calloc(1, sizeof *s);
    if (!s)
        return gmm_error(GMM_ENOMEM, "out of memory for the square-root form");
    c->sqrt_work = s;
    size_t n = c->n, kl = c->bw, nr = c->nrows, W = l->width;
    s->n = n;
    s->kl = kl;
    for (size_t k = 0; k < c->ncomp; k++)
        if (c->comp[k].damped) {
            s->nk++;
            s->nblk += gmm_ssm_nblocks(c->comp[k].ssm);
        }
    size_t nb = s->nblk ? s->nblk : 1;
    s->Qr = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    s->S = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    s->Qb = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    s->Sr = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    s->w = gmm_marglik_work_alloc(n, kl);
    s->kern = gmm_calloc(s->nk ? s->nk : 1, sizeof *s->kern);
    s->bdamp = gmm_calloc(nb, sizeof *s->bdamp);
    s->bp = gmm_calloc(7 * nb, sizeof *s->bp);
    s->lblk = gmm_malloc(n ? n : 1, sizeof *s->lblk);
    s->order = gmm_malloc(3 * (nr ? nr : 1), sizeof *s->order);
    s->ocoef = gmm_malloc(nr * W + 3 * nr + 1, sizeof *s->ocoef);
    s->mu = gmm_malloc(3 * n + 2 * (kl + 1) + c->nparam + l->nnz + 2, sizeof *s->mu);
    s->theta = gmm_malloc(c->nparam ? c->nparam : 1, sizeof *s->theta);
    if (c->ncon && !c->Qpinned) {
        c->Qpinned = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        c->Qpinned_bar = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    }
    if ((c->ncon && (!c->Qpinned || !c->Qpinned_bar)) || !s->Qr || !s->S || !s->Qb || !s->Sr ||
        !s->w ||
        !s->kern || !s->bdamp || !s->bp || !s->lblk || !s->order || !s->ocoef || !s->mu ||
        !s->theta) {
        sq_drop(c); /* none of it kept: the next call starts again */
        return gmm_error(GMM_ENOMEM, "out of memory for the square-root form (n = %zu, "
                                     "bandwidth %zu)",
                         n, kl);
    }
    s->bgm = s->bp + nb;
    s->bgz = s->bgm + nb;
    s->bdl = s->bgz + nb;
    s->bcnt = s->bdl + nb;
    s->pbar = s->bcnt + nb;
    s->ooff = s->order + nr;
    s->orow = s->ooff + nr;
    s->oy = s->ocoef + nr * W;
    s->owt = s->oy + nr;
    s->zeta = s->mu + n;
    s->xloc = s->zeta + n;
    s->vloc = s->xloc + n;
    s->gpart = s->vloc + 2 * (kl + 1);
    s->coefbar = s->gpart + c->nparam;
    size_t q = 0, b0 = 0;
    for (size_t j = 0; j < n; j++)
        s->lblk[j] = SIZE_MAX;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        if (!m->damped)
            continue;
        s->kern[q] = (sq_kern){.k = k, .nb = gmm_ssm_nblocks(m->ssm), .blk0 = b0};
        for (size_t j = 0; j < m->n; j++) {
            size_t b = b0 + gmm_ssm_var_block(m->ssm, j % m->d);
            s->lblk[c->iperm[m->off + j]] = b;
            s->bcnt[b] += 1.0;
        }
        b0 += s->kern[q].nb;
        q++;
    }
    /* the data rows by window start: nondecreasing offsets for the fold */
    for (size_t r = 0; r < nr; r++)
        s->order[r] = r;
    for (size_t r = 1; r < nr; r++) { /* insertion from a nearly sorted start */
        size_t v = s->order[r], i = r;
        while (i > 0 && l->offset[s->order[i - 1]] > l->offset[v]) {
            s->order[i] = s->order[i - 1];
            i--;
        }
        s->order[i] = v;
    }
    s->obs = (gmm_obs){.n = n, .width = W, .offset = s->ooff, .coef = s->ocoef,
                       .coef_stride = W, .y = s->oy};
    st = gmm_marglik_constrain(s->w, c->ncon, c->con.dense, c->con.pinned);
    if (st)
        sq_drop(c);
    return st;
}

/* ---- evaluation ---------------------------------------------------------------- */

/* The prior at theta: Q_r factorised, each kernel's rows and blocks. */
gmm_status stack_sq_eval_prior(stack_impl *c, gmm_latent *l, const double *theta, double *ld)
{
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    s->have_theta = 0;
    double sum = 0.0;
    if ((st = gmm_band_set_kind(s->Qr, GMM_BAND_SYMMETRIC)) ||
        (st = stack_assemble(c, theta, s->Qr, 1)))
        return st;
    /* intrinsic components: the normaliser on the subspace from Q^, and the
     * pins among the rows (marglik.h, LINEAR CONSTRAINTS) */
    if (c->ncon) {
        if ((st = stack_pinned_logdet(c, s->Qr, &sum)))
            return st;
        double tau = gmm_marglik_constr_tau(s->w, s->Qr);
        for (size_t i = 0; i < c->ncon; i++)
            *gmm_band_ptr(s->Qr, c->con.pinned[i], c->con.pinned[i]) += tau;
        gmm_marglik_rows_pinned(s->w, tau);
        s->tau = tau;
    }
    if ((st = gmm_band_chol_decomp_work(s->Qr, s->Qr, latent_asm_chol_work(&c->as, s->kl))))
        return gmm_error_at(st, gmm_error_index(), "the stacked prior (without its damped "
                                                   "kernels) is not positive definite");
    if (!c->ncon)
        sum = gmm_band_chol_logdet(s->Qr);
    for (size_t q = 0; q < s->nk; q++) {
        sq_kern *kq = &s->kern[q];
        stack_comp *m = &c->comp[kq->k];
        const double *th = theta + m->par0;
        if ((st = gmm_ssm_damped_blocks(m->ssm, th, s->bdamp + kq->blk0, s->bp + kq->blk0)) ||
            (st = gmm_ssm_prior_rows(m->ssm, th, &kq->G, &kq->ld)))
            return st;
        sum += kq->ld;
    }
    if (!s->gsrc && (st = merge_rows(c)))
        return st;
    /* the rows' coefficients at theta (demodulated kernels) */
    if (l->varies && (st = l->ops->obs_coef(l->impl, theta, l->coef)))
        return st;
    memcpy(s->theta, theta, c->nparam * sizeof *theta);
    *ld = sum;
    s->have_theta = 1;
    return GMM_OK;
}

/* The fold at theta (NULL: the last prior's) with the data rows of y (NAN:
 * unobserved), each with weight wt[r] (wt NULL: all 1, noise variance
 * noise). */
gmm_status stack_sq_eval(stack_impl *c, gmm_latent *l, const double *theta, const double *y,
                          const double *wt, double noise, double *loglik)
{
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    s->have_grad = 0;
    if (theta) {
        if ((st = stack_sq_eval_prior(c, l, theta, &s->ld)))
            return st;
    } else if (!s->have_theta) {
        return gmm_error(GMM_EINVAL, "stacked latent: no theta for the square-root form");
    }
    size_t W = l->width, o = 0;
    for (size_t t = 0; t < c->nrows; t++) {
        size_t r = s->order[t];
        if (isnan(y[r]))
            continue;
        if (!isfinite(y[r]))
            return gmm_error_at(GMM_EINVAL, r, "row %zu: the outcome %g is not finite", r, y[r]);
        double sw = 1.0;
        if (wt) {
            if (!(wt[r] > 0.0) || !isfinite(wt[r]))
                return gmm_error_at(GMM_EDOM, r, "weighted smoothing: row %zu has weight %g",
                                    r, wt[r]);
            sw = sqrt(wt[r]);
        }
        double *cr = s->ocoef + o * W;
        memset(cr, 0, W * sizeof *cr);
        for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++)
            cr[l->pos[k]] = sw * l->coef[k];
        s->ooff[o] = l->offset[r];
        s->oy[o] = sw * y[r];
        s->owt[o] = wt ? wt[r] : 1.0 / noise;
        s->orow[o++] = r;
    }
    s->nobs = s->obs.nobs = o;
    s->noise = wt ? 1.0 : noise;
    s->weighted = wt != NULL;
    gmm_prior_rows G = {.nrows = s->nG, .row = stack_sq_merged_row, .ctx = c};
    return gmm_marglik_eval_rows(&G, &s->obs, s->noise, s->ld, s->w, loglik);
}

/* ---- gradient ------------------------------------------------------------------ */

/* (Sigma a_r)_i for row r's entry k: a_r's entries against Sigma's band. */
double stack_sq_sigma_a(const struct stack_sq *s, const gmm_latent *l, size_t r, size_t i)
{
    double v = 0.0;
    for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++)
        v += gmm_band_get(s->S, i, l->offset[r] + l->pos[k]) * l->coef[k];
    return v;
}

/* Per damped block: sum over its latents of (E'WE Sigma)_ii (bdl). */
static void data_trace(struct stack_sq *s, const gmm_latent *l)
{
    memset(s->bdl, 0, s->nblk * sizeof *s->bdl);
    for (size_t o = 0; o < s->nobs; o++) {
        size_t r = s->orow[o];
        for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++) {
            size_t i = l->offset[r] + l->pos[k], b = s->lblk[i];
            if (b != SIZE_MAX)
                s->bdl[b] += s->owt[o] * l->coef[k] * stack_sq_sigma_a(s, l, r, i);
        }
    }
}

/* Per damped block, from the kernels' rows: acc[b] += (G_b x) . (G_b y)
 * over its rows (y NULL: x). */
void stack_sq_kern_dots(stack_impl *c, const double *x, const double *y, double *acc)
{
    struct stack_sq *s = c->sqrt_work;
    for (size_t q = 0; q < s->nk; q++) {
        const sq_kern *kq = &s->kern[q];
        const stack_comp *m = &c->comp[kq->k];
        for (size_t i = 0; i < kq->G.nrows; i++) {
            size_t b = kq->blk0 + gmm_ssm_var_block(m->ssm, i % m->d), lf;
            if (!s->bdamp[b])
                continue;
            size_t w = kern_row(s, q, i, &lf, s->vloc);
            double dx = 0.0, dy = 0.0;
            for (size_t a = 0; a < w; a++) {
                size_t g = c->iperm[m->off + lf + a];
                dx += s->vloc[a] * x[g];
                dy += y ? s->vloc[a] * y[g] : 0.0;
            }
            acc[b] += dx * (y ? dy : dx);
        }
    }
}

/* thetabar += the chain of stacked adjoints (gradient convention) through
 * every component's entries but the damped blocks': Qbar for the other
 * components, Kbar for the damped kernels' undamped blocks (with logdetbar
 * on the kernels' own log|Q_k|). */
gmm_status stack_sq_chain_entries(stack_impl *c, const gmm_band *Qbar, const gmm_band *Kbar,
                                double logdetbar, double *thetabar)
{
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    if ((st = stack_assemble_rev(c, s->theta, Qbar, thetabar, 1)))
        return st;
    for (size_t q = 0; q < s->nk; q++) {
        const sq_kern *kq = &s->kern[q];
        stack_comp *m = &c->comp[kq->k];
        const double *th = s->theta + m->par0;
        double ld;
        if ((st = gmm_ssm_prior(m->ssm, th, m->gQ, &ld)))
            return st;
        gmm_band_set_zero(m->gQbar);
        for (size_t t = 0; t < m->nslot; t++) {
            size_t bi = s->lblk[m->joint_row[t]], bj = s->lblk[m->joint_col[t]];
            if ((bi != SIZE_MAX && s->bdamp[bi]) || (bj != SIZE_MAX && s->bdamp[bj]))
                continue;
            *gmm_band_ptr(m->gQbar, m->own_row[t], m->own_col[t]) =
                *gmm_band_ptr(Kbar, m->joint_row[t], m->joint_col[t]);
        }
        if ((st = gmm_ssm_prior_rev(m->ssm, m->gQbar, logdetbar, thetabar + m->par0)))
            return st;
    }
    return GMM_OK;
}

/* thetabar += sum_b pbar_b dp_b / dtheta over the kernels' damped blocks. */
gmm_status stack_sq_chain_damped(stack_impl *c, const double *pbar, double *thetabar)
{
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    for (size_t q = 0; q < s->nk; q++) {
        const sq_kern *kq = &s->kern[q];
        const stack_comp *m = &c->comp[kq->k];
        if ((st = gmm_ssm_damped_rev(m->ssm, s->theta + m->par0, pbar + kq->blk0,
                                     thetabar + m->par0)))
            return st;
    }
    return GMM_OK;
}

/* After stack_sq_eval: Sigma's band and mu, then thetabar += Fisher's part (the
 * explicit gradient at fixed data and weights; GRADIENT above), and
 * *noisebar (may be NULL) the noise variance's. */
gmm_status stack_sq_fisher(stack_impl *c, gmm_latent *l, double *thetabar, double *noisebar)
{
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    const gmm_band *Qbar;
    double nb = 0.0;
    if ((st = gmm_marglik_posterior(s->w, s->mu, s->S)) ||
        (st = gmm_marglik_grad_view(s->w, &Qbar, &nb)))
        return st;
    if (noisebar)
        *noisebar += nb;
    /* the other components: Qbar + log|Q_r| / 2 (Q_r's identity rows, the
     * kernels', left out; with constraints Q^'s, the pins dropped) */
    if ((st = gmm_band_copy(s->Qb, Qbar)))
        return st;
    if (c->ncon ? (st = stack_pinned_logdet_rev(c, 0.5, s->Qb))
                : ((st = gmm_band_chol_selinv(s->Qr, s->Sr)) ||
                   (st = gmm_band_axpy(0.5, 2.0, s->Sr, s->Qb))))
        return st;
    if ((st = stack_sq_chain_entries(c, s->Qb, Qbar, 0.5, thetabar)))
        return st;
    /* the damped blocks: T_b / (2 p_b) per unit of p_b */
    data_trace(s, l);
    memset(s->bgm, 0, s->nblk * sizeof *s->bgm);
    stack_sq_kern_dots(c, s->mu, NULL, s->bgm);
    for (size_t b = 0; b < s->nblk; b++)
        s->pbar[b] = s->bdamp[b] ? (s->bcnt[b] - s->bdl[b] + s->bgm[b]) / (2.0 * s->bp[b]) : 0.0;
    if ((st = stack_sq_chain_damped(c, s->pbar, thetabar)))
        return st;
    s->have_grad = 1;
    return GMM_OK;
}

/* ---- the latent's operations -------------------------------------------------- */

gmm_status stack_sq_gaussian(void *impl, const double *theta, const double *y, double noise,
                             double *loglik, double *thetabar, double *noisebar)
{
    stack_impl *c = impl;
    gmm_latent *l = c->latent;
    gmm_status st;
    if (!(noise > 0.0) || !isfinite(noise))
        return gmm_error(GMM_EDOM, "noise variance %g must be positive and finite", noise);
    if ((st = stack_sq_alloc(c, l)) ||
        (st = stack_sq_eval(c, l, theta, y, NULL, noise, loglik)) || !thetabar)
        return st;
    struct stack_sq *s = c->sqrt_work;
    memset(thetabar, 0, c->nparam * sizeof *thetabar);
    if (noisebar)
        *noisebar = 0.0;
    if ((st = stack_sq_fisher(c, l, thetabar, noisebar)))
        return st;
    if (!l->varies)
        return GMM_OK;
    /* rows that vary: dlogp/da_r = ((y_r - a_r'mu) mu - Sigma a_r) / noise */
    memset(s->coefbar, 0, l->nnz * sizeof *s->coefbar);
    for (size_t o = 0; o < s->nobs; o++) {
        size_t r = s->orow[o];
        double f = gmm_obsmap_row_dot(&c->as.map, r, s->mu);
        for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++) {
            size_t i = l->offset[r] + l->pos[k];
            s->coefbar[k] = ((y[r] - f) * s->mu[i] - stack_sq_sigma_a(s, l, r, i)) / noise;
        }
    }
    return l->ops->obs_coef_rev(l->impl, theta, s->coefbar, thetabar);
}

gmm_status stack_sq_posterior(void *impl, double *mean, gmm_band *cov)
{
    stack_impl *c = impl;
    if (!c->sqrt_work)
        return gmm_error(GMM_EINVAL, "stacked latent: no evaluation before its posterior");
    return gmm_marglik_posterior(c->sqrt_work->w, mean, cov);
}

gmm_status stack_sq_posterior_solve(void *impl, double *v)
{
    stack_impl *c = impl;
    if (!c->sqrt_work)
        return gmm_error(GMM_EINVAL, "stacked latent: no evaluation before its posterior");
    return gmm_marglik_posterior_solve(c->sqrt_work->w, v);
}

/* The assembled prior is what this form avoids: refused, naming the model. */
static gmm_status refuse(const char *what)
{
    return gmm_error(GMM_EINVAL, "%s: a stacked model with a damped kernel (a constant, cosine "
                                 "or periodic factor not multiplied by a kernel with process "
                                 "noise) has no accurate assembled precision: it takes the "
                                 "square-root form (HMC whitens by the prior, the prior "
                                 "metric; VI goes through the prior's square root)",
                     what);
}

gmm_status stack_sq_prior(void *impl, const double *theta, gmm_band *Q, double *logdet)
{
    (void)impl, (void)theta, (void)Q, (void)logdet;
    return refuse("the stacked prior");
}

gmm_status stack_sq_prior_rev(void *impl, const gmm_band *Qbar, double logdetbar,
                              double *thetabar)
{
    (void)impl, (void)Qbar, (void)logdetbar, (void)thetabar;
    return refuse("the stacked prior");
}

const char *stack_sq_factorisation(const void *impl, double *bound)
{
    (void)impl;
    if (bound)
        *bound = 0.0;
    return "square-root";
}

/* Every row is smoothed in this form. */
gmm_status stack_sq_wls_rows(void *impl, const double *theta, double obs_prec, int *rows)
{
    (void)impl, (void)theta, (void)obs_prec;
    *rows = 1;
    return GMM_OK;
}
