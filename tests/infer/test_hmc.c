/* test_hmc.c -- the HMC sampler core on Gaussian targets with known moments.
 *
 * Every statistical check is a z-score against a Monte Carlo standard error,
 * on fixed seeds.  Within one chain the standard error is sqrt(var / ESS),
 * ESS from Geyer's initial monotone sequence (Stan's ess(), written here from
 * Vehtari et al. 2021, eqns 3, 11, 13); "bulk" ESS is that estimator on the
 * split, rank-normalised chain (ranks mapped through the normal quantile
 * function), as in Vehtari et al.  Across independent chains it is the
 * spread of the chain means, which needs no ESS.
 *
 * Bounds.  Every test fails falsely with probability at most 1e-6, whatever
 * the seed (the seeds are fixed only so that a failure can be rerun).  The
 * z-scores are Student t with TU_NU_MEAN(n) or TU_NU_SQUARE(n) degrees of
 * freedom (testutil.h, where the tails measured over 100 seeds of these
 * chains, 13900 z-scores of each kind, are quoted), against tu_t_bound
 * with the test's share of the 1e-6 split over their number.  The variance
 * errors of one chain are correlated across coordinates (all follow the
 * slowly mixing energy), so instead of a sum of their squares the mean over
 * coordinates of (q_j / s_j)^2 gets its own z-score.  The adapted metric's
 * entries are variance estimates of a window: chi-square(nu) / nu with nu =
 * 2 / sd(log)^2 = 170-210 measured here (10000 entries), taken as nu =
 * METRIC_NU = 120 (tu_chisq_bounds).  Other sampler statistics (acceptance,
 * tree depth, step size, ESS) are bounded at least 5.5 sd from their mean
 * over 100 seeds (normal approximation, Q(5.5) = 1.9e-8), each bound's
 * numbers beside it.
 */
#include <check.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/hmc.h"

#include "support/testutil.h"

#define METRIC_NU 120.0

/* Build with -DHMC_TEST_VERBOSE to see the measured statistics. */
#ifdef HMC_TEST_VERBOSE
#include <stdio.h>
#define DIAG(...) fprintf(stderr, __VA_ARGS__)
#else
#define DIAG(...) ((void)0)
#endif

/* ---- ESS ------------------------------------------------------------------- */

/* Biased autocovariance of x[0..n-1] at lag t (about mean mu). */
static double acov(const double *x, size_t n, double mu, size_t t)
{
    double s = 0.0;
    for (size_t i = 0; i + t < n; i++)
        s += (x[i] - mu) * (x[i + t] - mu);
    return s / (double)n;
}

/* ESS of m chains of n draws (chain c at x + c n): Geyer's initial monotone
 * sequence with Stan's antithetic correction and cap (n m log10(n m)). */
static double ess_chains(const double *x, size_t m, size_t n)
{
    double *mu = malloc(m * sizeof *mu), *rho = calloc(n + 2, sizeof *rho);
    double w = 0.0, bm = 0.0, bv = 0.0;
    ck_assert(mu && rho && m >= 1 && n >= 8);
    for (size_t c = 0; c < m; c++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += x[c * n + i];
        mu[c] = s / (double)n;
        w += acov(x + c * n, n, mu[c], 0) * (double)n / (double)(n - 1);
        bm += mu[c];
    }
    w /= (double)m;
    bm /= (double)m;
    for (size_t c = 0; c < m && m > 1; c++)
        bv += (mu[c] - bm) * (mu[c] - bm) / (double)(m - 1);
    double var_plus = w * (double)(n - 1) / (double)n + bv;
    double even = 1.0, odd;
    rho[0] = 1.0;
    {
        double a = 0.0;
        for (size_t c = 0; c < m; c++)
            a += acov(x + c * n, n, mu[c], 1);
        odd = 1.0 - (w - a / (double)m) / var_plus;
    }
    rho[1] = odd;
    size_t t = 1;
    while (t < n - 4 && even + odd > 0.0) {
        double ae = 0.0, ao = 0.0;
        for (size_t c = 0; c < m; c++) {
            ae += acov(x + c * n, n, mu[c], t + 1);
            ao += acov(x + c * n, n, mu[c], t + 2);
        }
        even = 1.0 - (w - ae / (double)m) / var_plus;
        odd = 1.0 - (w - ao / (double)m) / var_plus;
        if (even + odd >= 0.0) {
            rho[t + 1] = even;
            rho[t + 2] = odd;
        }
        if (rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]) {
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0;
            rho[t + 2] = rho[t + 1];
        }
        t += 2;
    }
    if (even > 0.0)
        rho[t + 1] = even;
    double tau = -1.0 + rho[t + 1], total = (double)(m * n);
    for (size_t k = 0; k < t; k++)
        tau += 2.0 * rho[k];
    if (tau < 1.0 / log10(total))
        tau = 1.0 / log10(total);
    free(mu);
    free(rho);
    return total / tau;
}

/* ESS of one chain x[0..n-1] (raw values: for the standard error of a mean). */
static double ess(const double *x, size_t n) { return ess_chains(x, 1, n); }

typedef struct {
    double v;
    size_t i;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    return x < y ? -1 : x > y;
}

/* Bulk ESS of one chain: split in two halves, rank-normalised. */
static double ess_bulk(const double *x, size_t n)
{
    size_t h = n / 2, s = 2 * h;
    ranked *r = malloc(s * sizeof *r);
    double *z = malloc(s * sizeof *z);
    ck_assert(r && z);
    for (size_t i = 0; i < s; i++) {
        r[i].v = x[n - s + i]; /* drop the first draw when n is odd */
        r[i].i = i;
    }
    qsort(r, s, sizeof *r, cmp_ranked);
    for (size_t i = 0; i < s;) {
        size_t j = i;
        while (j + 1 < s && r[j + 1].v == r[i].v)
            j++;
        double rank = 0.5 * (double)(i + j) + 1.0; /* average rank of ties */
        for (size_t k = i; k <= j; k++)
            z[r[k].i] = gsl_cdf_ugaussian_Pinv((rank - 0.375) / ((double)s + 0.25));
        i = j + 1;
    }
    double e = ess_chains(z, 2, h);
    free(r);
    free(z);
    return e;
}

/* z-score of mean(x) - truth with standard error sqrt(var(x) / ESS(x)). */
static double mc_z(const double *x, size_t n, double truth)
{
    double m = 0.0, v = 0.0;
    for (size_t i = 0; i < n; i++)
        m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= (double)(n - 1);
    return (m - truth) / sqrt(v / ess(x, n));
}

/* ---- targets ----------------------------------------------------------------- */

/* Independent normals N(0, scale_i^2) (scale NULL: all s), optionally
 * refusing q[0] > bound (mode 1: GMM_EDOM; mode 2: lp = NaN; mode 3:
 * GMM_ENOMEM, a real error). */
typedef struct {
    size_t dim;
    const double *scale;
    double s;
    int mode;
    double bound;
    size_t evals;
} normal_target;

