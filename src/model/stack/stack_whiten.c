/* stack_whiten.c -- the whitening of a stacked latent (latent.h): x = W v
 * with W W' the prior's covariance, its transpose, inverse and reverse mode,
 * for the assembled form and for the square-root form (damped kernels).
 *
 * WHITENING.  Proper stacks: W = L^-T, L L' = Q, as graph latents
 * (latent_gmrf.c).  With constraints: W = M L^^-T P_S (stack_whiten_setup).
 * The glue common to both is latent_asm.c's.  L is the band's Cholesky
 * factor, or (stack_whiten_setup_sparse) the sparse factor's L = P' L_c
 * (factor.h): any L with L L' = Q^ whitens.  Where Q^ is the identity's on
 * pinned row and column i, L_c is on position k = P i, so x_i = v_k and v_k
 * moves nothing else: the sparse map zeroes x_S after the solve, W = M D_S
 * L^-T (and W' = L^-1 D_S M'), where the band's zeroes v_S before it; either
 * way the coordinates never read are N(0, 1).  The sparse setup has no
 * reverse mode.
 */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"

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
    return c->con.null_is_b[e] ? c->wh.alpha[ci] * c->con.null_value[e] : c->con.null_value[e];
}

/* beta = (AN)^-1 A x. */
static void m_beta(stack_impl *c, const double *x)
{
    for (size_t b = 0; b < c->con.nblock; b++) {
        size_t c0 = c->con.block_start[b], kc = c->con.block_start[b + 1] - c0;
        double *be = c->wh.beta + c0;
        for (size_t i = 0; i < kc; i++) {
            double s = 0.0;
            for (size_t e = c->con.a_start[c0 + i]; e < c->con.a_start[c0 + i + 1]; e++)
                s += c->con.a_value[e] * x[c->con.a_latent[e]];
            be[i] = s;
        }
        block_solve(c->wh.AN, c->ncon, c0, kc, 0, be);
    }
}

/* x <- M x = x - N (AN)^-1 A x. */
static void apply_m(stack_impl *c, double *x)
{
    m_beta(c, x);
    for (size_t b = 0; b < c->con.nblock; b++) {
        size_t c0 = c->con.block_start[b], kc = c->con.block_start[b + 1] - c0;
        const double *be = c->wh.beta + c0;
        for (size_t i = 0; i < kc; i++)
            for (size_t e = c->con.null_start[c0 + i]; e < c->con.null_start[c0 + i + 1]; e++)
                x[c->con.null_latent[e]] -= nval(c, c0 + i, e) * be[i];
    }
}

/* g <- M' g = g - A' (AN)^-T N' g. */
static void apply_mt(stack_impl *c, double *g)
{
    for (size_t b = 0; b < c->con.nblock; b++) {
        size_t c0 = c->con.block_start[b], kc = c->con.block_start[b + 1] - c0;
        double *be = c->wh.beta + c0;
        for (size_t i = 0; i < kc; i++) {
            double s = 0.0;
            for (size_t e = c->con.null_start[c0 + i]; e < c->con.null_start[c0 + i + 1]; e++)
                s += nval(c, c0 + i, e) * g[c->con.null_latent[e]];
            be[i] = s;
        }
        block_solve(c->wh.AN, c->ncon, c0, kc, 1, be);
        for (size_t i = 0; i < kc; i++)
            for (size_t e = c->con.a_start[c0 + i]; e < c->con.a_start[c0 + i + 1]; e++)
                g[c->con.a_latent[e]] -= c->con.a_value[e] * be[i];
    }
}

