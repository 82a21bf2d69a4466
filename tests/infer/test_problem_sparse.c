/* test_problem_sparse.c -- the sparse path of a problem
 * (gmm_problem_alloc_sparse) against the band path on the same model:
 * crossed iid effects (7 x 5 levels, a covariate), Gaussian (the band's
 * exact marginal likelihood against the sparse path's one-step Laplace),
 * Poisson and with a random walk beside them; the objective and its
 * gradient to 1e-10 relative, the sparse gradient against central
 * differences, and the rows' posterior moments (a missing row whose pair
 * of levels no observed row has: a posterior solve).  The same on a graph latent (a 6 x 6 lattice,
 * edge-ou), and its nodes' moments.  Small: 35 and 40 rows. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/latent.h"
#include "gmm/spec.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/stack.h"
#include "support/tu_model.h"

#define NA 7
#define NB 5
#define NR (NA * NB)

typedef struct {
    double X[2 * NR], y[NR], e[NR], t[NR];
    size_t a[NR], b[NR];
} data;

static void make_data(data *d, int counts)
{
    for (size_t r = 0; r < NR; r++) {
        d->a[r] = r % NA;
        d->b[r] = r / NA;
        d->t[r] = (double)(r % 9);
        double z = sin(1.3 * (double)r);
        d->X[2 * r] = 1.0;
        d->X[2 * r + 1] = z;
        d->e[r] = 1.0 + 0.1 * (double)(r % 3);
        d->y[r] = counts ? (double)((r * 7) % 5)
                         : 0.4 * z + 0.3 * cos(2.1 * (double)d->a[r]) - 0.2 * (double)d->b[r] +
                               0.1 * sin(5.3 * (double)r);
    }
    /* a missing row at a pair (a, b) no observed row has: its variance
     * leaves the kept pattern (a posterior solve; conditioned on the
     * walk's constraint with three terms) */
    d->y[NA + 2] = NAN;
}

/* nterm 2: the crossed iid terms; 3: and a random walk over t. */
static gmm_latent *make_latent(const data *d, size_t nterm)
{
    gmm_stack_term t[3] = {
        {.model = GMM_STACK_IID, .name = "f.a", .nlevel = NA, .level = d->a, .variance = 0.7},
        {.model = GMM_STACK_IID, .name = "f.b", .nlevel = NB, .level = d->b, .variance = 0.4},
        {.model = GMM_STACK_RW1, .name = "f.t", .value = d->t, .variance = 0.3}};
    gmm_latent *lat = NULL;
    ck_assert_msg(gmm_latent_stack_alloc(NR, nterm, t, 0, &lat) == GMM_OK, "%s",
                  gmm_error_message());
    return lat;
}

static gmm_problem *make_problem(data *d, const gmm_lik *lik, gmm_latent *lat, int sparse)
{
    static const char *names[] = {"intercept", "coef.z"};
    double start[2] = {0.1, 0.2};
    gmm_problem_design des = {2, d->X, names, start, 0};
    gmm_problem *p = NULL;
    const double *e = lik->type->rowq ? d->e : NULL;
    gmm_status s = sparse ? gmm_problem_alloc_sparse(lat, lik, d->y, e, &des, &p)
                          : gmm_problem_alloc_design(lat, lik, d->y, e, &des, &p);
    ck_assert_msg(s == GMM_OK, "%s", gmm_error_message());
    ck_assert_int_eq(gmm_problem_sparse(p), sparse);
    return p;
}

static int close_to(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(1.0, fabs(b));
}

