/* test_hmc_posterior.c -- whitened NUTS on the problem layer's log joint
 * (problem.h + hmc.h), under the prior's map and the Laplace map, against
 * exact posteriors: the Gaussian likelihood on a
 * small state-space model and a small graph (every f against the exact
 * Gaussian posterior, z-scores from the ESS of the mean), and Poisson and
 * Bernoulli outcomes on a two-node graph against moments by quadrature
 * (Poisson at low counts, where the Laplace map is furthest from the
 * posterior, and at high ones, where it is close).
 * Under the Laplace map the sampler adapts as gmm-infer hmc has it there
 * (metric_pooling, GMM_HMC_TARGET_ACCEPT_LAPLACE).
 * Every test fails falsely with probability at most 1e-6, whatever the seed
 * (fixed, or shifted by GMM_TEST_SEED): each check_moments call gets a share
 * p, half over its means' z-scores (Student t, TU_NU_MEAN of the draws) and
 * half over its variances' (TU_NU_SQUARE), split over the quantities (a
 * union bound; testutil.h). */
#include <check.h>
#include <gsl/gsl_integration.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/graph.h"
#include "gmm/hmc.h"
#include "gmm/hmc_chains.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/summary.h"

#include "support/testutil.h"

static gmm_status logp(void *ctx, const double *v, double *lp, double *grad)
{
    return gmm_problem_whitened_logp(ctx, v, lp, grad);
}

/* Draws of f at the rows (or at the nodes): nchain x ndraw each, f-major:
 * out[(j * nchain + c) * ndraw + s]. */
static double *sample(gmm_problem *p, int nodes, size_t nchain, size_t ndraw, size_t *nf,
                      gmm_metric metric)
{
    const gmm_latent *lat = gmm_problem_latent(p);
    size_t n = gmm_latent_dim(lat), m = nodes ? n : gmm_latent_nrows(lat);
    const double *th = gmm_problem_objective(p)->value;
    double *out = malloc(m * nchain * ndraw * sizeof *out), *f = malloc(m * sizeof *f);
    double *v = malloc(n * sizeof *v);
    gmm_problem_set_metric(p, metric);
    ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
    for (size_t c = 0; c < nchain; c++) {
        gmm_hmc_params par;
        gmm_hmc_params_init(&par);
        par.warmup = 500;
        par.draws = ndraw;
        par.seed = tu_seed(17);
        par.chain = c + 1;
        if (metric == GMM_METRIC_LAPLACE) {
            par.metric_pooling = 1;
            par.target_accept = GMM_HMC_TARGET_ACCEPT_LAPLACE;
        }
        ck_assert_int_eq(gmm_problem_whitened_start(p, th, v), GMM_OK);
        gmm_hmc *h = gmm_hmc_alloc(n, &par);
        ck_assert_ptr_nonnull(h);
        gmm_hmc_target t = {logp, p};
        ck_assert_int_eq(gmm_hmc_init(h, v, &t), GMM_OK);
        size_t s = 0;
        for (size_t k = 0; k < par.warmup + par.draws; k++) {
            gmm_hmc_draw d;
            ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
            if (d.warmup)
                continue;
            ck_assert_int_eq(gmm_problem_whitened_linpred(p, d.q, nodes ? NULL : f,
                                                          nodes ? f : NULL),
                             GMM_OK);
            for (size_t j = 0; j < m; j++)
                out[(j * nchain + c) * ndraw + s] = f[j];
            s++;
        }
        gmm_hmc_free(h);
    }
    free(f);
    free(v);
    *nf = m;
    return out;
}

/* z-scores of the draws' means against exact means, the MC standard error
 * sd / sqrt(ess_mean); and of the variances against exact variances, the
 * variance being the mean of the squared deviations d = (x - mean)^2, with
 * MC error sd(d) / sqrt(ess_mean(d)); false failure at most p. */
