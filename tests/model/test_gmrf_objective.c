/* test_gmrf_objective.c -- the graph GMRF's Gaussian marginal likelihood
 * (a graph latent with the Gaussian likelihood, problem.h) against a dense GSL computation of the same
 * model, y ~ N(0, E Q^{-1} E' + noise I), and its gradient against central
 * differences. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "support/testutil.h"
#include "support/tu_gmrf.h"

static gmm_graph *test_graph(tu_rng *r, size_t n, size_t chords, size_t iso)
{
    size_t m = n - 1 + chords;
    size_t *ei = malloc(m * sizeof *ei), *ej = malloc(m * sizeof *ej);
    double *len = malloc(m * sizeof *len);
    for (size_t k = 0; k + 1 < n; k++) {
        ei[k] = k;
        ej[k] = k + 1;
    }
    for (size_t k = n - 1; k < m;) {
        size_t a = (size_t)(tu_uniform(r) * (double)n), b = (size_t)(tu_uniform(r) * (double)n);
        if (a == b || (a + 1 == b) || (b + 1 == a))
            continue;
        ei[k] = a;
        ej[k++] = b;
    }
    for (size_t k = 0; k < m; k++) {
        size_t lo = ei[k] < ej[k] ? ei[k] : ej[k], hi = ei[k] ^ ej[k] ^ lo;
        len[k] = 0.3 + fmod(0.61 * (double)lo + 0.17 * (double)hi, 2.0);
    }
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(n + iso, m, ei, ej, len, NULL, NULL, &g), GMM_OK);
    free(ei);
    free(ej);
    free(len);
    return g;
}

/* Dense log N(y; 0, E Q^{-1} E' + noise I), E selecting rows off[k] of the
 * (permuted) Q. */
static double dense_loglik(const gmm_band *Q, const gmm_obs *obs, double noise)
{
    size_t n = Q->n, k = obs->nobs;
    double *D = tu_band_to_dense(Q);
    gsl_matrix_view A = gsl_matrix_view_array(D, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&A.matrix), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&A.matrix), 0);
    gsl_matrix *K = gsl_matrix_alloc(k, k);
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++)
            gsl_matrix_set(K, a, b,
                           gsl_matrix_get(&A.matrix, obs->offset[a], obs->offset[b]) +
                               (a == b ? noise : 0.0));
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(K), 0);
    double logdet = 0.0;
    for (size_t a = 0; a < k; a++)
        logdet += 2.0 * log(gsl_matrix_get(K, a, a));
    gsl_vector *x = gsl_vector_alloc(k);
    for (size_t a = 0; a < k; a++)
        gsl_vector_set(x, a, obs->y[a]);
    gsl_vector *sol = gsl_vector_alloc(k);
    ck_assert_int_eq(gsl_linalg_cholesky_solve(K, x, sol), 0);
    double quad = 0.0;
    for (size_t a = 0; a < k; a++)
        quad += obs->y[a] * gsl_vector_get(sol, a);
    gsl_vector_free(x);
    gsl_vector_free(sol);
    gsl_matrix_free(K);
    free(D);
    return -0.5 * ((double)k * log(2.0 * M_PI) + logdet + quad);
}

typedef struct {
    gmm_objective *o;
    double *theta;
} fd_ctx;

static double objective_value(void *vctx)
{
    fd_ctx *c = vctx;
    double f;
    ck_assert_int_eq(c->o->eval(c->o->ctx, c->theta, &f, NULL), GMM_OK);
    return f;
}

