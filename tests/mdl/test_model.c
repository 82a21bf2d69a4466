/* test_model.c -- whole models from a gmm_mdl_spec (model.h), with no
 * command line: a Gaussian state-space model against the dense GP of its
 * kernel, a Poisson state-space model and a graph model against the same
 * latent, likelihood and data assembled by hand from the lower layers, the
 * model file round trip, the reports, and failures that say where. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/model.h"
#include "gmm/spec.h"
#include "support/tmpfiles.h"
#include "support/tu_model.h"
#include "support/tu_dense_gp.h"

/* Reports collected, one string each, kind in the first byte. */
typedef struct {
    char text[16][512];
    int kind[16];
    size_t n;
} reports;

static void collect(void *user, gmm_mdl_report kind, const char *text)
{
    reports *r = user;
    if (r->n < 16) {
        snprintf(r->text[r->n], sizeof r->text[0], "%s", text);
        r->kind[r->n++] = (int)kind;
    }
}

static const char *find_report(const reports *r, int kind, const char *prefix)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->kind[i] == kind && !strncmp(r->text[i], prefix, strlen(prefix)))
            return r->text[i];
    return NULL;
}

/* x, a smooth y with noise, an exposure; one y missing when `missing`. */
static char *write_series(const char *dir, int counts, int missing, size_t n, double *x,
                          double *y, double *e)
{
    size_t cap = 64 + 64 * n, at = 0;
    char *buf = malloc(cap);
    at += (size_t)snprintf(buf + at, cap - at, "t,count,e\n");
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.37 * (double)i + 0.05 * sin((double)i);
        double f = sin(x[i]) + 0.3 * cos(3.1 * (double)i);
        e[i] = 0.5 + 0.1 * (double)(i % 4);
        y[i] = counts ? floor(e[i] * exp(1.0 + f) + 0.5) : 2.0 + f;
        if (missing && i == 4) {
            y[i] = NAN;
            at += (size_t)snprintf(buf + at, cap - at, "%.17g,,%.17g\n", x[i], e[i]);
        } else {
            at += (size_t)snprintf(buf + at, cap - at, "%.17g,%.17g,%.17g\n", x[i], y[i], e[i]);
        }
    }
    char *path = tu_write_str(dir, "series.csv", buf);
    free(buf);
    return path;
}

/* The Gaussian state-space model's log likelihood is the dense GP's at the
 * centred y, its centre the mean of y; the model file says what was
 * built. */
