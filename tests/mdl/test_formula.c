/* test_formula.c -- formulas (formula.h) and the fixed effects they give
 * (problem.h's design): the parser's terms and error offsets; a Gaussian
 * model with a covariate, a factor and f(g, iid) against the dense
 * marginal likelihood y ~ N(X beta, v Z Z' + s2 I) and its gradient in
 * every parameter; the Laplace objective's coefficient gradient against
 * finite differences; the coefficient names and the treatment coding. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/formula.h"
#include "gmm/model.h"
#include "gmm/problem.h"
#include "gmm/vi.h"
#include "support/tmpfiles.h"

START_TEST(test_formula_parse)
{
    gmm_formula *f = NULL;
    ck_assert_int_eq(gmm_formula_parse("y ~ x1 + factor(period) - 1 + f(t, 'matern32 + "
                                       "periodic(period=52)', graph = e d.csv)",
                                       &f),
                     GMM_OK);
    ck_assert_str_eq(f->response, "y");
    ck_assert_int_eq(f->intercept, 0);
    ck_assert_uint_eq(f->nfixed, 2);
    ck_assert_str_eq(f->fixed[0].name, "x1");
    ck_assert_int_eq(f->fixed[0].factor, 0);
    ck_assert_str_eq(f->fixed[1].name, "period");
    ck_assert_int_eq(f->fixed[1].factor, 1);
    ck_assert_uint_eq(f->fixed[1].pos, 16);
    ck_assert_uint_eq(f->nlatent, 1);
    ck_assert_str_eq(f->latent[0].name, "t");
    ck_assert_str_eq(f->latent[0].model, "matern32 + periodic(period=52)");
    ck_assert_uint_eq(f->latent[0].model_pos, 36);
    ck_assert_int_eq(f->latent[0].quoted, 1);
    size_t pos;
    ck_assert_str_eq(gmm_formula_arg_find(&f->latent[0], "graph", &pos), "e d.csv");
    ck_assert_ptr_null(gmm_formula_arg_find(&f->latent[0], "cyclic", NULL));
    gmm_formula_free(f);

    ck_assert_int_eq(gmm_formula_parse("n ~ -1 + f(g, iid)", &f), GMM_OK);
    ck_assert_int_eq(f->intercept, 0);
    ck_assert_str_eq(f->latent[0].model, "iid");
    ck_assert_int_eq(f->latent[0].quoted, 0);
    gmm_formula_free(f);
    /* a bare key is a flag, its value "", beside KEY=VALUE */
    ck_assert_int_eq(gmm_formula_parse("n ~ f(w, rw2, cyclic, period = 52 )", &f), GMM_OK);
    ck_assert_uint_eq(f->latent[0].narg, 2);
    ck_assert_str_eq(gmm_formula_arg_find(&f->latent[0], "cyclic", &pos), "");
    ck_assert_uint_eq(pos, 14);
    ck_assert_int_eq(f->latent[0].arg[0].flag, 1);
    ck_assert_str_eq(gmm_formula_arg_find(&f->latent[0], "period", NULL), "52");
    ck_assert_int_eq(f->latent[0].arg[1].flag, 0);
    gmm_formula_free(f);
    ck_assert_int_eq(gmm_formula_parse("n ~ 0 + 1 + x", &f), GMM_OK);
    ck_assert_int_eq(f->intercept, 1);
    gmm_formula_free(f);

    /* errors: offset of the offending character */
    struct {
        const char *text;
        size_t pos;
    } bad[] = {
        {"y x", 2},           {"y ~ x +", 7},          {"y ~ x x", 6},
        {"y ~ - x", 6},       {"y ~ 2", 4},            {"y ~ g(x)", 4},
        {"y ~ x + x", 8},     {"y ~ f(t 'a')", 8},     {"y ~ f(t, 'a)", 9},
        {"y ~ f(t, a, k=1, k=2)", 17},                 {"y ~ factor(x", 12},
        {"y ~ f(t, a, k k)", 14},                      {"y ~ f(t, a, c, c)", 15},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(gmm_formula_parse(bad[i].text, &f) == GMM_EPARSE, "%s", bad[i].text);
        ck_assert_ptr_null(f);
        ck_assert_msg(gmm_error_index() == bad[i].pos, "%s: error at %zu, expected %zu",
                      bad[i].text, gmm_error_index(), bad[i].pos);
    }
}
END_TEST

/* R's formula operators this grammar lacks, and the response used as a
 * term: the exact message and the offset of the character it points at. */