static gmm_status normal_logp(void *ctx, const double *q, double *lp, double *grad)
{
    normal_target *t = ctx;
    double f = 0.0;
    t->evals++;
    if (t->mode && q[0] > t->bound) {
        if (t->mode == 1)
            return gmm_error(GMM_EDOM, "test: q[0] = %g is out of the domain", q[0]);
        if (t->mode == 3)
            return gmm_error(GMM_ENOMEM, "test: out of memory");
        *lp = NAN;
        return GMM_OK;
    }
    for (size_t i = 0; i < t->dim; i++) {
        double s = t->scale ? t->scale[i] : t->s, r = q[i] / s;
        f -= 0.5 * r * r;
        grad[i] = -r / s;
    }
    *lp = f;
    return GMM_OK;
}

/* Bivariate normal, zero mean, sds 1 and 2, correlation 0.9. */
#define CORR_RHO 0.9
#define CORR_S1 1.0
#define CORR_S2 2.0
static gmm_status corr_logp(void *ctx, const double *q, double *lp, double *grad)
{
    (void)ctx;
    double a = q[0] / CORR_S1, b = q[1] / CORR_S2, c = 1.0 - CORR_RHO * CORR_RHO;
    *lp = -0.5 * (a * a - 2.0 * CORR_RHO * a * b + b * b) / c;
    grad[0] = -(a - CORR_RHO * b) / (c * CORR_S1);
    grad[1] = -(b - CORR_RHO * a) / (c * CORR_S2);
    return GMM_OK;
}

/* ---- running a chain ----------------------------------------------------------- */

typedef struct {
    double *q;           /* draws x dim, row-major (sampling iterations only) */
    double mean_depth, mean_accept, mean_leapfrog;
    size_t divergent, divergent_warmup;
    double stepsize;     /* after warm-up */
    double *inv_metric;  /* dim values after the run */
} chain_out;

static void run_chain(size_t dim, const gmm_hmc_params *par, gmm_hmc_logp_fn f, void *ctx,
                      const double *q0, chain_out *o)
{
    gmm_hmc *h = gmm_hmc_alloc(dim, par);
    ck_assert_ptr_nonnull(h);
    gmm_hmc_target t = {f, ctx};
    ck_assert_int_eq(gmm_hmc_init(h, q0, &t), GMM_OK);
    memset(o, 0, sizeof *o);
    o->q = malloc((par->draws ? par->draws : 1) * dim * sizeof *o->q);
    o->inv_metric = malloc(dim * sizeof *o->inv_metric);
    ck_assert(o->q && o->inv_metric);
    for (size_t it = 0; it < par->warmup + par->draws; it++) {
        gmm_hmc_draw d;
        gmm_status st = gmm_hmc_iterate(h, &d);
        ck_assert_msg(st == GMM_OK, "iterate %zu: %s", it, gmm_error_message());
        ck_assert(d.iteration == it && d.warmup == (it < par->warmup));
        ck_assert(isfinite(d.lp) && isfinite(d.energy) && d.accept_stat >= 0.0 &&
                  d.accept_stat <= 1.0 && d.n_leapfrog >= 1 && d.stepsize > 0.0);
        if (d.warmup) {
            o->divergent_warmup += (size_t)d.divergent;
            continue;
        }
        memcpy(o->q + (it - par->warmup) * dim, d.q, dim * sizeof *o->q);
        o->mean_depth += d.treedepth;
        o->mean_accept += d.accept_stat;
        o->mean_leapfrog += (double)d.n_leapfrog;
        o->divergent += (size_t)d.divergent;
        o->stepsize = d.stepsize;
    }
    if (par->draws) {
        o->mean_depth /= (double)par->draws;
        o->mean_accept /= (double)par->draws;
        o->mean_leapfrog /= (double)par->draws;
    }
    DIAG("chain dim %zu: depth %.2f leapfrog %.1f accept %.3f stepsize %.4g divergent %zu "
         "(warm-up %zu)\n", dim, o->mean_depth, o->mean_leapfrog, o->mean_accept, o->stepsize,
         o->divergent, o->divergent_warmup);
    memcpy(o->inv_metric, gmm_hmc_inv_metric(h), dim * sizeof *o->inv_metric);
    gmm_hmc_free(h);
}

static void chain_free(chain_out *o)
{
    free(o->q);
    free(o->inv_metric);
}

/* Column j of the draws (n x dim) into x; optionally squared. */
static void column(const chain_out *o, size_t n, size_t dim, size_t j, int square, double *x)
{
    for (size_t i = 0; i < n; i++) {
        double v = o->q[i * dim + j];
        x[i] = square ? v * v : v;
    }
}

/* Means and variances of independent N(0, s_j^2) from n draws, failing
 * falsely with probability at most p: 0.4 p over the dim means' z-scores
 * (Student t, TU_NU_MEAN(n)), 0.4 p over the variances' (TU_NU_SQUARE(n)),
 * 0.1 p for the sum of the means' squared z-scores (sum of dim independent
 * t^2: a chi-square with its mean and variance, Satterthwaite's fit) and
 * 0.1 p for the z-score of the mean over coordinates of (q_j / s_j)^2.
 * Returns the least bulk ESS per draw. */
static double check_normal_moments(const chain_out *o, size_t n, size_t dim, const double *scale,
                                   double s, double p)
{
    const double nu = TU_NU_MEAN(n), nu2 = TU_NU_SQUARE(n);
    const double bm = tu_t_bound(0.4 * p, dim, nu), bv = tu_t_bound(0.4 * p, dim, nu2);
    const double bu = tu_t_bound(0.1 * p, 1, nu2);
    /* sum of dim t_nu^2: mean dim nu / (nu - 2), variance dim 2 nu^2 (nu - 1) /
     * ((nu - 2)^2 (nu - 4)); as a chi-square(f) times a with those moments */
    const double cm = (double)dim * nu / (nu - 2.0);
    const double cv = (double)dim * 2.0 * nu * nu * (nu - 1.0) / ((nu - 2.0) * (nu - 2.0) * (nu - 4.0));
    const double bchi = cv / (2.0 * cm) * gsl_cdf_chisq_Qinv(0.1 * p, 2.0 * cm * cm / cv);
    ck_assert(nu > 4.0);
    double *x = malloc(n * sizeof *x), *u2 = calloc(n, sizeof *u2), chi2 = 0.0;
    double min_ess = INFINITY;
    double max_zm = 0.0, max_zv = 0.0, mean_ess = 0.0;
    ck_assert(x && u2);
    for (size_t j = 0; j < dim; j++) {
        double sj = scale ? scale[j] : s;
        column(o, n, dim, j, 0, x);
        double e = ess_bulk(x, n) / (double)n;
        if (e < min_ess)
            min_ess = e;
        for (size_t i = 0; i < n; i++)
            x[i] /= sj;
        double zm = mc_z(x, n, 0.0);
        for (size_t i = 0; i < n; i++) {
            x[i] *= x[i];
            u2[i] += x[i] / (double)dim;
        }
        double zv = mc_z(x, n, 1.0);
        ck_assert_msg(fabs(zm) < bm && fabs(zv) < bv, "coordinate %zu: z(mean) %g (bound %.2f) "
                      "z(var) %g (bound %.2f)", j, zm, bm, zv, bv);
        chi2 += zm * zm;
        max_zm = fmax(max_zm, fabs(zm));
        max_zv = fmax(max_zv, fabs(zv));
        mean_ess += e / (double)dim;
    }
    double zu = mc_z(u2, n, 1.0);
    DIAG("  %zu coordinates: bulk ESS/draw min %.3f mean %.3f; max |z| mean %.2f var %.2f; "
         "sum z^2 %.1f; z(all var) %.2f\n", dim, min_ess, mean_ess, max_zm, max_zv, chi2, zu);
    ck_assert_msg(chi2 < bchi && fabs(zu) < bu,
                  "sum of z(mean)^2 %g over %zu (bound %.1f); z(mean of all (q/s)^2) %g (bound %.2f)",
                  chi2, dim, bchi, zu, bu);
    free(u2);
    free(x);
    return min_ess;
}

