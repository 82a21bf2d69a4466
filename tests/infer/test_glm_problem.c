/* test_glm_problem.c -- a problem whose latent is the empty stack (stack.h,
 * nterm 0: a model without latent terms) is a GLM: its objective is the
 * log likelihood sum_r w_r log p(y_r | X_r beta) (the Gaussian's y_r ~
 * N(X_r beta, variance / w_r)) and its gradient that sum's, computed
 * densely here for every family, without and with prior weights
 * (gmm_problem_set_weights), the gradient also against central
 * differences; and with an iid term, the weighted Laplace's log q and
 * gradient against central differences of itself (its Newton step, log q
 * and reverse mode carry the weights), a weight of 2 equal to the row given
 * twice.  The fitted Poisson GLM's covariance (gmm_fit_lincomb_var) against
 * the dense inverse information (X' diag(mu) X)^-1, its diagonal the
 * squared standard errors. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/stack.h"
#include "gmm/vi.h"
#include "support/tu_model.h"

#define NR 30
#define NC 3

typedef struct {
    double X[2 * NR * NC], y[2 * NR], e[2 * NR], w[2 * NR];
    size_t level[2 * NR];
} data;

/* Rows: intercept, a covariate and a 0/1 column; outcomes fitting spec. */
static void make_data(data *d, const char *spec)
{
    int gauss = !strncmp(spec, "gaussian", 8) || !strncmp(spec, "studentt", 8);
    int binom = !strncmp(spec, "binomial", 8);
    for (size_t r = 0; r < NR; r++) {
        double z = sin(1.7 * (double)r), a = (double)(r % 3 == 0);
        d->X[r * NC] = 1.0;
        d->X[r * NC + 1] = z;
        d->X[r * NC + 2] = a;
        d->e[r] = binom ? (double)(2 + r % 5) : 1.0 + 0.1 * (double)(r % 4);
        d->y[r] = gauss ? 0.3 + z - 0.5 * a + 0.4 * cos(2.3 * (double)r)
                  : binom ? (double)(r % (2 + r % 5))
                          : (double)((r * 7) % 5);
        d->w[r] = r == 4 ? 0.0 : 0.25 + 0.5 * (double)(r % 4);
        d->level[r] = r % 4;
    }
}

static gmm_problem *make_problem(data *d, gmm_lik *lik, gmm_latent *lat, int rowq,
                                 const double *w)
{
    static const char *names[] = {"intercept", "coef.z", "coef.a"};
    double start[NC] = {0.2, 0.3, -0.1};
    gmm_problem_design des = {NC, d->X, names, start, 0};
    gmm_problem *p = NULL;
    ck_assert_msg(gmm_problem_alloc_design(lat, lik, d->y, rowq ? d->e : NULL, &des, &p) ==
                      GMM_OK,
                  "%s", gmm_error_message());
    if (w)
        ck_assert_msg(gmm_problem_set_weights(p, w) == GMM_OK, "%s", gmm_error_message());
    return p;
}

/* d objective / d theta_i by central differences (step h) */
static double fd(gmm_objective *o, const double *theta, size_t i, double h)
{
    double t[8], fp, fm;
    memcpy(t, theta, o->nparam * sizeof *t);
    t[i] = theta[i] + h;
    ck_assert_int_eq(o->eval(o->ctx, t, &fp, NULL), GMM_OK);
    t[i] = theta[i] - h;
    ck_assert_int_eq(o->eval(o->ctx, t, &fm, NULL), GMM_OK);
    return (fp - fm) / (2.0 * h);
}

