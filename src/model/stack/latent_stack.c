/* latent_stack.c -- the stacked latent (stack.h) as a gmm_latent: the
 * joint ordering, the banded assembly of Q and its reverse mode, the exact
 * Gaussian likelihood (constrained when components are intrinsic) and the
 * whitening of proper stacks.
 *
 * CONSTRAINED LIKELIHOOD.  With k constraints A x = 0, pinned latents S and
 * Q^ = Q with S's rows and columns replaced by the identity's (banded, PD:
 * N_S invertible), the prior's normaliser on the subspace is
 *
 *     log det(V'QV) + log det(AA') = log det Q^ + 2 log|det AN| - 2 log|det N_S|
 *
 * (the second and third terms constants of the components), handed to
 * gmm_marglik_eval as the prior's log-determinant, which conditions on
 * A x = 0 (gmm_marglik_constrain, with S as the pins).  Gradient: marglik's dlogp/dQ,
 * plus log det Q^ / 2 through chol(Q^)'s reverse with the pinned rows and
 * columns dropped (they are constants).
 *
 * WHITENING.  Proper stacks: W = L^-T, L L' = Q, as graph latents
 * (latent_gmrf.c).  With constraints: W = M L^^-T P_S (stack_whiten_setup).
 * The glue common to both is latent_asm.c's. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"


static void stack_free_impl(void *p)
{
    stack_impl *c = p;
    if (!c)
        return;
    for (size_t k = 0; c->comp && k < c->K; k++)
        stack_comp_free(&c->comp[k]);
    stack_sq_free(c->sqw);
    gmm_free(c->eidx);
    gmm_free(c->hbuf);
    gmm_free(c->sqloc);
    gmm_free(c->comp);
    gmm_free(c->perm);
    gmm_free(c->A);
    gmm_free(c->pin);
    gmm_free(c->gaptr);
    gmm_free(c->gaidx);
    gmm_free(c->gaval);
    gmm_free(c->gnptr);
    gmm_free(c->gnidx);
    gmm_free(c->gnval);
    gmm_free(c->gnb);
    gmm_free(c->ccomp);
    gmm_free(c->blk0);
    gmm_free(c->theta);
    latent_asm_gauss_free(&c->as.gs);
    gmm_band_free(c->Qh);
    gmm_band_free(c->Qhbar);
    gmm_band_free(c->wL);
    gmm_band_free(c->wLb);
    gmm_free(c->wx);
    gmm_free(c);
}

/* ---- assembly ------------------------------------------------------------- */