/* ---- tests ---------------------------------------------------------------------- */

/* (1) NUTS earns its name: 100-d standard normal, default settings (1000
 * warm-up, 1000 draws), from a start away from the mode.  The bulk ESS/draw
 * of every coordinate is about 1.3 (NUTS is antithetic here: 20000-draw runs
 * estimate 0.74-1.9 over the 100 exchangeable coordinates, mean 1.3); the
 * estimate from 1000 draws is noisier: over 100 seeds its log had mean 0.29
 * and sd 0.23 per coordinate (10000 values, least 0.61), so 0.3 is 6.5 sd
 * below: 100 Q(6.5) = 4e-9 (a random walk would give ~0.01).  False failure
 * at most 6e-7 (moments) + 4e-9 + 6e-9 (acceptance) + 1e-7 (metric). */
START_TEST(test_hmc_std_normal_100)
{
    enum { D = 100 };
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(20240601);
    normal_target t = {D, NULL, 1.0, 0, 0.0, 0};
    double q0[D];
    for (size_t i = 0; i < D; i++)
        q0[i] = 2.0 * sin((double)i); /* in (-2, 2) */
    chain_out o;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    double min_ess = check_normal_moments(&o, par.draws, D, NULL, 1.0, 6e-7);
    ck_assert_msg(min_ess >= 0.3, "least bulk ESS/draw %g", min_ess);
    /* N(0, I): the leapfrog is stable below step size 2 (adapted ~0.7) */
    ck_assert_uint_eq(o.divergent, 0);
    /* dual averaging reaches its target (Stan: about 0.8-0.9 here): 0.855,
     * sd 0.020 over 100 seeds; 0.7 and 0.97 are 7.7 and 5.7 sd away */
    ck_assert_msg(o.mean_accept > 0.7 && o.mean_accept < 0.97, "accept %g", o.mean_accept);
    /* The adapted metric is unit within the sampling error of the last
     * window (500 draws, ESS of q^2 about 0.45 per draw: sd about 0.1). */
    double lo, hi;
    tu_chisq_bounds(1e-7, D, METRIC_NU, &lo, &hi);
    for (size_t i = 0; i < D; i++)
        ck_assert_msg(o.inv_metric[i] > lo && o.inv_metric[i] < hi, "inv_metric[%zu] = %g", i,
                      o.inv_metric[i]);
    chain_free(&o);
}
END_TEST

/* (1b) No bias, to a fraction of a percent: 64 independent chains (streams
 * 0..63) on 10 normals with scales 0.1 .. 10, 300 warm-up iterations and 300
 * draws each.  Each chain gives the mean over its draws and coordinates of
 * u = q / scale, u^2, u^4 and 1{u < 1}; the chains are independent, so the
 * spread of those 64 values gives the standard errors: t with 63 degrees of
 * freedom (each chain's value averages 3000 draws: normal), a false failure
 * 1e-6 over the four (tu_t_bound: |t| < 5.9). */
START_TEST(test_hmc_pooled_chains)
{
    enum { D = 10, C = 64, K = 4 };
    double scale[D], q0[D], stat[C][K];
    for (size_t i = 0; i < D; i++)
        scale[i] = pow(10.0, -1.0 + 2.0 * (double)i / (D - 1));
    normal_target t = {D, scale, 0.0, 0, 0.0, 0};
    const double truth[K] = {0.0, 1.0, 3.0, 0.841344746068543}; /* Phi(1) */
    const double bound = tu_t_bound(1e-6, K, C - 1);
    for (size_t c = 0; c < C; c++) {
        gmm_hmc_params par;
        gmm_hmc_params_init(&par);
        par.seed = tu_seed(2718);
        par.chain = c;
        par.warmup = 300;
        par.draws = 300;
        for (size_t i = 0; i < D; i++)
            q0[i] = scale[i] * cos((double)(c + 3 * i));
        chain_out o;
        run_chain(D, &par, normal_logp, &t, q0, &o);
        memset(stat[c], 0, sizeof stat[c]);
        for (size_t k = 0; k < par.draws * D; k++) {
            double u = o.q[k] / scale[k % D], u2 = u * u;
            stat[c][0] += u;
            stat[c][1] += u2;
            stat[c][2] += u2 * u2;
            stat[c][3] += u < 1.0;
        }
        for (size_t j = 0; j < K; j++)
            stat[c][j] /= (double)(par.draws * D);
        chain_free(&o);
    }
    for (size_t j = 0; j < K; j++) {
        double m = 0.0, v = 0.0;
        for (size_t c = 0; c < C; c++)
            m += stat[c][j] / C;
        for (size_t c = 0; c < C; c++)
            v += (stat[c][j] - m) * (stat[c][j] - m) / (C - 1);
        double z = (m - truth[j]) / sqrt(v / C);
        DIAG("pooled statistic %zu: %.5f (truth %.5f, se %.5f, z %.2f)\n", j, m, truth[j],
             sqrt(v / C), z);
        ck_assert_msg(fabs(z) < bound, "statistic %zu: %g, truth %g, se %g", j, m, truth[j],
                      sqrt(v / C));
    }
}
END_TEST

/* (2a) Scales 1e-2 .. 1e2: the adapted metric makes it an easy target (small
 * trees, correct moments); with a unit metric NUTS needs the longest
 * trajectories allowed.  Over 100 seeds: adapted depth 2.78, sd 0.08 (4 is
 * 15 sd off), no divergence; unit-metric depth 9.42, sd 0.076 (9 is 5.5 sd
 * below: 1.9e-8).  False failure at most 6e-7 + 1e-7 (metric) + 1.9e-8. */