START_TEST(test_empty_latent_is_the_glm)
{
    const char *specs[] = {"gaussian(variance=0.6)", "poisson", "binomial",
                           "negbinomial(dispersion=1.5)", "studentt(df=4, scale=0.7)"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        for (int weighted = 0; weighted < 2; weighted++) {
            data d;
            make_data(&d, specs[k]);
            gmm_lik lik = tu_lik_of(specs[k], NAN);
            gmm_latent *lat = NULL;
            ck_assert_int_eq(gmm_latent_stack_alloc(NR, 0, NULL, 0, &lat), GMM_OK);
            ck_assert_uint_eq(gmm_latent_dim(lat), 0);
            int rowq = lik.type->rowq != NULL;
            gmm_problem *p = make_problem(&d, &lik, lat, rowq, weighted ? d.w : NULL);
            gmm_objective *o = gmm_problem_objective(p);
            size_t np = lik.type->nparam;
            ck_assert_uint_eq(o->nparam, np + NC);
            double theta[8], g[8], f;
            for (size_t j = 0; j < np; j++)
                theta[j] = lik.par[j];
            theta[np] = 0.4;
            theta[np + 1] = 0.7;
            theta[np + 2] = -0.3;
            ck_assert_msg(o->eval(o->ctx, theta, &f, g) == GMM_OK, "%s", gmm_error_message());
            /* dense: sum_r (w_r) log p(y_r | X_r beta), its gradient in beta */
            double want = 0.0, gb[NC] = {0};
            for (size_t r = 0; r < NR; r++) {
                double eta = 0.0, out[4], wr = weighted ? d.w[r] : 1.0;
                for (size_t c = 0; c < NC; c++)
                    eta += d.X[r * NC + c] * theta[np + c];
                gmm_lik l = lik;
                if (lik.type->conjugate) /* N(y; eta, variance / w) */
                    l.par[0] = lik.par[0] / wr;
                if (wr == 0.0)
                    continue;
                gmm_lik_eval(&l, d.y[r], rowq ? d.e[r] : 1.0, eta, out, NULL);
                double s = lik.type->conjugate ? 1.0 : wr;
                want += s * out[0];
                for (size_t c = 0; c < NC; c++)
                    gb[c] += s * out[1] * d.X[r * NC + c];
            }
            ck_assert_msg(fabs(f - want) <= 1e-10 * fmax(1.0, fabs(want)),
                          "%s weighted %d: objective %.17g, dense %.17g", specs[k], weighted, f,
                          want);
            for (size_t c = 0; c < NC; c++)
                ck_assert_msg(fabs(g[np + c] - gb[c]) <= 1e-9 * fmax(1.0, fabs(gb[c])),
                              "%s weighted %d: d/dbeta_%zu %.17g, dense %.17g", specs[k],
                              weighted, c, g[np + c], gb[c]);
            for (size_t j = 0; j < o->nparam; j++) {
                double num = fd(o, theta, j, 1e-5 * fmax(1.0, fabs(theta[j])));
                ck_assert_msg(fabs(g[j] - num) <= 1e-6 * fmax(1.0, fabs(num)),
                              "%s weighted %d: gradient %zu %.17g, central difference %.17g",
                              specs[k], weighted, j, g[j], num);
            }
            gmm_problem_free(p);
            gmm_latent_free(lat);
        }
}
END_TEST

/* An iid term over 4 levels: the weighted Laplace's gradient by central
 * differences, and a weight of 2 the same as the row given twice. */
START_TEST(test_weighted_laplace_iid)
{
    const char *specs[] = {"poisson", "binomial", "gaussian(variance=0.5)"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        data d, dd;
        make_data(&d, specs[k]);
        gmm_lik lik = tu_lik_of(specs[k], NAN);
        int rowq = lik.type->rowq != NULL;
        /* weights 1 or 2 (even rows), and the rows of weight 2 repeated */
        double w2[NR];
        size_t m = 0;
        for (size_t r = 0; r < NR; r++) {
            w2[r] = r % 2 ? 1.0 : 2.0;
            for (int rep = 0; rep < (int)w2[r]; rep++, m++) {
                memcpy(dd.X + m * NC, d.X + r * NC, NC * sizeof *d.X);
                dd.y[m] = d.y[r];
                dd.e[m] = d.e[r];
                dd.level[m] = d.level[r];
            }
        }
        gmm_stack_term t = {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 4,
                            .level = d.level, .variance = 0.8};
        gmm_stack_term td = t;
        td.level = dd.level;
        gmm_latent *lat = NULL, *latd = NULL;
        ck_assert_int_eq(gmm_latent_stack_alloc(NR, 1, &t, 0, &lat), GMM_OK);
        ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &td, 0, &latd), GMM_OK);
        gmm_problem *p = make_problem(&d, &lik, lat, rowq, w2);
        gmm_problem *pd = make_problem(&dd, &lik, latd, rowq, NULL);
        gmm_objective *o = gmm_problem_objective(p), *od = gmm_problem_objective(pd);
        ck_assert_uint_eq(o->nparam, od->nparam);
        double theta[8], g[8], f, fdup;
        memcpy(theta, o->value, o->nparam * sizeof *theta);
        theta[o->nparam - 2] = 0.5;
        ck_assert_msg(o->eval(o->ctx, theta, &f, g) == GMM_OK, "%s", gmm_error_message());
        ck_assert_int_eq(od->eval(od->ctx, theta, &fdup, NULL), GMM_OK);
        if (lik.type->conjugate) {
            /* N(y; f, v / 2) against two N(y; f, v): the log densities differ
             * by log 2 + log(pi v) / 2 per such row, a constant in f */
            double v = theta[1];
            fdup += (double)(NR / 2) * (log(2.0) + 0.5 * log(3.14159265358979323846 * v));
        }
        ck_assert_msg(fabs(f - fdup) <= 1e-10 * fabs(fdup),
                      "%s: weighted %.17g, duplicated rows %.17g", specs[k], f, fdup);
        for (size_t j = 0; j < o->nparam; j++) {
            double num = fd(o, theta, j, 1e-5 * fmax(1.0, fabs(theta[j])));
            ck_assert_msg(fabs(g[j] - num) <= 1e-6 * fmax(1.0, fabs(num)),
                          "%s: gradient %zu (%s) %.17g, central difference %.17g", specs[k], j,
                          o->name[j], g[j], num);
        }
        gmm_problem_free(p);
        gmm_problem_free(pd);
        gmm_latent_free(lat);
        gmm_latent_free(latd);
    }
}
END_TEST