START_TEST(test_model_gaussian_ssm_dense)
{
    enum { N = 25 };
    double x[N], y[N], e[N];
    char *dir = tu_mkdtemp();
    char *path = write_series(dir, 0, 0, N, x, y, e);
    reports rep = {0};
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.data.file = path;
    s.desc.data.y = "count";
    s.desc.kernel = "matern32(variance=1.3, lengthscale=0.7)";
    s.noise = 0.2;
    s.verbose = 1;
    s.report = collect;
    s.report_user = &rep;
    gmm_mdl *m = NULL;
    gmm_mdl_failure f;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_OK);
    ck_assert_ptr_nonnull(
        find_report(&rep, GMM_MDL_REPORT_DATA, "read 25 rows: 25 observed, 0 missing"));
    ck_assert_ptr_nonnull(find_report(&rep, GMM_MDL_REPORT_SUMMARY, "state-space latent model"));

    double mean = 0.0;
    for (size_t i = 0; i < N; i++)
        mean += y[i] / N;
    int has_c = 0;
    ck_assert_double_eq_tol(gmm_mdl_center(m, &has_c), mean, 1e-14 * fabs(mean));
    ck_assert_int_eq(has_c, 1);

    gmm_objective *o = gmm_mdl_objective(m);
    ck_assert_uint_eq(o->nparam, 3);
    ck_assert_str_eq(o->name[2], "likelihood.variance");
    ck_assert_double_eq(o->value[2], 0.2);
    double ll;
    ck_assert_int_eq(o->eval(o->ctx, o->value, &ll, NULL), GMM_OK);

    /* dense: log N(y - c | 0, K + noise I) */
    gmm_spec_node *sp = NULL;
    gmm_kernel *k = NULL;
    ck_assert_int_eq(gmm_spec_parse(s.desc.kernel, &sp), GMM_OK);
    ck_assert_int_eq(gmm_kernel_from_spec(sp, &k), GMM_OK);
    long double *L = malloc(N * N * sizeof *L), z[N], ref = 0.0L;
    ck_assert_int_eq(tu_dense_chol(k, o->value, 0.2, 0.0, x, N, L), 0);
    for (size_t i = 0; i < N; i++) {
        long double v = (long double)(y[i] - gmm_mdl_center(m, NULL));
        for (size_t j = 0; j < i; j++)
            v -= L[i * N + j] * z[j];
        z[i] = v / L[i * N + i];
        ref += -0.5L * z[i] * z[i] - logl(L[i * N + i]) - 0.5L * logl(2.0L * acosl(-1.0L));
    }
    ck_assert_msg(fabs(ll - (double)ref) < 1e-9 * fabs((double)ref), "ll %.17g dense %.17Lg", ll,
                  ref);

    gmm_model mf;
    char *scratch = NULL;
    ck_assert_int_eq(gmm_mdl_describe(m, &mf, &scratch), GMM_OK);
    ck_assert_str_eq(mf.desc.likelihood, "gaussian");
    ck_assert_ptr_nonnull(mf.desc.kernel);
    ck_assert_ptr_null(mf.desc.precision);
    ck_assert_str_eq(mf.desc.data.y, "count");
    ck_assert_str_eq(mf.desc.data.x, "t");
    ck_assert_int_eq(mf.has_center, 1);
    ck_assert(mf.desc.data.file[0] == '/');
    gmm_free(scratch);

    ck_assert_int_eq(gmm_mdl_has_inputs(m), 1);
    ck_assert_uint_eq(gmm_mdl_nsites(m), N);
    ck_assert_double_eq(gmm_mdl_noise(m), 0.2);
    ck_assert_str_eq(gmm_mdl_site_column(m), "x");
    ck_assert_ptr_null(gmm_mdl_response_name(m));
    char buf[64], want[64];
    snprintf(want, sizeof want, "%.17g", x[3]);
    ck_assert_str_eq(gmm_mdl_site_label(m, 3, buf), want);
    size_t v;
    ck_assert_int_eq(gmm_mdl_draws_site(m, "f[25]", &v), GMM_OK);
    ck_assert_uint_eq(v, 24);
    ck_assert_int_eq(gmm_mdl_draws_site(m, "f[26]", &v), GMM_EINVAL);
    ck_assert_int_eq(gmm_mdl_draws_site(m, "f[a]", &v), GMM_EINVAL);
    char col[96];
    ck_assert_str_eq(gmm_mdl_draws_column(m, 24, col), "f[25]");
    size_t a, b;
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "2-4", &a, &b), GMM_OK);
    ck_assert_uint_eq(a, 1);
    ck_assert_uint_eq(b, 3);
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "0", &a, &b), GMM_EINVAL);
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "3-2", &a, &b), GMM_EINVAL);
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "26", &a, &b), GMM_EINVAL);

    /* at the sites: the data's inputs; observed: the noise added */
    double pm[N], pv[N];
    gmm_summary_pred pr[N], po[N];
    ck_assert_int_eq(gmm_mdl_predict(m, x, N, pm, pv), GMM_OK);
    ck_assert_int_eq(gmm_mdl_predict_summary(m, NULL, N, 0.9, 0, pr), GMM_OK);
    ck_assert_int_eq(gmm_mdl_predict_summary(m, NULL, N, 0.9, 1, po), GMM_OK);
    ck_assert_int_eq(gmm_mdl_predict_summary(m, NULL, N - 1, 0.9, 0, pr), GMM_EDIM);
    /* two calls' computations of one posterior: to rounding (1e-12) */
    for (size_t i = 0; i < N; i++) {
        ck_assert_double_eq_tol(pr[i].mean, pm[i], 1e-12 * (fabs(pm[i]) + sqrt(pv[i])));
        ck_assert_double_eq_tol(pr[i].var, pv[i], 1e-12 * pv[i]);
        ck_assert_double_eq_tol(po[i].var, pv[i] + 0.2, 1e-12 * (pv[i] + 0.2));
        /* the 90% interval of a normal: mean -+ 1.6448536269514722 sd */
        double h = 1.6448536269514722 * sqrt(pv[i] + 0.2);
        ck_assert_double_eq_tol(po[i].upper - po[i].lower, 2.0 * h, 1e-12 * h);
    }

    /* the data as held-out data: lpd_r = log N(y_r | mean_r, var_r + noise) */
    gmm_mdl_test *tt = NULL;
    double lpd[N];
    ck_assert_int_eq(gmm_mdl_test_read(m, path, &tt), GMM_OK);
    ck_assert_uint_eq(tt->nobs, N);
    ck_assert_int_eq(gmm_mdl_score(m, tt, lpd), GMM_OK);
    for (size_t i = 0; i < N; i++) {
        double s2 = pv[i] + 0.2, r = y[i] - pm[i];
        double want_l = -0.5 * log(2.0 * acos(-1.0) * s2) - 0.5 * r * r / s2;
        ck_assert_double_eq_tol(lpd[i], want_l, 1e-12 * (1.0 + fabs(want_l)));
    }
    gmm_mdl_test_free(tt);
    free(L);
    gmm_kernel_free(k);
    gmm_spec_free(sp);
    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(path);
}
END_TEST