static void check_moments(const double *dr, size_t m, size_t nchain, size_t ndraw,
                          const double *mean, const double *var, const char *what, double p)
{
    double zm = 0.0, zv = 0.0;
    const double bm = tu_t_bound(p / 2, m, TU_NU_MEAN(nchain * ndraw));
    const double bv = tu_t_bound(p / 2, m, TU_NU_SQUARE(nchain * ndraw));
    for (size_t j = 0; j < m; j++) {
        const double *x = dr + j * nchain * ndraw;
        size_t N = nchain * ndraw;
        double s = 0.0, s2 = 0.0, ess;
        for (size_t i = 0; i < N; i++)
            s += x[i];
        double mu = s / (double)N;
        for (size_t i = 0; i < N; i++)
            s2 += (x[i] - mu) * (x[i] - mu);
        double vv = s2 / (double)(N - 1), essd, sd2 = 0.0;
        ck_assert_int_eq(gmm_summary_ess_mean(x, nchain, ndraw, NULL, &ess), GMM_OK);
        double *d = malloc(N * sizeof *d);
        for (size_t i = 0; i < N; i++)
            d[i] = (x[i] - mu) * (x[i] - mu);
        ck_assert_int_eq(gmm_summary_ess_mean(d, nchain, ndraw, NULL, &essd), GMM_OK);
        for (size_t i = 0; i < N; i++)
            sd2 += (d[i] - s2 / (double)N) * (d[i] - s2 / (double)N);
        free(d);
        double z1 = (mu - mean[j]) / sqrt(vv / ess);
        double z2 = (vv - var[j]) / sqrt(sd2 / (double)(N - 1) / essd);
        zm = fmax(zm, fabs(z1));
        zv = fmax(zv, fabs(z2));
        ck_assert_msg(fabs(z1) < bm && fabs(z2) < bv,
                      "%s f[%zu]: mean %.5g vs exact %.5g (z %.2f), var %.5g vs %.5g (z %.2f), "
                      "ess %.0f",
                      what, j, mu, mean[j], z1, vv, var[j], z2, ess);
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "hmc %s: worst |z| of means %.2f, of variances %.2f over %zu\n", what, zm,
                zv, m);
}

START_TEST(test_gaussian_ssm)
{
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("matern32(variance=1, lengthscale=1.5)", &s), GMM_OK);
    gmm_kernel *k = NULL;
    ck_assert_int_eq(gmm_kernel_from_spec(s, &k), GMM_OK);
    size_t n = 24;
    double x[24], y[24];
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.4 * (double)i;
        y[i] = i % 5 == 4 ? NAN : sin(x[i]) + 0.3 * cos(7.0 * x[i]);
    }
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, n, NULL, &lat), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("gaussian(variance=0.2)", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
    double mean[24], var[24];
    ck_assert_int_eq(gmm_problem_predict_rows(p, gmm_problem_objective(p)->value, mean, var),
                     GMM_OK);
    size_t m;
    for (int lap = 0; lap < 2; lap++) {
        double *dr = sample(p, 0, 2, 1000, &m, lap ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR);
        check_moments(dr, m, 2, 1000, mean, var,
                      lap ? "gaussian state-space, laplace" : "gaussian state-space", 5e-7);
        free(dr);
    }
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(s);
}
END_TEST

START_TEST(test_gaussian_graph)
{
    size_t ei[13], ej[13];
    for (size_t i = 0; i < 12; i++) {
        ei[i] = i;
        ej[i] = (i + 1) % 12;
    }
    ei[12] = 2, ej[12] = 8;
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(12, 13, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1, lengthscale=3)", &s), GMM_OK);
    gmm_gmrf *gm = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, NULL, &gm), GMM_OK);
    size_t node[10];
    double y[10];
    for (size_t r = 0; r < 10; r++) {
        node[r] = (r * 5) % 12;
        y[r] = 0.5 * (double)(r % 4) - 0.7;
    }
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, 10, node, &lat), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("gaussian(variance=0.3)", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
    double mean[12], var[12];
    ck_assert_int_eq(gmm_problem_predict_nodes(p, gmm_problem_objective(p)->value, mean, var),
                     GMM_OK);
    size_t m;
    for (int lap = 0; lap < 2; lap++) {
        double *dr = sample(p, 1, 2, 1000, &m, lap ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR);
        check_moments(dr, m, 2, 1000, mean, var, lap ? "gaussian graph, laplace" : "gaussian graph",
                      5e-7);
        free(dr);
    }
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(gm);
    gmm_spec_free(s);
    gmm_graph_free(g);
}
END_TEST

/* ---- two latents, exact moments by nested quadrature -------------------------- */

typedef struct {
    double Q[4];     /* 2 x 2 precision */
    const gmm_lik *lik;
    const double *y; /* 2: one outcome per node */
    double b;
    double shift;    /* log density at the mode, to keep exp() in range */
    int moment;      /* 0: 1, 1: x0, 2: x1, 3: x0^2, 4: x1^2 */
    double x0;       /* outer variable */
} quad;

