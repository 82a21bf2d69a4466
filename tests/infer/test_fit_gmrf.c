/* test_fit_gmrf.c -- end to end on graphs: the GMRF objective
 * (gmm_gmrf_objective_alloc) against a dense computation in the graph's OWN
 * numbering, and gmm_fit recovering the precision parameters and the noise
 * from data simulated densely.
 *
 * The graph is a grid with random edge lengths, a few diagonals, and node
 * indices scrambled (so RCM has real work and every row mapping matters).
 * Q is written densely in this file from the formulas of gmrf.h, in graph
 * numbering; f ~ N(0, Q^-1) is drawn by a dense GSL Cholesky (f = L^-T z),
 * and y observes a random subset of nodes (some twice, one row missing) with
 * Gaussian noise, fixed seed.  The fit starts at x2 / x0.5 of the truth.
 *
 * tests/model/test_gmrf_objective.c compares the objective with a dense
 * computation built from the ASSEMBLED permuted band and the observation
 * offsets gmm_gmrf_obs_alloc produced; the pieces (assembly against a dense
 * construction after permutation, offsets = iperm[node]) are tested in
 * test_gmrf.c.  The dense oracle here starts from the edge list and the data
 * rows only, so the whole chain -- RCM, band slots, assembly, row mapping,
 * repeated and missing rows, marginal likelihood -- is checked at once
 * against the model in the graph's own numbering.
 *
 * TOLERANCE of the recovery: as in test_fit_ssm.c, tu_fit_z_bound (6.6)
 * observed-information standard errors on the log scale, with the SEs
 * bounded and checked against the spread over seeds (GMM_FIT_GMRF_SEEDS=K;
 * numbers above the cases), and the joint Wald statistic below
 * tu_fit_wald_bound (55: it catches data whose field is 1.5 times too large
 * -- Wald ~80-95 -- where the laplacian's poorly determined single
 * parameters would not): a false failure of at most 5e-7 per case over the
 * data's seed. */
#include <check.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <lbfgs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/gmrf.h"
#include "gmm/spec.h"
#include "support/testutil.h"
#include "support/tu_gmrf.h"

/* ---- graph, dense precision, data ---------------------------------------------- */

typedef struct {
    size_t n, m;
    size_t *ei, *ej; /* graph numbering */
    double *len;
} edges;

/* kx x ky grid, lengths U(0.3, 2.5), a diagonal in every 5th cell (length
 * U(0.5, 3)), node indices scrambled by a random permutation. */
static edges grid_edges(tu_rng *r, size_t kx, size_t ky)
{
    edges e;
    e.n = kx * ky;
    size_t cap = 3 * e.n;
    e.ei = malloc(cap * sizeof *e.ei);
    e.ej = malloc(cap * sizeof *e.ej);
    e.len = malloc(cap * sizeof *e.len);
    size_t *sig = malloc(e.n * sizeof *sig);
    for (size_t i = 0; i < e.n; i++)
        sig[i] = i;
    for (size_t i = e.n - 1; i > 0; i--) {
        size_t j = (size_t)(tu_uniform(r) * (double)(i + 1)), t = sig[i];
        sig[i] = sig[j];
        sig[j] = t;
    }
    e.m = 0;
    for (size_t a = 0; a < kx; a++)
        for (size_t b = 0; b < ky; b++) {
            size_t v = a * ky + b;
            if (b + 1 < ky) {
                e.ei[e.m] = sig[v];
                e.ej[e.m] = sig[v + 1];
                e.len[e.m++] = 0.3 + 2.2 * tu_uniform(r);
            }
            if (a + 1 < kx) {
                e.ei[e.m] = sig[v + ky];
                e.ej[e.m] = sig[v];
                e.len[e.m++] = 0.3 + 2.2 * tu_uniform(r);
            }
            if (a + 1 < kx && b + 1 < ky && v % 5 == 2) {
                e.ei[e.m] = sig[v];
                e.ej[e.m] = sig[v + ky + 1];
                e.len[e.m++] = 0.5 + 2.5 * tu_uniform(r);
            }
        }
    free(sig);
    return e;
}

static void edges_free(edges *e)
{
    free(e->ei);
    free(e->ej);
    free(e->len);
}

typedef enum { P_EDGE_OU, P_LAPLACIAN } family;

/* Dense Q (n x n, graph numbering) at the precision parameters th, straight
 * from gmrf.h: edge-ou adds 1/(v (1 - rho^2)) [[1, -rho], [-rho, 1]] -
 * 1/(2 v) I per edge (rho = exp(-d / l)); laplacian p (D - A) + ridge I. */