gmm_status stack_assemble(stack_impl *c, const double *theta, gmm_band *Q, int rest)
{
    gmm_status st;
    gmm_band_set_zero(Q);
    for (size_t k = 0; k < c->K; k++) {
        stack_comp *m = &c->comp[k];
        const double *th = theta + m->par0;
        if (rest && m->damped) {
            for (size_t j = 0; j < m->n; j++) {
                size_t g = c->iperm[m->off + j];
                *gmm_band_ptr(Q, g, g) = 1.0;
            }
            continue;
        }
        if (m->model == GMM_STACK_GRAPH || m->model == GMM_STACK_KERNEL) {
            if (m->model == GMM_STACK_GRAPH ? (st = gmm_gmrf_assemble(m->g, th, m->gQ))
                                            : (st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            for (size_t s = 0; s < m->nslot; s++)
                *gmm_band_ptr(Q, m->gi[s], m->gj[s]) += *gmm_band_ptr(m->gQ, m->gr[s], m->gc[s]);
            continue;
        }
        double cg[STACK_NGROUP], dc[2 * STACK_NGROUP];
        if ((st = stack_comp_coef(m, th, cg, dc)))
            return st;
        for (size_t s = 0; s < m->nslot; s++)
            *gmm_band_ptr(Q, m->gi[s], m->gj[s]) += cg[m->sg[s]] * m->sv[s];
    }
    return GMM_OK;
}

static gmm_status assemble(void *ctx, const double *theta, gmm_band *Q)
{
    return stack_assemble(ctx, theta, Q, 0);
}

static gmm_status assemble_rest(void *ctx, const double *theta, gmm_band *Q)
{
    return stack_assemble(ctx, theta, Q, 1);
}

gmm_status stack_assemble_rev(stack_impl *c, const double *theta, const gmm_band *Qbar,
                              double *thetabar, int rest)
{
    gmm_status st;
    for (size_t k = 0; k < c->K; k++) {
        stack_comp *m = &c->comp[k];
        const double *th = theta + m->par0;
        if (rest && m->damped)
            continue;
        if (m->model == GMM_STACK_GRAPH || m->model == GMM_STACK_KERNEL) {
            /* the SSM's reverse follows its own forward call at th (this
             * function runs at other thetas too: the whitening's) */
            if (m->model == GMM_STACK_KERNEL && (st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            gmm_band_set_zero(m->gQbar);
            for (size_t s = 0; s < m->nslot; s++)
                *gmm_band_ptr(m->gQbar, m->gr[s], m->gc[s]) =
                    *gmm_band_ptr(Qbar, m->gi[s], m->gj[s]);
            if (m->model == GMM_STACK_GRAPH
                    ? (st = gmm_gmrf_assemble_rev(m->g, th, m->gQbar, thetabar + m->par0))
                    : (st = gmm_ssm_prior_rev(m->ssm, m->gQbar, 0.0, thetabar + m->par0)))
                return st;
            continue;
        }
        double cg[STACK_NGROUP], dc[2 * STACK_NGROUP], gb[STACK_NGROUP] = {0};
        if ((st = stack_comp_coef(m, th, cg, dc)))
            return st;
        for (size_t s = 0; s < m->nslot; s++)
            gb[m->sg[s]] += *gmm_band_ptr(Qbar, m->gi[s], m->gj[s]) * m->sv[s];
        for (size_t p = 0; p < m->npar; p++)
            for (size_t g = 0; g < STACK_NGROUP; g++)
                thetabar[m->par0 + p] += gb[g] * dc[g * 2 + p];
    }
    return GMM_OK;
}

/* thetabar += sum over stored slots of Qbar dQ/dtheta. */
static gmm_status assemble_rev(void *ctx, const double *theta, const gmm_band *Qbar,
                               double *thetabar)
{
    return stack_assemble_rev(ctx, theta, Qbar, thetabar, 0);
}

static gmm_status assemble_rev_rest(void *ctx, const double *theta, const gmm_band *Qbar,
                                    double *thetabar)
{
    return stack_assemble_rev(ctx, theta, Qbar, thetabar, 1);
}

static gmm_status band_work(stack_impl *c);

/* With constraints, log|Q| on the subspace (latent.h) from Q^. */
static gmm_status stack_prior(void *p, const double *theta, gmm_band *Q, double *logdet)
{
    stack_impl *c = p;
    *logdet = NAN;
    gmm_status st = assemble(c, theta, Q);
    if (st == GMM_OK && c->ncon && (st = band_work(c)) == GMM_OK)
        st = stack_pinned_logdet(c, Q, logdet);
    c->prior_ok = st == GMM_OK;
    if (c->prior_ok)
        memcpy(c->theta, theta, c->nparam * sizeof *theta);
    return st;
}

static gmm_status stack_prior_rev(void *p, const gmm_band *Qbar, double logdetbar,
                                  double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    if (!c->prior_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: no gmm_latent_prior before");
    if ((st = assemble_rev(c, c->theta, Qbar, thetabar)) || logdetbar == 0.0)
        return st;
    gmm_band_set_zero(c->as.gs.Qbar);
    if ((st = stack_pinned_logdet_rev(c, logdetbar, c->as.gs.Qbar)))
        return st;
    return assemble_rev(c, c->theta, c->as.gs.Qbar, thetabar);
}

/* ---- the pinned matrix and the constrained normaliser ---------------------- */

static gmm_status band_work(stack_impl *c)
{
    if (c->as.gs.Q)
        return GMM_OK;
    c->as.gs.Q = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    c->as.gs.Qbar = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    if (c->ncon) {
        c->Qh = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
        c->Qhbar = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    }
    c->as.gs.w = gmm_marglik_work_alloc(c->n, c->bw);
    size_t no = c->nrows * c->as.map.width;
    c->as.gs.ocoef = gmm_malloc(no > 0 ? no : 1, sizeof *c->as.gs.ocoef);
    if (!c->as.gs.Q || !c->as.gs.Qbar || (c->ncon && (!c->Qh || !c->Qhbar)) || !c->as.gs.w ||
        !c->as.gs.ocoef)
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's bands (n = %zu, "
                                     "bandwidth %zu)",
                         c->n, c->bw);
    return gmm_marglik_constrain(c->as.gs.w, c->ncon, c->A, c->pin);
}

/* Q^ from Q into c->Qh, factorised in place (it turns LOWER); log det Q^ +
 * the constants into *ld. */
gmm_status stack_pinned_logdet(stack_impl *c, const gmm_band *Q, double *ld)
{
    gmm_status st;
    if ((st = gmm_band_copy(c->Qh, Q)))
        return st;
    latent_asm_pin(&c->as, c->Qh);
    if ((st = gmm_band_chol_decomp_work(c->Qh, c->Qh, latent_asm_chol_work(&c->as, c->bw))))
        return gmm_error_at(st, gmm_error_index(), "the intrinsic prior is not positive "
                                                   "definite on its constrained subspace");
    *ld = gmm_band_chol_logdet(c->Qh) + c->ldconst;
    return GMM_OK;
}

/* Qbar += ldbar d(log det Q^)/dQ (pinned rows and columns dropped), after
 * pinned_logdet. */
gmm_status stack_pinned_logdet_rev(stack_impl *c, double ldbar, gmm_band *Qbar)
{
    gmm_status st;
    gmm_band *B = c->Qhbar;
    if ((st = gmm_band_set_kind(B, GMM_BAND_LOWER)))
        return st;
    gmm_band_set_zero(B);
    if ((st = gmm_band_chol_logdet_rev(c->Qh, ldbar, B)))
        return st;
    if ((st = gmm_band_chol_decomp_rev_work(c->Qh, B, B, latent_asm_chol_work(&c->as, c->bw))))
        return st;
    for (size_t i = 0; i < c->ncon; i++)
        latent_asm_zero_rowcol(B, c->pin[i]);
    return gmm_band_axpy(1.0, 1.0, B, Qbar);
}

/* ---- Gaussian likelihood --------------------------------------------------- */

/* The Cholesky's rounding bound over the kernel components (ssm.h,
 * FACTORISATION; the SSM's rule): eps sum_i P_ii Pinf_ii over their
 * latents, P = Q + H'H / noise at the observed rows (stored in c->as.gs.Q, before
 * any factorisation), Pinf the kernel's stationary covariance (an upper
 * bound on the posterior variance). */
static gmm_status kernel_bound(stack_impl *c, const double *theta, const double *y,
                               double noise, double *bound)
{
    gmm_status st;
    double s = 0.0;
    *bound = 0.0;
    for (size_t k = 0; k < c->K; k++) {
        stack_comp *q = &c->comp[k];
        if (q->model != GMM_STACK_KERNEL)
            continue;
        size_t d = q->d;
        double *P = q->kscr, *obs = P + d * d;
        if ((st = gmm_kernel_stat(q->kern, theta + q->par0, gmm_ssm_damp(q->ssm), q->kw, P,
                                  NULL)))
            return st;
        for (size_t i = 0; i < q->n; i++) {
            size_t g = c->iperm[q->off + i];
            double v = P[gmm_ssm_state_var(q->ssm, i % d) * (d + 1)];
            s += gmm_band_get(c->as.gs.Q, g, g) * v;
        }
        /* the data's part, row by row: H'H / noise on the state's diagonal */
        for (size_t p = 0; p < d; p++)
            obs[p] = 0.0;
        for (size_t e = 0; e < q->nread; e++)
            obs[q->hidx[e]] = q->hval[e] * q->hval[e];
        double h = 0.0;
        for (size_t p = 0; p < d; p++)
            h += obs[p] * P[gmm_ssm_state_var(q->ssm, p) * (d + 1)];
        for (size_t r = 0; r < c->nrows; r++)
            if (!isnan(y[r]))
                s += h / noise;
    }
    *bound = DBL_EPSILON * s;
    return GMM_OK;
}

static const char *stack_factorisation(const void *p, double *bound)
{
    const stack_impl *c = p;
    if (bound)
        *bound = c->bound;
    return "cholesky";
}

/* latent_asm's normaliser: the kernels' rounding bound and, with
 * constraints, the prior's log-determinant on the subspace (top). */
static gmm_status stack_normaliser(void *p, const double *theta, const double *y, double noise,
                                   const gmm_band *Q, double *ld, int *given)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = kernel_bound(c, theta, y, noise, &c->bound)))
        return st;
    *given = c->ncon > 0;
    return c->ncon ? stack_pinned_logdet(c, Q, ld) : GMM_OK;
}

static gmm_status stack_normaliser_rev(void *p, double ldbar, gmm_band *Qbar)
{
    return stack_pinned_logdet_rev(p, ldbar, Qbar);
}

static gmm_status band_work_op(void *p)
{
    return band_work(p);
}

/* ---- whitening -------------------------------------------------------------- */

/* In-place LU (no pivoting) of the kc x kc block at c0 of the k x k M: the
 * blocks NS and AN are diagonal or unit triangular (stack_comp.c). */
static gmm_status block_lu(double *M, size_t k, size_t c0, size_t kc)
{
    for (size_t j = c0; j < c0 + kc; j++) {
        if (!(fabs(M[j * k + j]) > 0.0))
            return gmm_error(GMM_EDOM, "whitening: singular constraint block");
        for (size_t i = j + 1; i < c0 + kc; i++) {
            M[i * k + j] /= M[j * k + j];
            for (size_t t = j + 1; t < c0 + kc; t++)
                M[i * k + t] -= M[i * k + j] * M[j * k + t];
        }
    }
    return GMM_OK;
}

/* b <- M^-1 b (trans: M^-T b) on the block (b indexed from c0). */
static void block_solve(const double *M, size_t k, size_t c0, size_t kc, int trans, double *b)
{
    if (!trans) {
        for (size_t i = 0; i < kc; i++)
            for (size_t t = 0; t < i; t++)
                b[i] -= M[(c0 + i) * k + c0 + t] * b[t];
        for (size_t i = kc; i-- > 0;) {
            for (size_t t = i + 1; t < kc; t++)
                b[i] -= M[(c0 + i) * k + c0 + t] * b[t];
            b[i] /= M[(c0 + i) * k + c0 + i];
        }
    } else {
        for (size_t i = 0; i < kc; i++) {
            for (size_t t = 0; t < i; t++)
                b[i] -= M[(c0 + t) * k + c0 + i] * b[t];
            b[i] /= M[(c0 + i) * k + c0 + i];
        }
        for (size_t i = kc; i-- > 0;)
            for (size_t t = i + 1; t < kc; t++)
                b[i] -= M[(c0 + t) * k + c0 + i] * b[t];
    }
}

/* N's entry e of constraint ci at the setup's theta. */
static double nval(const stack_impl *c, size_t ci, size_t e)
{
    return c->gnb[e] ? c->walpha[ci] * c->gnval[e] : c->gnval[e];
}

/* wbeta = (AN)^-1 A x. */
static void m_beta(stack_impl *c, const double *x)
{
    for (size_t b = 0; b < c->nblk; b++) {
        size_t c0 = c->blk0[b], kc = c->blk0[b + 1] - c0;
        double *be = c->wbeta + c0;
        for (size_t i = 0; i < kc; i++) {
            double s = 0.0;
            for (size_t e = c->gaptr[c0 + i]; e < c->gaptr[c0 + i + 1]; e++)
                s += c->gaval[e] * x[c->gaidx[e]];
            be[i] = s;
        }
        block_solve(c->wAN, c->ncon, c0, kc, 0, be);
    }
}

/* x <- M x = x - N (AN)^-1 A x. */
static void apply_m(stack_impl *c, double *x)
{
    m_beta(c, x);
    for (size_t b = 0; b < c->nblk; b++) {
        size_t c0 = c->blk0[b], kc = c->blk0[b + 1] - c0;
        const double *be = c->wbeta + c0;
        for (size_t i = 0; i < kc; i++)
            for (size_t e = c->gnptr[c0 + i]; e < c->gnptr[c0 + i + 1]; e++)
                x[c->gnidx[e]] -= nval(c, c0 + i, e) * be[i];
    }
}

/* g <- M' g = g - A' (AN)^-T N' g. */
static void apply_mt(stack_impl *c, double *g)
{
    for (size_t b = 0; b < c->nblk; b++) {
        size_t c0 = c->blk0[b], kc = c->blk0[b + 1] - c0;
        double *be = c->wbeta + c0;
        for (size_t i = 0; i < kc; i++) {
            double s = 0.0;
            for (size_t e = c->gnptr[c0 + i]; e < c->gnptr[c0 + i + 1]; e++)
                s += nval(c, c0 + i, e) * g[c->gnidx[e]];
            be[i] = s;
        }
        block_solve(c->wAN, c->ncon, c0, kc, 1, be);
        for (size_t i = 0; i < kc; i++)
            for (size_t e = c->gaptr[c0 + i]; e < c->gaptr[c0 + i + 1]; e++)
                g[c->gaidx[e]] -= c->gaval[e] * be[i];
    }
}

/* The setup's N S-rows and A N blocks, factorised. */
static gmm_status whiten_blocks(stack_impl *c, const double *theta)
{
    gmm_status st;
    size_t k = c->ncon;
    for (size_t ci = 0; ci < k; ci++) {
        const stack_comp *m = &c->comp[c->ccomp[ci]];
        c->walpha[ci] = m->model == GMM_STACK_BYM2
                            ? sqrt(theta[m->par0] * theta[m->par0 + 1])
                            : 1.0;
    }
    memset(c->wNS, 0, k * k * sizeof *c->wNS);
    memset(c->wAN, 0, k * k * sizeof *c->wAN);
    double *col = c->wx; /* one column of N at a time, scattered */
    memset(col, 0, c->n * sizeof *col);
    for (size_t b = 0; b < c->nblk; b++) {
        size_t c0 = c->blk0[b], kc = c->blk0[b + 1] - c0;
        for (size_t j = c0; j < c0 + kc; j++) {
            for (size_t e = c->gnptr[j]; e < c->gnptr[j + 1]; e++)
                col[c->gnidx[e]] += nval(c, j, e);
            for (size_t i = c0; i < c0 + kc; i++) {
                double s = 0.0;
                for (size_t e = c->gaptr[i]; e < c->gaptr[i + 1]; e++)
                    s += c->gaval[e] * col[c->gaidx[e]];
                c->wAN[i * k + j] = s;
                c->wNS[i * k + j] = col[c->pin[i]];
            }
            for (size_t e = c->gnptr[j]; e < c->gnptr[j + 1]; e++)
                col[c->gnidx[e]] = 0.0;
        }
        if ((st = block_lu(c->wAN, k, c0, kc)) || (st = block_lu(c->wNS, k, c0, kc)))
            return st;
    }
    return GMM_OK;
}

/* WITH CONSTRAINTS the prior on {A x = 0} is x = M z, M = I - N (AN)^-1 A,
 * z_S = 0 and z_-S ~ N(0, Q_-S^-1) (the pinned GMRF): W = M L^^-T P_S
 * (P_S zeroes the pinned entries of v, which stay free N(0, 1) coordinates
 * the likelihood never reads), W^-1 x = L^' (x - N N_S^-1 x_S). */
static gmm_status stack_whiten_setup(void *p, const double *theta)
{
    stack_impl *c = p;
    gmm_status st;
    size_t k = c->ncon;
    c->wready = c->wsz_ok = c->wsg_ok = 0;
    if (!c->wL) {
        c->wL = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
        c->wLb = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_LOWER);
        c->wx = gmm_malloc(6 * c->n + c->nparam + 2 * k * k + 2 * k + 1, sizeof *c->wx);
        if (!c->wL || !c->wLb || !c->wx) {
            /* none of it kept: the next setup allocates again */
            gmm_band_free(c->wL);
            gmm_band_free(c->wLb);
            gmm_free(c->wx);
            c->wL = c->wLb = NULL;
            c->wx = NULL;
            return gmm_error(GMM_ENOMEM, "out of memory for the whitening workspace (two bands "
                                         "of %zu x %zu, bandwidth %zu)",
                             c->n, c->n, c->bw);
        }
        c->wwork = c->wx + c->n;
        c->wsolve = c->wwork + c->n;
        c->wsz = c->wsolve + c->n;
        c->wsg = c->wsz + c->n;
        c->wsu = c->wsg + c->n;
        c->wtheta = c->wsu + c->n;
        c->wNS = c->wtheta + c->nparam;
        c->wAN = c->wNS + k * k;
        c->wbeta = c->wAN + k * k;
        c->walpha = c->wbeta + k;
    }
    /* Q^ (Q itself without constraints) assembled in wL and factorised */
    if ((st = latent_asm_factor(&c->as, theta, c->wL)) ||
        (k && (st = whiten_blocks(c, theta))))
        return st;
    memcpy(c->wtheta, theta, c->nparam * sizeof *theta);
    c->wready = 1;
    return GMM_OK;
}