static double logpost(const quad *q, double a, double c)
{
    double out[4], s = -0.5 * (q->Q[0] * a * a + 2.0 * q->Q[1] * a * c + q->Q[3] * c * c);
    gmm_lik_eval(q->lik, q->y[0], 1.0, q->b + a, out, NULL);
    s += out[0];
    gmm_lik_eval(q->lik, q->y[1], 1.0, q->b + c, out, NULL);
    return s + out[0];
}

static double inner(double c, void *vq)
{
    quad *q = vq;
    double w = exp(logpost(q, q->x0, c) - q->shift);
    switch (q->moment) {
    case 1: return w * q->x0;
    case 2: return w * c;
    case 3: return w * q->x0 * q->x0;
    case 4: return w * c * c;
    default: return w;
    }
}

static double outer(double a, void *vq)
{
    quad *q = vq;
    q->x0 = a;
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(500);
    gsl_function F = {inner, q};
    double r, e;
    gsl_integration_qags(&F, -12.0, 12.0, 1e-12, 1e-11, 500, ws, &r, &e);
    gsl_integration_workspace_free(ws);
    return r;
}

static void exact_moments(quad *q, double *mean, double *var)
{
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(500);
    gsl_function F = {outer, q};
    double z[5], e;
    q->shift = logpost(q, 0.0, 0.0);
    for (int k = 0; k < 5; k++) {
        q->moment = k;
        ck_assert_int_eq(gsl_integration_qags(&F, -12.0, 12.0, 1e-12, 1e-10, 500, ws, &z[k], &e),
                         0);
    }
    gsl_integration_workspace_free(ws);
    mean[0] = z[1] / z[0];
    mean[1] = z[2] / z[0];
    var[0] = z[3] / z[0] - mean[0] * mean[0];
    var[1] = z[4] / z[0] - mean[1] * mean[1];
}

/* pf: the false-failure probability of each of the two checks */
static void two_nodes(const char *liktext, const double *y, double pf)
{
    size_t ei[1] = {0}, ej[1] = {1}, node[2] = {0, 1};
    double len[1] = {1.0};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(2, 1, ei, ej, len, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.5, lengthscale=2)", &s), GMM_OK);
    gmm_gmrf *gm = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, NULL, &gm), GMM_OK);
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, 2, node, &lat), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse(liktext, &lik), GMM_OK);
    gmm_problem *p = NULL;
    double b = 0.4;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 1, b, &p), GMM_OK);
    /* the prior precision in graph numbering (RCM may swap the nodes) */
    gmm_band *Q = gmm_band_alloc(2, 1, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior(lat, gmm_problem_objective(p)->value, Q, NULL), GMM_OK);
    size_t r0 = gmm_latent_node_index(lat, 0), r1 = gmm_latent_node_index(lat, 1);
    quad q = {{gmm_band_get(Q, r0, r0), gmm_band_get(Q, r0, r1), gmm_band_get(Q, r1, r0),
               gmm_band_get(Q, r1, r1)},
              &lik, y, b, 0.0, 0, 0.0};
    double mean[2], var[2];
    exact_moments(&q, mean, var);
    mean[0] += b; /* f = b + x */
    mean[1] += b;
    size_t m;
    char what[64];
    for (int lap = 0; lap < 2; lap++) {
        double *dr = sample(p, 1, 4, 1000, &m, lap ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR);
        snprintf(what, sizeof what, "%s y = (%g, %g)%s", liktext, y[0], y[1],
                 lap ? ", laplace" : "");
        check_moments(dr, m, 4, 1000, mean, var, what, pf);
        free(dr);
    }
    gmm_band_free(Q);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(gm);
    gmm_spec_free(s);
    gmm_graph_free(g);
}

START_TEST(test_poisson_two_nodes)
{
    double y[2] = {3, 0}, yhigh[2] = {40, 25};
    two_nodes("poisson", y, 2.5e-7);
    two_nodes("poisson", yhigh, 2.5e-7);
}
END_TEST

START_TEST(test_bernoulli_two_nodes)
{
    double y[2] = {1, 0};
    two_nodes("bernoulli", y, 5e-7);
}
END_TEST

Suite *infer_hmc_posterior_suite(void)
{
    Suite *s = suite_create("infer_hmc_posterior");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gaussian_ssm);
    tcase_add_test(tc, test_gaussian_graph);
    tcase_add_test(tc, test_poisson_two_nodes);
    tcase_add_test(tc, test_bernoulli_two_nodes);
    suite_add_tcase(s, tc);
    return s;
}