static gsl_matrix *dense_q(const edges *e, family fam, const double *th)
{
    gsl_matrix *Q = gsl_matrix_calloc(e->n, e->n);
    for (size_t k = 0; k < e->m; k++) {
        size_t i = e->ei[k], j = e->ej[k];
        double dii, dij;
        if (fam == P_EDGE_OU) {
            double v = th[0], rho = exp(-e->len[k] / th[1]), s = -expm1(-2.0 * e->len[k] / th[1]);
            dii = 1.0 / (v * s) - 0.5 / v;
            dij = -rho / (v * s);
        } else {
            dii = th[0];
            dij = -th[0];
        }
        *gsl_matrix_ptr(Q, i, i) += dii;
        *gsl_matrix_ptr(Q, j, j) += dii;
        *gsl_matrix_ptr(Q, i, j) += dij;
        *gsl_matrix_ptr(Q, j, i) += dij;
    }
    if (fam == P_LAPLACIAN)
        for (size_t i = 0; i < e->n; i++)
            *gsl_matrix_ptr(Q, i, i) += th[1];
    return Q;
}

/* Dense log N(y; 0, E Q^-1 E' + noise I) over the rows with a finite y,
 * E selecting graph nodes node[r]. */
static double dense_loglik(const edges *e, family fam, const double *th, double noise,
                           size_t nrow, const size_t *node, const double *y)
{
    gsl_matrix *S = dense_q(e, fam, th);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(S), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(S), GSL_SUCCESS);
    size_t k = 0;
    size_t *rows = malloc(nrow * sizeof *rows);
    for (size_t r = 0; r < nrow; r++)
        if (!isnan(y[r]))
            rows[k++] = r;
    gsl_matrix *C = gsl_matrix_alloc(k, k);
    gsl_vector *a = gsl_vector_alloc(k);
    for (size_t p = 0; p < k; p++) {
        for (size_t q = 0; q < k; q++)
            gsl_matrix_set(C, p, q,
                           gsl_matrix_get(S, node[rows[p]], node[rows[q]]) + (p == q ? noise : 0));
        gsl_vector_set(a, p, y[rows[p]]);
    }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(C), GSL_SUCCESS);
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, C, a);
    double ld = 0.0, qd = 0.0;
    for (size_t p = 0; p < k; p++) {
        ld += log(gsl_matrix_get(C, p, p));
        qd += gsl_vector_get(a, p) * gsl_vector_get(a, p);
    }
    gsl_vector_free(a);
    gsl_matrix_free(C);
    gsl_matrix_free(S);
    free(rows);
    return -0.5 * qd - ld - 0.5 * (double)k * log(2.0 * M_PI);
}

/* ---- the cases ----------------------------------------------------------------------- */

typedef struct {
    const char *name;
    family fam;
    const char *spec;  /* with the TRUE values */
    double noise;
    size_t kx, ky;
    double se_max;
    uint64_t seed;
} fit_case;

typedef struct {
    double z[3], se[3];
    int converged;
    double wald; /* joint Wald statistic against the truth (3 df) */
} fit_out;

