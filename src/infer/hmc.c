/* hmc.c -- NUTS and fixed-length HMC with Stan's warm-up; see hmc.h.
 *
 * Written from Stan's base_nuts.hpp, base_hmc.hpp (init_stepsize),
 * stepsize_adaptation.hpp, windowed_adaptation.hpp and var_adaptation.hpp;
 * differences are in storage only, and listed where they occur.
 *
 * Conventions.  A point holds q, its log density lp and gradient g of logp
 * (Stan keeps V = -lp and dV/dq), and for trajectory ends the momentum p and
 * kinetic energy kin = p' M^-1 p / 2.  lp = -inf marks a refused point.
 *
 * HAMILTONIAN.  H(q, p) = -logp(q) + p' M^-1 p / 2 with M^-1 = diag(inv_metric)
 * (unit unless adapted or set), integrated by leapfrog with step size eps.
 *
 * NUTS (Hoffman & Gelman 2014; Betancourt 2017, "A conceptual introduction to
 * HMC", appendix A), as in Stan's base_nuts since 2.26:
 *   - the trajectory doubles in a random direction (forward or backward in
 *     time) until the generalised no-U-turn criterion fails, a new subtree is
 *     invalid, or max_depth doublings were made;
 *   - the criterion p#_-.rho > 0 and p#_+.rho > 0 (p# = M^-1 p, rho the sum of
 *     the momenta between the two ends) is checked at every merge of two
 *     subtrees, over the merged tree and over each subtree extended by the
 *     neighbouring state of the other (the checks Stan added in 2.26, which
 *     catch U-turns that fall between subtrees);
 *   - states are drawn by multinomial sampling, weights exp(-H): within a new
 *     subtree uniformly-progressively (here as a reservoir over its leaves, one
 *     proposal buffer instead of one per level; the same distribution as
 *     Stan's merge-by-merge choice), and between the old trajectory and the
 *     new subtree by biased progressive sampling (the new subtree's proposal
 *     is taken with probability min(1, W_new / W_old));
 *   - a leaf with H - H0 > max_energy_error is a divergence: its subtree is
 *     invalid and the trajectory stops.
 * accept_stat__ is the mean over all leaves built of min(1, exp(H0 - H)).
 *
 * FIXED-LENGTH HMC: `steps` leapfrog steps, then a Metropolis accept/reject.
 *
 * WARM-UP (the first `warmup` iterations; as Stan's adapt_diag_e_nuts):
 *   - step size: before the first iteration, Stan's heuristic (double or halve
 *     eps from params.stepsize until the one-step acceptance crosses 0.8);
 *     then Nesterov dual averaging of log eps towards accept_stat =
 *     target_accept (Hoffman & Gelman 2014, section 3.2), mu = log(10 eps0),
 *     gamma, t0, kappa as in params; at the end of warm-up eps = exp(x_bar);
 *   - metric (adapt_metric): the variance of each coordinate over windows --
 *     an initial buffer of init_buffer iterations, then windows of
 *     base_window, doubling, the last stretched to end term_buffer iterations
 *     before the end of warm-up; when init_buffer + base_window + term_buffer
 *     exceed warmup, 15% / 75% / 10% of warmup; with warmup < 20 no metric
 *     adaptation.  At the end of a window inv_metric = (n / (n + 5)) var +
 *     1e-3 (5 / (n + 5)) (Welford variance of the window's n draws), the step
 *     size heuristic runs again from the current point, mu = log(10 eps), and
 *     dual averaging restarts.  With metric_pooling the window's estimates
 *     var_i are pooled instead: inv_metric_i = m + w (var_i - m), m their
 *     mean, w = tau^2 / (tau^2 + e^2) with e^2 the estimates' noise (from
 *     the differences between the window's two halves, mean_i (var_a,i -
 *     var_b,i)^2 n_a n_b / n^2) and tau^2 = max(0, sample variance of the
 *     var_i - e^2) the true variances' spread: Stan's rule with the
 *     pseudo-sample size n e^2 / tau^2 estimated from the window, toward the
 *     common value (w = n / (n + 5) when a half has fewer than 2 draws).  So a
 *     metric that should be unit is not made noisy by its estimate (the
 *     noise of ~ 1/sqrt(n) per coordinate over thousands of coordinates
 *     shortens the step size), and one that should not be keeps its
 *     estimates (w -> 1 as the spread exceeds the noise).
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

#define MAX_DEPTH_LIMIT 30u
#define MAX_STEPS 10000000u
#define STEPSIZE_MAX 1e7 /* Stan's "posterior is improper" bound */