/* The setup's N S-rows and A N blocks, factorised. */
static gmm_status whiten_blocks(stack_impl *c, const double *theta)
{
    gmm_status st;
    size_t k = c->ncon;
    for (size_t ci = 0; ci < k; ci++) {
        const stack_comp *m = &c->comp[c->con.component[ci]];
        c->wh.alpha[ci] = m->model == GMM_STACK_BYM2
                            ? sqrt(theta[m->par0] * theta[m->par0 + 1])
                            : 1.0;
    }
    memset(c->wh.NS, 0, k * k * sizeof *c->wh.NS);
    memset(c->wh.AN, 0, k * k * sizeof *c->wh.AN);
    double *col = c->wh.scratch; /* one column of N at a time, scattered */
    memset(col, 0, c->n * sizeof *col);
    for (size_t b = 0; b < c->con.nblock; b++) {
        size_t c0 = c->con.block_start[b], kc = c->con.block_start[b + 1] - c0;
        for (size_t j = c0; j < c0 + kc; j++) {
            for (size_t e = c->con.null_start[j]; e < c->con.null_start[j + 1]; e++)
                col[c->con.null_latent[e]] += nval(c, j, e);
            for (size_t i = c0; i < c0 + kc; i++) {
                double s = 0.0;
                for (size_t e = c->con.a_start[i]; e < c->con.a_start[i + 1]; e++)
                    s += c->con.a_value[e] * col[c->con.a_latent[e]];
                c->wh.AN[i * k + j] = s;
                c->wh.NS[i * k + j] = col[c->con.pinned[i]];
            }
            for (size_t e = c->con.null_start[j]; e < c->con.null_start[j + 1]; e++)
                col[c->con.null_latent[e]] = 0.0;
        }
        if ((st = block_lu(c->wh.AN, k, c0, kc)) || (st = block_lu(c->wh.NS, k, c0, kc)))
            return st;
    }
    return GMM_OK;
}

/* The work vectors and constraint blocks, once (both setups). */
static gmm_status whiten_scratch(stack_impl *c)
{
    size_t k = c->ncon;
    if (c->wh.scratch)
        return GMM_OK;
    c->wh.scratch =
        gmm_malloc(6 * c->n + c->nparam + 2 * k * k + 2 * k + 1, sizeof *c->wh.scratch);
    if (!c->wh.scratch)
        return gmm_error(GMM_ENOMEM, "out of memory for the whitening workspace (%zu latents)",
                         c->n);
    c->wh.work = c->wh.scratch + c->n;
    c->wh.solve = c->wh.work + c->n;
    c->wh.last_z = c->wh.solve + c->n;
    c->wh.last_g = c->wh.last_z + c->n;
    c->wh.last_u = c->wh.last_g + c->n;
    c->wh.theta = c->wh.last_u + c->n;
    c->wh.NS = c->wh.theta + c->nparam;
    c->wh.AN = c->wh.NS + k * k;
    c->wh.beta = c->wh.AN + k * k;
    c->wh.alpha = c->wh.beta + k;
    return GMM_OK;
}

/* x = L^-T P_S v (band) or D_S L^-T v (sparse) by the setup's factor (x
 * may be v). */
static gmm_status whiten_z(stack_impl *c, const double *v, double *x)
{
    if (!c->wh.sf)
        return latent_asm_whiten_z(&c->as, c->wh.L, NULL, v, x);
    if (x != v)
        memcpy(x, v, c->n * sizeof *x);
    gmm_status st = gmm_factor_solve_lt(c->wh.sf, x);
    for (size_t i = 0; i < c->as.npin; i++)
        x[c->as.pin[i]] = 0.0;
    return st;
}

/* WITH CONSTRAINTS the prior on {A x = 0} is x = M z, M = I - N (AN)^-1 A,
 * z_S = 0 and z_-S ~ N(0, Q_-S^-1) (the pinned GMRF): W = M L^^-T P_S
 * (P_S zeroes the pinned entries of v, which stay free N(0, 1) coordinates
 * the likelihood never reads), W^-1 x = L^' (x - N N_S^-1 x_S). */
gmm_status stack_whiten_setup(void *p, const double *theta)
{
    stack_impl *c = p;
    gmm_status st;
    size_t k = c->ncon;
    c->wh.ready = c->wh.z_kept = c->wh.g_kept = 0;
    c->wh.sf = NULL;
    if (!c->wh.L) {
        if ((st = stack_band_check(c)))
            return st;
        c->wh.L = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
        c->wh.Lbar = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_LOWER);
        if (!c->wh.L || !c->wh.Lbar) {
            /* none of it kept: the next setup allocates again */
            gmm_band_free(c->wh.L);
            gmm_band_free(c->wh.Lbar);
            c->wh.L = c->wh.Lbar = NULL;
            return gmm_error(GMM_ENOMEM, "out of memory for the whitening workspace (two bands "
                                         "of %zu x %zu, bandwidth %zu)",
                             c->n, c->n, c->bw);
        }
    }
    /* Q^ (Q itself without constraints) assembled in wh.L and factorised */
    if ((st = whiten_scratch(c)) || (st = latent_asm_factor(&c->as, theta, c->wh.L)) ||
        (k && (st = whiten_blocks(c, theta))))
        return st;
    memcpy(c->wh.theta, theta, c->nparam * sizeof *theta);
    c->wh.ready = 1;
    return GMM_OK;
}