START_TEST(test_hmc_scales_metric)
{
    enum { D = 9 };
    double scale[D], q0[D];
    for (size_t i = 0; i < D; i++) {
        scale[i] = pow(10.0, -2.0 + 0.5 * (double)i); /* 1e-2 .. 1e2 */
        q0[i] = 0.5 * scale[i];
    }
    normal_target t = {D, scale, 0.0, 0, 0.0, 0};
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(99);
    chain_out o;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    check_normal_moments(&o, par.draws, D, scale, 0.0, 6e-7);
    double lo, hi;
    tu_chisq_bounds(1e-7, D, METRIC_NU, &lo, &hi);
    for (size_t i = 0; i < D; i++) {
        double r = o.inv_metric[i] / (scale[i] * scale[i]);
        ck_assert_msg(r > lo && r < hi, "inv_metric[%zu] / scale^2 = %g", i, r);
    }
    ck_assert_msg(o.mean_depth < 4.0, "mean tree depth %g with metric adaptation", o.mean_depth);
    ck_assert_uint_eq(o.divergent, 0);
    double adapted_depth = o.mean_depth;
    chain_free(&o);

    /* Unit metric: the trajectory must span scale 1e2 with steps below 1e-2,
     * 2^13 of them, so nearly every tree stops at max_depth. 300 + 300
     * iterations suffice to show it. */
    par.adapt_metric = 0;
    par.warmup = 300;
    par.draws = 300;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    ck_assert_msg(o.mean_depth > 9.0, "mean tree depth %g with a unit metric (adapted: %g)",
                  o.mean_depth, adapted_depth);
    chain_free(&o);
}
END_TEST

/* (2b) Tree depth follows the target's scale.  With a fixed step size, a
 * target 8 times wider needs trajectories 8 times longer: about log2(8) = 3
 * more doublings.  With step-size adaptation (unit metric), scaling the
 * target by 1e-3 scales the step size by 1e-3 and leaves the trees as they
 * were: NUTS is scale-free.  Over 100 seeds: depth difference 2.858, sd
 * 0.015; leapfrog ratio 7.15, sd 0.10; step-size ratio / 1e-3 of log mean
 * 0.015, sd 0.027; depth difference at the two scales -0.064, sd 0.118 (0.8
 * is 6.2 sd off): every bound > 6 sd away.  Moments 3 x 3e-7. */
START_TEST(test_hmc_depth_scale)
{
    enum { D = 10 };
    double q0[D];
    for (size_t i = 0; i < D; i++)
        q0[i] = 0.3 * cos((double)i);
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(5);
    chain_out o1, o8;

    /* fixed step size 0.2 (accept ~0.99 at scale 1), no warm-up */
    par.warmup = 0;
    par.draws = 600;
    par.stepsize = 0.2;
    par.search_stepsize = 0;
    normal_target t1 = {D, NULL, 1.0, 0, 0.0, 0}, t8 = {D, NULL, 8.0, 0, 0.0, 0};
    run_chain(D, &par, normal_logp, &t1, q0, &o1);
    run_chain(D, &par, normal_logp, &t8, q0, &o8);
    double dd = o8.mean_depth - o1.mean_depth;
    ck_assert_msg(dd > 2.0 && dd < 4.0, "tree depth %g at scale 1, %g at scale 8", o1.mean_depth,
                  o8.mean_depth);
    ck_assert(o8.mean_leapfrog > 4.0 * o1.mean_leapfrog);
    check_normal_moments(&o1, par.draws, D, NULL, 1.0, 3e-7);
    chain_free(&o1);
    chain_free(&o8);

    /* adapted step size, unit metric: scale 1 vs 1e-3 */
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(6);
    par.adapt_metric = 0;
    par.warmup = 500;
    par.draws = 500;
    normal_target tm = {D, NULL, 1e-3, 0, 0.0, 0};
    double q0m[D];
    for (size_t i = 0; i < D; i++)
        q0m[i] = 1e-3 * q0[i];
    run_chain(D, &par, normal_logp, &t1, q0, &o1);
    run_chain(D, &par, normal_logp, &tm, q0m, &o8);
    double ratio = o8.stepsize / o1.stepsize;
    ck_assert_msg(ratio > 0.7e-3 && ratio < 1.4e-3, "step sizes %g and %g", o1.stepsize,
                  o8.stepsize);
    ck_assert_msg(fabs(o8.mean_depth - o1.mean_depth) < 0.8, "tree depth %g at scale 1, %g at 1e-3",
                  o1.mean_depth, o8.mean_depth);
    check_normal_moments(&o1, par.draws, D, NULL, 1.0, 3e-7);
    check_normal_moments(&o8, par.draws, D, NULL, 1e-3, 3e-7);
    chain_free(&o1);
    chain_free(&o8);
}
END_TEST

/* Without warm-up the step size still comes from Stan's initial search
 * (search_stepsize, the default), so a target far narrower than the
 * default stepsize 1 is sampled: no divergence, the draws move, and their
 * moments are right.  Leapfrog on N(0, s^2) is stable for eps < 2 s: no
 * divergence.  Over 100 seeds the search gave 0.488 s each time, and 0-2
 * of 999 draws repeated the previous one (15 of 99900): 100 repeats fail
 * falsely with P < 1e-130 even at 10 times that rate (Binomial(999,
 * 1.5e-3)).  Moments: 9e-7. */
START_TEST(test_hmc_no_warmup)
{
    enum { D = 10 };
    const double s = 1e-3;
    double q0[D];
    for (size_t i = 0; i < D; i++)
        q0[i] = s * 0.3 * cos((double)i);
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(11);
    par.warmup = 0;
    par.draws = 1000;
    normal_target t = {D, NULL, s, 0, 0.0, 0};
    chain_out o;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    ck_assert_msg(o.divergent == 0, "%zu divergent transitions", o.divergent);
    ck_assert_msg(o.stepsize > 0.1 * s && o.stepsize < 2.0 * s, "step size %g for scale %g",
                  o.stepsize, s);
    size_t same = 0;
    for (size_t i = 1; i < par.draws; i++)
        same += o.q[i * D] == o.q[(i - 1) * D];
    ck_assert_msg(same < par.draws / 10, "%zu of %zu draws repeat the previous", same,
                  (size_t)par.draws);
    check_normal_moments(&o, par.draws, D, NULL, s, 9e-7);
    chain_free(&o);
    /* search_stepsize = 0 keeps the given step size (here 1: every
     * transition diverges, as before the search) */
    par.search_stepsize = 0;
    par.draws = 20;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    ck_assert(o.stepsize == 1.0 && o.divergent == par.draws);
    chain_free(&o);
}
END_TEST

/* Run `n` iterations of a chain into q (n x dim) and info (n x 6). */
static void record(gmm_hmc *h, size_t n, size_t dim, double *q, double *info)
{
    for (size_t i = 0; i < n; i++) {
        gmm_hmc_draw d;
        ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
        memcpy(q + i * dim, d.q, dim * sizeof *q);
        double row[7] = {d.lp, d.accept_stat, d.stepsize, (double)d.treedepth,
                         (double)d.n_leapfrog, (double)d.divergent, d.energy};
        memcpy(info + i * 7, row, sizeof row);
    }
}

/* Entries equal in a and b (n values). */
static size_t shared(const double *a, const double *b, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += a[i] == b[i];
    return k;
}

/* (3) Same seed and chain: identical draws, also when two chains are run
 * interleaved (no shared state) and after a restart; another chain number or
 * seed: different draws.  Continuous draws of two streams coincide only
 * while both still sit at q0 in the first warm-up iterations; 10% of the
 * values (40 iterations) would need 40 rejected transitions in a row from
 * the start, each rejected with probability < 1/2 once the step-size search
 * has run: P < 0.5^40 = 1e-12. */