/* 3 x 3 symmetric positive definite inverse by cofactors */
static void inv3(const double *A, double *B)
{
    double d = A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
               A[2] * (A[3] * A[7] - A[4] * A[6]);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int r0 = (j + 1) % 3, r1 = (j + 2) % 3, c0 = (i + 1) % 3, c1 = (i + 2) % 3;
            B[i * 3 + j] = (A[r0 * 3 + c0] * A[r1 * 3 + c1] - A[r0 * 3 + c1] * A[r1 * 3 + c0]) / d;
        }
}

START_TEST(test_covariance_is_inverse_information)
{
    data d;
    make_data(&d, "poisson");
    gmm_lik lik = tu_lik_of("poisson", NAN);
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 0, NULL, 0, &lat), GMM_OK);
    gmm_problem *p = make_problem(&d, &lik, lat, 1, NULL);
    gmm_objective *o = gmm_problem_objective(p);
    gmm_fit_params par;
    gmm_fit_params_init(&par);
    gmm_fit_result res;
    ck_assert_msg(gmm_fit(o, &par, &res) == GMM_OK, "%s", gmm_error_message());
    /* C from the variances of e_i and e_i + e_j (gmm_fit_lincomb_var):
     * C_ij = (var(e_i + e_j) - C_ii - C_jj) / 2 */
    double C[NC * NC], se[NC], A[NC * NC] = {0}, B[NC * NC], E[NC * NC * NC] = {0},
           V[NC * NC];
    size_t np = o->nparam;
    ck_assert_int_eq(np, NC);
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < NC; j++) {
            E[(i * NC + j) * np + i] += 1.0;
            E[(i * NC + j) * np + j] += i == j ? 0.0 : 1.0;
        }
    ck_assert_int_eq(gmm_fit_lincomb_var(o, E, NC * NC, V), GMM_OK);
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < NC; j++)
            C[i * NC + j] = i == j ? V[i * NC + i]
                                   : (V[i * NC + j] - V[i * NC + i] - V[j * NC + j]) / 2.0;
    ck_assert_int_eq(gmm_fit_std_errors(o, se), GMM_OK);
    for (size_t r = 0; r < NR; r++) { /* X' diag(mu) X, mu = e exp(X beta) */
        double eta = 0.0;
        for (size_t c = 0; c < NC; c++)
            eta += d.X[r * NC + c] * o->value[c];
        double mu = d.e[r] * exp(eta);
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NC; j++)
                A[i * NC + j] += mu * d.X[r * NC + i] * d.X[r * NC + j];
    }
    inv3(A, B);
    for (size_t i = 0; i < NC; i++) {
        ck_assert_msg(fabs(C[i * NC + i] - se[i] * se[i]) <= 1e-12 * se[i] * se[i],
                      "cov %zu %.17g, se^2 %.17g", i, C[i * NC + i], se[i] * se[i]);
        for (size_t j = 0; j < NC; j++) {
            double tol = 1e-5 * sqrt(B[i * NC + i] * B[j * NC + j]);
            ck_assert_msg(fabs(C[i * NC + j] - B[i * NC + j]) <= tol,
                          "cov %zu %zu %.17g, dense %.17g", i, j, C[i * NC + j], B[i * NC + j]);
        }
    }
    gmm_problem_free(p);
    gmm_latent_free(lat);
}
END_TEST

