/* test_vi_hmc.c -- VI against whitened NUTS on a small Poisson graph: the
 * posterior means of every f agree within a stated tolerance.  VI is an
 * approximation (zero-forcing KL): its means are within 0.15 posterior sd
 * of HMC's here plus 4 Monte Carlo errors, and its variances within 25%.
 * Over 10 seeds (GMM_TEST_SEED 0-9): the worst mean gap 0.017-0.030 sd, the
 * worst variance gap 5.3-9.0%, the least ESS 4496.  False failures: a mean
 * needs a Monte Carlo error of 0.12 sd + 4 errors, > 10 errors of sd 0.015;
 * a variance, whose relative Monte Carlo error is ~0.025 here, 6 such errors
 * above the gap's ~8%: 12 x P(|t_100| > 6) = 4e-7 (testutil.h's model). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmm/graph.h"
#include "gmm/hmc.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/summary.h"
#include "gmm/vi.h"
#include "support/testutil.h"

static gmm_status logp(void *ctx, const double *v, double *lp, double *grad)
{
    return gmm_problem_whitened_logp(ctx, v, lp, grad);
}

START_TEST(test_vi_vs_hmc_graph)
{
    size_t ei[14], ej[14];
    for (size_t i = 0; i < 12; i++) {
        ei[i] = i;
        ej[i] = (i + 1) % 12;
    }
    ei[12] = 0, ej[12] = 6;
    ei[13] = 3, ej[13] = 9;
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(12, 14, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.5, lengthscale=3)", &s), GMM_OK);
    gmm_gmrf *gm = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, NULL, &gm), GMM_OK);
    size_t node[12];
    double y[12] = {0, 2, 5, 1, 0, 0, 3, 7, 2, 0, 1, 4};
    for (size_t r = 0; r < 12; r++)
        node[r] = r;
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, 12, node, &lat), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 1, 0.3, &p), GMM_OK);
    const double *th = gmm_problem_objective(p)->value;

    /* VI at the fixed hyperparameters */
    gmm_vi_params vp;
    gmm_vi_params_init(&vp);
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &vp, &v), GMM_OK);
    gmm_vi_result res;
    ck_assert_int_eq(gmm_vi_fit(v, &res), GMM_OK);
    ck_assert(res.converged);
    double vm[12], vv[12];
    ck_assert_int_eq(gmm_vi_predict_nodes(v, vm, vv), GMM_OK);

    /* NUTS: 4 chains x 1500 draws */
    size_t n = 12, nc = 4, nd = 1500;
    double *dr = malloc(n * nc * nd * sizeof *dr), q0[12], f[12];
    ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
    for (size_t c = 0; c < nc; c++) {
        gmm_hmc_params hp;
        gmm_hmc_params_init(&hp);
        hp.warmup = 500;
        hp.draws = nd;
        hp.seed = tu_seed(3);
        hp.chain = c + 1;
        ck_assert_int_eq(gmm_problem_whitened_start(p, th, q0), GMM_OK);
        gmm_hmc *h = gmm_hmc_alloc(n, &hp);
        gmm_hmc_target t = {logp, p};
        ck_assert_int_eq(gmm_hmc_init(h, q0, &t), GMM_OK);
        for (size_t k = 0, s2 = 0; k < hp.warmup + hp.draws; k++) {
            gmm_hmc_draw d;
            ck_assert_int_eq(gmm_hmc_iterate(h, &d), GMM_OK);
            if (d.warmup)
                continue;
            ck_assert_int_eq(gmm_problem_whitened_linpred(p, d.q, NULL, f), GMM_OK);
            for (size_t j = 0; j < n; j++)
                dr[(j * nc + c) * nd + s2] = f[j];
            s2++;
        }
        gmm_hmc_free(h);
    }
    double worst_m = 0.0, worst_v = 0.0, least_ess = INFINITY;
    for (size_t j = 0; j < n; j++) {
        const double *x = dr + j * nc * nd;
        size_t N = nc * nd;
        double mu = 0.0, ss = 0.0, ess;
        for (size_t i = 0; i < N; i++)
            mu += x[i];
        mu /= (double)N;
        for (size_t i = 0; i < N; i++)
            ss += (x[i] - mu) * (x[i] - mu);
        double var = ss / (double)(N - 1), sd = sqrt(var);
        ck_assert_int_eq(gmm_summary_ess_mean(x, nc, nd, NULL, &ess), GMM_OK);
        double dm = fabs(vm[j] - mu) / sd, mc = 4.0 / sqrt(ess);
        worst_m = fmax(worst_m, dm);
        least_ess = fmin(least_ess, ess);
        worst_v = fmax(worst_v, fabs(vv[j] / var - 1.0));
        ck_assert_msg(dm < 0.15 + mc, "f[%zu]: VI mean %.5g, HMC %.5g (sd %.3g, ess %.0f)", j,
                      vm[j], mu, sd, ess);
        ck_assert_msg(fabs(vv[j] / var - 1.0) < 0.25, "f[%zu]: VI var %.5g, HMC %.5g", j, vv[j],
                      var);
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "VI vs HMC: worst mean gap %.3f sd, worst variance ratio gap %.3f, "
                "least ESS %.0f\n", worst_m, worst_v, least_ess);
    free(dr);
    gmm_vi_free(v);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(gm);
    gmm_spec_free(s);
    gmm_graph_free(g);
}
END_TEST

Suite *infer_vi_hmc_suite(void)
{
    Suite *s = suite_create("infer_vi_hmc");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vi_vs_hmc_graph);
    suite_add_tcase(s, tc);
    return s;
}