START_TEST(test_formula_unsupported)
{
    static const struct {
        const char *text;
        size_t pos;
        const char *msg;
    } bad[] = {
        /* interactions join variables, not f() terms (test_design.c: the rest) */
        {"y ~ f(g, iid) * x", 14,
         "formula: interactions (':' and '*') join variables (NAME, factor(), I(), ...), not "
         "f() terms"},
        {"y ~ a/b", 5, "formula: nesting ('/' and '%in%') is not supported"},
        {"y ~ a %in% b", 6, "formula: nesting ('/' and '%in%') is not supported"},
        {"y ~ x^2", 5,
         "formula: crossing to a degree ('^') is not supported (a power of a covariate is "
         "I(x^2))"},
        {"y ~ (a + b)^2", 11,
         "formula: crossing to a degree ('^') is not supported (a power of a covariate is "
         "I(x^2))"},
        /* lme4's bars: tests/mdl/test_formula_bars.c */
        {"y ~ (a + b)", 4,
         "formula: parentheses around terms are not supported (join the terms with '+')"},
        {"y ~ . + f(g, iid)", 4, "formula: '.' (every other column) is not supported: name the "
                                 "columns"},
        {"y ~ x ~ z", 6, "formula: a formula has one '~'"},
        /* the response as a term: its first use */
        {"y ~ y + f(g, iid)", 4, "formula: the response 'y' cannot also be a covariate"},
        {"y ~ x + factor(y)", 15,
         "formula: the response 'y' cannot also be a factor (factor(y))"},
        {"y ~ f(g, iid) + f(y, rw1) + y", 18,
         "formula: the response 'y' cannot also index a latent term (f(y, rw1))"},
        {"y ~ f(y, 'matern32')", 6,
         "formula: the response 'y' cannot also index a latent term (f(y, 'matern32'))"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gmm_formula *f = NULL;
        ck_assert_msg(gmm_formula_parse(bad[i].text, &f) == GMM_EPARSE, "%s", bad[i].text);
        ck_assert_ptr_null(f);
        ck_assert_msg(gmm_error_index() == bad[i].pos, "%s: error at %zu, expected %zu",
                      bad[i].text, gmm_error_index(), bad[i].pos);
        ck_assert_msg(!strcmp(gmm_error_message(), bad[i].msg), "%s: '%s'", bad[i].text,
                      gmm_error_message());
    }
    /* a column named like the response's prefix is not the response */
    gmm_formula *f = NULL;
    ck_assert_int_eq(gmm_formula_parse("y ~ y2 + factor(y.1) + f(yy, iid)", &f), GMM_OK);
    gmm_formula_free(f);
}
END_TEST

/* A misspelt or misplaced model name: the message lists every model from
 * the tables, suggests the nearest, and the caret is under the name.  The
 * check comes before the data are read (the data file does not exist). */
START_TEST(test_formula_model_names)
{
    static const char list[] =
        " (models: iid, rw1, rw2, besag, bym2, ar1, seasonal; a kernel spec: matern12, "
        "matern32, matern52, cosine, constant, periodic, quasiperiodic; with graph=, a "
        "precision spec: edge-ou, laplacian, iid)";
    static const struct {
        const char *text;
        size_t pos;
        const char *msg; /* followed by list when it ends in '+' */
    } bad[] = {
        {"y ~ f(g, idd)", 9, "formula: unknown model 'idd'; did you mean 'iid'?+"},
        {"y ~ f(g, IID)", 9, "formula: unknown model 'IID'; did you mean 'iid'?+"},
        {"y ~ f(g, rw3)", 9, "formula: unknown model 'rw3'; did you mean 'rw1' or 'rw2'?+"},
        {"y ~ f(g, ou)", 9,
         "formula: unknown model 'ou'; did you mean 'matern12' (the Ornstein-Uhlenbeck "
         "process)?+"},
        {"y ~ f(t, 'matern23')", 10,
         "formula: unknown model 'matern23'; did you mean 'matern32'?+"},
        {"y ~ f(t, matern)", 9,
         "formula: unknown model 'matern'; did you mean 'matern12', 'matern32' or "
         "'matern52'?+"},
        {"y ~ f(g, bessag, graph=e.csv)", 9,
         "formula: unknown model 'bessag'; did you mean 'besag'?+"},
        {"y ~ f(g, xyz)", 9, "formula: unknown model 'xyz'+"},
        /* in a stack, the second term */
        {"y ~ f(t, rw2) + f(g, idd)", 21, "formula: unknown model 'idd'; did you mean 'iid'?+"},
        {"y ~ f(g, 'iid')", 10,
         "formula: 'iid' in quotes is a kernel spec; the model iid is written without quotes "
         "(f(g, iid))"},
        {"y ~ f(g, laplacian)", 9,
         "formula: 'laplacian' is a graph precision: it needs graph=EDGES.csv"},
        {"y ~ f(g, matern32, graph=e.csv)", 9,
         "formula: 'matern32' is a kernel: with graph= the model is a precision (f(g, "
         "'PRECISION', graph=EDGES.csv))"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gmm_mdl_spec s;
        gmm_mdl_spec_init(&s);
        s.desc.formula = bad[i].text;
        s.desc.data.file = "/nonexistent/d.csv";
        gmm_mdl *m = NULL;
        gmm_mdl_failure fail;
        ck_assert_msg(gmm_mdl_build(&s, &m, &fail) == GMM_EPARSE, "%s: %s", bad[i].text,
                      gmm_error_message());
        ck_assert_ptr_null(m);
        ck_assert_msg(fail.spec_text == bad[i].text && fail.spec_pos == bad[i].pos,
                      "%s: caret at %zu, expected %zu", bad[i].text, fail.spec_pos, bad[i].pos);
        char want[1024];
        size_t n = strlen(bad[i].msg);
        if (bad[i].msg[n - 1] == '+')
            snprintf(want, sizeof want, "%.*s%s", (int)(n - 1), bad[i].msg, list);
        else
            snprintf(want, sizeof want, "%s", bad[i].msg);
        ck_assert_msg(!strcmp(gmm_error_message(), want), "%s: '%s'", bad[i].text,
                      gmm_error_message());
        gmm_mdl_failure_free(&fail);
    }
}
END_TEST

/* A data set: y, a covariate x, a factor p with levels "b", "a", "c" (a
 * is the reference), a group g of 5 levels. */
enum { N = 40, NG = 5 };
static const char *const plev[] = {"b", "a", "c"};

static char *write_data(const char *dir, int counts, double *x, int *p, int *g, double *y)
{
    char buf[8192];
    size_t at = (size_t)snprintf(buf, sizeof buf, "y,x,p,g\n");
    for (int i = 0; i < N; i++) {
        x[i] = sin(1.7 * i) + 0.1 * i;
        p[i] = (i * 7) % 3;
        g[i] = (i * 3 + i / 7) % NG;
        double f = 0.4 + 0.5 * x[i] + 0.3 * (p[i] == 0) - 0.2 * (p[i] == 2) + 0.4 * cos(g[i]);
        y[i] = counts ? floor(exp(f) * (1.0 + 0.5 * sin(3.0 * i)) + 0.5)
                      : f + 0.3 * sin(5.3 * i);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%.17g,%.17g,%s,grp%d\n", y[i], x[i],
                               plev[p[i]], g[i]);
    }
    return tu_write_str(dir, "d.csv", buf);
}

static gmm_mdl *build(const char *path, const char *formula, const char *lik)
{
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.formula = formula;
    s.desc.data.file = path;
    s.desc.likelihood = lik;
    gmm_mdl *m = NULL;
    gmm_mdl_failure fail;
    gmm_status st = gmm_mdl_build(&s, &m, &fail);
    ck_assert_msg(st == GMM_OK, "%s", gmm_error_message());
    gmm_mdl_failure_free(&fail);
    return m;
}

static size_t param(const gmm_objective *o, const char *name)
{
    for (size_t k = 0; k < o->nparam; k++)
        if (!strcmp(o->name[k], name))
            return k;
    ck_abort_msg("no parameter %s", name);
    return 0;
}

/* log N(y; X beta, v Z Z' + s2 I) and its gradient (beta, v, s2), dense;
 * pm, pv (may be NULL): the posterior mean and variance of the linear
 * predictor X beta + Z u at every row, and loo the exact leave-one-out
 * log density of every row: N(y_r; y_r - (V^-1 r)_r / (V^-1)_rr,
 * 1 / (V^-1)_rr). */
static double dense_gauss(const double *x, const int *p, const int *g, const double *y,
                          const double *beta, double v, double s2, double *gb, double *gv,
                          double *gs, double *pm, double *pv, double *loo)
{
    gsl_matrix *V = gsl_matrix_alloc(N, N), *Vi = gsl_matrix_alloc(N, N);
    double r[N], a[N];
    for (int i = 0; i < N; i++) {
        double mu = beta[0] + beta[1] * x[i] + beta[2] * (p[i] == 0) + beta[3] * (p[i] == 2);
        r[i] = y[i] - mu;
        for (int j = 0; j < N; j++)
            gsl_matrix_set(V, i, j, (g[i] == g[j] ? v : 0.0) + (i == j ? s2 : 0.0));
    }
    gsl_linalg_cholesky_decomp1(V);
    double logdet = 0.0;
    for (int i = 0; i < N; i++)
        logdet += 2.0 * log(gsl_matrix_get(V, i, i));
    gsl_matrix_memcpy(Vi, V);
    gsl_linalg_cholesky_invert(Vi);
    double q = 0.0;
    for (int i = 0; i < N; i++) {
        a[i] = 0.0;
        for (int j = 0; j < N; j++)
            a[i] += gsl_matrix_get(Vi, i, j) * r[j];
        q += r[i] * a[i];
    }
    /* d/dbeta = X' a; d/dtheta = (a' dV a - tr(Vi dV)) / 2 */
    memset(gb, 0, 4 * sizeof *gb);
    *gv = *gs = 0.0;
    for (int i = 0; i < N; i++) {
        gb[0] += a[i];
        gb[1] += x[i] * a[i];
        gb[2] += (p[i] == 0) * a[i];
        gb[3] += (p[i] == 2) * a[i];
        *gs += 0.5 * (a[i] * a[i] - gsl_matrix_get(Vi, i, i));
        for (int j = 0; j < N; j++)
            if (g[i] == g[j])
                *gv += 0.5 * (a[i] * a[j] - gsl_matrix_get(Vi, i, j));
    }
    for (int i = 0; loo && i < N; i++) {
        double d = gsl_matrix_get(Vi, i, i), e = a[i] / d;
        loo[i] = -0.5 * (log(2.0 * M_PI / d) + e * e * d);
    }
    /* K = v Z Z': mean X beta + K a, variance diag(K - K V^-1 K) */
    for (int i = 0; pm && i < N; i++) {
        pm[i] = y[i] - r[i];
        pv[i] = v;
        for (int j = 0; j < N; j++) {
            if (g[i] != g[j])
                continue;
            pm[i] += v * a[j];
            for (int k = 0; k < N; k++)
                if (g[k] == g[i])
                    pv[i] -= v * gsl_matrix_get(Vi, j, k) * v;
        }
    }
    gsl_matrix_free(V);
    gsl_matrix_free(Vi);
    return -0.5 * (q + logdet + N * log(2.0 * M_PI));
}

START_TEST(test_formula_gaussian_dense)
{
    char *dir = tu_mkdtemp();
    double x[N], y[N];
    int p[N], g[N];
    char *path = write_data(dir, 0, x, p, g, y);
    gmm_mdl *m = build(path, "y ~ x + factor(p) + f(g, iid)", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    ck_assert_uint_eq(gmm_mdl_ncoef(m), 4);
    size_t kb[4] = {param(o, "intercept"), param(o, "coef.x"), param(o, "coef.p[b]"),
                    param(o, "coef.p[c]")};
    size_t kv = param(o, "f.g.variance"), ks = param(o, "likelihood.variance");
    ck_assert_uint_eq(o->nparam, 6);
    const double beta[4] = {0.3, 0.45, 0.25, -0.1}, v = 0.37, s2 = 0.11;
    double *th = gmm_malloc(o->nparam, sizeof *th), *gr = gmm_malloc(o->nparam, sizeof *gr);
    for (int k = 0; k < 4; k++)
        th[kb[k]] = beta[k];
    th[kv] = v;
    th[ks] = s2;
    double f, gb[4], gv, gs;
    ck_assert_int_eq(o->eval(o->ctx, th, &f, gr), GMM_OK);
    double pm[N], pv[N], mean[N], var[N], loo[N], lpd[N];
    double ref = dense_gauss(x, p, g, y, beta, v, s2, gb, &gv, &gs, pm, pv, loo);
    ck_assert_msg(fabs(f - ref) <= 1e-10 * fabs(ref), "loglik %.15g, dense %.15g", f, ref);
    /* the linear predictor at the rows: the covariates' part added */
    ck_assert_int_eq(gmm_problem_predict_rows(gmm_mdl_problem(m), th, mean, var), GMM_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fabs(mean[i] - pm[i]) <= 1e-10 * (1.0 + fabs(pm[i])), "row %d mean", i);
        ck_assert_msg(fabs(var[i] - pv[i]) <= 1e-10, "row %d var %g vs %g", i, var[i], pv[i]);
    }
    /* score --loo: each row's own linear predictor, the exact Gaussian LOO */
    memcpy(o->value, th, o->nparam * sizeof *th);
    ck_assert_int_eq(gmm_mdl_score_loo(m, lpd), GMM_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(lpd[i] - loo[i]) <= 1e-9 * (1.0 + fabs(loo[i])), "row %d loo %.12g vs %.12g",
                      i, lpd[i], loo[i]);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(fabs(gr[kb[k]] - gb[k]) <= 1e-9 * (1.0 + fabs(gb[k])),
                      "%s: %.15g, dense %.15g", o->name[kb[k]], gr[kb[k]], gb[k]);
    ck_assert_msg(fabs(gr[kv] - gv) <= 1e-9 * (1.0 + fabs(gv)), "v: %g vs %g", gr[kv], gv);
    ck_assert_msg(fabs(gr[ks] - gs) <= 1e-9 * (1.0 + fabs(gs)), "s2: %g vs %g", gr[ks], gs);
    gmm_free(th);
    gmm_free(gr);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* The Laplace objective's gradient in the coefficients (through the mode's
 * per-row shift) against central differences of its value. */
START_TEST(test_formula_laplace_coef_gradient)
{
    char *dir = tu_mkdtemp();
    double x[N], y[N];
    int p[N], g[N];
    char *path = write_data(dir, 1, x, p, g, y);
    gmm_mdl *m = build(path, "y ~ x + factor(p) + f(g, iid)", "poisson");
    gmm_objective *o = gmm_mdl_objective(m);
    size_t np = o->nparam;
    double *th = gmm_malloc(np, sizeof *th), *gr = gmm_malloc(np, sizeof *gr);
    memcpy(th, o->value, np * sizeof *th);
    th[param(o, "coef.x")] = 0.4;
    th[param(o, "coef.p[c]")] = -0.3;
    th[param(o, "f.g.variance")] = 0.5;
    double f;
    ck_assert_int_eq(o->eval(o->ctx, th, &f, gr), GMM_OK);
    for (size_t k = 0; k < np; k++) {
        double h = 1e-5, t0 = th[k], fp, fm;
        th[k] = t0 + h;
        ck_assert_int_eq(o->eval(o->ctx, th, &fp, NULL), GMM_OK);
        th[k] = t0 - h;
        ck_assert_int_eq(o->eval(o->ctx, th, &fm, NULL), GMM_OK);
        th[k] = t0;
        double fd = (fp - fm) / (2.0 * h);
        ck_assert_msg(fabs(fd - gr[k]) <= 1e-6 * (1.0 + fabs(gr[k])), "%s: %.12g, fd %.12g",
                      o->name[k], gr[k], fd);
    }
    gmm_free(th);
    gmm_free(gr);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* f(g, iid) alone under a Gaussian likelihood is the dense N(b 1, v ZZ' +
 * s2 I) of the data, its intercept b estimated as the formula's 1 asks:
 * the iid family equals its dense computation, the gradient in b too. */
START_TEST(test_formula_iid_dense)
{
    char *dir = tu_mkdtemp();
    double x[N], y[N];
    int p[N], g[N];
    char *path = write_data(dir, 0, x, p, g, y);
    gmm_mdl *m = build(path, "y ~ f(g, iid)", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    ck_assert_uint_eq(gmm_mdl_ncoef(m), 1);
    int has;
    gmm_mdl_center(m, &has);
    ck_assert(!has);
    double th[3], gr[3], f;
    th[param(o, "f.g.variance")] = 0.8;
    th[param(o, "likelihood.variance")] = 0.2;
    th[param(o, "intercept")] = 1.7;
    ck_assert_int_eq(o->eval(o->ctx, th, &f, gr), GMM_OK);
    const double beta[4] = {1.7, 0, 0, 0};
    double gb[4], gv, gs;
    double ref = dense_gauss(x, p, g, y, beta, 0.8, 0.2, gb, &gv, &gs, NULL, NULL, NULL);
    ck_assert_msg(fabs(f - ref) <= 1e-10 * fabs(ref), "loglik %.15g, dense %.15g", f, ref);
    ck_assert_msg(fabs(gr[param(o, "f.g.variance")] - gv) <= 1e-9 * (1.0 + fabs(gv)),
                  "v gradient");
    ck_assert_msg(fabs(gr[param(o, "intercept")] - gb[0]) <= 1e-9 * (1.0 + fabs(gb[0])),
                  "intercept gradient %.15g, dense %.15g", gr[param(o, "intercept")], gb[0]);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* A state-space term with a covariate and a factor under a Poisson
 * likelihood: HMC's joint log density and VI's ELBO take the coefficients
 * through the rows' offsets; their gradients in the coefficients against
 * central differences. */
START_TEST(test_formula_joint_and_elbo_gradients)
{
    char *dir = tu_mkdtemp();
    char buf[8192];
    size_t at = (size_t)snprintf(buf, sizeof buf, "t,z,p,y\n");
    for (int i = 0; i < 30; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%d,%.4f,%s,%d\n", i,
                               0.5 + 0.4 * sin(2.3 * i), plev[i % 3],
                               (int)floor(2.0 * exp(sin(i / 5.0)) + 0.5 * (i % 4)));
    char *path = tu_write_str(dir, "s.csv", buf);
    gmm_mdl *m = build(path, "y ~ z + factor(p) + f(t, 'matern32(variance=0.7, lengthscale=4)')",
                       "poisson");
    gmm_problem *pb = gmm_mdl_problem(m);
    gmm_objective *o = gmm_mdl_objective(m);
    size_t np = o->nparam, nc = gmm_problem_ncoef(pb);
    ck_assert_uint_eq(nc, 4);
    double *th = gmm_malloc(np, sizeof *th);
    memcpy(th, o->value, np * sizeof *th);
    th[param(o, "coef.z")] = 0.3;
    th[param(o, "coef.p[b]")] = -0.2;
    th[param(o, "coef.p[c]")] = 0.15;

    /* HMC: q = (v, u), every parameter sampled (coefficients as they are) */
    int *samp = gmm_calloc(np, sizeof *samp);
    gmm_prior *pr = gmm_calloc(np, sizeof *pr);
    for (size_t k = 0; k < np; k++) {
        samp[k] = 1;
        pr[k] = k >= np - nc ? (gmm_prior){GMM_PRIOR_NORMAL, 0.0, 2.0}
                             : (gmm_prior){GMM_PRIOR_LOGNORMAL, 0.0, 1.0};
    }
    ck_assert_int_eq(gmm_problem_joint_setup(pb, th, samp, pr), GMM_OK);
    size_t dim = gmm_problem_joint_dim(pb), n = dim - np;
    double *q = gmm_malloc(dim, sizeof *q), *gq = gmm_malloc(dim, sizeof *gq), lp, lpp, lpm;
    ck_assert_int_eq(gmm_problem_joint_start(pb, q), GMM_OK);
    for (size_t j = 0; j < n; j++)
        q[j] += 0.1 * sin(1.0 + j);
    ck_assert_int_eq(gmm_problem_joint_logp(pb, q, &lp, gq), GMM_OK);
    for (size_t j = n + np - nc; j < dim; j++) {
        double h = 1e-5, q0 = q[j];
        q[j] = q0 + h;
        ck_assert_int_eq(gmm_problem_joint_logp(pb, q, &lpp, NULL), GMM_OK);
        q[j] = q0 - h;
        ck_assert_int_eq(gmm_problem_joint_logp(pb, q, &lpm, NULL), GMM_OK);
        q[j] = q0;
        double fd = (lpp - lpm) / (2.0 * h);
        ck_assert_msg(fabs(fd - gq[j]) <= 1e-6 * (1.0 + fabs(fd)), "joint %zu: %.12g, fd %.12g",
                      j, gq[j], fd);
    }

    /* VI: the ELBO's gradient in theta at the Laplace start */
    gmm_vi_params vp;
    gmm_vi_params_init(&vp);
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(pb, &vp, &v), GMM_OK);
    ck_assert_int_eq(gmm_vi_start_laplace(v, NULL), GMM_OK);
    size_t nv = gmm_vi_nvar(v);
    double *lam = gmm_malloc(nv, sizeof *lam), *lb = gmm_malloc(nv, sizeof *lb);
    double *tb = gmm_malloc(np, sizeof *tb), e, ep, em;
    memcpy(lam, gmm_vi_lambda(v), nv * sizeof *lam);
    ck_assert_int_eq(gmm_vi_elbo(v, th, lam, &e, lb, tb), GMM_OK);
    for (size_t k = np - nc; k < np; k++) {
        double h = 1e-5, t0 = th[k];
        th[k] = t0 + h;
        ck_assert_int_eq(gmm_vi_elbo(v, th, lam, &ep, NULL, NULL), GMM_OK);
        th[k] = t0 - h;
        ck_assert_int_eq(gmm_vi_elbo(v, th, lam, &em, NULL, NULL), GMM_OK);
        th[k] = t0;
        double fd = (ep - em) / (2.0 * h);
        ck_assert_msg(fabs(fd - tb[k]) <= 1e-6 * (1.0 + fabs(fd)), "elbo %s: %.12g, fd %.12g",
                      o->name[k], tb[k], fd);
    }
    gmm_vi_free(v);
    gmm_free(lam);
    gmm_free(lb);
    gmm_free(tb);
    gmm_free(q);
    gmm_free(gq);
    gmm_free(samp);
    gmm_free(pr);
    gmm_free(th);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* Predictions and scores at new rows (gmm_mdl_rows_read,
 * gmm_mdl_predict_test, gmm_mdl_score) of y ~ x + factor(p) + f(g, iid)
 * against the dense posterior: a row of a known group g has mean
 * X_new beta + E[u_g | y] and variance Var[u_g | y] (the dense pm, pv of
 * any data row of g, less its own X beta); a group the data do not have
 * N(X_new beta, v); the score log N(y; mean, var + s2).  A factor level
 * the data do not have is refused with file, line and level. */
START_TEST(test_formula_new_rows_dense)
{
    char *dir = tu_mkdtemp();
    double x[N], y[N];
    int p[N], g[N];
    char *path = write_data(dir, 0, x, p, g, y);
    gmm_mdl *m = build(path, "y ~ x + factor(p) + f(g, iid)", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    size_t kb[4] = {param(o, "intercept"), param(o, "coef.x"), param(o, "coef.p[b]"),
                    param(o, "coef.p[c]")};
    const double beta[4] = {0.3, 0.45, 0.25, -0.1}, v = 0.37, s2 = 0.11;
    for (int k = 0; k < 4; k++)
        o->value[kb[k]] = beta[k];
    o->value[param(o, "f.g.variance")] = v;
    o->value[param(o, "likelihood.variance")] = s2;
    double pm[N], pv[N], gb[4], gv, gs;
    dense_gauss(x, p, g, y, beta, v, s2, gb, &gv, &gs, pm, pv, NULL);
    /* rows: (group, level of p, x, y); group -1 is "grpnew" */
    enum { NT = 5 };
    const int tg[NT] = {0, 3, 4, -1, 2}, tp[NT] = {1, 0, 2, 2, 1};
    const double tx[NT] = {0.25, -1.5, 2.0, 0.7, 0.0}, ty[NT] = {0.4, 1.1, -0.3, 0.9, 0.2};
    char buf[1024];
    size_t at = (size_t)snprintf(buf, sizeof buf, "g,p,x,y\n");
    for (int i = 0; i < NT; i++) {
        char gname[16];
        if (tg[i] < 0)
            snprintf(gname, sizeof gname, "grpnew");
        else
            snprintf(gname, sizeof gname, "grp%d", tg[i]);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s,%s,%.17g,%.17g\n", gname,
                               plev[tp[i]], tx[i], ty[i]);
    }
    char *tpath = tu_write_str(dir, "t.csv", buf);
    gmm_mdl_test *t = NULL;
    ck_assert_int_eq(gmm_mdl_rows_read(m, tpath, 1, &t), GMM_OK);
    double mean[NT], var[NT], lpd[NT];
    ck_assert_int_eq(gmm_mdl_predict_test(m, t, mean, var), GMM_OK);
    ck_assert_int_eq(gmm_mdl_score(m, t, lpd), GMM_OK);
    for (int i = 0; i < NT; i++) {
        double xb = beta[0] + beta[1] * tx[i] + beta[2] * (tp[i] == 0) + beta[3] * (tp[i] == 2);
        double em = xb, ev = v;
        for (int r = 0; tg[i] >= 0 && r < N; r++)
            if (g[r] == tg[i]) {
                double xr = beta[0] + beta[1] * x[r] + beta[2] * (p[r] == 0) +
                            beta[3] * (p[r] == 2);
                em = xb + pm[r] - xr;
                ev = pv[r];
                break;
            }
        ck_assert_msg(fabs(mean[i] - em) <= 1e-10 * (1.0 + fabs(em)), "row %d mean %.15g vs %.15g",
                      i, mean[i], em);
        ck_assert_msg(fabs(var[i] - ev) <= 1e-10, "row %d var %.15g vs %.15g", i, var[i], ev);
        double d = ty[i] - em, el = -0.5 * (log(2.0 * M_PI * (ev + s2)) + d * d / (ev + s2));
        ck_assert_msg(fabs(lpd[i] - el) <= 1e-10 * (1.0 + fabs(el)), "row %d lpd %.15g vs %.15g",
                      i, lpd[i], el);
    }
    gmm_mdl_test_free(t);
    /* predict --terms: the coefficients as they are, then u_g's posterior
     * at every level (the dense pm - X beta of a row of g, sqrt(pv)) */
    gmm_mdl_terms terms;
    ck_assert_int_eq(gmm_mdl_terms_get(m, &terms), GMM_OK);
    ck_assert_uint_eq(terms.n, 4 + NG);
    for (int k = 0; k < 4; k++) {
        ck_assert_str_eq(terms.term[k], o->name[kb[k]]);
        ck_assert_str_eq(terms.level[k], "");
        ck_assert_double_eq(terms.mean[k], beta[k]);
    }
    for (size_t i = 4; i < terms.n; i++) {
        ck_assert_str_eq(terms.term[i], "f.g");
        int gi = atoi(terms.level[i] + 3), r = 0;
        while (g[r] != gi)
            r++;
        double xr = beta[0] + beta[1] * x[r] + beta[2] * (p[r] == 0) + beta[3] * (p[r] == 2);
        ck_assert_msg(fabs(terms.mean[i] - (pm[r] - xr)) <= 1e-10, "%s mean %.15g vs %.15g",
                      terms.level[i], terms.mean[i], pm[r] - xr);
        ck_assert_msg(fabs(terms.sd[i] - sqrt(pv[r])) <= 1e-10, "%s sd", terms.level[i]);
    }
    gmm_mdl_terms_free(&terms);
    /* without the outcome column: prediction rows */
    char *ppath = tu_write_str(dir, "p.csv", "g,p,x\ngrp1,c,0.5\n");
    ck_assert_int_eq(gmm_mdl_rows_read(m, ppath, 0, &t), GMM_OK);
    ck_assert_uint_eq(t->n, 1);
    gmm_mdl_test_free(t);
    t = NULL;
    char *bpath = tu_write_str(dir, "b.csv", "g,p,x,y\ngrp1,a,0.5,1\ngrp2,zz,0.5,1\n");
    ck_assert_int_eq(gmm_mdl_rows_read(m, bpath, 1, &t), GMM_EPARSE);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(gmm_error_message(), "b.csv:3: column 'p': level 'zz'"), "%s",
                  gmm_error_message());
    free(ppath);
    free(bpath);
    free(tpath);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* A kernel term with a covariate at new inputs: y ~ z + f(t, matern32)
 * under the Gaussian likelihood against the dense GP: mean z_new b_z + b +
 * k_*' V^-1 (y - X beta), variance k(0) - k_*' V^-1 k_*, V = K + s2 I. */
static double matern32(double tau, double var, double ell)
{
    double a = sqrt(3.0) * fabs(tau) / ell;
    return var * (1.0 + a) * exp(-a);
}

START_TEST(test_formula_kernel_new_rows_dense)
{
    enum { NS = 25, NQ = 4 };
    char *dir = tu_mkdtemp();
    double t[NS], z[NS], y[NS];
    char buf[4096];
    size_t at = (size_t)snprintf(buf, sizeof buf, "t,z,y\n");
    for (int i = 0; i < NS; i++) {
        t[i] = i + 0.3 * sin(i);
        z[i] = cos(1.3 * i);
        y[i] = 0.5 + 0.8 * z[i] + sin(t[i] / 4.0) + 0.2 * sin(7.1 * i);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%.17g,%.17g,%.17g\n", t[i], z[i], y[i]);
    }
    char *path = tu_write_str(dir, "s.csv", buf);
    gmm_mdl *m = build(path, "y ~ z + f(t, matern32)", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    const double var = 0.9, ell = 3.5, s2 = 0.05, b0 = 0.4, bz = 0.7;
    o->value[param(o, "f.t.matern32.variance")] = var;
    o->value[param(o, "f.t.matern32.lengthscale")] = ell;
    o->value[param(o, "likelihood.variance")] = s2;
    o->value[param(o, "intercept")] = b0;
    o->value[param(o, "coef.z")] = bz;
    const double tq[NQ] = {-2.0, 7.5, 12.0, 30.0}, zq[NQ] = {0.3, -1.0, 0.0, 2.0};
    at = (size_t)snprintf(buf, sizeof buf, "t,z\n");
    for (int q = 0; q < NQ; q++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%.17g,%.17g\n", tq[q], zq[q]);
    char *qpath = tu_write_str(dir, "q.csv", buf);
    gmm_mdl_test *tt = NULL;
    ck_assert_int_eq(gmm_mdl_rows_read(m, qpath, 0, &tt), GMM_OK);
    double mean[NQ], vq[NQ];
    ck_assert_int_eq(gmm_mdl_predict_test(m, tt, mean, vq), GMM_OK);
    gsl_matrix *V = gsl_matrix_alloc(NS, NS);
    gsl_vector *r = gsl_vector_alloc(NS), *a = gsl_vector_alloc(NS), *ks = gsl_vector_alloc(NS);
    gsl_vector *w = gsl_vector_alloc(NS);
    for (int i = 0; i < NS; i++) {
        gsl_vector_set(r, i, y[i] - b0 - bz * z[i]);
        for (int j = 0; j < NS; j++)
            gsl_matrix_set(V, i, j, matern32(t[i] - t[j], var, ell) + (i == j ? s2 : 0.0));
    }
    gsl_linalg_cholesky_decomp1(V);
    gsl_linalg_cholesky_solve(V, r, a);
    for (int q = 0; q < NQ; q++) {
        double em = b0 + bz * zq[q], ev = var, kk = 0.0;
        for (int i = 0; i < NS; i++) {
            gsl_vector_set(ks, i, matern32(tq[q] - t[i], var, ell));
            em += gsl_vector_get(ks, i) * gsl_vector_get(a, i);
        }
        gsl_linalg_cholesky_solve(V, ks, w);
        for (int i = 0; i < NS; i++)
            kk += gsl_vector_get(ks, i) * gsl_vector_get(w, i);
        ev -= kk;
        ck_assert_msg(fabs(mean[q] - em) <= 1e-9 * (1.0 + fabs(em)), "q %d mean %.15g vs %.15g",
                      q, mean[q], em);
        ck_assert_msg(fabs(vq[q] - ev) <= 1e-9 * var, "q %d var %.15g vs %.15g", q, vq[q], ev);
    }
    gsl_matrix_free(V);
    gsl_vector_free(r);
    gsl_vector_free(a);
    gsl_vector_free(ks);
    gsl_vector_free(w);
    gmm_mdl_test_free(tt);
    free(qpath);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* A formula names the latent's parameters after its term; the shorthand
 * keeps the spec's names. */
START_TEST(test_formula_param_names)
{
    char *dir = tu_mkdtemp();
    char *path = tu_write_str(dir, "s.csv", "t,y\n1,0.5\n2,0.1\n3,0.7\n4,0.2\n5,0.4\n");
    gmm_mdl *m = build(path, "y ~ f(t, 'matern32 + periodic(period=3) + matern32')", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    param(o, "f.t.matern32.lengthscale");
    param(o, "f.t.periodic.period");
    param(o, "f.t.matern32.2.variance");
    param(o, "f.t.matern32.2.lengthscale");
    gmm_mdl_free(m);
    gmm_mdl_spec sp;
    gmm_mdl_spec_init(&sp);
    sp.desc.kernel = "matern32";
    sp.desc.data.file = path;
    ck_assert_int_eq(gmm_mdl_build(&sp, &m, NULL), GMM_OK);
    param(gmm_mdl_objective(m), "0.matern32.lengthscale");
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* Start values as f() keys, KEY=VALUE with 'fixed' to hold it: the parser
 * separates the marker from the value (bare or quoted); the model takes
 * variance on every keyword model and phi on bym2 as the objective's start
 * values, holds the marked ones, and refuses values out of their domain,
 * keys the model lacks and a marker on a key that is no parameter, with
 * the caret under the value, key or marker. */
START_TEST(test_formula_start_values)
{
    gmm_formula *f = NULL;
    ck_assert_int_eq(gmm_formula_parse("y ~ f(g, iid, variance = 0.5  fixed)", &f), GMM_OK);
    const gmm_formula_arg *a = &f->latent[0].arg[0];
    ck_assert_str_eq(a->value, "0.5");
    ck_assert_int_eq(a->fixed, 1);
    ck_assert_uint_eq(a->fixed_pos, 30);
    gmm_formula_free(f);
    ck_assert_int_eq(gmm_formula_parse("y ~ f(g, 'a', graph='e d.csv' fixed, k=1)", &f), GMM_OK);
    ck_assert_str_eq(f->latent[0].arg[0].value, "e d.csv");
    ck_assert_int_eq(f->latent[0].arg[0].fixed, 1);
    ck_assert_uint_eq(f->latent[0].arg[0].fixed_pos, 30);
    ck_assert_int_eq(f->latent[0].arg[1].fixed, 0);
    gmm_formula_free(f);
    /* the word alone, or glued to the value, is the value */
    static const char *const plain[] = {"y ~ f(g, iid, variance=fixed)",
                                        "y ~ f(g, iid, variance=0.5fixed)",
                                        "y ~ f(g, iid, variance=0.5 fixedly)"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(gmm_formula_parse(plain[i], &f), GMM_OK);
        ck_assert_int_eq(f->latent[0].arg[0].fixed, 0);
        gmm_formula_free(f);
    }

    char *dir = tu_mkdtemp();
    double x[N], y[N];
    int p[N], g[N];
    char *path = write_data(dir, 0, x, p, g, y);
    gmm_mdl *m = build(path, "y ~ x + f(g, iid, variance=0.5 fixed)", NULL);
    gmm_objective *o = gmm_mdl_objective(m);
    size_t k = param(o, "f.g.variance");
    ck_assert(o->value[k] == 0.5 && o->fixed[k]);
    gmm_mdl_free(m);
    m = build(path, "y ~ f(x, rw1, variance=2) + f(g, iid, variance=0.25 fixed)", NULL);
    o = gmm_mdl_objective(m);
    k = param(o, "f.x.variance");
    ck_assert(o->value[k] == 2.0 && !o->fixed[k]);
    k = param(o, "f.g.variance");
    ck_assert(o->value[k] == 0.25 && o->fixed[k]);
    gmm_mdl_free(m);
    free(path);
    tu_rmdir_all(dir);
    free(dir);

    static const struct {
        const char *text;
        size_t pos;
        const char *msg;
    } bad[] = {
        {"y ~ f(g, bym2, graph=e.csv, phi=1.5)", 32,
         "formula: f(g, bym2): phi = 1.5 is not in (0, 1)"},
        {"y ~ f(g, bym2, graph=e.csv, phi=0 fixed)", 32,
         "formula: f(g, bym2): phi = 0 is not in (0, 1)"},
        {"y ~ f(g, iid, variance=-1)", 23, "formula: f(g, iid): variance = -1 is not > 0"},
        {"y ~ f(t, rw2, variance=abc)", 23,
         "formula: f(t, rw2): variance must be a number, not 'abc'"},
        {"y ~ f(g, besag, graph=e.csv, phi=0.5)", 29,
         "formula: f(g, besag) has no parameter 'phi' (phi is bym2's mixing weight)"},
        {"y ~ f(t, rw1) + f(g, iid, phi=0.5)", 26,
         "formula: f(g, iid) has no parameter 'phi' (phi is bym2's mixing weight)"},
        {"y ~ f(t, 'matern32', variance=1)", 21,
         "formula: f(t, 'matern32'): a spec's parameters take their start values in the spec "
         "(KIND(variance=...)) and are held fixed by name, f.t.KIND.variance"},
        {"y ~ f(t, rw1, cyclic, period=3 fixed)", 31,
         "formula: f(t, rw1): 'fixed' holds a parameter at its start value (variance=1 "
         "fixed); 'period' is not a parameter"},
        {"y ~ f(g, iid, scale=1)", 14,
         "formula: f() has no key 'scale' (keys: graph; variance, phi on bym2, rho on ar1; on "
         "rw1 and rw2: cyclic, period; period on seasonal; group, control, group.rho, "
         "replicate)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gmm_mdl_spec sp;
        gmm_mdl_spec_init(&sp);
        sp.desc.formula = bad[i].text;
        sp.desc.data.file = "/nonexistent/d.csv";
        gmm_mdl_failure fail;
        ck_assert_msg(gmm_mdl_build(&sp, &m, &fail) == GMM_EPARSE, "%s: %s", bad[i].text,
                      gmm_error_message());
        ck_assert_msg(fail.spec_text == bad[i].text && fail.spec_pos == bad[i].pos,
                      "%s: caret at %zu, expected %zu", bad[i].text, fail.spec_pos, bad[i].pos);
        ck_assert_msg(!strcmp(gmm_error_message(), bad[i].msg), "%s: '%s'", bad[i].text,
                      gmm_error_message());
        gmm_mdl_failure_free(&fail);
    }
}
END_TEST

Suite *mdl_formula_suite(void)
{
    Suite *s = suite_create("mdl_formula");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_formula_parse);
    tcase_add_test(tc, test_formula_unsupported);
    tcase_add_test(tc, test_formula_model_names);
    tcase_add_test(tc, test_formula_gaussian_dense);
    tcase_add_test(tc, test_formula_laplace_coef_gradient);
    tcase_add_test(tc, test_formula_iid_dense);
    tcase_add_test(tc, test_formula_joint_and_elbo_gradients);
    tcase_add_test(tc, test_formula_new_rows_dense);
    tcase_add_test(tc, test_formula_kernel_new_rows_dense);
    tcase_add_test(tc, test_formula_param_names);
    tcase_add_test(tc, test_formula_start_values);
    suite_add_tcase(s, tc);
    return s;
}
