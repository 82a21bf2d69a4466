/* hmc.c -- NUTS and fixed-length HMC with Stan's warm-up; see hmc.h.
 * Parameters, allocation and the run; the transitions are in
 * hmc_trajectory.c, the warm-up in hmc_adapt.c.
 *
 * With warmup = 0 there is no adaptation: eps is the heuristic's from
 * params.stepsize (params.search_stepsize = 0: params.stepsize itself) and
 * the metric is kept, for every transition.
 */
#include "gmm/hmc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/rng.h"
#include "hmc_impl.h"

#define MAX_DEPTH_LIMIT 30u
#define MAX_STEPS 10000000u

/* ---- parameters -------------------------------------------------------- */

void gmm_hmc_params_init(gmm_hmc_params *p)
{
    memset(p, 0, sizeof *p);
    p->warmup = 1000;
    p->draws = 1000;
    p->sampler = GMM_HMC_NUTS;
    p->max_depth = 10;
    p->steps = 10;
    p->stepsize = 1.0;
    p->search_stepsize = 1;
    p->target_accept = 0.8;
    p->gamma = 0.05;
    p->t0 = 10.0;
    p->kappa = 0.75;
    p->adapt_metric = 1;
    p->init_buffer = 75;
    p->term_buffer = 50;
    p->base_window = 25;
    p->max_energy_error = 1000.0;
    p->seed = 1;
    p->chain = 0;
}

static int pos_finite(double x) { return x > 0.0 && isfinite(x); }

gmm_status gmm_hmc_params_check(const gmm_hmc_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "hmc: no parameters");
    if (p->sampler != GMM_HMC_NUTS && p->sampler != GMM_HMC_STATIC)
        return gmm_error(GMM_EINVAL, "hmc: sampler must be GMM_HMC_NUTS or GMM_HMC_STATIC, got %d",
                         (int)p->sampler);
    if (p->max_depth < 1 || p->max_depth > MAX_DEPTH_LIMIT)
        return gmm_error(GMM_EINVAL, "hmc: max_depth must be in 1..%u, got %u", MAX_DEPTH_LIMIT,
                         p->max_depth);
    if (p->sampler == GMM_HMC_STATIC && (p->steps < 1 || p->steps > MAX_STEPS))
        return gmm_error(GMM_EINVAL, "hmc: steps must be in 1..%u, got %zu", MAX_STEPS, p->steps);
    if (!pos_finite(p->stepsize))
        return gmm_error(GMM_EINVAL, "hmc: stepsize must be finite and > 0, got %g", p->stepsize);
    if (!(p->stepsize_jitter >= 0.0 && p->stepsize_jitter < 1.0))
        return gmm_error(GMM_EINVAL, "hmc: stepsize_jitter must be in [0, 1), got %g",
                         p->stepsize_jitter);
    if (!(p->target_accept > 0.0 && p->target_accept < 1.0))
        return gmm_error(GMM_EINVAL, "hmc: target_accept must be in (0, 1), got %g",
                         p->target_accept);
    if (!pos_finite(p->gamma))
        return gmm_error(GMM_EINVAL, "hmc: gamma must be finite and > 0, got %g", p->gamma);
    if (!pos_finite(p->t0))
        return gmm_error(GMM_EINVAL, "hmc: t0 must be finite and > 0, got %g", p->t0);
    if (!(p->kappa > 0.0 && p->kappa <= 1.0))
        return gmm_error(GMM_EINVAL, "hmc: kappa must be in (0, 1], got %g", p->kappa);
    if (p->base_window < 1)
        return gmm_error(GMM_EINVAL, "hmc: base_window must be >= 1, got %zu", p->base_window);
    if (!pos_finite(p->max_energy_error))
        return gmm_error(GMM_EINVAL, "hmc: max_energy_error must be finite and > 0, got %g",
                         p->max_energy_error);
    /* warmup + draws must count without overflow */
    if (p->warmup > ((size_t)-1) / 2 || p->draws > ((size_t)-1) / 2)
        return gmm_error(GMM_EINVAL, "hmc: warmup and draws must be below %zu each",
                         ((size_t)-1) / 2);
    return GMM_OK;
}

/* ---- allocation -------------------------------------------------------- */

void gmm_hmc_free(gmm_hmc *h)
{
    if (!h)
        return;
    /* every vector lives in one block: see gmm_hmc_alloc */
    gmm_free(h->inv_metric);
    gmm_free(h->p_init_end);
    gmm_free(h);
}