/* A Poisson state-space model with exposure, a missing count and the
 * default intercept: the same objective as latent + likelihood + data put
 * together by hand; built again from its own description (a model file's
 * values), the same parameters. */
START_TEST(test_model_poisson_ssm_by_hand)
{
    enum { N = 30 };
    double x[N], y[N], e[N];
    char *dir = tu_mkdtemp();
    char *path = write_series(dir, 1, 1, N, x, y, e);
    reports rep = {0};
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.data.file = path;
    s.desc.data.y = "count";
    s.desc.data.exposure = "e";
    s.desc.likelihood = "poisson";
    s.desc.kernel = "matern32(variance=0.8, lengthscale=1.5)";
    s.report = collect;
    s.report_user = &rep;
    gmm_mdl *m = NULL;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, NULL), GMM_OK);
    ck_assert_ptr_nonnull(
        find_report(&rep, GMM_MDL_REPORT_DATA, "read 30 rows: 29 observed, 1 missing"));
    ck_assert_ptr_null(find_report(&rep, GMM_MDL_REPORT_INFO, "")); /* not verbose */
    ck_assert_int_eq(gmm_mdl_center(m, NULL), 0.0);
    ck_assert_str_eq(gmm_mdl_approximation(m), "laplace");

    /* by hand: the default intercept log((sum y + 1/2) / sum e) over observed rows */
    double sy = 0.0, se = 0.0;
    for (size_t i = 0; i < N; i++)
        if (!isnan(y[i])) {
            sy += y[i];
            se += e[i];
        }
    double b0 = log((sy + 0.5) / se);
    gmm_spec_node *sp = NULL;
    gmm_kernel *k = NULL;
    gmm_latent *lat = NULL;
    gmm_problem *p = NULL;
    gmm_lik lik;
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    ck_assert_int_eq(gmm_spec_parse(s.desc.kernel, &sp), GMM_OK);
    ck_assert_int_eq(gmm_kernel_from_spec(sp, &k), GMM_OK);
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, N, &par, &lat), GMM_OK);
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, e, 1, b0, &p), GMM_OK);
    gmm_objective *o = gmm_mdl_objective(m), *oh = gmm_problem_objective(p);
    ck_assert_uint_eq(o->nparam, oh->nparam);
    for (size_t i = 0; i < o->nparam; i++) {
        ck_assert_str_eq(o->name[i], oh->name[i]);
        ck_assert_double_eq_tol(o->value[i], oh->value[i], 1e-15 * fabs(oh->value[i]));
    }
    double th[3] = {1.1, 2.0, 0.4}, ll, llh, g[3], gh[3];
    ck_assert_uint_eq(o->nparam, 3);
    ck_assert_int_eq(o->eval(o->ctx, th, &ll, g), GMM_OK);
    ck_assert_int_eq(oh->eval(oh->ctx, th, &llh, gh), GMM_OK);
    /* the model's problem and the one built here: to rounding (1e-12) */
    ck_assert_double_eq_tol(ll, llh, 1e-12 * fabs(llh));
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(g[i], gh[i], 1e-12 * (fabs(gh[i]) + 1.0));

    /* its description, read back as a model file's values */
    for (size_t i = 0; i < 3; i++)
        o->value[i] = th[i];
    gmm_model mf;
    char *scratch = NULL;
    ck_assert_int_eq(gmm_mdl_describe(m, &mf, &scratch), GMM_OK);
    ck_assert_str_eq(mf.desc.likelihood, "poisson");
    ck_assert_str_eq(mf.desc.data.exposure, "e");
    ck_assert_int_eq(mf.has_center, 0);
    gmm_mdl_spec s2;
    gmm_mdl_spec_init(&s2);
    s2.desc.data.file = mf.desc.data.file;
    s2.desc.data.x = mf.desc.data.x;
    s2.desc.data.y = mf.desc.data.y;
    s2.desc.data.exposure = mf.desc.data.exposure;
    s2.desc.likelihood = mf.desc.likelihood;
    s2.desc.kernel = mf.desc.kernel;
    s2.values = &mf;
    s2.values_name = "m.json";
    gmm_mdl *m2 = NULL;
    ck_assert_int_eq(gmm_mdl_build(&s2, &m2, NULL), GMM_OK);
    gmm_objective *o2 = gmm_mdl_objective(m2);
    for (size_t i = 0; i < 3; i++) /* values kept as given: exact */
        ck_assert_double_eq(o2->value[i], th[i]);
    double ll2;
    ck_assert_int_eq(o2->eval(o2->ctx, o2->value, &ll2, NULL), GMM_OK);
    ck_assert_double_eq_tol(ll2, ll, 1e-12 * fabs(ll)); /* another build: to rounding */

    gmm_mdl_free(m2);

    /* a model file's values: each in its domain, none the model lacks */
    gmm_mdl_failure f;
    double keep = mf.param_value[1];
    mf.param_value[1] = -2.0;
    ck_assert_int_eq(gmm_mdl_build(&s2, &m2, &f), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m.json: parameter '0.matern32.lengthscale' = -2 is "
                                          "out of its domain (it must be positive)");
    gmm_mdl_failure_free(&f);
    mf.param_value[1] = keep;
    char *names[4] = {mf.param_name[0], mf.param_name[1], mf.param_name[2], "0.matern32.sigma"};
    double vals[4] = {th[0], th[1], th[2], 1.0};
    mf.param_name = names;
    mf.param_value = vals;
    mf.nparam = 4;
    ck_assert_int_eq(gmm_mdl_build(&s2, &m2, &f), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m.json: unknown parameter '0.matern32.sigma' in "
                                          "\"parameters\"; the model's are:");
    ck_assert_str_eq(f.params, "  0.matern32.variance\n  0.matern32.lengthscale\n  intercept\n");
    ck_assert_int_eq(f.usage, 0);
    gmm_mdl_failure_free(&f);
    ck_assert_ptr_null(m2);
    gmm_free(scratch);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(sp);
    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(path);
}
END_TEST

