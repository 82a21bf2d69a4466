/* stack_normaliser.c -- what the stacked latent hands latent_asm's
 * Gaussian likelihood beside Q: its bands on first use, the kernels'
 * rounding bound and, with constraints, the prior's normaliser.
 *
 * INTRINSIC COMPONENTS.  Their prior is the limit of a proper GMRF
 * conditioned on the constraints A x = 0: the Gaussian on {A x = 0} with
 * precision Q there (covariance V (V'QV)^-1 V', V a basis of that
 * subspace).  The normalising constant comes from the banded determinant
 * of Q with the rows and columns of k pinned latents S removed (N_S
 * invertible, N the null space of Q): det(V'QV) det(AA') = det(Q_-S)
 * det(AN)^2 / det(N_S)^2.  gmm_latent_nconstr gives the number of
 * constraints, gmm_latent_constraints and gmm_latent_constraint_pins A and
 * S.  The exact Gaussian likelihood (gmm_latent_gaussian), the Laplace
 * approximation (gmm_problem) and their gradients and posteriors condition
 * on them (constr.h); the whitening (hence HMC) maps v onto the subspace:
 * x = M L^^-T P_S v, M = I - N (AN)^-1 A the projection along Q's null
 * space, L^ the Cholesky factor of Q with S pinned, P_S zeroing v_S (k
 * coordinates of v the likelihood never reads, left N(0, 1)).  VI
 * conditions its q on them (vi_elbo.c, CONSTRAINTS).
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
 */
#include <float.h>
#include <math.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"

gmm_status stack_band_check(const void *p)
{
    const stack_impl *c = p;
    double band = (double)(c->bw + 1) * (double)c->n * sizeof(double);
    if (band > (double)c->band_limit)
        return gmm_error(GMM_ENOMEM, "the stacked latent (n = %zu, bandwidth %zu) needs %.0f MB "
                                     "per band; the limit is %.0f MB",
                         c->n, c->bw, band / 1e6, (double)c->band_limit / 1e6);
    return GMM_OK;
}

gmm_status stack_band_work(void *ctx)
{
    stack_impl *c = ctx;
    gmm_status st;
    if (c->as.gs.Q)
        return GMM_OK;
    if ((st = stack_band_check(c)))
        return st;
    c->as.gs.Q = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    c->as.gs.Qbar = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    if (c->ncon) {
        c->Qpinned = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
        c->Qpinned_bar = gmm_band_alloc(c->n, c->bw, 0, GMM_BAND_SYMMETRIC);
    }
    c->as.gs.w = gmm_marglik_work_alloc(c->n, c->bw);
    size_t no = c->nrows * c->as.map.width;
    c->as.gs.ocoef = gmm_malloc(no > 0 ? no : 1, sizeof *c->as.gs.ocoef);
    if (!c->as.gs.Q || !c->as.gs.Qbar || (c->ncon && (!c->Qpinned || !c->Qpinned_bar)) ||
        !c->as.gs.w ||
        !c->as.gs.ocoef)
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's bands (n = %zu, "
                                     "bandwidth %zu)",
                         c->n, c->bw);
    return gmm_marglik_constrain(c->as.gs.w, c->ncon, c->con.dense, c->con.pinned);
}

/* Q^ from Q into c->Qpinned, factorised in place (it turns LOWER); log det Q^ +
 * the constants into *ld. */
gmm_status stack_pinned_logdet(stack_impl *c, const gmm_band *Q, double *ld)
{
    gmm_status st;
    if ((st = gmm_band_copy(c->Qpinned, Q)))
        return st;
    latent_asm_pin(&c->as, c->Qpinned);
    double *work = latent_asm_chol_work(&c->as, c->bw);
    if ((st = gmm_band_chol_decomp_work(c->Qpinned, c->Qpinned, work)))
        return gmm_error_at(st, gmm_error_index(), "the intrinsic prior is not positive "
                                                   "definite on its constrained subspace");
    *ld = gmm_band_chol_logdet(c->Qpinned) + c->con.ld_const;
    return GMM_OK;
}

/* Qbar += ldbar d(log det Q^)/dQ (pinned rows and columns dropped), after
 * pinned_logdet. */
gmm_status stack_pinned_logdet_rev(stack_impl *c, double ldbar, gmm_band *Qbar)
{
    gmm_status st;
    gmm_band *B = c->Qpinned_bar;
    if ((st = gmm_band_set_kind(B, GMM_BAND_LOWER)))
        return st;
    gmm_band_set_zero(B);
    if ((st = gmm_band_chol_logdet_rev(c->Qpinned, ldbar, B)))
        return st;
    if ((st = gmm_band_chol_decomp_rev_work(c->Qpinned, B, B, latent_asm_chol_work(&c->as, c->bw))))
        return st;
    for (size_t i = 0; i < c->ncon; i++)
        latent_asm_zero_rowcol(B, c->con.pinned[i]);
    return gmm_band_axpy(1.0, 1.0, B, Qbar);
}

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
    for (size_t k = 0; k < c->ncomp; k++) {
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

const char *stack_factorisation(const void *p, double *bound)
{
    const stack_impl *c = p;
    if (bound)
        *bound = c->round_bound;
    return "cholesky";
}

/* latent_asm's normaliser: the kernels' rounding bound and, with
 * constraints, the prior's log-determinant on the subspace (top). */
gmm_status stack_normaliser(void *p, const double *theta, const double *y, double noise,
                                   const gmm_band *Q, double *ld, int *given)
{
    stack_impl *c = p;
    gmm_status st;
    if ((st = kernel_bound(c, theta, y, noise, &c->round_bound)))
        return st;
    *given = c->ncon > 0;
    return c->ncon ? stack_pinned_logdet(c, Q, ld) : GMM_OK;
}

gmm_status stack_normaliser_rev(void *p, double ldbar, gmm_band *Qbar)
{
    return stack_pinned_logdet_rev(p, ldbar, Qbar);
}