typedef struct {
    double *q, *p, *g; /* p is NULL for the sample/proposal buffers */
    double lp, kin;
} point;

struct gmm_hmc {
    size_t dim;
    gmm_hmc_params par;
    gmm_hmc_target target;
    gmm_rng rng;
    int ready;

    double *inv_metric;
    double *sqrt_metric;  /* 1 / sqrt(inv_metric): momentum scale */
    point cur_a, cur_b;   /* the chain's state and the proposal (swapped) */
    point *cur, *prop;
    point zf, zb;         /* the trajectory's forward and backward ends */
    double *rho;          /* sum of the momenta over the trajectory */
    double *rho_new;      /* ... over the subtree being built */
    double *p_new_beg;    /* momentum at the subtree's first leaf */
    double *p_near;       /* old end momentum adjacent to the new subtree */
    /* Per recursion level d = 2 .. max_depth - 1, when merging the two halves
     * of a subtree of depth d: the momentum at the end of the first half, at
     * the start of the second, and the second half's momentum sum. */
    double **p_init_end, **p_final_beg, **rho_final;
    double *welford_mean, *welford_m2;
    double *half_mean, *half_m2; /* the window's first half (metric_pooling) */

    /* the transition being built */
    double H0;
    double lsw_sub;       /* log sum of weights exp(H0 - H) over the subtree */
    double sum_metro;
    size_t n_leapfrog;
    int divergent;

    /* step size and dual averaging (stepsize_adaptation.hpp) */
    double eps;           /* nominal step size */
    double step;          /* this transition's: eps, jittered after warm-up */
    double da_mu, da_sbar, da_xbar;
    double da_counter;

    /* metric windows (windowed_adaptation.hpp); unsigned as there */
    int windows;          /* 0: no metric adaptation */
    size_t w_warmup, w_init, w_term, w_base;
    size_t w_counter, w_next, w_size;
    size_t w_begin;       /* the window's first iteration */
    size_t welford_n, half_n;

    size_t iteration;
    size_t div_warmup, div_sampling;
    size_t failures;
    char fail_msg[GMM_ERROR_MAX];
};

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

/* ---- small pieces -------------------------------------------------------- */

