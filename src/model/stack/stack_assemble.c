/* stack_assemble.c -- the stacked prior's precision: Q(theta) assembled
 * into the joint band from the components' slots (stack_impl.h), its
 * reverse mode thetabar += sum over slots of Qbar dQ/dtheta, and the
 * latent's prior operations on them (latent.h; with constraints the
 * log-determinant on the subspace, stack_normaliser.c). */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"

/* The component's coefficients (stack_impl.h). */
static gmm_status coef(const stack_comp *m, const double *th, double *cg, double *dc)
{
    return m->model == GMM_STACK_CORR ? stack_corr_coef(m, th, cg, dc)
                                      : stack_comp_coef(m, th, cg, dc);
}

gmm_status stack_assemble(stack_impl *c, const double *theta, gmm_band *Q, int rest)
{
    gmm_status st;
    gmm_band_set_zero(Q);
    for (size_t k = 0; k < c->ncomp; k++) {
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
            if (m->model == GMM_STACK_GRAPH && (st = stack_graph_bands(m)))
                return st;
            if (m->model == GMM_STACK_GRAPH ? (st = gmm_gmrf_assemble(m->g, th, m->gQ))
                                            : (st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            for (size_t s = 0; s < m->nslot; s++)
                *gmm_band_ptr(Q, m->joint_row[s], m->joint_col[s]) +=
                    *gmm_band_ptr(m->gQ, m->own_row[s], m->own_col[s]);
            continue;
        }
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
        if ((st = coef(m, th, cg, dc)))
            return st;
        for (size_t s = 0; s < m->nslot; s++)
            *gmm_band_ptr(Q, m->joint_row[s], m->joint_col[s]) +=
                cg[m->slot_group[s]] * m->slot_value[s];
    }
    return GMM_OK;
}

gmm_status stack_asm_assemble(void *ctx, const double *theta, gmm_band *Q)
{
    return stack_assemble(ctx, theta, Q, 0);
}

gmm_status stack_asm_assemble_rest(void *ctx, const double *theta, gmm_band *Q)
{
    return stack_assemble(ctx, theta, Q, 1);
}

gmm_status stack_assemble_rev(stack_impl *c, const double *theta, const gmm_band *Qbar,
                              double *thetabar, int rest)
{
    gmm_status st;
    for (size_t k = 0; k < c->ncomp; k++) {
        stack_comp *m = &c->comp[k];
        const double *th = theta + m->par0;
        if (rest && m->damped)
            continue;
        if (m->model == GMM_STACK_GRAPH || m->model == GMM_STACK_KERNEL) {
            /* the SSM's reverse follows its own forward call at th (this
             * function runs at other thetas too: the whitening's) */
            if (m->model == GMM_STACK_KERNEL && (st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            if (m->model == GMM_STACK_GRAPH && (st = stack_graph_bands(m)))
                return st;
            gmm_band_set_zero(m->gQbar);
            for (size_t s = 0; s < m->nslot; s++)
                *gmm_band_ptr(m->gQbar, m->own_row[s], m->own_col[s]) =
                    *gmm_band_ptr(Qbar, m->joint_row[s], m->joint_col[s]);
            if (m->model == GMM_STACK_GRAPH
                    ? (st = gmm_gmrf_assemble_rev(m->g, th, m->gQbar, thetabar + m->par0))
                    : (st = gmm_ssm_prior_rev(m->ssm, m->gQbar, 0.0, thetabar + m->par0)))
                return st;
            continue;
        }
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP], gb[STACK_NGROUP] = {0};
        if ((st = coef(m, th, cg, dc)))
            return st;
        for (size_t s = 0; s < m->nslot; s++)
            gb[m->slot_group[s]] +=
                *gmm_band_ptr(Qbar, m->joint_row[s], m->joint_col[s]) * m->slot_value[s];
        for (size_t p = 0; p < m->npar; p++)
            for (size_t g = 0; g < STACK_NGROUP; g++)
                thetabar[m->par0 + p] += gb[g] * dc[g * STACK_NPAR + p];
    }
    return GMM_OK;
}

/* thetabar += sum over stored slots of Qbar dQ/dtheta. */
gmm_status stack_asm_assemble_rev(void *ctx, const double *theta, const gmm_band *Qbar,
                               double *thetabar)
{
    return stack_assemble_rev(ctx, theta, Qbar, thetabar, 0);
}

gmm_status stack_asm_assemble_rev_rest(void *ctx, const double *theta, const gmm_band *Qbar,
                                    double *thetabar)
{
    return stack_assemble_rev(ctx, theta, Qbar, thetabar, 1);
}

/* With constraints, log|Q| on the subspace (latent.h) from Q^. */
gmm_status stack_prior(void *p, const double *theta, gmm_band *Q, double *logdet)
{
    stack_impl *c = p;
    *logdet = NAN;
    gmm_status st = stack_asm_assemble(c, theta, Q);
    if (st == GMM_OK && c->ncon && (st = stack_band_work(c)) == GMM_OK)
        st = stack_pinned_logdet(c, Q, logdet);
    c->prior_ok = st == GMM_OK;
    if (c->prior_ok)
        memcpy(c->prior_theta, theta, c->nparam * sizeof *theta);
    return st;
}

gmm_status stack_prior_rev(void *p, const gmm_band *Qbar, double logdetbar,
                                  double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    if (!c->prior_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: no gmm_latent_prior before");
    if ((st = stack_asm_assemble_rev(c, c->prior_theta, Qbar, thetabar)) || logdetbar == 0.0)
        return st;
    gmm_band_set_zero(c->as.gs.Qbar);
    if ((st = stack_pinned_logdet_rev(c, logdetbar, c->as.gs.Qbar)))
        return st;
    return stack_asm_assemble_rev(c, c->prior_theta, c->as.gs.Qbar, thetabar);
}