START_TEST(test_hmc_reproducible)
{
    enum { D = 5, N = 400 };
    normal_target t = {D, NULL, 1.0, 0, 0.0, 0};
    gmm_hmc_target tg = {normal_logp, &t};
    double q0[D] = {0.1, -0.2, 0.3, 1.0, -1.0};
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.warmup = N / 2;
    par.draws = N / 2;
    par.seed = tu_seed(1234);
    static double qa[N * D], ia[N * 7], qb[N * D], ib[N * 7], qc[N * D], ic[N * 7];
    static double qd[N * D], id[N * 7];

    for (int kind = 0; kind < 2; kind++) {
        par.sampler = kind ? GMM_HMC_STATIC : GMM_HMC_NUTS;
        par.chain = 0;
        gmm_hmc *a = gmm_hmc_alloc(D, &par);
        par.chain = 1;
        gmm_hmc *b = gmm_hmc_alloc(D, &par);
        ck_assert(a && b);
        ck_assert_int_eq(gmm_hmc_init(a, q0, &tg), GMM_OK);
        record(a, N, D, qa, ia);
        /* restart the same object (init keeps the adapted metric: reset it) */
        const double ones[D] = {1, 1, 1, 1, 1};
        ck_assert_int_eq(gmm_hmc_set_inv_metric(a, ones), GMM_OK);
        ck_assert_int_eq(gmm_hmc_init(a, q0, &tg), GMM_OK);
        record(a, N, D, qb, ib);
        ck_assert(memcmp(qa, qb, sizeof qa) == 0 && memcmp(ia, ib, sizeof ia) == 0);

        /* chain 1 interleaved with chain 0 */
        gmm_hmc_free(a);
        gmm_hmc_free(b);
        par.chain = 0;
        a = gmm_hmc_alloc(D, &par);
        par.chain = 1;
        b = gmm_hmc_alloc(D, &par);
        ck_assert(a && b);
        ck_assert_int_eq(gmm_hmc_init(a, q0, &tg), GMM_OK);
        ck_assert_int_eq(gmm_hmc_init(b, q0, &tg), GMM_OK);
        for (size_t i = 0; i < N; i++) {
            record(a, 1, D, qc + i * D, ic + i * 7);
            record(b, 1, D, qd + i * D, id + i * 7);
        }
        ck_assert(memcmp(qa, qc, sizeof qa) == 0 && memcmp(ia, ic, sizeof ia) == 0);
        /* chain 1 differs from chain 0 (both may stay at q0 for the first
         * iterations, while the step size is still too large) */
        ck_assert_msg(shared(qa, qd, N * D) < N * D / 10, "%zu of %d values shared by chains 0 "
                      "and 1", shared(qa, qd, N * D), N * D);
        gmm_hmc_free(a);
        gmm_hmc_free(b);

        /* another seed, chain 0 */
        par.seed = tu_seed(1235);
        par.chain = 0;
        a = gmm_hmc_alloc(D, &par);
        ck_assert_int_eq(gmm_hmc_init(a, q0, &tg), GMM_OK);
        record(a, N, D, qc, ic);
        ck_assert_msg(shared(qa, qc, N * D) < N * D / 10, "%zu of %d values shared by seeds 1234 "
                      "and 1235", shared(qa, qc, N * D), N * D);
        gmm_hmc_free(a);
        par.seed = tu_seed(1234);
    }
}
END_TEST

/* (4) A target that refuses q[0] > 2: the refusals are divergences, never
 * errors, and the draws follow the truncated normal.  Mode 1 refuses with
 * GMM_EDOM, mode 2 with a NaN log density.  Over 100 seeds 234-349 (mode 1,
 * 4000 draws) and 25-53 (mode 2, 500) divergences: none has P ~ e^-25 or
 * less.  The moments of mode 1: z-scores of the mean and variance, 1e-6
 * shared (Student t, TU_NU_MEAN and TU_NU_SQUARE of 4000 draws). */
START_TEST(test_hmc_domain_failures)
{
    enum { D = 2 };
    /* N(0,1) truncated to (-inf, 2]: mean -phi(2)/Phi(2), variance
     * 1 - 2 phi(2)/Phi(2) - (phi(2)/Phi(2))^2 */
    const double lam = 0.053990966513188 / 0.977249868051821;
    const double tmean = -lam, tvar = 1.0 - 2.0 * lam - lam * lam;
    double q0[D] = {0.0, 0.5};
    for (int mode = 1; mode <= 2; mode++) {
        normal_target t = {D, NULL, 1.0, mode, 2.0, 0};
        gmm_hmc_params par;
        gmm_hmc_params_init(&par);
        par.seed = tu_seed(31 + (uint64_t)mode);
        par.warmup = 1000;
        par.draws = mode == 1 ? 4000 : 500;
        gmm_hmc *h = gmm_hmc_alloc(D, &par);
        ck_assert_ptr_nonnull(h);
        gmm_hmc_target tg = {normal_logp, &t};
        ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
        double *x = malloc(par.draws * sizeof *x);
        size_t div = 0;
        for (size_t it = 0; it < par.warmup + par.draws; it++) {
            gmm_hmc_draw d;
            ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
            ck_assert(d.q[0] <= 2.0 && isfinite(d.lp));
            if (!d.warmup) {
                x[it - par.warmup] = d.q[0];
                div += (size_t)d.divergent;
            }
        }
        const char *msg;
        size_t nfail = gmm_hmc_failures(h, &msg);
        ck_assert_msg(div > 0 && nfail >= div, "%zu divergences, %zu failures", div, nfail);
        if (mode == 1)
            ck_assert(strncmp(msg, "test: q[0] = ", 13) == 0);
        else
            ck_assert(strstr(msg, "log density") != NULL);
        /* the last error of this thread is not left set by a refusal */
        ck_assert_int_eq(gmm_error_status(), GMM_OK);
        if (mode == 1) {
            double zm = mc_z(x, par.draws, tmean);
            for (size_t i = 0; i < par.draws; i++)
                x[i] = (x[i] - tmean) * (x[i] - tmean);
            double zv = mc_z(x, par.draws, tvar);
            ck_assert_msg(fabs(zm) < tu_t_bound(5e-7, 1, TU_NU_MEAN(par.draws)) &&
                              fabs(zv) < tu_t_bound(5e-7, 1, TU_NU_SQUARE(par.draws)),
                          "z(mean) %g z(var) %g", zm, zv);
        }
        free(x);
        gmm_hmc_free(h);
    }
}
END_TEST

/* A real error of the callback stops the chain with its status; the chain
 * then needs gmm_hmc_init.  A start outside the domain is an error. */