START_TEST(test_sparse_equals_band)
{
    const char *specs[] = {"gaussian(variance=0.3)", "poisson"};
    for (size_t k = 0; k < 2; k++)
        for (size_t nterm = 2; nterm <= 3; nterm++) {
            data d;
            make_data(&d, k == 1);
            gmm_lik lik = tu_lik_of(specs[k], NAN);
            gmm_latent *lb = make_latent(&d, nterm), *ls = make_latent(&d, nterm);
            gmm_problem *pb = make_problem(&d, &lik, lb, 0), *ps = make_problem(&d, &lik, ls, 1);
            gmm_objective *ob = gmm_problem_objective(pb), *os = gmm_problem_objective(ps);
            ck_assert_uint_eq(ob->nparam, os->nparam);
            size_t np = ob->nparam;
            double theta[8], gb[8], gs[8], fb, fs;
            memcpy(theta, ob->value, np * sizeof *theta);
            theta[np - 1] = -0.3;
            ck_assert_msg(ob->eval(ob->ctx, theta, &fb, gb) == GMM_OK, "%s", gmm_error_message());
            ck_assert_msg(os->eval(os->ctx, theta, &fs, gs) == GMM_OK, "%s", gmm_error_message());
            ck_assert_msg(close_to(fs, fb, 1e-10), "%s, %zu terms: sparse %.17g, band %.17g",
                          specs[k], nterm, fs, fb);
            for (size_t j = 0; j < np; j++) {
                ck_assert_msg(close_to(gs[j], gb[j], 1e-10),
                              "%s, %zu terms: gradient %zu (%s) sparse %.17g, band %.17g",
                              specs[k], nterm, j, os->name[j], gs[j], gb[j]);
                /* and the sparse gradient against its own central differences */
                double h = 1e-5 * fmax(1.0, fabs(theta[j])), th[8], fp, fm;
                memcpy(th, theta, np * sizeof *th);
                th[j] = theta[j] + h;
                ck_assert_int_eq(os->eval(os->ctx, th, &fp, NULL), GMM_OK);
                th[j] = theta[j] - h;
                ck_assert_int_eq(os->eval(os->ctx, th, &fm, NULL), GMM_OK);
                double num = (fp - fm) / (2.0 * h);
                ck_assert_msg(close_to(gs[j], num, 1e-6), "%s: gradient %zu %.17g, central %.17g",
                              specs[k], j, gs[j], num);
            }
            /* the rows' posterior moments, the missing one included */
            double mb[NR], vb[NR], ms[NR], vs[NR];
            ck_assert_msg(gmm_problem_predict_rows(pb, theta, mb, vb) == GMM_OK, "%s",
                          gmm_error_message());
            ck_assert_msg(gmm_problem_predict_rows(ps, theta, ms, vs) == GMM_OK, "%s",
                          gmm_error_message());
            for (size_t r = 0; r < NR; r++)
                ck_assert_msg(close_to(ms[r], mb[r], 1e-9) && close_to(vs[r], vb[r], 1e-9),
                              "%s, %zu terms: row %zu sparse %.17g (%.17g), band %.17g (%.17g)",
                              specs[k], nterm, r, ms[r], vs[r], mb[r], vb[r]);
            gmm_problem_free(pb);
            gmm_problem_free(ps);
            gmm_latent_free(lb);
            gmm_latent_free(ls);
        }
}
END_TEST

/* A stop that answers yes from its limit-th poll on. */
typedef struct {
    int polls, limit;
} stopper;

static int stop_after(void *user)
{
    stopper *s = user;
    return ++s->polls >= s->limit;
}

/* gmm_problem_set_stop: a stop polled between Newton steps ends an
 * evaluation with GMM_ECANCEL on either storage (the Poisson model with
 * three terms: a few Newton steps); gmm_fit then returns GMM_ECANCEL with
 * the start values kept; without the stop the next evaluation equals a
 * fresh problem's (the cancelled one left no half-made mode behind). */
START_TEST(test_stop)
{
    for (int sparse = 0; sparse <= 1; sparse++) {
        data d;
        make_data(&d, 1);
        gmm_lik lik = tu_lik_of("poisson", NAN);
        gmm_latent *l1 = make_latent(&d, 3), *l2 = make_latent(&d, 3);
        gmm_problem *p = make_problem(&d, &lik, l1, sparse), *q = make_problem(&d, &lik, l2, sparse);
        gmm_objective *o = gmm_problem_objective(p), *oq = gmm_problem_objective(q);
        size_t np = o->nparam;
        double theta[8], start[8], g[8], gq[8], f, fq;
        memcpy(theta, o->value, np * sizeof *theta);
        memcpy(start, o->value, np * sizeof *start);
        stopper s = {0, 2};
        gmm_problem_set_stop(p, stop_after, &s);
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, g), GMM_ECANCEL);
        ck_assert_int_eq(s.polls, 2);
        gmm_fit_params fp;
        gmm_fit_params_init(&fp);
        gmm_fit_result res;
        s = (stopper){0, 5};
        ck_assert_int_eq(gmm_fit(o, &fp, &res), GMM_ECANCEL);
        for (size_t j = 0; j < np; j++)
            ck_assert(o->value[j] == start[j]);
        gmm_problem_set_stop(p, NULL, NULL);
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, g), GMM_OK);
        ck_assert_int_eq(oq->eval(oq->ctx, theta, &fq, gq), GMM_OK);
        ck_assert_msg(close_to(f, fq, 1e-12), "storage %d: after a cancelled evaluation "
                      "%.17g, fresh %.17g", sparse, f, fq);
        for (size_t j = 0; j < np; j++)
            ck_assert(close_to(g[j], gq[j], 1e-10));
        gmm_problem_free(p);
        gmm_problem_free(q);
        gmm_latent_free(l1);
        gmm_latent_free(l2);
    }
}
END_TEST

/* The objective and gradient of pb and ps at their start to 1e-10, and
 * the rows' moments; nr rows. */