gmm_hmc *gmm_hmc_alloc(size_t dim, const gmm_hmc_params *params)
{
    gmm_hmc *h = NULL;
    if (gmm_hmc_params_check(params) != GMM_OK)
        return NULL;
    if (dim == 0) {
        gmm_error(GMM_EINVAL, "hmc: dimension must be >= 1");
        return NULL;
    }
    size_t levels = params->max_depth; /* level 0 unused */
    /* inv_metric and its root, 2 x (q, g), 2 x (q, p, g), rho, rho_new,
     * p_new_beg, p_near, welford mean and m2 of the window and of its first
     * half, and 3 per level 2 .. max_depth - 1 (build_pair needs none for
     * level 1) */
    size_t nvec = 2 + 4 + 6 + 4 + 4 + 3 * (levels > 2 ? levels - 2 : 0);
    if (dim > ((size_t)-1) / sizeof(double) / nvec) {
        gmm_error(GMM_ENOMEM, "hmc: dimension %zu too large", dim);
        return NULL;
    }
    h = gmm_calloc(1, sizeof *h);
    if (!h)
        goto nomem;
    h->dim = dim;
    h->par = *params;
    h->inv_metric = gmm_malloc(nvec * dim, sizeof(double));
    h->p_init_end = gmm_calloc(3 * levels, sizeof(double *));
    if (!h->inv_metric || !h->p_init_end)
        goto nomem;
    h->p_final_beg = h->p_init_end + levels;
    h->rho_final = h->p_final_beg + levels;

    double *v = h->inv_metric + dim;
#define TAKE() (v += dim, v - dim)
    h->sqrt_metric = TAKE();
    h->cur_a.q = TAKE();
    h->cur_a.g = TAKE();
    h->cur_b.q = TAKE();
    h->cur_b.g = TAKE();
    h->zf.q = TAKE();
    h->zf.p = TAKE();
    h->zf.g = TAKE();
    h->zb.q = TAKE();
    h->zb.p = TAKE();
    h->zb.g = TAKE();
    h->rho = TAKE();
    h->rho_new = TAKE();
    h->p_new_beg = TAKE();
    h->p_near = TAKE();
    h->welford_mean = TAKE();
    h->welford_m2 = TAKE();
    h->half_mean = TAKE();
    h->half_m2 = TAKE();
    for (size_t d = 2; d < levels; d++) {
        h->p_init_end[d] = TAKE();
        h->p_final_beg[d] = TAKE();
        h->rho_final[d] = TAKE();
    }
#undef TAKE
    for (size_t i = 0; i < dim; i++)
        h->inv_metric[i] = h->sqrt_metric[i] = 1.0;
    h->cur = &h->cur_a;
    h->prop = &h->cur_b;
    h->eps = h->step = params->stepsize;
    return h;
nomem:
    gmm_hmc_free(h);
    gmm_error(GMM_ENOMEM, "hmc: out of memory (dimension %zu, max_depth %u)", dim,
              params->max_depth);
    return NULL;
}
/* ---- public ---------------------------------------------------------------- */