START_TEST(test_hmc_real_errors)
{
    enum { D = 2 };
    normal_target t = {D, NULL, 1.0, 3, 1.5, 0};
    gmm_hmc_target tg = {normal_logp, &t};
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.warmup = 0;
    par.draws = 1000;
    par.stepsize = 0.8;
    par.search_stepsize = 0;
    gmm_hmc *h = gmm_hmc_alloc(D, &par);
    double q0[D] = {0.0, 0.0}, qbad[D] = {3.0, 0.0};
    ck_assert_int_eq(gmm_hmc_init(h, qbad, &tg), GMM_ENOMEM);
    ck_assert(strstr(gmm_error_message(), "hmc: initial point: test: out of memory") != NULL);
    t.mode = 1;
    ck_assert_int_eq(gmm_hmc_init(h, qbad, &tg), GMM_EDOM);
    qbad[1] = NAN;
    ck_assert_int_eq(gmm_hmc_init(h, qbad, &tg), GMM_EINVAL);
    t.mode = 3;
    gmm_hmc_draw d;
    ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_EINVAL); /* no successful init */
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    gmm_status st = GMM_OK;
    size_t it;
    for (it = 0; it < par.draws && st == GMM_OK; it++)
        st = gmm_hmc_iterate(h, &d);
    /* q[0] > 1.5 is reached within 1000 draws: P(q[0] > 1.5) = 0.067 per draw,
     * none in an ESS of even 300 has P = 0.933^300 = 1e-9 */
    ck_assert_int_eq(st, GMM_ENOMEM);
    ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_EINVAL);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
    gmm_hmc_free(h);

    /* an improper target: the step size search gives up */
    normal_target flat = {D, NULL, 1e300, 0, 0.0, 0};
    gmm_hmc_target tf = {normal_logp, &flat};
    gmm_hmc_params_init(&par);
    h = gmm_hmc_alloc(D, &par);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tf), GMM_EDOM);
    ck_assert(strstr(gmm_error_message(), "improper") != NULL);
    gmm_hmc_free(h);
}
END_TEST

/* (5) Fixed-length HMC (10 steps) on a correlated bivariate normal: means,
 * variances and covariance within Monte Carlo error (Student t,
 * TU_NU_MEAN and TU_NU_SQUARE of 4000 draws: 4e-7 over the two means, 4e-7
 * over the two variances, 1e-7 for the covariance); accept_stat 0.963, sd
 * 0.021 over 100 seeds (0.6 is 17 sd below). */
START_TEST(test_hmc_static_correlated)
{
    enum { D = 2 };
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.sampler = GMM_HMC_STATIC;
    par.steps = 10;
    par.seed = tu_seed(77);
    par.warmup = 500;
    par.draws = 4000;
    double q0[D] = {1.0, -1.0};
    chain_out o;
    run_chain(D, &par, corr_logp, NULL, q0, &o);
    size_t n = par.draws;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    const double sd[D] = {CORR_S1, CORR_S2};
    const double bm = tu_t_bound(4e-7, D, TU_NU_MEAN(n)), bv = tu_t_bound(4e-7, D, TU_NU_SQUARE(n));
    for (size_t j = 0; j < D; j++) {
        column(&o, n, D, j, 0, x);
        double zm = mc_z(x, n, 0.0);
        column(&o, n, D, j, 1, x);
        double zv = mc_z(x, n, sd[j] * sd[j]);
        ck_assert_msg(fabs(zm) < bm && fabs(zv) < bv, "q[%zu]: z(mean) %g z(var) %g", j, zm, zv);
    }
    column(&o, n, D, 0, 0, x);
    column(&o, n, D, 1, 0, y);
    for (size_t i = 0; i < n; i++)
        x[i] *= y[i];
    double zc = mc_z(x, n, CORR_RHO * CORR_S1 * CORR_S2);
    ck_assert_msg(fabs(zc) < tu_t_bound(1e-7, 1, TU_NU_SQUARE(n)), "z(cov) %g", zc);
    ck_assert(o.mean_leapfrog == 10.0 && o.mean_depth == 0.0);
    /* No upper bound: with L fixed, the energy error on a Gaussian is periodic
     * in eps, and dual averaging settles between high-acceptance step sizes
     * (accept_stat about 0.97 here) */
    ck_assert_msg(o.mean_accept > 0.6, "accept %g", o.mean_accept);
    free(x);
    free(y);
    chain_free(&o);
}
END_TEST

/* (2c) metric_pooling.  On D = 2000 exchangeable coordinates (iid N(0, 1),
 * the Laplace map's ideal), Stan's estimator leaves each coordinate the
 * sampling error of the last window (200 draws here: sd about 0.13, so over
 * 2000 coordinates some are off by 40%); pooled, the spread of the true
 * variances is 0 and the estimates fall near their mean (the weight w near
 * 0), and the draws keep their moments.  Over 130 seeds: Stan's largest /
 * least estimate 2.58-4.31 (below 1.4 all 2000 would lie within 1.3 sd of
 * 1: P < 1e-100); pooled 1.00-1.13, log mean 0.022, sd 0.030 (1.3 is 8 sd
 * above); their mean 0.995-1.015 (log sd 0.004); the pooled step size over
 * Stan's 0.75-1.21, log mean 0.006, sd 0.089: no systematic gain (seed 31
 * gave 1.14), only a bound 0.5 (7.8 sd below) that pooling does not cost
 * step size.  On scales 0.5 .. 2 (log-uniform, D = 200) the true spread
 * dominates the noise: w near 1, and each estimate follows its own variance
 * as Stan's would (chi-square(METRIC_NU) bounds, 1e-7 over the 200).
 * Moments 2 x 4e-7. */
START_TEST(test_hmc_metric_pooling)
{
    enum { D = 2000, D2 = 200 };
    static double q0[D], scale[D2];
    for (size_t i = 0; i < D; i++)
        q0[i] = 0.5 * sin((double)i);
    normal_target t = {D, NULL, 1.0, 0, 0.0, 0};
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(31);
    par.warmup = 500;
    par.draws = 300;
    chain_out o_stan, o_pool;
    run_chain(D, &par, normal_logp, &t, q0, &o_stan);
    par.metric_pooling = 1;
    run_chain(D, &par, normal_logp, &t, q0, &o_pool);
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0.0, 0.0}, mean = 0.0;
    for (size_t i = 0; i < D; i++) {
        lo[0] = fmin(lo[0], o_stan.inv_metric[i]);
        hi[0] = fmax(hi[0], o_stan.inv_metric[i]);
        lo[1] = fmin(lo[1], o_pool.inv_metric[i]);
        hi[1] = fmax(hi[1], o_pool.inv_metric[i]);
        mean += o_pool.inv_metric[i] / D;
    }
    DIAG("pooling, %d unit coordinates: inv_metric %.3f .. %.3f (Stan's %.3f .. %.3f), step size "
         "%.4g (Stan's %.4g)\n", D, lo[1], hi[1], lo[0], hi[0], o_pool.stepsize, o_stan.stepsize);
    ck_assert_msg(hi[0] / lo[0] > 1.4, "Stan's estimates %g .. %g", lo[0], hi[0]);
    ck_assert_msg(hi[1] / lo[1] < 1.3, "pooled estimates %g .. %g", lo[1], hi[1]);
    ck_assert_msg(mean > 0.8 && mean < 1.25, "pooled estimates' mean %g", mean);
    ck_assert_msg(o_pool.stepsize > 0.5 * o_stan.stepsize, "step size %g pooled, %g Stan's",
                  o_pool.stepsize, o_stan.stepsize);
    check_normal_moments(&o_pool, par.draws, D, NULL, 1.0, 4e-7);
    ck_assert_uint_eq(o_pool.divergent, 0);
    chain_free(&o_stan);
    chain_free(&o_pool);

    for (size_t i = 0; i < D2; i++)
        scale[i] = pow(2.0, -1.0 + 2.0 * (double)((i * 37) % D2) / (D2 - 1)); /* 0.5 .. 2 */
    normal_target t2 = {D2, scale, 0.0, 0, 0.0, 0};
    par.seed = tu_seed(32);
    par.warmup = 1000;
    par.draws = 500;
    run_chain(D2, &par, normal_logp, &t2, q0, &o_pool);
    double rlo = INFINITY, rhi = 0.0;
    for (size_t i = 0; i < D2; i++) {
        double r = o_pool.inv_metric[i] / (scale[i] * scale[i]);
        rlo = fmin(rlo, r);
        rhi = fmax(rhi, r);
    }
    DIAG("pooling, scales 0.5 .. 2: inv_metric / scale^2 %.3f .. %.3f\n", rlo, rhi);
    /* the estimates' own noise is +-30% at the extremes over 200
     * coordinates (0.69-1.49 over 30 seeds); a weight w of 0.5 would pull
     * the variance 0.25 toward their mean 1.5, to 3.5 times itself */
    double blo, bhi;
    tu_chisq_bounds(1e-7, D2, METRIC_NU, &blo, &bhi);
    ck_assert_msg(rlo > blo && rhi < bhi, "inv_metric / scale^2 %g .. %g", rlo, rhi);
    check_normal_moments(&o_pool, par.draws, D2, scale, 0.0, 4e-7);
    chain_free(&o_pool);
}
END_TEST