/* A graph model: the same objective as the graph, its nodes, the GMRF and
 * the problem put together by hand; its sites are the graph's nodes. */
START_TEST(test_model_graph_by_hand)
{
    char *dir = tu_mkdtemp();
    char *edges = tu_write_str(dir, "edges.csv",
                               "i,j,length\na,b,1\nb,c,2\nc,d,1.5\nd,e,1\nb,e,3\n");
    char *nodes = tu_write_str(dir, "nodes.csv",
                               "node,count\na,3\nb,0\nc,5\nd,\ne,2\na,4\n");
    reports rep = {0};
    gmm_mdl_spec s;
    tu_graph_count_spec(&s, nodes, edges, "edge-ou(variance=1.2, lengthscale=2)");
    s.fix = (const char *const[]){"intercept"};
    s.nfix = 1;
    s.report = collect;
    s.report_user = &rep;
    gmm_mdl *m = NULL;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, NULL), GMM_OK);
    ck_assert_ptr_nonnull(
        find_report(&rep, GMM_MDL_REPORT_DATA, "read 6 rows: 5 observed, 1 missing"));
    ck_assert_int_eq(gmm_mdl_has_inputs(m), 0);
    ck_assert_uint_eq(gmm_mdl_nsites(m), 5);
    size_t v;
    char buf[64];
    ck_assert_int_eq(gmm_mdl_site_find(m, "c", &v), 1);
    ck_assert_str_eq(gmm_mdl_site_label(m, v, buf), "c");
    ck_assert_int_eq(gmm_mdl_site_find(m, "zz", &v), 0);
    ck_assert_str_eq(gmm_mdl_data_site_name(m), "node");

    gmm_table *te = NULL, *tn = NULL;
    gmm_graph *g = NULL;
    gmm_gmrf *q = NULL;
    gmm_spec_node *sp = NULL;
    gmm_latent *lat = NULL;
    gmm_problem *p = NULL;
    gmm_lik lik;
    size_t row_node[6], *iso = NULL, niso = 0;
    double y[6];
    ck_assert_int_eq(gmm_table_read(edges, &te), GMM_OK);
    ck_assert_int_eq(gmm_table_read(nodes, &tn), GMM_OK);
    ck_assert_int_eq(gmm_mdl_graph_read(te, "i", "j", "length", 1, &g), GMM_OK);
    ck_assert_int_eq(gmm_mdl_graph_attach(g, tn, "node", 0, row_node, &iso, &niso), GMM_OK);
    ck_assert_int_eq(gmm_table_column_double(tn, 1, 1, y), GMM_OK);
    ck_assert_int_eq(gmm_spec_parse(s.desc.precision, &sp), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(g, sp, s.desc.precision, &q), GMM_OK);
    ck_assert_int_eq(gmm_latent_gmrf_alloc(q, 6, row_node, &lat), GMM_OK);
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 1, log((14.0 + 0.5) / 5.0), &p),
                     GMM_OK);
    gmm_objective *o = gmm_mdl_objective(m), *oh = gmm_problem_objective(p);
    ck_assert_uint_eq(o->nparam, oh->nparam);
    ck_assert_str_eq(o->name[o->nparam - 1], "intercept");
    ck_assert_int_eq(o->fixed[o->nparam - 1], 1);
    for (size_t i = 0; i < o->nparam; i++) {
        ck_assert_str_eq(o->name[i], oh->name[i]);
        ck_assert_double_eq_tol(o->value[i], oh->value[i], 1e-15 * fabs(oh->value[i]));
    }
    double ll, llh;
    ck_assert_int_eq(o->eval(o->ctx, o->value, &ll, NULL), GMM_OK);
    ck_assert_int_eq(oh->eval(oh->ctx, oh->value, &llh, NULL), GMM_OK);
    ck_assert_double_eq_tol(ll, llh, 1e-12 * fabs(llh)); /* two problems: to rounding */

    /* predictions at every node, against the problem's (to rounding) */
    double mean[5], var[5], mh[5], vh[5];
    ck_assert_int_eq(gmm_mdl_predict(m, NULL, 5, mean, var), GMM_OK);
    ck_assert_int_eq(gmm_problem_predict_nodes(p, oh->value, mh, vh), GMM_OK);
    for (size_t i = 0; i < 5; i++) {
        ck_assert_double_eq_tol(mean[i], mh[i], 1e-12 * (fabs(mh[i]) + sqrt(vh[i])));
        ck_assert_double_eq_tol(var[i], vh[i], 1e-12 * vh[i]);
    }
    ck_assert_int_eq(gmm_mdl_predict(m, NULL, 4, mean, var), GMM_EDIM);
    ck_assert_str_eq(gmm_mdl_site_column(m), "node");
    ck_assert_str_eq(gmm_mdl_response_name(m), "rate");
    gmm_summary_pred pr[5];
    ck_assert_int_eq(gmm_mdl_predict_summary(m, NULL, 5, 0.8, 1, pr), GMM_EINVAL);
    ck_assert_int_eq(gmm_mdl_predict_summary(m, NULL, 5, 0.8, 0, pr), GMM_OK);
    for (size_t i = 0; i < 5; i++) {
        /* the rate's interval is the linear predictor's through exp; the
         * Laplace mode is found again from the last (its Newton stop) */
        ck_assert_double_eq_tol(pr[i].mean, mh[i], 1e-8 * (1.0 + fabs(mh[i])));
        ck_assert_double_eq_tol(log(pr[i].resp_lower), pr[i].lower, 1e-12);
        ck_assert_double_eq_tol(log(pr[i].resp_upper), pr[i].upper, 1e-12);
    }
    ck_assert_int_eq(gmm_mdl_draws_site(m, "f[d]", &v), GMM_OK);
    ck_assert_str_eq(gmm_mdl_site_label(m, v, buf), "d");
    char col[96];
    ck_assert_str_eq(gmm_mdl_draws_column(m, v, col), "f[d]");
    size_t a, b;
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "d", &a, &b), GMM_OK);
    ck_assert_uint_eq(a, v);
    ck_assert_uint_eq(b, v);
    ck_assert_int_eq(gmm_mdl_sites_parse(m, "1-2", &a, &b), GMM_EINVAL);
    ck_assert_int_eq(gmm_mdl_draws_site(m, "f[zz]", &v), GMM_EINVAL);

    /* held-out rows name their node; an unknown one is refused at its line */
    char *test = tu_write_str(dir, "test.csv", "node,count\ne,1\nb,\nq,2\n");
    gmm_mdl_test *tt = NULL;
    ck_assert_int_eq(gmm_mdl_test_read(m, test, &tt), GMM_EPARSE);
    char want[512];
    snprintf(want, sizeof want,
             "%s:4: column 'node': node 'q' is not a node of the model's graph", test);
    ck_assert_str_eq(gmm_error_message(), want);
    free(test);
    test = tu_write_str(dir, "test.csv", "node,count\ne,1\nb,\n");
    ck_assert_int_eq(gmm_mdl_test_read(m, test, &tt), GMM_OK);
    ck_assert_uint_eq(tt->nobs, 1);
    double lpd[2] = {0.0, 0.0};
    ck_assert_int_eq(gmm_mdl_score(m, tt, lpd), GMM_OK);
    ck_assert(lpd[0] < 0.0 && isfinite(lpd[0]));
    ck_assert_double_eq(lpd[1], 0.0); /* missing: not written */
    gmm_mdl_test_free(tt);
    free(test);

    gmm_free(iso);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(q);
    gmm_spec_free(sp);
    gmm_graph_free(g);
    gmm_table_free(te);
    gmm_table_free(tn);
    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(edges);
    free(nodes);
}
END_TEST