static void compare(gmm_problem *pb, gmm_problem *ps, size_t nr, const char *what)
{
    gmm_objective *ob = gmm_problem_objective(pb), *os = gmm_problem_objective(ps);
    size_t np = ob->nparam;
    double gb[8], gs[8], fb, fs, mb[64], vb[64], ms[64], vs[64];
    ck_assert_msg(ob->eval(ob->ctx, ob->value, &fb, gb) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(os->eval(os->ctx, os->value, &fs, gs) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(close_to(fs, fb, 1e-10), "%s: sparse %.17g, band %.17g", what, fs, fb);
    for (size_t j = 0; j < np; j++)
        ck_assert_msg(close_to(gs[j], gb[j], 1e-10), "%s: gradient %zu sparse %.17g, band %.17g",
                      what, j, gs[j], gb[j]);
    ck_assert_int_eq(gmm_problem_predict_rows(pb, ob->value, mb, vb), GMM_OK);
    ck_assert_msg(gmm_problem_predict_rows(ps, os->value, ms, vs) == GMM_OK, "%s",
                  gmm_error_message());
    for (size_t r = 0; r < nr; r++)
        ck_assert_msg(close_to(ms[r], mb[r], 1e-9) && close_to(vs[r], vb[r], 1e-9),
                      "%s: row %zu sparse %.17g (%.17g), band %.17g (%.17g)", what, r, ms[r],
                      vs[r], mb[r], vb[r]);
}

START_TEST(test_graph_sparse_equals_band)
{
    enum { K = 6, N = K * K, R = N + 4 };
    size_t ei[2 * N], ej[2 * N], m = 0, node[R];
    double len[2 * N], y[R], e[R];
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++) {
            if (j + 1 < K)
                ei[m] = i * K + j, ej[m] = i * K + j + 1, len[m++] = 1.0;
            if (i + 1 < K)
                ei[m] = i * K + j, ej[m] = (i + 1) * K + j, len[m++] = 1.0;
        }
    for (size_t r = 0; r < R; r++) {
        node[r] = (r * 7) % N;
        e[r] = 1.0 + 0.1 * (double)(r % 3);
    }
    gmm_graph *g = NULL;
    gmm_spec_node *spec = NULL;
    gmm_gmrf *gm = NULL;
    const char *text = "edge-ou(variance=1.3, lengthscale=2)";
    ck_assert_int_eq(gmm_graph_from_edges(N, m, ei, ej, len, NULL, NULL, &g), GMM_OK);
    ck_assert_int_eq(gmm_spec_parse(text, &spec), GMM_OK);
    ck_assert_msg(gmm_gmrf_alloc(g, spec, text, &gm) == GMM_OK, "%s", gmm_error_message());
    const char *specs[] = {"gaussian(variance=0.3)", "poisson"};
    for (size_t k = 0; k < 2; k++) {
        for (size_t r = 0; r < R; r++)
            y[r] = k ? (double)((r * 5) % 4) : sin(0.7 * (double)r);
        y[3] = NAN;
        gmm_lik lik = tu_lik_of(specs[k], NAN);
        static const char *names[] = {"intercept"};
        double one[R], start[1] = {0.1};
        for (size_t r = 0; r < R; r++)
            one[r] = 1.0;
        gmm_problem_design des = {1, one, names, start, 0};
        gmm_latent *lb = NULL, *ls = NULL;
        gmm_problem *pb = NULL, *ps = NULL;
        ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, R, node, &lb), GMM_OK);
        ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, R, node, &ls), GMM_OK);
        ck_assert_int_eq(gmm_problem_alloc_design(lb, &lik, y, k ? e : NULL, &des, &pb), GMM_OK);
        ck_assert_msg(gmm_problem_alloc_sparse(ls, &lik, y, k ? e : NULL, &des, &ps) == GMM_OK,
                      "%s", gmm_error_message());
        compare(pb, ps, R, specs[k]);
        /* the latent at the nodes */
        double mb[N], vb[N], ms[N], vs[N];
        const double *th = gmm_problem_objective(pb)->value;
        ck_assert_int_eq(gmm_problem_predict_latent(pb, th, NULL, 0, mb, vb), GMM_OK);
        ck_assert_int_eq(gmm_problem_predict_latent(ps, th, NULL, 0, ms, vs), GMM_OK);
        for (size_t v = 0; v < N; v++)
            ck_assert_msg(close_to(ms[v], mb[v], 1e-9) && close_to(vs[v], vb[v], 1e-9),
                          "%s: node %zu sparse %.17g (%.17g), band %.17g (%.17g)", specs[k], v,
                          ms[v], vs[v], mb[v], vb[v]);
        gmm_problem_free(pb);
        gmm_problem_free(ps);
        gmm_latent_free(lb);
        gmm_latent_free(ls);
    }
    gmm_gmrf_free(gm);
    gmm_spec_free(spec);
    gmm_graph_free(g);
}
END_TEST

Suite *problem_sparse_suite(void)
{
    Suite *s = suite_create("problem_sparse");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sparse_equals_band);
    tcase_add_test(tc, test_graph_sparse_equals_band);
    tcase_add_test(tc, test_stop);
    suite_add_tcase(s, tc);
    return s;
}