gmm_status stack_whiten_setup_sparse(void *p, const double *theta)
{
    stack_impl *c = p;
    gmm_status st;
    c->wh.ready = c->wh.z_kept = c->wh.g_kept = 0;
    c->wh.sf = NULL;
    if ((st = whiten_scratch(c)) || (st = stack_sp_whiten_factor(c, theta, &c->wh.sf)) ||
        (c->ncon && (st = whiten_blocks(c, theta))))
        return st;
    memcpy(c->wh.theta, theta, c->nparam * sizeof *theta);
    c->wh.ready = 1;
    return GMM_OK;
}

gmm_status stack_whiten(void *p, const double *v, double *x)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wh.ready, v, x, "gmm_latent_whiten");
    if (st || (st = whiten_z(c, v, x)))
        return st;
    memcpy(c->wh.last_z, x, c->n * sizeof *x);
    c->wh.z_kept = 1;
    if (c->ncon)
        apply_m(c, x);
    return GMM_OK;
}

gmm_status stack_unwhiten(void *p, const double *x, double *v)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wh.ready, x, v, "gmm_latent_unwhiten");
    if (st)
        return st;
    if (x == v)
        return gmm_error(GMM_EINVAL, "gmm_latent_unwhiten: x and v alias");
    const double *z = x;
    if (c->ncon) {
        double *zz = c->wh.scratch;
        memcpy(zz, x, c->n * sizeof *zz);
        for (size_t b = 0; b < c->con.nblock; b++) {
            size_t c0 = c->con.block_start[b], kc = c->con.block_start[b + 1] - c0;
            double *be = c->wh.beta + c0;
            for (size_t i = 0; i < kc; i++)
                be[i] = x[c->con.pinned[c0 + i]];
            block_solve(c->wh.NS, c->ncon, c0, kc, 0, be);
            for (size_t i = 0; i < kc; i++)
                for (size_t e = c->con.null_start[c0 + i]; e < c->con.null_start[c0 + i + 1]; e++)
                    zz[c->con.null_latent[e]] -= nval(c, c0 + i, e) * be[i];
        }
        z = zz;
    }
    return c->wh.sf ? gmm_factor_mul_lt(c->wh.sf, z, v)
                    : gmm_band_gemv(GMM_TRANS, 1.0, c->wh.L, z, 0.0, v);
}

gmm_status stack_whiten_t(void *p, const double *g, double *u)
{
    stack_impl *c = p;
    gmm_status st = latent_asm_wready(c->wh.ready, g, u, "gmm_latent_whiten_t");
    if (st)
        return st;
    memcpy(c->wh.last_g, g, c->n * sizeof *g);
    c->wh.g_kept = 1;
    if (u != g)
        memcpy(u, g, c->n * sizeof *u);
    if (c->ncon)
        apply_mt(c, u);
    if (c->wh.sf) {
        for (size_t i = 0; i < c->as.npin; i++)
            u[c->as.pin[i]] = 0.0;
        return gmm_factor_solve_l(c->wh.sf, u); /* no reverse mode: last_u unused */
    }
    if ((st = gmm_band_tri_solve_vec(c->wh.L, GMM_NOTRANS, u)))
        return st;
    memcpy(c->wh.last_u, u, c->n * sizeof *u);
    for (size_t i = 0; i < c->ncon; i++)
        u[c->con.pinned[i]] = 0.0;
    return GMM_OK;
}

/* Reverse of x = M(theta) L^(theta)^-T P_S v: zbar = M' xbar through the
 * factor (solve's and Cholesky's reverse modes, pinned rows and columns
 * dropped: constants), and BYM2's N, whose b entries are alpha = sqrt(variance
 * phi) times constants: dx/dalpha = -N_b beta / alpha. */