/* The samplers' targets with weights: the whitened log density (hyper-
 * parameters fixed) and the joint one (negative binomial: its dispersion
 * sampled too) of the weighted rows equal those of the
 * rows given twice, value and gradient, at the same point. */
START_TEST(test_weighted_sampler_targets)
{
    data d, dd;
    make_data(&d, "negbinomial(dispersion=2)");
    gmm_lik lik = tu_lik_of("negbinomial(dispersion=2)", NAN);
    double w2[NR];
    size_t m = 0;
    for (size_t r = 0; r < NR; r++) {
        w2[r] = r % 2 ? 1.0 : 2.0;
        for (int rep = 0; rep < (int)w2[r]; rep++, m++) {
            memcpy(dd.X + m * NC, d.X + r * NC, NC * sizeof *d.X);
            dd.y[m] = d.y[r];
            dd.e[m] = d.e[r];
            dd.level[m] = d.level[r];
        }
    }
    gmm_stack_term t = {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 4, .level = d.level,
                        .variance = 0.8};
    gmm_stack_term td = t;
    td.level = dd.level;
    gmm_latent *lat = NULL, *latd = NULL;
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 1, &t, 0, &lat), GMM_OK);
    ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &td, 0, &latd), GMM_OK);
    gmm_problem *p = make_problem(&d, &lik, lat, 1, w2), *pd = make_problem(&dd, &lik, latd, 1, NULL);
    gmm_objective *o = gmm_problem_objective(p);
    double theta[8], v[4] = {0.3, -0.2, 0.5, -0.1}, lp, lpd, g[8], gd[8];
    memcpy(theta, o->value, o->nparam * sizeof *theta);
    ck_assert_int_eq(gmm_problem_whiten_setup(p, theta), GMM_OK);
    ck_assert_int_eq(gmm_problem_whiten_setup(pd, theta), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp, g), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_logp(pd, v, &lpd, gd), GMM_OK);
    ck_assert_msg(fabs(lp - lpd) <= 1e-11 * fabs(lpd), "whitened %.17g, duplicated %.17g", lp,
                  lpd);
    for (size_t j = 0; j < 4; j++)
        ck_assert_msg(fabs(g[j] - gd[j]) <= 1e-11 * fmax(1.0, fabs(gd[j])), "d/dv_%zu %.17g, %.17g",
                      j, g[j], gd[j]);
    int sampled[8] = {0};
    gmm_prior pri[8];
    for (size_t k = 0; k < o->nparam; k++) {
        sampled[k] = k == 1; /* the dispersion (the coefficients would move in a basis of
                              * the design's rows, which the duplicates change) */
        pri[k] = (gmm_prior){gmm_prior_kind_of(o->scale[k]), 0.0, 2.0};
    }
    ck_assert_msg(gmm_problem_joint_setup(p, theta, sampled, pri) == GMM_OK, "%s",
                  gmm_error_message());
    ck_assert_int_eq(gmm_problem_joint_setup(pd, theta, sampled, pri), GMM_OK);
    size_t dim = gmm_problem_joint_dim(p);
    ck_assert_uint_eq(dim, gmm_problem_joint_dim(pd));
    double q[12];
    ck_assert_int_eq(gmm_problem_joint_start(p, q), GMM_OK);
    for (size_t j = 0; j < dim; j++)
        q[j] += 0.05 * (double)(j % 3) - 0.04;
    double gq[12], gqd[12];
    ck_assert_int_eq(gmm_problem_joint_logp(p, q, &lp, gq), GMM_OK);
    ck_assert_int_eq(gmm_problem_joint_logp(pd, q, &lpd, gqd), GMM_OK);
    ck_assert_msg(fabs(lp - lpd) <= 1e-11 * fabs(lpd), "joint %.17g, duplicated %.17g", lp, lpd);
    for (size_t j = 0; j < dim; j++)
        ck_assert_msg(fabs(gq[j] - gqd[j]) <= 1e-10 * fmax(1.0, fabs(gqd[j])),
                      "joint d/dq_%zu %.17g, %.17g", j, gq[j], gqd[j]);
    gmm_problem_free(p);
    gmm_problem_free(pd);
    gmm_latent_free(lat);
    gmm_latent_free(latd);
}
END_TEST

/* The ELBO of weighted rows (gmm_lik_expect_weighted) and its gradients in
 * q and theta equal those of the rows given twice, at the same point:
 * negative binomial (Gauss-Hermite) and Gaussian (closed form, up to the
 * constant log 2 + log(pi v) / 2 per doubled row and its derivative in v). */