static gmm_status stack_whiten(void *p, const double *v, double *x)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, v, x, "gmm_latent_whiten");
    if (st || (st = latent_asm_whiten_z(&c->as, c->wL, NULL, v, x)))
        return st;
    memcpy(c->wsz, x, c->n * sizeof *x);
    c->wsz_ok = 1;
    if (c->ncon)
        apply_m(c, x);
    return GMM_OK;
}

static gmm_status stack_unwhiten(void *p, const double *x, double *v)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, x, v, "gmm_latent_unwhiten");
    if (st)
        return st;
    if (x == v)
        return gmm_error(GMM_EINVAL, "gmm_latent_unwhiten: x and v alias");
    const double *z = x;
    if (c->ncon) {
        double *zz = c->wx;
        memcpy(zz, x, c->n * sizeof *zz);
        for (size_t b = 0; b < c->nblk; b++) {
            size_t c0 = c->blk0[b], kc = c->blk0[b + 1] - c0;
            double *be = c->wbeta + c0;
            for (size_t i = 0; i < kc; i++)
                be[i] = x[c->pin[c0 + i]];
            block_solve(c->wNS, c->ncon, c0, kc, 0, be);
            for (size_t i = 0; i < kc; i++)
                for (size_t e = c->gnptr[c0 + i]; e < c->gnptr[c0 + i + 1]; e++)
                    zz[c->gnidx[e]] -= nval(c, c0 + i, e) * be[i];
        }
        z = zz;
    }
    return gmm_band_gemv(GMM_TRANS, 1.0, c->wL, z, 0.0, v);
}

static gmm_status stack_whiten_t(void *p, const double *g, double *u)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, g, u, "gmm_latent_whiten_t");
    if (st)
        return st;
    memcpy(c->wsg, g, c->n * sizeof *g);
    c->wsg_ok = 1;
    if (u != g)
        memcpy(u, g, c->n * sizeof *u);
    if (c->ncon)
        apply_mt(c, u);
    if ((st = gmm_band_tri_solve_vec(c->wL, GMM_NOTRANS, u)))
        return st;
    memcpy(c->wsu, u, c->n * sizeof *u);
    for (size_t i = 0; i < c->ncon; i++)
        u[c->pin[i]] = 0.0;
    return GMM_OK;
}

/* Reverse of x = M(theta) L^(theta)^-T P_S v: zbar = M' xbar through the
 * factor (solve's and Cholesky's reverse modes, pinned rows and columns
 * dropped: constants), and BYM2's N, whose b entries are alpha = sqrt(variance
 * phi) times constants: dx/dalpha = -N_b beta / alpha. */
static gmm_status stack_whiten_rev(void *p, const double *v, const double *xbar,
                                   double *thetabar)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready_rev(c->wready, c->wsz_ok, c->wsg_ok, v, xbar, thetabar);
    if (st)
        return st;
    size_t n = c->n;
    double *z = v ? c->wx : c->wsz, *zbar = c->wwork;
    if (v && (st = latent_asm_whiten_z(&c->as, c->wL, NULL, v, z)))
        return st;
    const double *g = xbar ? NULL : c->wsu; /* L^^-1 zbar, whiten_t's */
    if (!xbar)
        xbar = c->wsg;
    memcpy(zbar, xbar, n * sizeof *zbar);
    if (c->ncon) {
        m_beta(c, z); /* alpha's adjoint needs beta = (AN)^-1 A z */
        for (size_t ci = 0; ci < c->ncon; ci++) {
            const stack_comp *m = &c->comp[c->ccomp[ci]];
            if (m->model != GMM_STACK_BYM2)
                continue;
            double s = 0.0;
            for (size_t e = c->gnptr[ci]; e < c->gnptr[ci + 1]; e++)
                if (c->gnb[e])
                    s += xbar[c->gnidx[e]] * c->gnval[e];
            double ab = -s * c->wbeta[ci]; /* d(xbar . x)/dalpha */
            double sv = c->wtheta[m->par0], ph = c->wtheta[m->par0 + 1];
            double al = c->walpha[ci];
            thetabar[m->par0] += ab * al / (2.0 * sv);
            thetabar[m->par0 + 1] += ab * al / (2.0 * ph);
        }
        apply_mt(c, zbar);
    }
    if ((st = latent_asm_factor_rev(&c->as, c->wL, z, zbar, g, c->wLb, c->wsolve)))
        return st;
    return c->as.assemble_rev(c, c->wtheta, c->wLb, thetabar);
}

static const gmm_latent_ops stack_ops = {
    .family = "stack",
    .free = stack_free_impl,
    .prior = stack_prior,
    .prior_rev = stack_prior_rev,
    .gaussian = latent_asm_gaussian,
    .gaussian_posterior = latent_asm_posterior,
    .gaussian_posterior_solve = latent_asm_posterior_solve,
    .factorisation = stack_factorisation,
    .whiten_setup = stack_whiten_setup,
    .whiten = stack_whiten,
    .whiten_t = stack_whiten_t,
    .unwhiten = stack_unwhiten,
    .whiten_rev = stack_whiten_rev,
};