static fit_out run_case(const fit_case *c, int strict)
{
    tu_rng r;
    tu_rng_seed(&r, tu_seed(c->seed));
    edges e = grid_edges(&r, c->kx, c->ky);
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(e.n, e.m, e.ei, e.ej, e.len, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *spec = NULL;
    ck_assert_int_eq(gmm_spec_parse(c->spec, &spec), GMM_OK);
    gmm_gmrf *m = NULL;
    ck_assert_msg(gmm_gmrf_alloc(g, spec, c->spec, &m) == GMM_OK, "%s", gmm_error_message());
    ck_assert_uint_eq(m->nparam, 2);
    ck_assert_uint_lt(m->bw, m->bw_before); /* the scrambling left RCM work to do */
    double truth[3] = {m->param_value[0], m->param_value[1], c->noise};

    /* f ~ N(0, Q^-1): Q = L L', f = L^-T z */
    gsl_matrix *L = dense_q(&e, c->fam, truth);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(L), GSL_SUCCESS);
    gsl_vector *f = gsl_vector_alloc(e.n);
    for (size_t i = 0; i < e.n; i++)
        gsl_vector_set(f, i, tu_normal(&r));
    gsl_blas_dtrsv(CblasLower, CblasTrans, CblasNonUnit, L, f);
    gsl_matrix_free(L);

    /* rows: 70% of the nodes, every 9th of those observed twice, one row
     * without an outcome */
    size_t nrow = 0, *node = malloc(2 * e.n * sizeof *node);
    double *y = malloc(2 * e.n * sizeof *y), sd = sqrt(c->noise);
    for (size_t v = 0; v < e.n; v++) {
        if (tu_uniform(&r) >= 0.7)
            continue;
        size_t times = nrow % 9 == 4 ? 2 : 1;
        for (size_t t = 0; t < times; t++) {
            node[nrow] = v;
            y[nrow++] = gsl_vector_get(f, v) + sd * tu_normal(&r);
        }
    }
    y[nrow / 2] = NAN;
    gsl_vector_free(f);

    gmm_gmrf_obs *ob = NULL;
    ck_assert_int_eq(gmm_gmrf_obs_alloc(m, nrow, node, y, &ob), GMM_OK);
    tu_gprob gp;
    ck_assert_int_eq(tu_gmrf_problem(m, nrow, node, y, 2.0 * c->noise, &gp), GMM_OK);
    gmm_objective *o = gmm_problem_objective(gp.p);
    ck_assert_uint_eq(o->nparam, 3);

    /* The objective equals the dense model in graph numbering, at the truth
     * and at the start.  Tolerance: both sides are O(n) sums of logs and a
     * quadratic form of well-conditioned matrices (cond(Q) measured 5 to 17
     * at these points). */
    double start[3] = {2.0 * truth[0], 0.5 * truth[1], 2.0 * truth[2]};
    const double *pts[2] = {truth, start};
    for (int p = 0; p < 2; p++) {
        double ll, want = dense_loglik(&e, c->fam, pts[p], pts[p][2], nrow, node, y);
        ck_assert_int_eq(o->eval(o->ctx, pts[p], &ll, NULL), GMM_OK);
        ck_assert_msg(fabs(ll - want) <= 1e-10 * fabs(want), "%s: loglik %.17g, dense %.17g",
                      c->name, ll, want);
    }

    memcpy(o->value, start, sizeof start);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    gmm_fit_result res;
    ck_assert_msg(gmm_fit(o, &fp, &res) == GMM_OK, "%s: %s", c->name, gmm_error_message());

    fit_out out = {{0}, {0}, res.converged, 0.0};
    double dec, wq = tu_fit_wald_bound(3), zq = tu_fit_z_bound(3);
    ck_assert_msg(tu_objective_log_se(o, o->value, 1e-4, out.se, &dec, truth, &out.wald) == 0,
                  "%s: observed information not positive definite at the optimum", c->name);
    ck_assert_msg(dec < 1e-6, "%s: %s; Newton decrement %g", c->name, res.message, dec);
    double lfit = dense_loglik(&e, c->fam, o->value, o->value[2], nrow, node, y),
           ltrue = dense_loglik(&e, c->fam, truth, truth[2], nrow, node, y);
    ck_assert_msg(fabs(res.loglik - lfit) <= 1e-10 * fabs(lfit), "%s: fit %.15g dense %.15g",
                  c->name, res.loglik, lfit);
    ck_assert_msg(lfit >= ltrue, "%s: loglik at the fit %.15g < at the truth %.15g", c->name,
                  lfit, ltrue);
    for (size_t i = 0; i < 3; i++)
        out.z[i] = log(o->value[i] / truth[i]);
    if (strict) {
        /* see test_fit_ssm.c on LBFGSERR_ROUNDING_ERROR at the maximum */
        ck_assert_msg(res.converged || res.lbfgs_status == LBFGSERR_ROUNDING_ERROR, "%s: %s",
                      c->name, res.message);
        ck_assert_msg(out.wald < wq, "%s: Wald statistic %.3g >= %.3g", c->name, out.wald, wq);
        for (size_t i = 0; i < 3; i++) {
            ck_assert_msg(out.se[i] < c->se_max, "%s: %s standard error %.3g >= %.3g", c->name,
                          o->name[i], out.se[i], c->se_max);
            ck_assert_msg(fabs(out.z[i]) < zq * out.se[i],
                          "%s: %s fitted %.6g, truth %.6g: log ratio %.3g, %.2f SE = %.3g",
                          c->name, o->name[i], o->value[i], truth[i], out.z[i], zq,
                          zq * out.se[i]);
        }
    }
    if (getenv("GMM_TEST_REPORT")) {
        fprintf(stderr, "%s (seed %llu): n %zu, bw %zu (%zu before), %zu obs, %zu evals, %s, "
                        "Newton decrement %.2g, Wald %.3g (< %.3g)\n",
                c->name, (unsigned long long)c->seed, m->n, m->bw, m->bw_before, ob->obs.nobs,
                res.evaluations, res.message, dec, out.wald, wq);
        for (size_t i = 0; i < 3; i++)
            fprintf(stderr, "  %-26s truth %-6g fit %-10.5g log ratio %+.3f  SE %.3f\n",
                    o->name[i], truth[i], o->value[i], out.z[i], out.se[i]);
    }
    tu_gmrf_problem_free(&gp);
    gmm_gmrf_obs_free(ob);
    gmm_gmrf_free(m);
    gmm_spec_free(spec);
    gmm_graph_free(g);
    edges_free(&e);
    free(node);
    free(y);
    return out;
}