/* (2d) stepsize_jitter.  Fixed-length HMC on 10 unit normals with L = 20
 * steps of eps = 2 sin(pi / L): each leapfrog step rotates (q, p) by
 * 2 pi / L in the oscillator's phase plane, so L steps make a full turn and
 * the unjittered chain never leaves its start -- the resonance jitter exists
 * for.  With J = 0.5 each transition turns by 0.50-1.52 full turns instead,
 * and the draws have the normal's moments (bounds of check_normal_moments).
 * NUTS with J = 0.5 on 100 normals of scales 0.5 .. 2 keeps them too.  The
 * jitter is drawn only after warm-up, from the chain's stream: warm-up and the
 * nominal step size are those of the unjittered run, the sampling step sizes
 * spread over eps (1 -+ J), and a rerun reproduces the draws.  Over 100 seeds
 * the jittered full-turn chain's bulk ESS/draw had log mean -0.056, sd 0.081
 * per coordinate (0.3 is 14 sd below).  False failure: moments 2 x 4e-7, the
 * jitter's extremes 3e-8, the shared draws as in test_hmc_reproducible. */
START_TEST(test_hmc_stepsize_jitter)
{
    enum { D = 10, L = 20, N = 2000, DN = 100, W = 300 };
    normal_target t = {D, NULL, 1.0, 0, 0.0, 0};
    double q0[DN];
    for (size_t i = 0; i < DN; i++)
        q0[i] = 2.0 * sin((double)i + 1.0);
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    par.sampler = GMM_HMC_STATIC;
    par.steps = L;
    par.warmup = 0;
    par.search_stepsize = 0;
    par.draws = N;
    par.stepsize = 2.0 * sin(acos(-1.0) / L);
    par.seed = tu_seed(77);
    chain_out o;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    double moved = 0.0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            moved = fmax(moved, fabs(o.q[i * D + j] - q0[j]));
    ck_assert_msg(moved < 1e-9, "the unjittered full turn moved by %g", moved);
    chain_free(&o);
    par.stepsize_jitter = 0.5;
    run_chain(D, &par, normal_logp, &t, q0, &o);
    double min_ess = check_normal_moments(&o, N, D, NULL, 1.0, 4e-7);
    ck_assert_msg(min_ess > 0.3, "least bulk ESS/draw %g", min_ess);
    chain_free(&o);

    double scale[DN];
    for (size_t i = 0; i < DN; i++)
        scale[i] = 0.5 * pow(4.0, (double)i / (DN - 1));
    normal_target ts = {DN, scale, 0.0, 0, 0.0, 0};
    gmm_hmc_params_init(&par);
    par.seed = tu_seed(20261127);
    par.stepsize_jitter = 0.5;
    run_chain(DN, &par, normal_logp, &ts, q0, &o);
    check_normal_moments(&o, par.draws, DN, scale, 0.0, 4e-7);
    ck_assert_uint_eq(o.divergent, 0); /* stable: eps (1 + J) < 2 x the least scale */
    chain_free(&o);

    /* warm-up untouched, sampling jittered, reproducible by seed and chain */
    static double qa[2 * W * DN], ia[2 * W * 7], qb[2 * W * DN], ib[2 * W * 7];
    gmm_hmc_target tg = {normal_logp, &ts};
    par.warmup = par.draws = W;
    double eps[2];
    for (int k = 0; k < 2; k++) {
        par.stepsize_jitter = k ? 0.3 : 0.0;
        gmm_hmc *h = gmm_hmc_alloc(DN, &par);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
        record(h, 2 * W, DN, k ? qb : qa, k ? ib : ia);
        eps[k] = gmm_hmc_stepsize(h);
        gmm_hmc_free(h);
    }
    ck_assert(eps[0] == eps[1]);
    ck_assert(memcmp(qa, qb, W * DN * sizeof *qa) == 0 && memcmp(ia, ib, W * 7 * sizeof *ia) == 0);
    double lo = INFINITY, hi = 0.0;
    for (size_t i = W; i < 2 * W; i++) {
        double e = ib[i * 7 + 2];
        ck_assert(ia[i * 7 + 2] == eps[0]);
        ck_assert_msg(e >= 0.7 * eps[0] && e <= 1.3 * eps[0], "step %g of nominal %g", e, eps[0]);
        lo = fmin(lo, e);
        hi = fmax(hi, e);
    }
    /* 300 uniform draws on (0.7, 1.3): the extremes lie within 0.035 of the
     * ends but with probability (1 - 0.035 / 0.6)^300 = 1.5e-8 per end */
    ck_assert_msg(lo < 0.735 * eps[0] && hi > 1.265 * eps[0], "steps %g .. %g of %g", lo, hi,
                  eps[0]);
    ck_assert_msg(shared(qa + W * DN, qb + W * DN, W * DN) < W * DN / 10, "jittered draws equal to unjittered ones");
    gmm_hmc *h = gmm_hmc_alloc(DN, &par);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    record(h, 2 * W, DN, qa, ia);
    gmm_hmc_free(h);
    ck_assert(memcmp(qa, qb, sizeof qa) == 0 && memcmp(ia, ib, sizeof ia) == 0);
    par.chain = 1;
    h = gmm_hmc_alloc(DN, &par);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    record(h, 2 * W, DN, qa, ia);
    gmm_hmc_free(h);
    ck_assert(shared(qa + W * DN, qb + W * DN, W * DN) < W * DN / 10);
}
END_TEST