/* ---- the square-root form's operations (stack_sqrt.c) ---------------------- */

static gmm_status sq_refuse(const char *what)
{
    return gmm_error(GMM_EINVAL, "%s: a stacked model with a damped kernel (a constant, cosine "
                                 "or periodic factor not multiplied by a kernel with process "
                                 "noise) has no accurate assembled precision: it takes the "
                                 "square-root form (hmc whitens by the prior, --metric prior; "
                                 "vi goes through the prior's square root)",
                     what);
}

static gmm_status sq_prior_op(void *p, const double *theta, gmm_band *Q, double *logdet)
{
    (void)p, (void)theta, (void)Q, (void)logdet;
    return sq_refuse("the stacked prior");
}

static gmm_status sq_prior_rev_op(void *p, const gmm_band *Qbar, double logdetbar,
                                  double *thetabar)
{
    (void)p, (void)Qbar, (void)logdetbar, (void)thetabar;
    return sq_refuse("the stacked prior");
}

/* WHITENING in the square-root form: the prior is block diagonal over the
 * components, so W is too.  The other components' part is the assembled
 * stacks' (constraints included), on Q with the damped kernels' latents the
 * identity's (latent_asm's assembly is stack_assemble's rest for such a
 * stack), which leaves those latents as they come; each damped kernel's
 * innovations form (gmm_ssm_whiten), exact at any damping, then takes them
 * in its local order.  v and x (g and u) may alias: the identity leaves the
 * kernels' entries as they were. */
static gmm_status sq_per_kernel(stack_impl *c, const double *in, double *out,
                                gmm_status (*op)(gmm_ssm *, const double *, double *))
{
    gmm_status st;
    for (size_t k = 0; k < c->K; k++) {
        const stack_comp *m = &c->comp[k];
        if (!m->damped)
            continue;
        double *a = c->sqloc, *b = a + m->n;
        for (size_t j = 0; j < m->n; j++)
            a[j] = in[c->iperm[m->off + j]];
        if ((st = op(m->ssm, a, b)))
            return st;
        for (size_t j = 0; j < m->n; j++)
            out[c->iperm[m->off + j]] = b[j];
    }
    return GMM_OK;
}

static gmm_status sq_whiten_setup(void *p, const double *theta)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = stack_whiten_setup(c, theta)))
        return st;
    for (size_t k = 0; k < c->K; k++)
        if (c->comp[k].damped &&
            (st = gmm_ssm_whiten_setup(c->comp[k].ssm, theta + c->comp[k].par0))) {
            c->wready = 0;
            return st;
        }
    return GMM_OK;
}

static gmm_status sq_whiten(void *p, const double *v, double *x)
{
    gmm_status st = stack_whiten(p, v, x);
    return st ? st : sq_per_kernel(p, v, x, gmm_ssm_whiten);
}

static gmm_status sq_whiten_t(void *p, const double *g, double *u)
{
    gmm_status st = stack_whiten_t(p, g, u);
    return st ? st : sq_per_kernel(p, g, u, gmm_ssm_whiten_t);
}

static gmm_status sq_unwhiten(void *p, const double *x, double *v)
{
    gmm_status st = stack_unwhiten(p, x, v);
    return st ? st : sq_per_kernel(p, x, v, gmm_ssm_unwhiten);
}

/* The kernels' x are their own: the other part's reverse sees them only
 * through Q's identity entries, which no parameter moves.  NULL v or xbar:
 * each part's saved vectors (the SSM keeps its own whiten's and
 * whiten_t's). */
static gmm_status sq_whiten_rev(void *p, const double *v, const double *xbar, double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = stack_whiten_rev(c, v, xbar, thetabar)))
        return st;
    for (size_t k = 0; k < c->K; k++) {
        const stack_comp *m = &c->comp[k];
        if (!m->damped)
            continue;
        double *a = c->sqloc, *b = a + m->n;
        for (size_t j = 0; v && j < m->n; j++)
            a[j] = v[c->iperm[m->off + j]];
        for (size_t j = 0; xbar && j < m->n; j++)
            b[j] = xbar[c->iperm[m->off + j]];
        if ((st = gmm_ssm_whiten_rev(m->ssm, v ? a : NULL, xbar ? b : NULL,
                                     thetabar + m->par0)))
            return st;
    }
    return GMM_OK;
}

/* The rows' coefficients at theta: constant ones as built, a demodulated
 * kernel's h(t_r) (its reads cover the whole state). */
static gmm_status stack_obs_coef(void *p, const double *theta, double *coef)
{
    stack_impl *c = p;
    gmm_status st;
    for (size_t k = 0, e0 = 0; k < c->K; e0 += c->comp[k].nread, k++) {
        stack_comp *q = &c->comp[k];
        if (!q->modulated) {
            for (size_t r = 0; r < c->nrows; r++)
                for (size_t e = 0; e < q->nread; e++)
                    coef[c->eidx[r * c->R + e0 + e]] = q->hval[e];
            continue;
        }
        if ((st = gmm_ssm_obs_rows(q->ssm, theta + q->par0, c->hbuf)))
            return st;
        for (size_t r = 0; r < c->nrows; r++)
            for (size_t e = 0; e < q->nread; e++)
                coef[c->eidx[r * c->R + e0 + e]] = c->hbuf[r * q->d + q->hidx[e]];
    }
    return GMM_OK;
}

static gmm_status stack_obs_coef_rev(void *p, const double *theta, const double *coefbar,
                                     double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    for (size_t k = 0, e0 = 0; k < c->K; e0 += c->comp[k].nread, k++) {
        stack_comp *q = &c->comp[k];
        if (!q->modulated)
            continue;
        memset(c->hbuf, 0, c->nrows * q->d * sizeof *c->hbuf);
        for (size_t r = 0; r < c->nrows; r++)
            for (size_t e = 0; e < q->nread; e++)
                c->hbuf[r * q->d + q->hidx[e]] = coefbar[c->eidx[r * c->R + e0 + e]];
        if ((st = gmm_ssm_obs_rows_rev(q->ssm, theta + q->par0, c->hbuf, thetabar + q->par0)))
            return st;
    }
    return GMM_OK;
}

static gmm_status sq_gaussian_op(void *p, const double *theta, const double *y, double noise,
                                 double *loglik, double *thetabar, double *noisebar)
{
    stack_impl *c = p;
    return stack_sq_gaussian(c, c->lat, theta, y, noise, loglik, thetabar, noisebar);
}

static gmm_status sq_posterior_op(void *p, double *mean, gmm_band *cov)
{
    return stack_sq_posterior(p, mean, cov);
}

static gmm_status sq_posterior_solve_op(void *p, double *v)
{
    return stack_sq_posterior_solve(p, v);
}

static const char *sq_factorisation(const void *p, double *bound)
{
    (void)p;
    if (bound)
        *bound = 0.0;
    return "square-root";
}

static gmm_status sq_wls_rows_op(void *p, const double *theta, double obs_prec, int *rows)
{
    (void)p, (void)theta, (void)obs_prec;
    *rows = 1;
    return GMM_OK;
}

static gmm_status sq_wls_op(void *p, const double *theta, const double *y, const double *wt,
                            int record, double *loglik, double *mean)
{
    stack_impl *c = p;
    (void)record;
    return stack_sq_wls(c, c->lat, theta, y, wt, loglik, mean);
}

static gmm_status sq_wls_quad_op(void *p, const double *x, double *q)
{
    return stack_sq_wls_quad(p, x, q);
}

static gmm_status sq_wls_var_op(void *p, double *fvar)
{
    stack_impl *c = p;
    return stack_sq_wls_var(c, c->lat, fvar);
}

static gmm_status sq_wls_adjoint_op(void *p, const double *rw, double *u, double *thetabar)
{
    stack_impl *c = p;
    return stack_sq_wls_adjoint(c, c->lat, rw, u, thetabar);
}

static gmm_status sq_wls_rowcov_op(void *p, double *zeta, double *sh)
{
    stack_impl *c = p;
    return stack_sq_wls_rowcov(c, c->lat, zeta, sh);
}

static gmm_status sq_prior_rows_op(void *p, const double *theta, gmm_prior_rows *G,
                                   double *logdet)
{
    stack_impl *c = p;
    return stack_sq_prior_rows(c, c->lat, theta, G, logdet);
}

static gmm_status sq_rows_rev_q_op(void *p, const gmm_band *S, const double *m,
                                   const gmm_band *D, double *thetabar)
{
    return stack_sq_rows_rev_q(p, S, m, D, thetabar);
}