gmm_status stack_whiten_rev(void *p, const double *v, const double *xbar,
                                   double *thetabar)
{
    stack_impl *c = p;
    gmm_status st =
        latent_asm_wready_rev(c->wh.ready, c->wh.z_kept, c->wh.g_kept, v, xbar, thetabar);
    if (st)
        return st;
    if (c->wh.sf)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: the whitening from the sparse "
                                     "factorisation has no reverse mode (the hyperparameters "
                                     "sampled with the latents need the band)");
    size_t n = c->n;
    double *z = v ? c->wh.scratch : c->wh.last_z, *zbar = c->wh.work;
    if (v && (st = latent_asm_whiten_z(&c->as, c->wh.L, NULL, v, z)))
        return st;
    const double *g = xbar ? NULL : c->wh.last_u; /* L^^-1 zbar, whiten_t's */
    if (!xbar)
        xbar = c->wh.last_g;
    memcpy(zbar, xbar, n * sizeof *zbar);
    if (c->ncon) {
        m_beta(c, z); /* alpha's adjoint needs beta = (AN)^-1 A z */
        for (size_t ci = 0; ci < c->ncon; ci++) {
            const stack_comp *m = &c->comp[c->con.component[ci]];
            if (m->model != GMM_STACK_BYM2)
                continue;
            double s = 0.0;
            for (size_t e = c->con.null_start[ci]; e < c->con.null_start[ci + 1]; e++)
                if (c->con.null_is_b[e])
                    s += xbar[c->con.null_latent[e]] * c->con.null_value[e];
            double ab = -s * c->wh.beta[ci]; /* d(xbar . x)/dalpha */
            double sv = c->wh.theta[m->par0], ph = c->wh.theta[m->par0 + 1];
            double al = c->wh.alpha[ci];
            thetabar[m->par0] += ab * al / (2.0 * sv);
            thetabar[m->par0 + 1] += ab * al / (2.0 * ph);
        }
        apply_mt(c, zbar);
    }
    if ((st = latent_asm_factor_rev(&c->as, c->wh.L, z, zbar, g, c->wh.Lbar, c->wh.solve)))
        return st;
    return c->as.assemble_rev(c, c->wh.theta, c->wh.Lbar, thetabar);
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
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        if (!m->damped)
            continue;
        double *a = c->damped_local, *b = a + m->n;
        for (size_t j = 0; j < m->n; j++)
            a[j] = in[c->iperm[m->off + j]];
        if ((st = op(m->ssm, a, b)))
            return st;
        for (size_t j = 0; j < m->n; j++)
            out[c->iperm[m->off + j]] = b[j];
    }
    return GMM_OK;
}

gmm_status stack_sq_whiten_setup(void *p, const double *theta)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = stack_whiten_setup(c, theta)))
        return st;
    for (size_t k = 0; k < c->ncomp; k++)
        if (c->comp[k].damped &&
            (st = gmm_ssm_whiten_setup(c->comp[k].ssm, theta + c->comp[k].par0))) {
            c->wh.ready = 0;
            return st;
        }
    return GMM_OK;
}

gmm_status stack_sq_whiten(void *p, const double *v, double *x)
{
    gmm_status st = stack_whiten(p, v, x);
    return st ? st : sq_per_kernel(p, v, x, gmm_ssm_whiten);
}

gmm_status stack_sq_whiten_t(void *p, const double *g, double *u)
{
    gmm_status st = stack_whiten_t(p, g, u);
    return st ? st : sq_per_kernel(p, g, u, gmm_ssm_whiten_t);
}

gmm_status stack_sq_unwhiten(void *p, const double *x, double *v)
{
    gmm_status st = stack_unwhiten(p, x, v);
    return st ? st : sq_per_kernel(p, x, v, gmm_ssm_unwhiten);
}

/* The kernels' x are their own: the other part's reverse sees them only
 * through Q's identity entries, which no parameter moves.  NULL v or xbar:
 * each part's saved vectors (the SSM keeps its own whiten's and
 * whiten_t's). */
gmm_status stack_sq_whiten_rev(void *p, const double *v, const double *xbar, double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = stack_whiten_rev(c, v, xbar, thetabar)))
        return st;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        if (!m->damped)
            continue;
        double *a = c->damped_local, *b = a + m->n;
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