/* Draws of a graph model (made here, f at each node): their summaries at
 * the sites, the held-out lpd under them against log mean_k Poisson(y |
 * exp f_k) computed directly, and the check of their columns. */
START_TEST(test_model_graph_draws)
{
    char *dir = tu_mkdtemp();
    char *edges = tu_write_str(dir, "edges.csv", "i,j\na,b\nb,c\n");
    char *nodes = tu_write_str(dir, "nodes.csv", "node,count\na,3\nb,0\nc,5\n");
    char *test = tu_write_str(dir, "test.csv", "node,count\nc,4\na,\nb,1\n");
    char *dpath = tu_path(dir, "draws.csv"); /* named only: no sidecar there */
    gmm_mdl_spec s;
    tu_graph_count_spec(&s, nodes, edges, "edge-ou(variance=1, lengthscale=2)");
    gmm_mdl *m = NULL;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, NULL), GMM_OK);

    enum { K = 7 };
    char *names[3] = {"f[a]", "f[b]", "f[c]"};
    long chain[1] = {1};
    double x[3 * K];
    for (size_t v = 0; v < 3; v++)
        for (size_t k = 0; k < K; k++)
            x[v * K + k] = 0.3 * (double)v + 0.2 * sin(1.7 * (double)(k + 3 * v));
    gmm_draws d = {3, 1, K, names, chain, x, 0};

    gmm_mdl_draws_verdict verdict;
    ck_assert_int_eq(gmm_mdl_check_draws(m, dpath, &d, &verdict), GMM_OK);
    ck_assert_int_eq(verdict, GMM_MDL_DRAWS_UNCHECKED);

    size_t site[3], nout = 0;
    gmm_summary_pred pr[3];
    ck_assert_int_eq(gmm_mdl_predict_draws(m, &d, dpath, 0.9, site, pr, &nout), GMM_OK);
    ck_assert_uint_eq(nout, 3);
    for (size_t v = 0; v < 3; v++) {
        static const char *const label[3] = {"a", "b", "c"};
        char buf[64];
        ck_assert_str_eq(gmm_mdl_site_label(m, site[v], buf), label[v]);
        double mf = 0.0, mr = 0.0;
        for (size_t k = 0; k < K; k++) {
            mf += x[v * K + k] / K;
            mr += exp(x[v * K + k]) / K;
        }
        ck_assert_double_eq_tol(pr[v].mean, mf, 1e-14);
        ck_assert_double_eq_tol(pr[v].resp, mr, 1e-14 * mr);
    }

    gmm_mdl_test *tt = NULL;
    double lpd[3] = {0.0, 0.0, 0.0};
    ck_assert_int_eq(gmm_mdl_test_read(m, test, &tt), GMM_OK);
    ck_assert_int_eq(gmm_mdl_score_draws(m, tt, &d, dpath, lpd), GMM_OK);
    const size_t col[3] = {2, 0, 1}; /* test rows c, a (missing), b */
    const double yt[3] = {4.0, NAN, 1.0};
    for (size_t r = 0; r < 3; r++) {
        if (isnan(yt[r]))
            continue;
        double mean = 0.0;
        for (size_t k = 0; k < K; k++) {
            double f = x[col[r] * K + k];
            mean += exp(yt[r] * f - exp(f) - lgamma(yt[r] + 1.0)) / K;
        }
        ck_assert_double_eq_tol(lpd[r], log(mean), 1e-12);
    }
    gmm_mdl_test_free(tt);

    /* a node missing from the columns */
    d.nvar = 2;
    ck_assert_int_eq(gmm_mdl_check_draws(m, dpath, &d, &verdict), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "column 'f[c] (missing)'"));
    names[1] = "f[q]";
    ck_assert_int_eq(gmm_mdl_predict_draws(m, &d, dpath, 0.9, site, pr, &nout), GMM_EINVAL);

    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(edges);
    free(nodes);
    free(test);
    free(dpath);
}
END_TEST