static const gmm_latent_ops stack_sq_ops = {
    .family = "stack",
    .free = stack_free_impl,
    .prior = sq_prior_op,
    .prior_rev = sq_prior_rev_op,
    .obs_coef = stack_obs_coef,
    .obs_coef_rev = stack_obs_coef_rev,
    .gaussian = sq_gaussian_op,
    .gaussian_posterior = sq_posterior_op,
    .gaussian_posterior_solve = sq_posterior_solve_op,
    .factorisation = sq_factorisation,
    .whiten_setup = sq_whiten_setup,
    .whiten = sq_whiten,
    .whiten_t = sq_whiten_t,
    .unwhiten = sq_unwhiten,
    .whiten_rev = sq_whiten_rev,
    .wls_rows = sq_wls_rows_op,
    .wls = sq_wls_op,
    .wls_quad = sq_wls_quad_op,
    .wls_var = sq_wls_var_op,
    .wls_adjoint = sq_wls_adjoint_op,
    .wls_rowcov = sq_wls_rowcov_op,
    .prior_rows = sq_prior_rows_op,
    .prior_rows_rev_q = sq_rows_rev_q_op,
};

/* ---- building ---------------------------------------------------------------- */

/* The unpermuted stacked index of data row r's entry e of component q. */
static size_t read_at(const stack_comp *q, size_t r, size_t e)
{
    return q->off + q->row_loc[r] + q->hidx[e];
}

/* The joint order: RCM over the components' slots and the data's cliques. */
static gmm_status order(stack_impl *c)
{
    gmm_status st;
    size_t m = 0, K = c->K;
    for (size_t k = 0; k < K; k++)
        for (size_t s = 0; s < c->comp[k].nslot; s++)
            m += c->comp[k].si[s] != c->comp[k].sj[s];
    size_t R = 0; /* entries a row reads */
    for (size_t k = 0; k < K; k++)
        R += c->comp[k].nread;
    m += c->nrows * (R * (R - 1) / 2);
    size_t *ei = gmm_malloc(2 * (m ? m : 1), sizeof *ei), *ej = ei ? ei + (m ? m : 1) : NULL;
    gmm_graph *g = NULL;
    if (!ei)
        return gmm_error(GMM_ENOMEM, "out of memory ordering the stacked latent (%zu edges)", m);
    size_t e = 0;
    for (size_t k = 0; k < K; k++) {
        const stack_comp *q = &c->comp[k];
        for (size_t s = 0; s < q->nslot; s++)
            if (q->si[s] != q->sj[s]) {
                ei[e] = q->off + q->si[s];
                ej[e++] = q->off + q->sj[s];
            }
    }
    for (size_t r = 0; r < c->nrows; r++)
        for (size_t a = 0; a < K; a++)
            for (size_t ea = 0; ea < c->comp[a].nread; ea++)
                for (size_t b = a; b < K; b++)
                    for (size_t eb = b == a ? ea + 1 : 0; eb < c->comp[b].nread; eb++) {
                        ei[e] = read_at(&c->comp[a], r, ea);
                        ej[e++] = read_at(&c->comp[b], r, eb);
                    }
    /* a data row reading one latent twice (never across components) adds no edge */
    size_t e2 = 0;
    for (size_t i = 0; i < e; i++)
        if (ei[i] != ej[i]) {
            ei[e2] = ei[i];
            ej[e2++] = ej[i];
        }
    if (e2 == 0) {
        for (size_t i = 0; i < c->n; i++)
            c->perm[i] = c->iperm[i] = i;
        c->bw = 0;
        gmm_free(ei);
        return GMM_OK;
    }
    if ((st = gmm_graph_from_edges(c->n, e2, ei, ej, NULL, "stacked latent", NULL, &g)) ||
        (st = gmm_graph_rcm(g, c->perm, c->iperm)))
        goto done;
    c->bw = gmm_graph_bandwidth(g, c->iperm);
done:
    gmm_graph_free(g);
    gmm_free(ei);
    return st;
}

gmm_status gmm_latent_stack_alloc(size_t nrows, size_t nterm, const gmm_stack_term *terms,
                                  size_t limit, gmm_latent **out)
{
    gmm_status st;
    gmm_latent *l = NULL;
    if (!out || !terms || nterm == 0)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_alloc: NULL argument or no component");
    *out = NULL;
    size_t lim = limit ? limit : GMM_GMRF_BAND_LIMIT;
    stack_impl *c = gmm_calloc(1, sizeof *c);
    if (!c || !(c->comp = gmm_calloc(nterm, sizeof *c->comp))) {
        gmm_free(c);
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
    }
    c->K = nterm;
    c->nrows = nrows;
    for (size_t k = 0; k < nterm; k++) {
        stack_comp *q = &c->comp[k];
        if ((st = stack_comp_build(q, &terms[k], nrows, limit)))
            goto fail;
        q->off = c->n;
        q->par0 = c->nparam;
        c->n += q->n;
        c->nparam += q->npar;
        c->ncon += q->ncon;
        c->ldconst += q->ldconst;
        c->ldaa += q->ldaa;
    }
    c->perm = gmm_malloc(2 * (c->n ? c->n : 1), sizeof *c->perm);
    c->theta = gmm_malloc(c->nparam ? c->nparam : 1, sizeof *c->theta);
    if (!c->perm || !c->theta) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
        goto fail;
    }
    c->iperm = c->perm + c->n;
    if ((st = order(c)))
        goto fail;
    /* each row's window */
    size_t W = 1;
    for (size_t r = 0; r < nrows; r++) {
        size_t lo = SIZE_MAX, hi = 0;
        for (size_t k = 0; k < c->K; k++)
            for (size_t e = 0; e < c->comp[k].nread; e++) {
                size_t p = c->iperm[read_at(&c->comp[k], r, e)];
                lo = p < lo ? p : lo;
                hi = p > hi ? p : hi;
            }
        W = hi - lo + 1 > W ? hi - lo + 1 : W;
    }
    double band = (double)(c->bw + 1) * (double)c->n * sizeof(double);
    if (band > (double)lim) {
        st = gmm_error(GMM_ENOMEM, "the stacked latent (n = %zu, bandwidth %zu) needs %.0f MB "
                                   "per band; the limit is %.0f MB",
                       c->n, c->bw, band / 1e6, (double)lim / 1e6);
        goto fail;
    }
    /* every row reads nread latents of each component, distinct ones */
    size_t R = 0, dmax = 1;
    int varies = 0;
    for (size_t k = 0; k < c->K; k++) {
        R += c->comp[k].nread;
        c->sq |= c->comp[k].damped;
        varies |= c->comp[k].modulated;
        dmax = c->comp[k].d > dmax ? c->comp[k].d : dmax;
    }
    c->R = R;
    c->eidx = gmm_malloc(nrows * R + R + 1, sizeof *c->eidx);
    c->hbuf = varies ? gmm_malloc(nrows * dmax + 1, sizeof *c->hbuf) : NULL;
    size_t nbig = 1;
    for (size_t k = 0; k < c->K; k++)
        nbig = c->comp[k].damped && c->comp[k].n > nbig ? c->comp[k].n : nbig;
    c->sqloc = c->sq ? gmm_malloc(2 * nbig, sizeof *c->sqloc) : NULL;
    if (!c->eidx || (varies && !c->hbuf) || (c->sq && !c->sqloc)) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
        goto fail;
    }
    l = latent_new_sparse(c->sq ? &stack_sq_ops : &stack_ops, nrows, W, nrows * R, c->nparam);
    c->as.gs.ooff = gmm_malloc(nrows ? nrows : 1, sizeof *c->as.gs.ooff);
    c->as.gs.oy = gmm_malloc(nrows ? nrows : 1, sizeof *c->as.gs.oy);
    c->A = gmm_calloc(c->ncon * c->n > 0 ? c->ncon * c->n : 1, sizeof *c->A);
    c->pin = gmm_malloc(c->ncon ? c->ncon : 1, sizeof *c->pin);
    size_t nae = 0, nne = 0, k1 = c->ncon + 1;
    for (size_t k = 0; k < c->K; k++) {
        nae += c->comp[k].ncon ? c->comp[k].cptr[c->comp[k].ncon] : 0;
        nne += c->comp[k].ncon ? c->comp[k].nptr[c->comp[k].ncon] : 0;
    }
    c->gaptr = gmm_calloc(k1, sizeof *c->gaptr);
    c->gnptr = gmm_calloc(k1, sizeof *c->gnptr);
    c->ccomp = gmm_calloc(k1, sizeof *c->ccomp);
    c->blk0 = gmm_calloc(k1, sizeof *c->blk0);
    c->gaidx = gmm_malloc(nae + 1, sizeof *c->gaidx);
    c->gaval = gmm_malloc(nae + 1, sizeof *c->gaval);
    c->gnidx = gmm_malloc(nne + 1, sizeof *c->gnidx);
    c->gnval = gmm_malloc(nne + 1, sizeof *c->gnval);
    c->gnb = gmm_malloc(nne + 1, sizeof *c->gnb);
    if (!l || !c->as.gs.ooff || !c->as.gs.oy || !c->A || !c->pin || !c->gaptr || !c->gnptr ||
        !c->ccomp || !c->blk0 || !c->gaidx || !c->gaval || !c->gnidx || !c->gnval || !c->gnb) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent");
        goto fail;
    }
    l->impl = c;
    c->lat = l;
    l->varies = varies;
    l->sqrt_only = c->sq;
    /* vi takes the square root (stack_sqrt.c: one merged row per latent),
     * its gradient from q's moments (gmm_latent_prior_rows_rev_q) */
    l->prior_nrows = c->sq ? c->n : 0;
    l->prior_seg = c->sq ? 1 : 0;
    l->n = c->n;
    l->kl = c->bw;
    l->cov_kl = c->bw;
    l->nconstr = c->ncon;
    l->constr = c->ncon ? c->A : NULL;
    l->pin = c->ncon ? c->pin : NULL;
    c->as = (latent_asm){.ctx = c, .what = "stacked latent", .n = c->n, .nparam = c->nparam,
                         .npin = c->ncon, .pin = c->pin,
                         .assemble = c->sq ? assemble_rest : assemble,
                         .assemble_rev = c->sq ? assemble_rev_rest : assemble_rev, .normaliser = stack_normaliser,
                         .normaliser_rev = stack_normaliser_rev, .work = band_work_op,
                         .map = gmm_latent_obs_map(l),
                         .gs = c->as.gs}; /* its rows allocated above */
    for (size_t r = 0; r < nrows; r++) {
        size_t lo = SIZE_MAX;
        for (size_t k = 0; k < c->K; k++)
            for (size_t e = 0; e < c->comp[k].nread; e++) {
                size_t p = c->iperm[read_at(&c->comp[k], r, e)];
                lo = p < lo ? p : lo;
            }
        if (lo + W > c->n)
            lo = c->n - W;
        l->offset[r] = lo;
        size_t *pr = l->pos + r * R, j0 = 0, *src = c->eidx + nrows * R;
        double *cr = l->coef + r * R;
        for (size_t k = 0; k < c->K; k++)
            for (size_t e = 0; e < c->comp[k].nread; e++, j0++) {
                /* insertion: increasing positions */
                size_t p = c->iperm[read_at(&c->comp[k], r, e)] - lo, j = j0;
                for (; j > 0 && pr[j - 1] > p; j--) {
                    pr[j] = pr[j - 1];
                    cr[j] = cr[j - 1];
                    src[j] = src[j - 1];
                }
                pr[j] = p;
                cr[j] = c->comp[k].hval[e];
                src[j] = j0;
            }
        for (size_t j = 0; j < R; j++)
            c->eidx[r * R + src[j]] = r * R + j;
        l->rowptr[r + 1] = (r + 1) * R;
    }
    size_t ci = 0;
    for (size_t k = 0; k < c->K; k++) {
        stack_comp *q = &c->comp[k];
        for (size_t s = 0; s < q->nslot; s++) {
            size_t a = c->iperm[q->off + q->si[s]], b = c->iperm[q->off + q->sj[s]];
            q->gi[s] = a > b ? a : b;
            q->gj[s] = a > b ? b : a;
        }
        if (q->ncon)
            c->blk0[c->nblk++] = ci;
        for (size_t t = 0; t < q->ncon; t++, ci++) {
            c->pin[ci] = c->iperm[q->off + q->cpin[t]];
            c->ccomp[ci] = k;
            size_t ea = c->gaptr[ci], en = c->gnptr[ci];
            for (size_t e = q->cptr[t]; e < q->cptr[t + 1]; e++, ea++) {
                c->A[ci * c->n + c->iperm[q->off + q->cidx[e]]] = q->cval[e];
                c->gaidx[ea] = c->iperm[q->off + q->cidx[e]];
                c->gaval[ea] = q->cval[e];
            }
            for (size_t e = q->nptr[t]; e < q->nptr[t + 1]; e++, en++) {
                c->gnidx[en] = c->iperm[q->off + q->nidx[e]];
                c->gnval[en] = q->nval[e];
                c->gnb[en] = q->nb[e];
            }
            c->gaptr[ci + 1] = ea;
            c->gnptr[ci + 1] = en;
        }
        for (size_t p = 0; p < q->npar; p++) {
            int gr = q->model == GMM_STACK_GRAPH, kn = q->model == GMM_STACK_KERNEL;
            l->name[q->par0 + p] = gr || kn ? q->gname[p] : q->pname[p];
            l->start[q->par0 + p] = gr   ? q->g->param_value[p]
                                    : kn ? gmm_kernel_values_const(q->kern)[p]
                                         : q->start[p];
            l->zero_ok[q->par0 + p] = gr ? q->g->param_zero_ok[p] : 0;
            l->unit[q->par0 + p] = q->model == GMM_STACK_BYM2 && p == 1; /* phi */
        }
    }
    c->blk0[c->nblk] = c->ncon;
    *out = l;
    return GMM_OK;