START_TEST(test_objective_vs_dense)
{
    tu_rng r;
    tu_rng_seed(&r, 41);
    const char *specs[] = {"edge-ou(variance=1.3, lengthscale=0.8)",
                           "laplacian(precision=2, ridge=0.3)",
                           "edge-ou(variance=0.7, lengthscale=2) + laplacian(precision=0.5, "
                           "ridge=0.05)"};
    for (int rep = 0; rep < 9; rep++) {
        size_t n = 6 + (size_t)(tu_uniform(&r) * 30), iso = rep % 2;
        gmm_graph *g = test_graph(&r, n, n / 3, iso);
        gmm_spec_node *spec = NULL;
        ck_assert_int_eq(gmm_spec_parse(specs[rep % 3], &spec), GMM_OK);
        gmm_gmrf *m = NULL;
        ck_assert_int_eq(gmm_gmrf_alloc(g, spec, specs[rep % 3], &m), GMM_OK);

        /* Data rows: some nodes twice, some latent, one missing outcome. */
        size_t nrow = g->n / 2 + 3;
        size_t *node = malloc(nrow * sizeof *node);
        double *y = malloc(nrow * sizeof *y);
        for (size_t k = 0; k < nrow; k++) {
            node[k] = (size_t)(tu_uniform(&r) * (double)g->n);
            y[k] = tu_normal(&r);
        }
        node[0] = node[1];
        y[2] = NAN;
        gmm_gmrf_obs *ob = NULL;
        ck_assert_int_eq(gmm_gmrf_obs_alloc(m, nrow, node, y, &ob), GMM_OK);

        tu_gprob gp;
        ck_assert_int_eq(tu_gmrf_problem(m, nrow, node, y, 0.4, &gp), GMM_OK);
        gmm_objective *o = gmm_problem_objective(gp.p);
        ck_assert_uint_eq(o->nparam, m->nparam + 1);
        ck_assert_str_eq(o->name[o->nparam - 1], "likelihood.variance");
        ck_assert(o->value[o->nparam - 1] == 0.4);

        double theta[5], grad[5], f;
        memcpy(theta, o->value, o->nparam * sizeof *theta);
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, grad), GMM_OK);

        gmm_band *Q = gmm_gmrf_band_alloc(m, 0);
        ck_assert_int_eq(gmm_gmrf_assemble(m, theta, Q), GMM_OK);
        double want = dense_loglik(Q, &ob->obs, theta[o->nparam - 1]);
        /* Tolerance: both are O(n) sums of well-conditioned logs/solves. */
        ck_assert_msg(fabs(f - want) <= 1e-10 * (1.0 + fabs(want)), "loglik %.17g dense %.17g",
                      f, want);

        fd_ctx ctx = {o, theta};
        size_t worst = 0;
        double err = tu_fd_check(theta, o->nparam, grad, objective_value, &ctx, 1e-5, 1e-6,
                                 &worst);
        ck_assert_msg(err < 1e-5, "rep %d: gradient rel err %g at %s", rep, err,
                      o->name[worst]);

        /* Outside the domain: an ordinary failure, not a crash. */
        theta[o->nparam - 1] = -1.0;
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, grad), GMM_EDOM);
        theta[o->nparam - 1] = 0.4;
        theta[0] = 0.0;
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, grad), GMM_EDOM);

        gmm_band_free(Q);
        tu_gmrf_problem_free(&gp);
        gmm_gmrf_obs_free(ob);
        free(node);
        free(y);
        gmm_gmrf_free(m);
        gmm_spec_free(spec);
        gmm_graph_free(g);
    }
}
END_TEST

START_TEST(test_objective_refuses_huge_band)
{
    tu_rng r;
    tu_rng_seed(&r, 42);
    gmm_graph *g = test_graph(&r, 30, 20, 0);
    gmm_spec_node *spec = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou", &spec), GMM_OK);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, spec, NULL, &m), GMM_OK);
    size_t node[] = {1, 2};
    double y[] = {0.5, -0.5};
    ck_assert_int_eq(gmm_gmrf_band_check(m, 64), GMM_ENOMEM);
    ck_assert(strstr(gmm_error_message(), "n = 30 nodes"));
    tu_gprob gp;
    ck_assert_int_eq(tu_gmrf_problem(m, 2, node, y, 0.0, &gp), GMM_EINVAL);
    /* every allocation failure of the construction is a clean ENOMEM */
    int failed = 0;
    for (long k = 0; k < 60; k++) {
        gmm_alloc_fail_after(k);
        gmm_status st = tu_gmrf_problem(m, 2, node, y, 1.0, &gp);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            tu_gmrf_problem_free(&gp);
            break;
        }
        ck_assert_int_eq(st, GMM_ENOMEM);
        ck_assert_ptr_null(gp.p);
        failed++;
    }
    ck_assert_int_gt(failed, 5);
    gmm_gmrf_free(m);
    gmm_spec_free(spec);
    gmm_graph_free(g);
}
END_TEST

Suite *model_gmrf_objective_suite(void)
{
    Suite *s = suite_create("model_gmrf_objective");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_objective_vs_dense);
    tcase_add_test(tc, test_objective_refuses_huge_band);
    suite_add_tcase(s, tc);
    return s;
}