static double log_sum_exp(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* A refusal at z: lp = -inf, counted, its reason kept. */
static void refuse(gmm_hmc *h, point *z, const char *why)
{
    h->failures++;
    snprintf(h->fail_msg, sizeof h->fail_msg, "%s", why);
    gmm_error_clear();
    z->lp = -INFINITY;
}

/* Evaluate the target at z->q into z->lp, z->g.  A domain failure (GMM_EDOM,
 * GMM_ENOTPD, non-finite value) gives lp = -inf and GMM_OK; any other status
 * is returned.  The gradient is checked by the caller (leapfrog: through the
 * kinetic energy it feeds). */
static gmm_status eval_point(gmm_hmc *h, point *z)
{
    double lp = 0.0;
    gmm_status st = h->target.logp(h->target.ctx, z->q, &lp, z->g);
    if (st == GMM_OK && isfinite(lp))
        z->lp = lp;
    else if (st == GMM_OK)
        refuse(h, z, "hmc: the log density is not finite");
    else if (st == GMM_EDOM || st == GMM_ENOTPD)
        refuse(h, z, gmm_error_message());
    else
        return st;
    return GMM_OK;
}

/* p ~ N(0, M): p_i = z_i sqrt(M_ii), z_i standard normal pairs by
 * Marsaglia's polar method (no trigonometry: the momentum draw is most of
 * the sampler's own cost on a cheap target); sets z->kin = |z|^2 / 2. */
static void sample_momentum(gmm_hmc *h, point *z)
{
    double kin = 0.0;
    size_t n = h->dim;
    for (size_t i = 0; i < n; i += 2) {
        double u, v, r;
        do {
            u = 2.0 * gmm_rng_uniform(&h->rng) - 1.0;
            v = 2.0 * gmm_rng_uniform(&h->rng) - 1.0;
            r = u * u + v * v;
        } while (r >= 1.0 || r == 0.0);
        double f = sqrt(-2.0 * log(r) / r);
        z->p[i] = f * u * h->sqrt_metric[i];
        kin += f * f * u * u;
        if (i + 1 < n) {
            z->p[i + 1] = f * v * h->sqrt_metric[i + 1];
            kin += f * f * v * v;
        }
    }
    z->kin = 0.5 * kin;
}

/* inv_metric changed: its root for sample_momentum. */
static void metric_changed(gmm_hmc *h)
{
    for (size_t i = 0; i < h->dim; i++)
        h->sqrt_metric[i] = 1.0 / sqrt(h->inv_metric[i]);
}

/* One leapfrog step of size eps (negative: backward in time) from z, in
 * place.  A refused point gets lp = -inf (its momentum is then stale and
 * never used: H = inf ends the trajectory).  A non-finite gradient makes a
 * non-finite momentum and so a non-finite kinetic energy: that test covers
 * both at no cost. */
static gmm_status leapfrog(gmm_hmc *h, point *z, double eps)
{
    const double *m = h->inv_metric;
    double *p = z->p, *q = z->q;
    const double *g = z->g;
    double half = 0.5 * eps, k[4] = {0.0, 0.0, 0.0, 0.0};
    size_t n = h->dim, i;
    for (i = 0; i < n; i++) {
        p[i] += half * g[i];
        q[i] += eps * m[i] * p[i];
    }
    gmm_status st = eval_point(h, z);
    if (st != GMM_OK || z->lp == -INFINITY)
        return st;
    /* four partial sums: the additions need not wait for each other */
    for (i = 0; i + 4 <= n; i += 4)
        for (size_t j = 0; j < 4; j++) {
            p[i + j] += half * g[i + j];
            k[j] += m[i + j] * p[i + j] * p[i + j];
        }
    for (; i < n; i++) {
        p[i] += half * g[i];
        k[0] += m[i] * p[i] * p[i];
    }
    z->kin = 0.5 * ((k[0] + k[1]) + (k[2] + k[3]));
    if (!isfinite(z->kin))
        refuse(h, z, "hmc: the gradient (or the momentum it drives) is not finite");
    return GMM_OK;
}

/* H at z; +inf for a refused point or NaN. */
static double hamiltonian(const point *z)
{
    double H = z->kin - z->lp;
    return isnan(H) || z->lp == -INFINITY ? INFINITY : H;
}

static void copy_vec(double *dst, const double *src, size_t n) { memcpy(dst, src, n * sizeof *dst); }

static void copy_state(point *dst, const point *src, size_t n)
{
    copy_vec(dst->q, src->q, n);
    copy_vec(dst->g, src->g, n);
    if (dst->p && src->p)
        copy_vec(dst->p, src->p, n);
    dst->lp = src->lp;
    dst->kin = src->kin;
}

/* ---- NUTS ------------------------------------------------------------------ */

/* A leaf: one leapfrog step from the trajectory end z in direction dir.
 * Weighs it, offers it to the subtree's reservoir (h->prop), and copies its
 * momentum to p_beg and rho when they are not NULL (the subtree's first
 * momentum and momentum sum). */
static gmm_status leaf(gmm_hmc *h, point *z, double dir, double *p_beg, double *rho, int *valid)
{
    gmm_status st = leapfrog(h, z, dir * h->step);
    if (st != GMM_OK)
        return st;
    h->n_leapfrog++;
    double H = hamiltonian(z);
    if (H - h->H0 > h->par.max_energy_error)
        h->divergent = 1;
    double lw = h->H0 - H;
    h->sum_metro += lw > 0.0 ? 1.0 : exp(lw);
    if (lw > -INFINITY) {
        /* Reservoir sampling over the subtree's leaves: leaf i is kept with
         * probability w_i / W_i (W_i the weight of leaves 1..i), so the
         * survivor is leaf i with probability w_i / W -- Stan's multinomial
         * choice within the subtree, with one buffer instead of one per
         * level. */
        double lsw = log_sum_exp(h->lsw_sub, lw);
        double a = exp(lw - lsw);
        h->lsw_sub = lsw;
        if (a >= 1.0 || gmm_rng_uniform(&h->rng) < a) {
            copy_vec(h->prop->q, z->q, h->dim);
            copy_vec(h->prop->g, z->g, h->dim);
            h->prop->lp = z->lp;
            h->prop->kin = z->kin;
        }
    }
    if (!h->divergent && p_beg)
        copy_vec(p_beg, z->p, h->dim);
    if (!h->divergent && rho)
        copy_vec(rho, z->p, h->dim);
    *valid = !h->divergent;
    return GMM_OK;
}

/* build_tree for depth 1, two leaves A and B: the three checks of a merge
 * coincide (merged: ends pA, pB, sum pA + pB; each half extended by the
 * other: the same), so p#A.(pA + pB) > 0 and p#B.(pA + pB) > 0 decide, and
 * neither leaf needs its momentum copied but to p_beg.  Half of all merges
 * are of this kind; this one reads 3 vectors where the general one reads 7. */
static gmm_status build_pair(gmm_hmc *h, point *z, double dir, double *p_beg, double *rho,
                             int *valid)
{
    gmm_status st = leaf(h, z, dir, p_beg, NULL, valid);
    if (st != GMM_OK || !*valid)
        return st;
    st = leaf(h, z, dir, NULL, NULL, valid);
    if (st != GMM_OK || !*valid)
        return st;
    const double *m = h->inv_metric, *pa = p_beg, *pb = z->p;
    double a0 = 0, a1 = 0, b0 = 0, b1 = 0; /* even and odd i: two chains each */
    size_t n = h->dim, i;
    for (i = 0; i + 2 <= n; i += 2) {
        double r0 = pa[i] + pb[i], r1 = pa[i + 1] + pb[i + 1];
        a0 += m[i] * pa[i] * r0;
        a1 += m[i + 1] * pa[i + 1] * r1;
        b0 += m[i] * pb[i] * r0;
        b1 += m[i + 1] * pb[i + 1] * r1;
        rho[i] = r0;
        rho[i + 1] = r1;
    }
    if (i < n) {
        double r = pa[i] + pb[i];
        a0 += m[i] * pa[i] * r;
        b0 += m[i] * pb[i] * r;
        rho[i] = r;
    }
    *valid = a0 + a1 > 0 && b0 + b1 > 0;
    return GMM_OK;
}

/* Build a subtree of 2^depth leaves from z in direction dir (base_nuts::
 * build_tree).  On return p_beg is the momentum at its first leaf, z->p at
 * its last, rho the sum of its momenta; *valid is 0 when it diverged or
 * a sub-subtree made a U-turn. */
static gmm_status build_tree(gmm_hmc *h, unsigned depth, point *z, double dir, double *p_beg,
                             double *rho, int *valid)
{
    if (depth == 0)
        return leaf(h, z, dir, p_beg, rho, valid);
    if (depth == 1)
        return build_pair(h, z, dir, p_beg, rho, valid);
    gmm_status st = build_tree(h, depth - 1, z, dir, p_beg, rho, valid);
    if (st != GMM_OK || !*valid)
        return st;
    double *pie = h->p_init_end[depth], *pfb = h->p_final_beg[depth];
    double *rf = h->rho_final[depth];
    copy_vec(pie, z->p, h->dim);
    st = build_tree(h, depth - 1, z, dir, pfb, rf, valid);
    if (st != GMM_OK || !*valid)
        return st;

    /* The generalised criterion p#.r > 0 at both ends (p# = M^-1 p), over
     * the merged subtree (r = rho_init + rho_final), and over each half
     * extended by the adjacent leaf of the other: the first half with the
     * second's first leaf (r = rho_init + pfb, ends p_beg and pfb), the second
     * with the first's last leaf (r = rho_final + pie, ends pie and p_end).
     * One pass; rho becomes the merged sum. */
    const double *m = h->inv_metric, *pe = z->p;
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0, c1 = 0, c2 = 0;
    for (size_t i = 0; i < h->dim; i++) {
        double ri = rho[i], rfi = rf[i], mi = m[i];
        double bs = mi * p_beg[i], es = mi * pe[i], fs = mi * pfb[i], is = mi * pie[i];
        double rs = ri + rfi, ra = ri + pfb[i], rb = rfi + pie[i];
        a1 += bs * rs;
        a2 += es * rs;
        b1 += bs * ra;
        b2 += fs * ra;
        c1 += is * rb;
        c2 += es * rb;
        rho[i] = rs;
    }
    *valid = a1 > 0 && a2 > 0 && b1 > 0 && b2 > 0 && c1 > 0 && c2 > 0;
    return GMM_OK;
}

static gmm_status nuts_transition(gmm_hmc *h, gmm_hmc_draw *d)
{
    size_t n = h->dim;
    const double *m = h->inv_metric;
    point *z0 = h->cur;
    gmm_status st = GMM_OK;

    /* start: fresh momentum at the current state; both ends there */
    copy_vec(h->zf.q, z0->q, n);
    copy_vec(h->zf.g, z0->g, n);
    h->zf.lp = z0->lp;
    sample_momentum(h, &h->zf);
    h->H0 = hamiltonian(&h->zf);
    copy_state(&h->zb, &h->zf, n);
    z0->kin = h->zf.kin;
    copy_vec(h->rho, h->zf.p, n);

    point *sample = z0; /* the transition's draw so far */
    double lsw = 0.0;   /* log sum of weights over the trajectory: log exp(H0 - H0) */
    unsigned depth = 0;
    h->n_leapfrog = 0;
    h->sum_metro = 0.0;
    h->divergent = 0;

    while (depth < h->par.max_depth) {
        int forward = gmm_rng_uniform(&h->rng) > 0.5;
        point *z = forward ? &h->zf : &h->zb, *zfar = forward ? &h->zb : &h->zf;
        int valid = 0;
        copy_vec(h->p_near, z->p, n);
        h->lsw_sub = -INFINITY;
        st = build_tree(h, depth, z, forward ? 1.0 : -1.0, h->p_new_beg, h->rho_new, &valid);
        if (st != GMM_OK)
            goto fail;
        if (!valid)
            break;
        depth++;

        /* biased progressive sampling between old trajectory and subtree */
        if (h->lsw_sub > lsw || gmm_rng_uniform(&h->rng) < exp(h->lsw_sub - lsw)) {
            point *t = sample;
            sample = h->prop;
            h->prop = t;
        }
        lsw = log_sum_exp(lsw, h->lsw_sub);

        /* The criterion over the whole trajectory (far end to new end) and
         * across the junction: the old trajectory extended by the subtree's
         * first leaf (ends: far end, p_new_beg), the subtree extended by the
         * old end next to it (ends: p_near, new end).  One pass, as in
         * build_tree; rho becomes the whole trajectory's sum. */
        const double *pf = zfar->p, *pe = z->p, *pb = h->p_new_beg, *pn = h->p_near;
        double *rho = h->rho;
        const double *rn = h->rho_new;
        double a1 = 0, a2 = 0, b1 = 0, b2 = 0, c1 = 0, c2 = 0;
        for (size_t i = 0; i < n; i++) {
            double fs = m[i] * pf[i], es = m[i] * pe[i], bs = m[i] * pb[i], ns = m[i] * pn[i];
            double rs = rho[i] + rn[i], ra = rho[i] + pb[i], rb = rn[i] + pn[i];
            a1 += fs * rs;
            a2 += es * rs;
            b1 += fs * ra;
            b2 += bs * ra;
            c1 += ns * rb;
            c2 += es * rb;
            rho[i] = rs;
        }
        if (!(a1 > 0 && a2 > 0 && b1 > 0 && b2 > 0 && c1 > 0 && c2 > 0))
            break;
    }

    h->cur = sample;
    h->prop = sample == &h->cur_a ? &h->cur_b : &h->cur_a;
    d->treedepth = depth;
    d->n_leapfrog = h->n_leapfrog;
    d->divergent = h->divergent;
    d->accept_stat = h->sum_metro / (double)h->n_leapfrog;
    return GMM_OK;
fail:
    h->cur = sample;
    h->prop = sample == &h->cur_a ? &h->cur_b : &h->cur_a;
    return st;
}

/* ---- fixed-length HMC ---------------------------------------------------- */

static gmm_status static_transition(gmm_hmc *h, gmm_hmc_draw *d)
{
    size_t n = h->dim;
    point *z0 = h->cur, *z = &h->zf;
    copy_vec(z->q, z0->q, n);
    copy_vec(z->g, z0->g, n);
    z->lp = z0->lp;
    sample_momentum(h, z);
    z0->kin = z->kin;
    double H0 = hamiltonian(z);
    size_t k;
    for (k = 0; k < h->par.steps; k++) {
        gmm_status st = leapfrog(h, z, h->step);
        if (st != GMM_OK)
            return st;
        if (z->lp == -INFINITY) { /* a refused point: the trajectory stops */
            k++;
            break;
        }
    }
    double H = hamiltonian(z);
    double a = exp(H0 - H);
    d->divergent = H - H0 > h->par.max_energy_error;
    if (a >= 1.0 || gmm_rng_uniform(&h->rng) < a) {
        point *t = h->prop;
        copy_vec(t->q, z->q, n);
        copy_vec(t->g, z->g, n);
        t->lp = z->lp;
        t->kin = z->kin;
        h->prop = h->cur;
        h->cur = t;
    }
    d->treedepth = 0;
    d->n_leapfrog = k;
    d->accept_stat = a < 1.0 ? a : 1.0;
    return GMM_OK;
}

/* ---- adaptation ------------------------------------------------------------ */

/* Stan's initial step-size heuristic (base_hmc::init_stepsize): from the
 * current state, one leapfrog step with fresh momentum; double eps while the
 * acceptance exp(H0 - H) stays above 0.8, or halve it while it stays below. */
static gmm_status init_stepsize(gmm_hmc *h)
{
    const double log08 = log(0.8);
    point *z = &h->zf, *z0 = h->cur;
    int direction = 0;
    if (!(h->eps > 0.0) || h->eps > STEPSIZE_MAX)
        return GMM_OK;
    for (;;) {
        copy_vec(z->q, z0->q, h->dim);
        copy_vec(z->g, z0->g, h->dim);
        z->lp = z0->lp;
        sample_momentum(h, z);
        double H0 = hamiltonian(z);
        gmm_status st = leapfrog(h, z, h->eps);
        if (st != GMM_OK)
            return st;
        double dH = H0 - hamiltonian(z);
        if (direction == 0) { /* the first probe only sets the direction */
            direction = dH > log08 ? 1 : -1;
            continue;
        }
        if (direction == 1 && !(dH > log08))
            break;
        if (direction == -1 && !(dH < log08))
            break;
        h->eps = direction == 1 ? 2.0 * h->eps : 0.5 * h->eps;
        if (h->eps > STEPSIZE_MAX)
            return gmm_error(GMM_EDOM, "hmc: step size search passed %g: the target looks "
                             "improper (a density that does not decay)", STEPSIZE_MAX);
        if (h->eps == 0.0)
            return gmm_error(GMM_EDOM, "hmc: step size search reached 0: no step is accepted "
                             "(a discontinuous target, or one refused near the current point)");
    }
    return GMM_OK;
}

static void da_restart(gmm_hmc *h)
{
    h->da_counter = 0.0;
    h->da_sbar = 0.0;
    h->da_xbar = 0.0;
}

/* Dual averaging of log eps (stepsize_adaptation::learn_stepsize). */
static void da_learn(gmm_hmc *h, double accept_stat)
{
    const gmm_hmc_params *p = &h->par;
    double a = accept_stat > 1.0 ? 1.0 : accept_stat;
    h->da_counter += 1.0;
    double eta = 1.0 / (h->da_counter + p->t0);
    h->da_sbar = (1.0 - eta) * h->da_sbar + eta * (p->target_accept - a);
    double x = h->da_mu - h->da_sbar * sqrt(h->da_counter) / p->gamma;
    double x_eta = pow(h->da_counter, -p->kappa);
    h->da_xbar = (1.0 - x_eta) * h->da_xbar + x_eta * x;
    h->eps = exp(x);
}

/* windowed_adaptation::set_window_params and restart. */
static void windows_setup(gmm_hmc *h)
{
    const gmm_hmc_params *p = &h->par;
    size_t w = p->warmup;
    h->windows = p->adapt_metric && w >= 20;
    h->w_warmup = w;
    h->w_init = p->init_buffer;
    h->w_term = p->term_buffer;
    h->w_base = p->base_window;
    /* the three stages do not fit (compare without overflow) */
    if (h->windows && (p->init_buffer > w || p->term_buffer > w - p->init_buffer ||
                       p->base_window > w - p->init_buffer - p->term_buffer)) {
        h->w_init = (size_t)(0.15 * (double)w);
        h->w_term = (size_t)(0.10 * (double)w);
        h->w_base = w - (h->w_init + h->w_term);
    }
    h->w_counter = 0;
    h->w_size = h->w_base;
    h->w_next = h->w_init + h->w_size - 1;
    h->w_begin = h->w_init;
    h->welford_n = h->half_n = 0;
    memset(h->welford_mean, 0, h->dim * sizeof(double));
    memset(h->welford_m2, 0, h->dim * sizeof(double));
}

/* windowed_adaptation::compute_next_window. */
static void windows_next(gmm_hmc *h)
{
    size_t last = h->w_warmup - h->w_term - 1;
    if (h->w_next == last)
        return;
    h->w_size *= 2;
    h->w_next = h->w_counter + h->w_size;
    if (h->w_next == last)
        return;
    /* if the window after this one would pass the end of the slow phase,
     * stretch this one to the end */
    if (h->w_next + 2 * h->w_size >= h->w_warmup - h->w_term)
        h->w_next = last;
}

/* The window's variance estimates pooled toward their mean (metric_pooling),
 * into est (dim values; est may be h->welford_mean, read before written).
 * Empirical Bayes over the coordinates: the estimates s_i scatter about
 * their mean m by the spread tau^2 of the true variances plus the
 * estimation noise e^2, so with the prior var_i ~ (m, tau^2) the posterior
 * mean is m + w (s_i - m), w = tau^2 / (tau^2 + e^2) -- Stan's
 * regularisation with a pseudo-sample size k = n e^2 / tau^2 taken from the
 * window instead of 5.  e^2 from the window's two halves: with Var(s) = K /
 * n_eff for n_eff proportional to the draws, Var(s_a - s_b) = K n / (n_a
 * n_b), so e^2 = mean_i (s_a,i - s_b,i)^2 n_a n_b / n^2 -- whatever the
 * draws' autocorrelation and tails; tau^2 = max(0, var_i(s_i) - e^2).
 * When the map leaves every variance near one, tau^2 is small and w falls
 * with it; when the variances really differ, w -> 1 and the estimates stand
 * as Stan's do.  The mean's scale is the step size's business: only the
 * ratios between coordinates reach the sampler.  Without two halves of two
 * draws each, w = n / (n + 5), Stan's weight.  A window where the chain
 * never moved (every variance 0) keeps the old metric.  0, or -1 when the
 * window's statistics overflow. */
static int pooled_variance(gmm_hmc *h, double *est)
{
    size_t n = h->dim;
    double k = (double)h->welford_n, ka = (double)h->half_n, kb = k - ka;
    int halves = h->half_n >= 2 && h->welford_n >= h->half_n + 2;
    double sum = 0.0, dd = 0.0, tot = 0.0;
    for (size_t i = 0; i < n; i++) {
        double var = h->welford_m2[i] / (k - 1.0);
        if (halves) {
            /* the second half's m2 from the whole's and the first's (Chan
             * et al.'s pairwise update, solved for one part) */
            double ma = h->half_mean[i], mb = (k * h->welford_mean[i] - ka * ma) / kb;
            double m2b = h->welford_m2[i] - h->half_m2[i] - (mb - ma) * (mb - ma) * ka * kb / k;
            double d = h->half_m2[i] / (ka - 1.0) - (m2b > 0.0 ? m2b : 0.0) / (kb - 1.0);
            dd += d * d;
        }
        sum += var;
        est[i] = var;
    }
    double mean = sum / (double)n;
    if (!isfinite(mean) || !isfinite(dd))
        return -1;
    if (!(mean > 0.0)) { /* no transition moved the chain in the window */
        copy_vec(est, h->inv_metric, n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        tot += (est[i] - mean) * (est[i] - mean);
    tot /= n > 1 ? (double)(n - 1) : 1.0;
    double noise = dd / (double)n * ka * kb / (k * k);
    double spread = tot > noise ? tot - noise : 0.0;
    double w = halves && noise > 0.0 ? spread / (spread + noise) : k / (k + 5.0);
    for (size_t i = 0; i < n; i++)
        est[i] = mean + w * (est[i] - mean);
    return 0;
}

/* var_adaptation::learn_variance after a warm-up transition to q: 1 when a
 * window ended and inv_metric was re-estimated, 0 if not, -1 on overflow. */
static int learn_variance(gmm_hmc *h, const double *q)
{
    size_t n = h->dim, c = h->w_counter;
    int updated = 0;
    if (c >= h->w_init && c < h->w_warmup - h->w_term && c != h->w_warmup) {
        double k = (double)++h->welford_n;
        for (size_t i = 0; i < n; i++) {
            double dl = q[i] - h->welford_mean[i];
            h->welford_mean[i] += dl / k;
            h->welford_m2[i] += dl * (q[i] - h->welford_mean[i]);
        }
        /* the first half of the window, kept for pooled_variance */
        if (h->par.metric_pooling && h->welford_n == (h->w_next + 1 - h->w_begin) / 2) {
            copy_vec(h->half_mean, h->welford_mean, n);
            copy_vec(h->half_m2, h->welford_m2, n);
            h->half_n = h->welford_n;
        }
    }
    if (c == h->w_next && c != h->w_warmup) {
        windows_next(h);
        h->w_begin = c + 1;
        double k = (double)h->welford_n, *est = h->welford_mean; /* mean no longer needed */
        if (h->par.metric_pooling && h->welford_n > 1) {
            if (pooled_variance(h, est) < 0)
                updated = -1;
        } else if (h->par.metric_pooling) {
            copy_vec(est, h->inv_metric, n);
        } else {
            for (size_t i = 0; i < n; i++) {
                /* one draw: Stan's estimator leaves the old value */
                double var = h->welford_n > 1 ? h->welford_m2[i] / (k - 1.0) : h->inv_metric[i];
                est[i] = (k / (k + 5.0)) * var + 1e-3 * (5.0 / (k + 5.0));
            }
        }
        for (size_t i = 0; i < n && updated == 0; i++)
            if (!isfinite(est[i]))
                updated = -1;
        if (updated == 0) { /* an overflow keeps the old metric */
            copy_vec(h->inv_metric, est, n);
            metric_changed(h);
            updated = 1;
        }
        h->welford_n = h->half_n = 0;
        memset(h->welford_mean, 0, n * sizeof(double));
        memset(h->welford_m2, 0, n * sizeof(double));
    }
    h->w_counter++;
    return updated;
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

    windows_setup(h);
    da_restart(h);
    h->da_mu = log(10.0 * h->par.stepsize); /* Stan: from the user's step size */
    if ((h->par.warmup > 0 || h->par.search_stepsize) && (st = init_stepsize(h)) != GMM_OK)
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
    st = h->par.sampler == GMM_HMC_NUTS ? nuts_transition(h, d) : static_transition(h, d);
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
        da_learn(h, d->accept_stat);
        if (h->windows) {
            int u = learn_variance(h, h->cur->q);
            if (u < 0) {
                st = gmm_error(GMM_EDOM, "hmc: numerical overflow in metric adaptation "
                               "(extreme values of q: an improper or too wide target?)");
                goto fail;
            }
            if (u > 0) {
                d->metric_updated = 1;
                if ((st = init_stepsize(h)) != GMM_OK)
                    goto fail;
                h->da_mu = log(10.0 * h->eps);
                da_restart(h);
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