/* GMM_FIT_GMRF_SEEDS=K: spread over K seeds (far apart: neighbouring
 * tu_rng seeds give shifted copies of one stream) beside the mean SE. */
static void seed_sweep(const fit_case *c0)
{
    const char *env = getenv("GMM_FIT_GMRF_SEEDS");
    if (!env)
        return;
    int K = atoi(env), nconv = 0, nout = 0, nwald = 0;
    double swald = 0.0;
    double s1[3] = {0}, s2[3] = {0}, sse[3] = {0}, smax[3] = {0}, zmax[3] = {0}, lse[3] = {0}, lse2[3] = {0};
    for (int s = 0; s < K; s++) {
        fit_case c = *c0;
        c.seed = 1000 + 1000003 * (uint64_t)s;
        fit_out o = run_case(&c, 0);
        nconv += o.converged;
        swald += o.wald;
        nwald += o.wald >= gsl_cdf_chisq_Pinv(0.9973, 3.0);
        for (size_t i = 0; i < 3; i++) {
            s1[i] += o.z[i];
            s2[i] += o.z[i] * o.z[i];
            sse[i] += o.se[i];
            smax[i] = fmax(smax[i], o.se[i]);
            if (o.se[i] > 0) {
                lse[i] += log(o.se[i]);
                lse2[i] += log(o.se[i]) * log(o.se[i]);
            }
            if (o.se[i] > 0)
                zmax[i] = fmax(zmax[i], fabs(o.z[i]) / o.se[i]);
            if (fabs(o.z[i]) >= 3.0 * o.se[i]) {
                nout++;
                fprintf(stderr, "  seed %llu: param %zu log ratio %+.3f, SE %.3f\n",
                        (unsigned long long)c.seed, i, o.z[i], o.se[i]);
            }
        }
    }
    fprintf(stderr,
            "%s over %d seeds: %d converged, %d estimates beyond 3 SE, mean Wald %.2g (df 3), "
            "%d beyond its 0.9973 quantile\n",
            c0->name, K, nconv, nout, swald / K, nwald);
    for (size_t i = 0; i < 3; i++)
        fprintf(stderr, "  param %zu: mean log ratio %+.3f, sd %.3f, mean SE %.3f, largest %.3f (log SE: sd %.3f), largest |log ratio| / SE %.2f\n", i, s1[i] / K,
                sqrt(fmax(0.0, s2[i] / K - (s1[i] / K) * (s1[i] / K))), sse[i] / K, smax[i], sqrt(fmax(0.0, lse2[i] / K - (lse[i] / K) * (lse[i] / K))), zmax[i]);
}

/* Measured with GMM_FIT_GMRF_SEEDS=40 (seeds 1000 + 1000003 s; each seed
 * draws its own graph lengths, scrambling, observed subset and data): mean
 * of log(estimate / truth), sd over seeds and mean observed-information SE,
 * for the two precision parameters then the noise, and the sd of log SE.
 *   edge-ou:   mean +0.02 -0.01 -0.01; sd 0.15 0.22 0.20; SE 0.14 0.24 0.19;
 *              log SE sd 0.10 0.07 0.05
 *   laplacian: mean -0.05 +0.00 -0.01; sd 0.23 0.30 0.21; SE 0.26 0.30 0.19;
 *              log SE sd 0.25 0.09 0.04 (the precision's SE up to 0.49)
 * All 80 fits converged; no estimate beyond 2.9 SE; mean Wald statistic 3.2
 * and 3.2 (3 df), none beyond even the 0.9973 quantile.  The laplacian's ridge
 * is the weakly identified one (at ridge 0.3 its SE was ~1, uninformative):
 * ridge / precision = 2 makes it matter for most eigenmodes.  se_max: 0.4,
 * 7 log sds above edge-ou's lengthscale SE (0.24); 1.15, 6.1 above the
 * laplacian precision's (0.26, log sd 0.25; 0.45 was 2.3 sd above it, and
 * one seed of 40 exceeded it). */
static const fit_case cases[] = {
    {"edge-ou", P_EDGE_OU, "edge-ou(variance=1, lengthscale=1.5)", 0.1, 25, 25, 0.4, 11},
    {"laplacian", P_LAPLACIAN, "laplacian(precision=1, ridge=2)", 0.05, 25, 25, 1.15, 12},
};

START_TEST(test_fit_recovers)
{
    gsl_set_error_handler_off();
    run_case(&cases[_i], 1);
    seed_sweep(&cases[_i]);
}
END_TEST

Suite *infer_fit_gmrf_suite(void)
{
    Suite *s = suite_create("infer_fit_gmrf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_fit_recovers, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    return s;
}