fail:
    if (l)
        l->impl = NULL;
    gmm_latent_free(l);
    stack_free_impl(c);
    return st;
}

/* ---- accessors ------------------------------------------------------------------ */

static stack_impl *impl_of(const gmm_latent *l)
{
    return l && (l->ops == &stack_ops || l->ops == &stack_sq_ops) ? l->impl : NULL;
}

size_t gmm_latent_stack_nterm(const gmm_latent *l)
{
    stack_impl *c = impl_of(l);
    return c ? c->K : 0;
}

size_t gmm_latent_stack_size(const gmm_latent *l, size_t k)
{
    stack_impl *c = impl_of(l);
    return c && k < c->K ? c->comp[k].n : 0;
}

size_t gmm_latent_stack_index(const gmm_latent *l, size_t k, size_t j)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || j >= c->comp[k].n)
        return GMM_NO_INDEX;
    return c->iperm[c->comp[k].off + j];
}

const double *gmm_latent_stack_values(const gmm_latent *l, size_t k, size_t *m)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || !c->comp[k].val)
        return NULL;
    if (m)
        *m = c->comp[k].m;
    return c->comp[k].val;
}

size_t gmm_latent_stack_nmerged(const gmm_latent *l, size_t k)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || !c->comp[k].ssm)
        return 0;
    return gmm_ssm_nmerged(c->comp[k].ssm);
}

double gmm_latent_stack_period(const gmm_latent *l, size_t k)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || !c->comp[k].cyclic)
        return NAN;
    return c->comp[k].period;
}

double gmm_latent_stack_wrap(const gmm_latent *l, size_t k, double t)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || !c->comp[k].cyclic)
        return t;
    return stack_wrap(c->comp[k].val[0], c->comp[k].period, t);
}

double gmm_latent_stack_scale(const gmm_latent *l, size_t k, size_t v)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K || !c->comp[k].scale || v >= c->comp[k].n)
        return NAN;
    return c->comp[k].scale[v];
}

gmm_status gmm_latent_stack_constraints(const gmm_latent *l, double *A)
{
    stack_impl *c = impl_of(l);
    if (!c || (c->ncon && !A))
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_constraints: not a stacked latent");
    memcpy(A, c->A, c->ncon * c->n * sizeof *A);
    return GMM_OK;
}

gmm_status gmm_latent_stack_logdet(gmm_latent *l, const double *theta, double *logdet)
{
    stack_impl *c = impl_of(l);
    gmm_status st;
    if (!c || !theta || !logdet)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_logdet: not a stacked latent");
    if (c->sq)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_logdet: a stack with a damped kernel has "
                                     "no accurate assembled precision");
    if ((st = gmm_latent_theta_check(l, theta)) || (st = band_work(c)) ||
        (st = assemble(c, theta, c->as.gs.Q)))
        return st;
    if (c->ncon) {
        if ((st = stack_pinned_logdet(c, c->as.gs.Q, logdet)))
            return st;
        *logdet -= c->ldaa;
        return GMM_OK;
    }
    if ((st = gmm_band_chol_decomp(c->as.gs.Q, c->as.gs.Q)))
        return st;
    *logdet = gmm_band_chol_logdet(c->as.gs.Q);
    return gmm_band_set_kind(c->as.gs.Q, GMM_BAND_SYMMETRIC);
}

void gmm_latent_stack_describe(const gmm_latent *l, char *buf, size_t size)
{
    stack_impl *c = impl_of(l);
    static const char *model[] = {"iid", "rw1", "rw2", "besag", "bym2", "graph", "kernel"};
    size_t used = 0;
    if (!buf || size == 0)
        return;
    buf[0] = '\0';
    if (!c)
        return;
    for (size_t k = 0; k < c->K && used < size; k++) {
        int w = c->comp[k].cyclic
                    ? snprintf(buf + used, size - used, "%s%s (%s, cyclic, period %g): %zu latents",
                               k ? ", " : "", c->comp[k].name, model[c->comp[k].model],
                               c->comp[k].period, c->comp[k].n)
                    : snprintf(buf + used, size - used, "%s%s (%s): %zu latents", k ? ", " : "",
                               c->comp[k].name, model[c->comp[k].model], c->comp[k].n);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < size)
        snprintf(buf + used, size - used,
                 "; n = %zu, bandwidth %zu, observation width %zu, %zu constraints, band of Q: "
                 "%.1f MB%s",
                 c->n, c->bw, c->as.map.width, c->ncon,
                 (double)(c->bw + 1) * (double)c->n * sizeof(double) / 1e6,
                 c->sq ? "; square-root form (a damped kernel)" : "");
}