/* Failures say where: a spec's key, text and offset; a data row's
 * file:line: column; a contradictory description; a fixed name that is no
 * parameter, with the list of those there are. */
START_TEST(test_model_failures)
{
    char *dir = tu_mkdtemp();
    char *path = tu_write_str(dir, "d.csv", "t,y\n1,2\n2,-1\n3,4\n");
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.data.file = path;
    gmm_mdl *m = NULL;
    gmm_mdl_failure f;

    s.desc.kernel = "matern32(variance=1, lengthscal=2)";
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_EPARSE);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(f.spec_key, "kernel");
    ck_assert_ptr_eq(f.spec_text, s.desc.kernel);
    ck_assert_uint_eq(f.spec_pos, 21); /* the unknown key */
    ck_assert_int_eq(f.usage, 0);
    gmm_mdl_failure_free(&f);

    s.desc.kernel = "matern32";
    s.desc.likelihood = "poisson";
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_EINVAL);
    char want[512];
    snprintf(want, sizeof want, "%s:3: column 'y': ", path);
    ck_assert_msg(!strncmp(gmm_error_message(), want, strlen(want)), "%s", gmm_error_message());
    ck_assert_ptr_null(f.spec_text);
    gmm_mdl_failure_free(&f);

    s.desc.likelihood = NULL;
    s.desc.data.exposure = "y";
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_EINVAL);
    ck_assert_int_eq(f.usage, 1);
    /* the rule, for the caller to word; the message in the description's terms */
    ck_assert_int_eq(f.rule, GMM_MDL_RULE_NON_GAUSSIAN_FIELDS);
    ck_assert_ptr_null(strstr(gmm_error_message(), "--"));
    gmm_mdl_failure_free(&f);

    s.desc.data.exposure = NULL;
    s.desc.graph = "edges.csv";
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_EINVAL);
    ck_assert_int_eq(f.rule, GMM_MDL_RULE_KERNEL_AND_GRAPH);
    ck_assert_str_eq(gmm_error_message(), "a kernel and a graph exclude each other");
    gmm_mdl_failure_free(&f);
    s.desc.graph = NULL;

    /* no latent named: the default kernel, its period held unless freed */
    s.desc.kernel = NULL;
    for (int free_period = 0; free_period < 2; free_period++) {
        s.free_period = free_period;
        ck_assert_int_eq(gmm_mdl_build(&s, &m, NULL), GMM_OK);
        gmm_objective *o = gmm_mdl_objective(m);
        size_t k = 0;
        while (k < o->nparam && strcmp(o->name[k], GMM_MDL_DEFAULT_KERNEL_FIXED))
            k++;
        ck_assert_uint_lt(k, o->nparam);
        ck_assert_int_eq(o->fixed[k], !free_period);
        gmm_mdl_free(m);
        m = NULL;
    }
    s.free_period = 0;
    s.desc.kernel = "matern32";

    s.desc.data.exposure = NULL;
    s.fix = (const char *const[]){"0.matern32.lengthscale", "nosuch"};
    s.nfix = 2;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, &f), GMM_EINVAL);
    ck_assert_int_eq(f.fix, 1);
    ck_assert_str_eq(gmm_error_message(), "no parameter 'nosuch'; the parameters are:");
    ck_assert_str_eq(f.params, "  0.matern32.variance\n  0.matern32.lengthscale\n"
                               "  likelihood.variance\n");
    gmm_mdl_failure_free(&f);
    ck_assert_ptr_null(f.params);

    tu_rmdir_all(dir);
    free(dir);
    free(path);
}
END_TEST