/* The metric windows of Stan: 75 + 25, 50, 100, 200, 500 + 50 for 1000
 * warm-up iterations; 15% / 75% / 10% when the stages do not fit; none
 * below 20. */
START_TEST(test_hmc_windows)
{
    struct {
        size_t warmup;
        size_t ends[6];
    } cases[] = {
        {1000, {99, 149, 249, 449, 949, 0}},
        {300, {99, 149, 249, 0}},
        {150, {99, 0}},
        {100, {89, 0}}, /* 15 + 75 + 10 */
        {19, {0}},
    };
    normal_target t = {2, NULL, 1.0, 0, 0.0, 0};
    gmm_hmc_target tg = {normal_logp, &t};
    double q0[2] = {0.0, 0.0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gmm_hmc_params par;
        gmm_hmc_params_init(&par);
        par.warmup = cases[c].warmup;
        par.draws = 5;
        gmm_hmc *h = gmm_hmc_alloc(2, &par);
        ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
        size_t k = 0;
        for (size_t it = 0; it < par.warmup + par.draws; it++) {
            gmm_hmc_draw d;
            ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
            if (d.metric_updated) {
                ck_assert_msg(cases[c].ends[k] == it, "warmup %zu: update at %zu, expected %zu",
                              par.warmup, it, cases[c].ends[k]);
                k++;
            }
        }
        ck_assert_msg(cases[c].ends[k] == 0, "warmup %zu: %zu updates", par.warmup, k);
        gmm_hmc_free(h);
    }
}
END_TEST

static int cancel_at_5(void *user, const gmm_hmc_progress *p)
{
    size_t *calls = user;
    ck_assert_uint_eq(p->iteration, ++*calls);
    ck_assert_uint_eq(p->total, 30);
    ck_assert_uint_eq(p->chain, 3);
    ck_assert(p->draw && p->draw->iteration + 1 == p->iteration);
    return p->iteration == 5;
}

START_TEST(test_hmc_params_progress)
{
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    ck_assert_int_eq(gmm_hmc_params_check(&par), GMM_OK);
    ck_assert_int_eq(gmm_hmc_params_check(NULL), GMM_EINVAL);
#define BAD(field, value, name)                                                  \
    do {                                                                         \
        gmm_hmc_params_init(&par);                                               \
        par.field = value;                                                       \
        ck_assert_int_eq(gmm_hmc_params_check(&par), GMM_EINVAL);                \
        ck_assert(strstr(gmm_error_message(), name) != NULL);                    \
        ck_assert_ptr_null(gmm_hmc_alloc(3, &par));                              \
    } while (0)
    BAD(max_depth, 0, "max_depth");
    BAD(max_depth, 31, "max_depth");
    BAD(stepsize, 0.0, "stepsize");
    BAD(stepsize, INFINITY, "stepsize");
    BAD(stepsize_jitter, 1.0, "stepsize_jitter");
    BAD(stepsize_jitter, -0.1, "stepsize_jitter");
    BAD(stepsize_jitter, NAN, "stepsize_jitter");
    BAD(target_accept, 1.0, "target_accept");
    BAD(target_accept, 0.0, "target_accept");
    BAD(gamma, -1.0, "gamma");
    BAD(t0, 0.0, "t0");
    BAD(kappa, 1.5, "kappa");
    BAD(base_window, 0, "base_window");
    BAD(max_energy_error, NAN, "max_energy_error");
    BAD(sampler, (gmm_hmc_kind)7, "sampler");
#undef BAD
    gmm_hmc_params_init(&par);
    par.sampler = GMM_HMC_STATIC;
    par.steps = 0;
    ck_assert_int_eq(gmm_hmc_params_check(&par), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "steps") != NULL);
    par.sampler = GMM_HMC_NUTS; /* steps unused by NUTS */
    ck_assert_int_eq(gmm_hmc_params_check(&par), GMM_OK);
    ck_assert_ptr_null(gmm_hmc_alloc(0, &par));
    ck_assert_int_eq(gmm_error_status(), GMM_EINVAL);
    gmm_hmc_free(NULL);

    /* out of memory at each allocation */
    gmm_hmc_params_init(&par);
    for (long k = 0; k < 3; k++) {
        gmm_alloc_fail_after(k);
        gmm_hmc *h = gmm_hmc_alloc(3, &par);
        gmm_alloc_fail_after(-1);
        if (h) {
            ck_assert_int_ge(k, 2);
            gmm_hmc_free(h);
        } else {
            ck_assert_int_eq(gmm_error_status(), GMM_ENOMEM);
        }
    }

    /* progress and cancellation; set_inv_metric */
    size_t calls = 0;
    par.warmup = 20;
    par.draws = 10;
    par.chain = 3;
    par.progress = cancel_at_5;
    par.user = &calls;
    gmm_hmc *h = gmm_hmc_alloc(3, &par);
    normal_target t = {3, NULL, 1.0, 0, 0.0, 0};
    gmm_hmc_target tg = {normal_logp, &t};
    double q0[3] = {0, 0, 0}, m[3] = {1, 2, 3};
    ck_assert_int_eq(gmm_hmc_set_inv_metric(h, m), GMM_OK);
    ck_assert(gmm_hmc_inv_metric(h)[2] == 3.0);
    m[1] = -1.0;
    ck_assert_int_eq(gmm_hmc_set_inv_metric(h, m), GMM_EINVAL);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    ck_assert(gmm_hmc_stepsize(h) > 0.0);
    gmm_hmc_draw d;
    gmm_status st = GMM_OK;
    while (st == GMM_OK)
        st = gmm_hmc_iterate(h, &d);
    ck_assert_int_eq(st, GMM_ECANCEL);
    ck_assert_uint_eq(calls, 5);
    ck_assert_uint_eq(d.iteration, 4);
    par.progress = NULL;
    gmm_hmc_free(h);

    /* the end: warmup + draws iterations, then EINVAL */
    h = gmm_hmc_alloc(3, &par);
    ck_assert_int_eq(gmm_hmc_init(h, q0, &tg), GMM_OK);
    for (size_t i = 0; i < 30; i++)
        ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
    ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_EINVAL);
    gmm_hmc_free(h);
}
END_TEST

Suite *infer_hmc_suite(void)
{
    Suite *s = suite_create("infer_hmc");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hmc_std_normal_100);
    tcase_add_test(tc, test_hmc_pooled_chains);
    tcase_add_test(tc, test_hmc_scales_metric);
    tcase_add_test(tc, test_hmc_depth_scale);
    tcase_add_test(tc, test_hmc_no_warmup);
    tcase_add_test(tc, test_hmc_reproducible);
    tcase_add_test(tc, test_hmc_domain_failures);
    tcase_add_test(tc, test_hmc_real_errors);
    tcase_add_test(tc, test_hmc_static_correlated);
    tcase_add_test(tc, test_hmc_metric_pooling);
    tcase_add_test(tc, test_hmc_stepsize_jitter);
    tcase_add_test(tc, test_hmc_windows);
    tcase_add_test(tc, test_hmc_params_progress);
    suite_add_tcase(s, tc);
    return s;
}