/* ---- new rows ---------------------------------------------------------------------- */

gmm_stack_model gmm_latent_stack_kind(const gmm_latent *l, size_t k)
{
    stack_impl *c = impl_of(l);
    return c && k < c->K ? c->comp[k].model : GMM_STACK_KERNEL + 1;
}

/* The integrated Wiener process's unit-variance transition over d: F =
 * [1 d; 0 1] and the innovation's precision S^-1 (row-major 2 x 2). */
static void iw_step(double d, double F[4], double Si[4])
{
    F[0] = 1.0;
    F[1] = d;
    F[2] = 0.0;
    F[3] = 1.0;
    Si[0] = 12.0 / (d * d * d);
    Si[1] = Si[2] = -6.0 / (d * d);
    Si[3] = 4.0 / d;
}

/* RW2's state at t between a state z_l (d1 before) and z_r (d2 after):
 * z | z_l, z_r has precision P = S1^-1 + F2' S2^-1 F2 and mean P^-1 (S1^-1
 * F1 z_l + F2' S2^-1 z_r); x(t)'s weights on (x_l, x'_l, x_r, x'_r) into
 * wt, its unit variance (P^-1)_00 returned. */
static double iw_bridge(double d1, double d2, double wt[4])
{
    double F1[4], S1[4], F2[4], S2[4], P[4], B[4], C[4];
    iw_step(d1, F1, S1);
    iw_step(d2, F2, S2);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            double b = 0.0, cc = 0.0, p = S1[i * 2 + j];
            for (size_t t = 0; t < 2; t++) {
                b += S1[i * 2 + t] * F1[t * 2 + j];  /* S1^-1 F1 */
                cc += F2[t * 2 + i] * S2[t * 2 + j]; /* F2' S2^-1 */
                for (size_t u = 0; u < 2; u++)
                    p += F2[t * 2 + i] * S2[t * 2 + u] * F2[u * 2 + j];
            }
            B[i * 2 + j] = b;
            C[i * 2 + j] = cc;
            P[i * 2 + j] = p;
        }
    double det = P[0] * P[3] - P[1] * P[2];
    double r0[2] = {P[3] / det, -P[1] / det}; /* the first row of P^-1 */
    for (size_t j = 0; j < 2; j++) {
        wt[j] = r0[0] * B[j] + r0[1] * B[2 + j];
        wt[2 + j] = r0[0] * C[j] + r0[1] * C[2 + j];
    }
    return r0[0];
}

/* Component q's reading of value t: entries (local index, weight) appended
 * to li, lw (*ne of them) and the unit variance of eps returned. */
static double walk_row(const stack_comp *q, double t, size_t *li, double *lw, size_t *ne)
{
    int two = q->model == GMM_STACK_RW2;
    size_t m = q->m, s = two ? 2 : 1;
    if (q->cyclic)
        t = stack_wrap(q->val[0], q->period, t);
    size_t lo = stack_lower_bound(q->val, m, t);
    if (lo < m && q->val[lo] == t) {
        li[*ne] = s * lo;
        lw[(*ne)++] = 1.0;
        return 0.0;
    }
    if (!q->cyclic && (lo == 0 || lo == m)) {
        /* beyond an end: forwards from the last value, backwards from the
         * first (x - d x') */
        size_t j = lo == 0 ? 0 : m - 1;
        double d = lo == 0 ? q->val[0] - t : t - q->val[m - 1];
        li[*ne] = s * j;
        lw[(*ne)++] = 1.0;
        if (!two)
            return d;
        li[*ne] = s * j + 1;
        lw[(*ne)++] = lo == 0 ? -d : d;
        return d * d * d / 3.0;
    }
    /* a bridge; on a circle lo == m is the wrap-around interval (t >= t_0
     * after wrapping, so lo > 0) */
    size_t jl = lo - 1, jr = lo < m ? lo : 0;
    double d1 = t - q->val[jl], d2 = lo < m ? q->val[lo] - t : q->val[0] + q->period - t;
    if (!(d1 > 0.0) || !(d2 > 0.0)) {
        /* a value the wrap rounded onto the first one */
        li[*ne] = s * (d1 > 0.0 ? jr : jl);
        lw[(*ne)++] = 1.0;
        return 0.0;
    }
    if (!two) {
        li[*ne] = jl;
        lw[(*ne)++] = d2 / (d1 + d2);
        li[*ne] = jr;
        lw[(*ne)++] = d1 / (d1 + d2);
        return d1 * d2 / (d1 + d2);
    }
    double wt[4];
    double v = iw_bridge(d1, d2, wt);
    const size_t at[4] = {2 * jl, 2 * jl + 1, 2 * jr, 2 * jr + 1};
    for (size_t e = 0; e < 4; e++) {
        li[*ne] = at[e];
        lw[(*ne)++] = wt[e];
    }
    return v;
}

/* In-place lower Cholesky of the d x d row-major S (GMM_ENOTPD). */
static gmm_status small_chol(double *S, size_t d)
{
    for (size_t j = 0; j < d; j++) {
        double v = S[j * d + j];
        for (size_t t = 0; t < j; t++)
            v -= S[j * d + t] * S[j * d + t];
        if (!(v > 0.0))
            return gmm_error(GMM_ENOTPD, "a new row's state covariance is not positive "
                                         "definite");
        S[j * d + j] = sqrt(v);
        for (size_t i = j + 1; i < d; i++) {
            double u = S[i * d + j];
            for (size_t t = 0; t < j; t++)
                u -= S[i * d + t] * S[j * d + t];
            S[i * d + j] = u / S[j * d + j];
        }
    }
    return GMM_OK;
}

/* b <- S^-1 b, L the lower Cholesky factor of S (small_chol). */
static void small_solve(const double *L, size_t d, double *b)
{
    for (size_t i = 0; i < d; i++) {
        for (size_t t = 0; t < i; t++)
            b[i] -= L[i * d + t] * b[t];
        b[i] /= L[i * d + i];
    }
    for (size_t i = d; i-- > 0;) {
        for (size_t t = i + 1; t < d; t++)
            b[i] -= L[t * d + i] * b[t];
        b[i] /= L[i * d + i];
    }
}

/* A KERNEL's reading of value t (stack.h, gmm_latent_stack_row): entries
 * (local index, weight) appended to li, lw, the variance of eps into *var.
 * All d x d algebra in the kernel's variable order, mapped to the band's by
 * gmm_ssm_state_var. */