gmm_status gmm_hmc_init(gmm_hmc *h, const double *q0, const gmm_hmc_target *target)
{
    gmm_status st;
    if (!h || !q0 || !target || !target->logp)
        return gmm_error(GMM_EINVAL, "hmc: init needs a sampler, a start and a target");
    for (size_t i = 0; i < h->dim; i++)
        if (!isfinite(q0[i]))
            return gmm_error_at(GMM_EINVAL, i, "hmc: initial point: q[%zu] = %g is not finite", i,
                                q0[i]);
    h->ready = 0;
    h->target = *target;
    gmm_rng_seed(&h->rng, h->par.seed, h->par.chain);
    h->iteration = 0;
    h->div_warmup = h->div_sampling = 0;
    h->failures = 0;
    h->fail_msg[0] = '\0';
    h->eps = h->par.stepsize;
    h->cur = &h->cur_a;
    h->prop = &h->cur_b;
    copy_vec(h->cur->q, q0, h->dim);

    double lp = 0.0;
    st = target->logp(target->ctx, h->cur->q, &lp, h->cur->g);
    if (st != GMM_OK) {
        char msg[GMM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", gmm_error_message());
        return gmm_error(st, "hmc: initial point: %s", msg);
    }
    if (!isfinite(lp))
        return gmm_error(GMM_EDOM, "hmc: initial point: log density %g", lp);
    for (size_t i = 0; i < h->dim; i++)
        if (!isfinite(h->cur->g[i]))
            return gmm_error_at(GMM_EDOM, i, "hmc: initial point: gradient[%zu] = %g", i,
                                h->cur->g[i]);
    h->cur->lp = lp;
    h->cur->kin = 0.0;

    hmc_windows_setup(h);
    hmc_da_restart(h);
    h->da_mu = log(10.0 * h->par.stepsize); /* Stan: from the user's step size */
    if ((h->par.warmup > 0 || h->par.search_stepsize) && (st = hmc_init_stepsize(h)) != GMM_OK)
        return st;
    h->ready = 1;
    return GMM_OK;
}

gmm_status gmm_hmc_iterate(gmm_hmc *h, gmm_hmc_draw *d)
{
    gmm_status st;
    if (!h || !d)
        return gmm_error(GMM_EINVAL, "hmc: iterate needs a sampler and a draw");
    if (!h->ready)
        return gmm_error(GMM_EINVAL, "hmc: iterate before a successful gmm_hmc_init");
    if (h->iteration >= h->par.warmup + h->par.draws)
        return gmm_error(GMM_EINVAL, "hmc: all %zu iterations (warmup + draws) are made",
                         h->par.warmup + h->par.draws);
    memset(d, 0, sizeof *d);
    int warm = h->iteration < h->par.warmup;
    /* Jitter only after warm-up, unlike Stan: dual averaging then learns
     * from the nominal step alone, and a run's warm-up does not depend on J.
     * The draw precedes the momentum's, and none is made with J = 0, so
     * unjittered runs keep their streams. */
    h->step = h->eps;
    if (!warm && h->par.stepsize_jitter > 0.0)
        h->step *= 1.0 + h->par.stepsize_jitter * (2.0 * gmm_rng_uniform(&h->rng) - 1.0);
    d->stepsize = h->step;
    d->warmup = warm;
    d->iteration = h->iteration;
    st = h->par.sampler == GMM_HMC_NUTS ? hmc_nuts_transition(h, d) : hmc_static_transition(h, d);
    if (st != GMM_OK)
        goto fail;
    d->q = h->cur->q;
    d->lp = h->cur->lp;
    d->energy = h->cur->kin - h->cur->lp;
    if (d->divergent) {
        if (warm)
            h->div_warmup++;
        else
            h->div_sampling++;
    }

    if (warm) {
        hmc_da_learn(h, d->accept_stat);
        if (h->windows) {
            int u = hmc_learn_variance(h, h->cur->q);
            if (u < 0) {
                st = gmm_error(GMM_EDOM, "hmc: numerical overflow in metric adaptation "
                               "(extreme values of q: an improper or too wide target?)");
                goto fail;
            }
            if (u > 0) {
                d->metric_updated = 1;
                if ((st = hmc_init_stepsize(h)) != GMM_OK)
                    goto fail;
                h->da_mu = log(10.0 * h->eps);
                hmc_da_restart(h);
            }
        }
        /* End of warm-up: the averaged iterate -- unless a metric window
         * ended on this very iteration (term_buffer = 0) and restarted the
         * averaging, where Stan would take exp(0) = 1; the step size the
         * search just found is kept instead. */
        if (h->iteration + 1 == h->par.warmup && h->da_counter > 0.0)
            h->eps = exp(h->da_xbar);
    }
    h->iteration++;

    if (h->par.progress) {
        gmm_hmc_progress pr;
        pr.chain = h->par.chain;
        pr.iteration = h->iteration;
        pr.total = h->par.warmup + h->par.draws;
        pr.draw = d;
        pr.warmup_divergences = h->div_warmup;
        pr.divergences = h->div_sampling;
        if (h->par.progress(h->par.user, &pr))
            return gmm_error(GMM_ECANCEL, "hmc: cancelled at iteration %zu", h->iteration);
    }
    return GMM_OK;
fail:
    /* the state may be part-overwritten: a restart is needed */
    h->ready = 0;
    return st;
}

double gmm_hmc_stepsize(const gmm_hmc *h) { return h->eps; }

const double *gmm_hmc_inv_metric(const gmm_hmc *h) { return h->inv_metric; }

gmm_status gmm_hmc_set_inv_metric(gmm_hmc *h, const double *inv_metric)
{
    if (!h || !inv_metric)
        return gmm_error(GMM_EINVAL, "hmc: set_inv_metric needs a sampler and a metric");
    for (size_t i = 0; i < h->dim; i++)
        if (!pos_finite(inv_metric[i]))
            return gmm_error_at(GMM_EINVAL, i, "hmc: inv_metric[%zu] must be finite and > 0, got %g",
                                i, inv_metric[i]);
    copy_vec(h->inv_metric, inv_metric, h->dim);
    metric_changed(h);
    return GMM_OK;
}

size_t gmm_hmc_failures(const gmm_hmc *h, const char **last_message)
{
    if (last_message)
        *last_message = h->fail_msg;
    return h->failures;
}

gmm_status gmm_hmc_set_point(gmm_hmc *h, const double *q)
{
    if (!h || !h->ready || !q)
        return gmm_error(GMM_EINVAL, "hmc: set_point needs an initialised sampler and a point");
    if (q != h->cur->q)
        memmove(h->cur->q, q, h->dim * sizeof *q);
    double lp = 0.0;
    gmm_status st = h->target.logp(h->target.ctx, h->cur->q, &lp, h->cur->g);
    if (st == GMM_OK && !isfinite(lp))
        st = gmm_error(GMM_EDOM, "log density %g", lp);
    for (size_t i = 0; st == GMM_OK && i < h->dim; i++)
        if (!isfinite(h->cur->g[i]))
            st = gmm_error_at(GMM_EDOM, i, "gradient[%zu] = %g", i, h->cur->g[i]);
    if (st != GMM_OK) {
        char msg[GMM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", gmm_error_message());
        h->ready = 0;
        return gmm_error(st, "hmc: set point: %s", msg);
    }
    h->cur->lp = lp;
    h->cur->kin = 0.0;
    return GMM_OK;
}