START_TEST(test_weighted_elbo)
{
    const char *specs[] = {"negbinomial(dispersion=2)", "gaussian(variance=0.5)"};
    for (size_t sp = 0; sp < 2; sp++) {
        data d, dd;
        make_data(&d, specs[sp]);
        gmm_lik lik = tu_lik_of(specs[sp], NAN);
        int rowq = lik.type->rowq != NULL, gauss = lik.type->conjugate;
        double w2[NR];
        size_t m = 0;
        for (size_t r = 0; r < NR; r++) {
            w2[r] = r % 2 ? 1.0 : 2.0;
            for (int rep = 0; rep < (int)w2[r]; rep++, m++) {
                memcpy(dd.X + m * NC, d.X + r * NC, NC * sizeof *d.X);
                dd.y[m] = d.y[r];
                dd.e[m] = d.e[r];
                dd.level[m] = d.level[r];
            }
        }
        gmm_stack_term t = {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 4, .level = d.level,
                            .variance = 0.8};
        gmm_stack_term td = t;
        td.level = dd.level;
        gmm_latent *lat = NULL, *latd = NULL;
        ck_assert_int_eq(gmm_latent_stack_alloc(NR, 1, &t, 0, &lat), GMM_OK);
        ck_assert_int_eq(gmm_latent_stack_alloc(m, 1, &td, 0, &latd), GMM_OK);
        gmm_problem *p = make_problem(&d, &lik, lat, rowq, w2);
        gmm_problem *pd = make_problem(&dd, &lik, latd, rowq, NULL);
        gmm_vi_params par;
        gmm_vi_params_init(&par);
        gmm_vi *v = NULL, *vd = NULL;
        ck_assert_msg(gmm_vi_alloc(p, &par, &v) == GMM_OK, "%s", gmm_error_message());
        ck_assert_int_eq(gmm_vi_alloc(pd, &par, &vd), GMM_OK);
        size_t nv = gmm_vi_nvar(v), np = gmm_vi_nparam(v);
        ck_assert_uint_eq(nv, gmm_vi_nvar(vd));
        double lam[64], lb[64], lbd[64], tb[8], tbd[8], e, ed;
        ck_assert_uint_le(nv, 64);
        for (size_t j = 0; j < nv; j++)
            lam[j] = 0.2 * sin(1.3 * (double)j);
        const double *theta = gmm_problem_objective(p)->value;
        ck_assert_msg(gmm_vi_elbo(v, theta, lam, &e, lb, tb) == GMM_OK, "%s", gmm_error_message());
        ck_assert_int_eq(gmm_vi_elbo(vd, theta, lam, &ed, lbd, tbd), GMM_OK);
        if (gauss) { /* two N(y; f, v) against N(y; f, v / 2): see test_weighted_laplace_iid */
            double var = theta[1];
            ed += (double)(NR / 2) * (log(2.0) + 0.5 * log(3.14159265358979323846 * var));
            tbd[1] += (double)(NR / 2) * 0.5 / var;
        }
        ck_assert_msg(fabs(e - ed) <= 1e-11 * fabs(ed), "%s: ELBO %.17g, duplicated %.17g",
                      specs[sp], e, ed);
        for (size_t j = 0; j < nv; j++)
            ck_assert_msg(fabs(lb[j] - lbd[j]) <= 1e-10 * fmax(1.0, fabs(lbd[j])),
                          "%s: d/dlambda_%zu %.17g, %.17g", specs[sp], j, lb[j], lbd[j]);
        for (size_t k = 0; k < np; k++)
            ck_assert_msg(fabs(tb[k] - tbd[k]) <= 1e-10 * fmax(1.0, fabs(tbd[k])),
                          "%s: d/dtheta_%zu %.17g, %.17g", specs[sp], k, tb[k], tbd[k]);
        gmm_vi_free(v);
        gmm_vi_free(vd);
        gmm_problem_free(p);
        gmm_problem_free(pd);
        gmm_latent_free(lat);
        gmm_latent_free(latd);
    }
}
END_TEST

extern Suite *infer_glm_problem_suite(void);
Suite *infer_glm_problem_suite(void)
{
    Suite *s = suite_create("infer_glm_problem");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_empty_latent_is_the_glm);
    tcase_add_test(tc, test_weighted_laplace_iid);
    tcase_add_test(tc, test_covariance_is_inverse_information);
    tcase_add_test(tc, test_weighted_sampler_targets);
    tcase_add_test(tc, test_weighted_elbo);
    suite_add_tcase(s, tc);
    return s;
}