static gmm_status kernel_row(stack_comp *q, const double *theta, double t, size_t *li,
                             double *lw, size_t *ne, double *var)
{
    gmm_status st;
    size_t d = q->d, m = q->m, lo = stack_lower_bound(q->val, m, t);
    *var = 0.0;
    /* a value on a state, or within merge_tol of one (the lower first, as
     * ssm_predict.c's snap), reads it */
    size_t on = lo < m && q->val[lo] == t                       ? lo
                : lo > 0 && t - q->val[lo - 1] <= q->merge_tol ? lo - 1
                : lo < m && q->val[lo] - t <= q->merge_tol     ? lo
                                                               : m;
    double *P = q->kscr, *A1 = P + d * d, *Q1 = A1 + d * d, *A2 = Q1 + d * d;
    double *Q2 = A2 + d * d, *T = Q2 + d * d, *H = T + d * d, *u = H + d, *v = u + d;
    double *wl = v + d, *wr = wl + d;
    if ((on == m || q->modulated) &&
        (st = gmm_kernel_stat(q->kern, theta, gmm_ssm_damp(q->ssm), q->kw, P, H)))
        return st;
    /* a demodulated kernel reads h(t - t_0) (kernel.h, DEMODULATION; t_0 the
     * first state's value, as the data rows: a state's own value on it) */
    if (q->modulated &&
        (st = gmm_kernel_obs(q->kern, q->kw, (on < m ? q->val[on] : t) - q->val[0], H)))
        return st;
    if (on < m) {
        for (size_t e = 0; e < q->nread; e++) {
            li[*ne] = q->lvl_off[on] + q->hidx[e];
            lw[(*ne)++] =
                q->modulated ? H[gmm_ssm_state_var(q->ssm, q->hidx[e])] : q->hval[e];
        }
        return GMM_OK;
    }
    for (size_t i = 0; i < d; i++)
        wl[i] = wr[i] = 0.0;
    size_t jl = lo > 0 ? lo - 1 : 0, jr = lo < m ? lo : m - 1;
    if (lo == m) {
        /* forwards from the last value: H A(d) x, variance H Q(d) H' */
        if ((st = gmm_kernel_disc(q->kern, q->kw, t - q->val[m - 1], A1, Q1)))
            return st;
        for (size_t j = 0; j < d; j++) {
            double a = 0.0, b = 0.0;
            for (size_t i = 0; i < d; i++) {
                a += H[i] * A1[i * d + j];
                b += H[i] * Q1[i * d + j];
            }
            wl[j] = a;
            *var += b * H[j];
        }
    } else if (lo == 0) {
        /* backwards from the first value, the stationary reversal: x(t) | x_0
         * has mean Pinf A' Pinf^-1 x_0 and covariance Pinf - Pinf A'
         * Pinf^-1 A Pinf; u = A Pinf H' */
        if ((st = gmm_kernel_disc(q->kern, q->kw, q->val[0] - t, A1, Q1)))
            return st;
        for (size_t i = 0; i < d; i++) {
            double a = 0.0;
            for (size_t j = 0; j < d; j++) {
                double ph = 0.0;
                for (size_t k = 0; k < d; k++)
                    ph += P[j * d + k] * H[k];
                a += A1[i * d + j] * ph;
            }
            u[i] = v[i] = a;
        }
        memcpy(T, P, d * d * sizeof *T);
        if ((st = small_chol(T, d)))
            return st;
        small_solve(T, d, v); /* Pinf^-1 A Pinf H' */
        double hph = 0.0, uv = 0.0;
        for (size_t i = 0; i < d; i++) {
            wr[i] = v[i];
            uv += u[i] * v[i];
            for (size_t k = 0; k < d; k++)
                hph += H[i] * P[i * d + k] * H[k];
        }
        *var = hph - uv;
    } else {
        /* the bridge: precision P = Q1^-1 + A2' Q2^-1 A2; u = P^-1 H'; the
         * weights u' Q1^-1 A1 on x_l and u' A2' Q2^-1 on x_r, variance H u */
        double d1 = t - q->val[jl], d2 = q->val[jr] - t;
        if ((st = gmm_kernel_disc(q->kern, q->kw, d1, A1, Q1)) ||
            (st = gmm_kernel_disc(q->kern, q->kw, d2, A2, Q2)) || (st = small_chol(Q1, d)) ||
            (st = small_chol(Q2, d)))
            return st;
        for (size_t j = 0; j < d; j++) { /* column j of Q1^-1 and of Q2^-1 A2 */
            for (size_t i = 0; i < d; i++) {
                u[i] = i == j;
                v[i] = A2[i * d + j];
            }
            small_solve(Q1, d, u);
            small_solve(Q2, d, v);
            for (size_t i = 0; i < d; i++) {
                P[i * d + j] = u[i];
                T[i * d + j] = v[i];
            }
        }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double a = 0.0;
                for (size_t k = 0; k < d; k++)
                    a += A2[k * d + i] * T[k * d + j];
                P[i * d + j] += a;
            }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < i; j++)
                P[i * d + j] = P[j * d + i] = 0.5 * (P[i * d + j] + P[j * d + i]);
        if ((st = small_chol(P, d)))
            return st;
        for (size_t i = 0; i < d; i++)
            u[i] = H[i];
        small_solve(P, d, u);
        for (size_t i = 0; i < d; i++)
            v[i] = u[i];
        small_solve(Q1, d, v); /* Q1^-1 u */
        for (size_t j = 0; j < d; j++) {
            double a = 0.0;
            for (size_t i = 0; i < d; i++)
                a += v[i] * A1[i * d + j];
            wl[j] = a;
        }
        for (size_t j = 0; j < d; j++) { /* wr = Q2^-1 A2 u */
            double b = 0.0;
            for (size_t i = 0; i < d; i++)
                b += T[j * d + i] * u[i];
            wr[j] = b;
            *var += H[j] * u[j];
        }
    }
    for (size_t p = 0; p < d; p++) {
        size_t kv = gmm_ssm_state_var(q->ssm, p);
        if (wl[kv] != 0.0 && lo > 0) {
            li[*ne] = q->lvl_off[jl] + p;
            lw[(*ne)++] = wl[kv];
        }
        if (wr[kv] != 0.0 && lo < m) {
            li[*ne] = q->lvl_off[jr] + p;
            lw[(*ne)++] = wr[kv];
        }
    }
    if (*var < 0.0)
        *var = 0.0;
    return GMM_OK;
}

size_t gmm_latent_stack_row_max(const gmm_latent *l)
{
    stack_impl *c = impl_of(l);
    size_t r = 0;
    for (size_t k = 0; c && k < c->K; k++)
        r += c->comp[k].model == GMM_STACK_KERNEL ? 2 * c->comp[k].d : GMM_STACK_ROW_MAX;
    return r;
}

size_t gmm_latent_stack_nlevel(const gmm_latent *l, size_t k)
{
    stack_impl *c = impl_of(l);
    if (!c || k >= c->K)
        return 0;
    const stack_comp *q = &c->comp[k];
    return q->model == GMM_STACK_RW2 || q->model == GMM_STACK_KERNEL ? q->m : q->n;
}

gmm_status gmm_latent_stack_level(const gmm_latent *l, size_t k, size_t j, size_t *idx,
                                  double *w, size_t *nnz)
{
    stack_impl *c = impl_of(l);
    if (!c || !idx || !w || !nnz || k >= c->K || j >= gmm_latent_stack_nlevel(l, k))
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_level: not a stacked latent, NULL or "
                                     "out of range");
    const stack_comp *q = &c->comp[k];
    *nnz = 0;
    if (q->model == GMM_STACK_KERNEL) {
        for (size_t e = 0; e < q->nread; e++) {
            idx[*nnz] = c->iperm[q->off + q->lvl_off[j] + q->hidx[e]];
            w[(*nnz)++] = q->hval[e];
        }
        return GMM_OK;
    }
    idx[0] = c->iperm[q->off + (q->model == GMM_STACK_RW2 ? 2 * j : j)];
    w[0] = 1.0;
    *nnz = 1;
    return GMM_OK;
}

gmm_status gmm_latent_stack_row(const gmm_latent *l, const double *theta, const gmm_stack_at *at,
                                size_t *idx, double *w, size_t *nnz, double *evar)
{
    stack_impl *c = impl_of(l);
    if (!c || !theta || !at || !idx || !w || !nnz || !evar)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_row: not a stacked latent, or NULL");
    *nnz = 0;
    *evar = 0.0;
    for (size_t k = 0; k < c->K; k++) {
        const stack_comp *q = &c->comp[k];
        size_t li[GMM_STACK_ROW_MAX], ne = 0;
        double lw[GMM_STACK_ROW_MAX], u = 0.0;
        if (q->model == GMM_STACK_KERNEL) {
            double ev;
            gmm_status st;
            if (!isfinite(at[k].value))
                return gmm_error_at(GMM_EINVAL, k, "'%s': index value %g is not finite",
                                    q->name, at[k].value);
            size_t *ki = idx + *nnz, ne2 = 0;
            double *kw = w + *nnz;
            if ((st = kernel_row(&c->comp[k], theta + q->par0, at[k].value, ki, kw, &ne2, &ev)))
                return gmm_error_at(st, k, "'%s': %s", q->name, gmm_error_message());
            for (size_t e = 0; e < ne2; e++)
                ki[e] = c->iperm[q->off + ki[e]];
            *nnz += ne2;
            *evar += ev;
            continue;
        }
        if (q->model == GMM_STACK_RW1 || q->model == GMM_STACK_RW2) {
            if (!isfinite(at[k].value))
                return gmm_error_at(GMM_EINVAL, k, "'%s': index value %g is not finite",
                                    q->name, at[k].value);
            u = walk_row(q, at[k].value, li, lw, &ne);
        } else {
            /* BYM2's levels read b, at the node itself */
            size_t m = q->model == GMM_STACK_BYM2 ? q->n / 2 : q->n;
            if (at[k].level == GMM_NO_INDEX && q->model == GMM_STACK_IID) {
                u = 1.0;
            } else if (at[k].level >= m) {
                return gmm_error_at(GMM_EINVAL, k, "'%s': level %zu is not one of its %zu",
                                    q->name, at[k].level, m);
            } else {
                li[0] = at[k].level;
                lw[0] = 1.0;
                ne = 1;
            }
        }
        for (size_t e = 0; e < ne; e++) {
            idx[*nnz] = c->iperm[q->off + li[e]];
            w[(*nnz)++] = lw[e];
        }
        /* eps scales with the component's variance (not BYM2 or GRAPH:
         * their new levels are refused above) */
        *evar += u * theta[q->par0];
    }
    return GMM_OK;
}