/* Nothing is printed: failures, warnings and reports with no callback
 * leave stdout and stderr untouched. */
START_TEST(test_model_never_prints)
{
    char *dir = tu_mkdtemp();
    char *path = tu_write_str(dir, "d.csv", "t,y\n1,2\n1.0000001,3\n2,-1\n3,4\n4,\n");
    char *out = tu_path(dir, "out.txt");
    fflush(stdout);
    fflush(stderr);
    int save1 = dup(1), save2 = dup(2);
    FILE *o = fopen(out, "w");
    ck_assert_ptr_nonnull(o);
    dup2(fileno(o), 1);
    dup2(fileno(o), 2);
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.data.file = path;
    s.desc.kernel = "matern32";
    s.desc.merge_tol = 1e-3; /* a warning: two inputs merged */
    s.verbose = 1;
    gmm_mdl *m = NULL;
    gmm_status st1 = gmm_mdl_build(&s, &m, NULL);
    s.desc.likelihood = "poisson"; /* -1 is no count */
    gmm_mdl *m2 = NULL;
    gmm_status st2 = gmm_mdl_build(&s, &m2, NULL);
    s.desc.likelihood = "poisson(";
    gmm_status st3 = gmm_mdl_build(&s, &m2, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(save1, 1);
    dup2(save2, 2);
    close(save1);
    close(save2);
    fclose(o);
    ck_assert_int_eq(st1, GMM_OK);
    ck_assert_int_eq(st2, GMM_EINVAL);
    ck_assert_int_eq(st3, GMM_EPARSE);
    size_t len = 1;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(len == 0, "printed: %s", text);
    free(text);
    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(path);
    free(out);
}
END_TEST

Suite *mdl_model_suite(void)
{
    Suite *s = suite_create("mdl_model");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_model_gaussian_ssm_dense);
    tcase_add_test(tc, test_model_poisson_ssm_by_hand);
    tcase_add_test(tc, test_model_graph_by_hand);
    tcase_add_test(tc, test_model_graph_draws);
    tcase_add_test(tc, test_model_failures);
    tcase_add_test(tc, test_model_never_prints);
    suite_add_tcase(s, tc);
    return s;
}
