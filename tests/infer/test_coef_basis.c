/* test_coef_basis.c -- the coefficients' scale for the optimisers
 * (gmm_problem_coef_basis, objective.h lin_*): R is the QR's of the observed
 * rows' free columns (R'R = X'X there), a column in the span of those before
 * it is aliased -- held at 0 and flagged -- whatever the columns' scale, and
 * fit's answer is the same for a covariate shifted by 1e6 sd or scaled by
 * 1e+-12: the loglik to 1e-10 relative, the coefficient and its standard
 * error transformed to 1e-6 and 1e-5; the variance of linear combinations
 * of the estimates (gmm_fit_lincomb_var) against a dense inverse, with and
 * without the basis. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/hmc_chains.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "support/testutil.h"
#include "support/tu_model.h"

#define NR 40

typedef struct {
    gmm_kernel *k;
    gmm_latent *lat;
    gmm_lik lik;
    gmm_problem *p;
    double y[NR], X[NR * 4];
} setup;

/* A matern32 series at NR inputs with Poisson counts; columns: 1, z, and
 * the two given ones (NAN: absent). */
static void make(setup *s, const double *c2, const double *c3, size_t ncoef)
{
    memset(s, 0, sizeof *s);
    s->k = tu_kernel_of("matern32(variance=0.5, lengthscale=3)");
    double x[NR];
    for (size_t i = 0; i < NR; i++) {
        x[i] = (double)i;
        double z = sin(0.9 * (double)i);
        s->y[i] = i == 7 ? NAN : floor(3.0 + 2.0 * z + 1.5 * sin(0.3 * (double)i) + 0.5);
        double *r = s->X + i * ncoef;
        r[0] = 1.0;
        r[1] = z;
        if (ncoef > 2)
            r[2] = c2[i];
        if (ncoef > 3)
            r[3] = c3[i];
    }
    ck_assert_int_eq(gmm_latent_ssm_alloc(s->k, x, NR, NULL, &s->lat), GMM_OK);
    ck_assert_int_eq(gmm_lik_parse("poisson", &s->lik), GMM_OK);
    const char *names[] = {"intercept", "coef.z", "coef.a", "coef.b"};
    double start[4] = {1.0, 0.0, 0.0, 0.0};
    gmm_problem_design d = {ncoef, s->X, names, start, 0};
    ck_assert_msg(gmm_problem_alloc_design(s->lat, &s->lik, s->y, NULL, &d, &s->p) == GMM_OK, "%s",
                  gmm_error_message());
}

static void drop(setup *s)
{
    gmm_problem_free(s->p);
    gmm_latent_free(s->lat);
    gmm_kernel_free(s->k);
}

START_TEST(test_basis_r_and_aliasing)
{
    double a[NR], b[NR];
    for (size_t i = 0; i < NR; i++) {
        a[i] = 1e-12 * (3.0 - 2.0 * sin(0.9 * (double)i)); /* 3 - 2 z, scaled: aliased */
        b[i] = 1e12 * cos(0.2 * (double)i);                /* free */
    }
    setup s;
    make(&s, a, b, 4);
    int al[4];
    ck_assert_int_eq(gmm_problem_coef_basis(s.p, GMM_ALIAS_TOL, al), GMM_OK);
    gmm_objective *o = gmm_problem_objective(s.p);
    ck_assert(!al[0] && !al[1] && al[2] && !al[3]);
    size_t c0 = o->nparam - 4;
    ck_assert(o->fixed[c0 + 2] && o->value[c0 + 2] == 0.0);
    ck_assert_uint_eq(o->lin_n, 3);
    ck_assert_double_eq_tol(o->lin_s, sqrt((double)(NR - 1)), 1e-15);
    /* R'R = X'X over the observed rows and the kept columns */
    const size_t keep[3] = {0, 1, 3};
    for (size_t j = 0; j < 3; j++) {
        ck_assert_uint_eq(o->lin_idx[j], c0 + keep[j]);
        for (size_t k = 0; k < 3; k++) {
            double rr = 0.0, xx = 0.0;
            for (size_t t = 0; t <= j && t <= k; t++)
                rr += o->lin_R[t * 3 + j] * o->lin_R[t * 3 + k];
            for (size_t i = 0; i < NR; i++)
                if (!isnan(s.y[i]))
                    xx += s.X[i * 4 + keep[j]] * s.X[i * 4 + keep[k]];
            double scale = 0.0;
            for (size_t i = 0; i < NR; i++)
                if (!isnan(s.y[i]))
                    scale = fmax(scale, fabs(s.X[i * 4 + keep[j]] * s.X[i * 4 + keep[k]]));
            ck_assert_msg(fabs(rr - xx) <= 1e-12 * NR * scale,
                          "(R'R)_%zu%zu %.17g, (X'X) %.17g", j, k, rr, xx);
        }
    }
    /* a fixed coefficient leaves the basis */
    o->fixed[c0 + 3] = 1;
    ck_assert_int_eq(gmm_problem_coef_basis(s.p, GMM_ALIAS_TOL, al), GMM_OK);
    ck_assert_uint_eq(o->lin_n, 2);
    ck_assert(!al[3]);
    drop(&s);
}
END_TEST

/* The fit of a covariate a = z-like column written as c + s a0: the same
 * loglik, the coefficient divided by s, its standard error too. */
static void fit_with(const double *col, double *ll, double *coef, double *se)
{
    setup s;
    make(&s, col, NULL, 3);
    ck_assert_int_eq(gmm_problem_coef_basis(s.p, GMM_ALIAS_TOL, NULL), GMM_OK);
    gmm_objective *o = gmm_problem_objective(s.p);
    double sev[16];
    ck_assert(o->nparam <= 16);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    fp.std_errors = sev;
    gmm_fit_result res;
    ck_assert_msg(gmm_fit(o, &fp, &res) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(res.converged && res.gain <= 1e-8, "%s (%g)", res.message, res.gain);
    *ll = res.loglik;
    *coef = o->value[o->nparam - 1];
    *se = sev[o->nparam - 1];
    drop(&s);
}

START_TEST(test_fit_invariant_to_shift_and_scale)
{
    double a0[NR], col[NR], ll0, b0, se0;
    for (size_t i = 0; i < NR; i++)
        a0[i] = cos(0.2 * (double)i);
    fit_with(a0, &ll0, &b0, &se0);
    const double shift[] = {0.0, 0.0, 1e6 * 0.7}, scale[] = {1e12, 1e-12, 1.0};
    for (size_t t = 0; t < 3; t++) {
        for (size_t i = 0; i < NR; i++)
            col[i] = shift[t] + scale[t] * a0[i];
        double ll, b, se;
        fit_with(col, &ll, &b, &se);
        ck_assert_msg(fabs(ll - ll0) <= 1e-10 * fabs(ll0), "case %zu: loglik %.17g, %.17g", t,
                      ll, ll0);
        ck_assert_msg(fabs(b * scale[t] - b0) <= 1e-6 * fabs(b0), "case %zu: coef %.17g", t, b);
        ck_assert_msg(fabs(se * scale[t] - se0) <= 1e-5 * se0, "case %zu: se %.17g, %.17g", t,
                      se * scale[t], se0);
    }
}
END_TEST

/* The joint target of hmc --sample-hyper with the coefficients in the
 * design basis: its gradient against central differences, and its prior
 * the centred design's -- the intercept's on b + sum_k beta_k mean(x_k) --
 * for a covariate 2000 away from 0. */
START_TEST(test_joint_prior_centred)
{
    double a[NR];
    for (size_t i = 0; i < NR; i++)
        a[i] = 2000.0 + cos(0.2 * (double)i);
    setup s;
    make(&s, a, NULL, 3);
    ck_assert_int_eq(gmm_problem_coef_basis(s.p, GMM_ALIAS_TOL, NULL), GMM_OK);
    gmm_objective *o = gmm_problem_objective(s.p);
    size_t np = o->nparam, c0 = np - 3, n = gmm_latent_dim(s.lat);
    int sampled[16];
    gmm_prior prior[16];
    ck_assert(np <= 16);
    gmm_hmc_default_priors(s.p, sampled, prior);
    o->value[c0] = 0.8;
    o->value[c0 + 1] = 0.6;
    o->value[c0 + 2] = -1e-3;
    ck_assert_int_eq(gmm_problem_joint_setup(s.p, o->value, sampled, prior), GMM_OK);
    size_t d = gmm_problem_joint_dim(s.p), nh = gmm_problem_hyper_dim(s.p);
    ck_assert_uint_eq(d, n + nh);
    double *q = malloc(d * sizeof *q), *g = malloc(d * sizeof *g), th[16];
    ck_assert_int_eq(gmm_problem_joint_start(s.p, q), GMM_OK);
    double lp;
    ck_assert_int_eq(gmm_problem_joint_logp(s.p, q, &lp, g), GMM_OK);
    for (size_t j = n; j < d; j++) {
        double h = 1e-5, q0 = q[j], lpp, lpm;
        q[j] = q0 + h;
        ck_assert_int_eq(gmm_problem_joint_logp(s.p, q, &lpp, NULL), GMM_OK);
        q[j] = q0 - h;
        ck_assert_int_eq(gmm_problem_joint_logp(s.p, q, &lpm, NULL), GMM_OK);
        q[j] = q0;
        double fd = (lpp - lpm) / (2.0 * h);
        ck_assert_msg(fabs(fd - g[j]) <= 1e-6 * (1.0 + fabs(g[j])), "q[%zu]: %.12g, fd %.12g", j,
                      g[j], fd);
    }
    /* the prior on the centred design, directly */
    ck_assert_int_eq(gmm_problem_joint_theta(s.p, q, th), GMM_OK);
    double mean[3], sd[3];
    long icpt;
    ck_assert_int_eq(gmm_problem_coef_moments(s.p, mean, sd, &icpt), GMM_OK);
    ck_assert_int_eq(icpt, 0);
    double bc = th[c0] + th[c0 + 1] * mean[1] + th[c0 + 2] * mean[2], want = 0.0;
    double z = (bc - prior[c0].mu) / prior[c0].sigma;
    want -= 0.5 * z * z;
    for (size_t k = 1; k < 3; k++) {
        z = (th[c0 + k] - prior[c0 + k].mu) / prior[c0 + k].sigma;
        want -= 0.5 * z * z;
        ck_assert_double_eq_tol(prior[c0 + k].sigma, 2.5 / sd[k], 1e-12 / sd[k]);
    }
    for (size_t j = 0; j < nh; j++) {
        size_t i = j; /* the positive parameters come first, in order */
        if (i >= c0)
            break;
        z = (log(th[i]) - prior[i].mu) / prior[i].sigma;
        want -= 0.5 * z * z;
    }
    double got = gmm_problem_hyper_prior(s.p, q + n, th, NULL, NULL);
    ck_assert_msg(fabs(got - want) <= 1e-9 * (1.0 + fabs(want)), "prior %.15g, direct %.15g",
                  got, want);
    free(q);
    free(g);
    drop(&s);
}
END_TEST

/* A log likelihood quadratic in u = (log s, b1, b2): -(u - m)' A (u - m) / 2,
 * so that the covariance of the estimates on the u scale is A^-1 exactly. */
static const double QA[9] = {4.0, 1.0, -0.5, 1.0, 3.0, 0.8, -0.5, 0.8, 2.0};
static const double QM[3] = {-0.3, 1.5, -2.0};

static gmm_status quad_eval(void *ctx, const double *th, double *f, double *grad)
{
    (void)ctx;
    double u[3] = {log(th[0]) - QM[0], th[1] - QM[1], th[2] - QM[2]}, g[3] = {0.0, 0.0, 0.0};
    *f = 0.0;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            *f -= 0.5 * u[i] * QA[i * 3 + j] * u[j];
            g[i] -= QA[i * 3 + j] * u[j];
        }
    if (grad) {
        grad[0] = g[0] / th[0]; /* d/ds = d/du / s */
        grad[1] = g[1];
        grad[2] = g[2];
    }
    return GMM_OK;
}

/* gmm_fit_lincomb_var of a few rows a against g' A^-1 g, g = (a_0 s, a_1,
 * a_2) (the delta method: dtheta/du = diag(s, 1, 1)), by a dense inverse of
 * A; with and without a design basis for (b1, b2) (a linear change of
 * variables: the same covariance); and its diagonal against
 * gmm_fit_std_errors. */
START_TEST(test_lincomb_var_dense)
{
    char n0[] = "v", n1[] = "b1", n2[] = "b2";
    char *names[3] = {n0, n1, n2};
    double val[3] = {exp(QM[0]), QM[1], QM[2]};
    gmm_scale sc[3] = {GMM_SCALE_LOG, GMM_SCALE_IDENTITY, GMM_SCALE_IDENTITY};
    int fixed[3] = {0, 0, 0};
    const size_t lidx[2] = {1, 2};
    const double R[4] = {2.0, -0.7, 0.0, 0.4};
    gmm_objective o = {.nparam = 3, .name = names, .value = val, .scale = sc, .fixed = fixed,
                       .eval = quad_eval, .lin_s = 1.0};
    /* A^-1 by cofactors */
    const double *a = QA;
    double det = a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
                 a[2] * (a[3] * a[7] - a[4] * a[6]);
    double inv[9] = {(a[4] * a[8] - a[5] * a[7]) / det, (a[2] * a[7] - a[1] * a[8]) / det,
                     (a[1] * a[5] - a[2] * a[4]) / det, (a[5] * a[6] - a[3] * a[8]) / det,
                     (a[0] * a[8] - a[2] * a[6]) / det, (a[2] * a[3] - a[0] * a[5]) / det,
                     (a[3] * a[7] - a[4] * a[6]) / det, (a[1] * a[6] - a[0] * a[7]) / det,
                     (a[0] * a[4] - a[1] * a[3]) / det};
    const double rows[4 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 2.5, 0.7, -1.3};
    for (int basis = 0; basis < 2; basis++) {
        o.lin_n = basis ? 2 : 0;
        o.lin_idx = basis ? lidx : NULL;
        o.lin_R = basis ? R : NULL;
        o.lin_s = basis ? 3.0 : 1.0;
        double var[4], se[3];
        ck_assert_msg(gmm_fit_lincomb_var(&o, rows, 4, var) == GMM_OK, "%s", gmm_error_message());
        ck_assert_int_eq(gmm_fit_std_errors(&o, se), GMM_OK);
        for (size_t r = 0; r < 4; r++) {
            const double *ar = rows + r * 3;
            double g[3] = {ar[0] * val[0], ar[1], ar[2]}, want = 0.0;
            for (size_t i = 0; i < 3; i++)
                for (size_t j = 0; j < 3; j++)
                    want += g[i] * inv[i * 3 + j] * g[j];
            ck_assert_msg(fabs(var[r] - want) <= 1e-8 * want, "basis %d, row %zu: %.17g, dense %.17g",
                          basis, r, var[r], want);
            if (r < 3)
                ck_assert_msg(fabs(se[r] * se[r] - var[r]) <= 1e-12 * var[r],
                              "basis %d: se[%zu]^2 %.17g, var %.17g", basis, r, se[r] * se[r],
                              var[r]);
        }
        /* a fixed parameter carries no error: its entries count for nothing */
        fixed[1] = 1;
        o.lin_n = 0;
        double v1;
        const double only1[3] = {0.0, 1.0, 0.0};
        ck_assert_int_eq(gmm_fit_lincomb_var(&o, only1, 1, &v1), GMM_OK);
        ck_assert(v1 == 0.0);
        fixed[1] = 0;
    }
}
END_TEST

Suite *infer_coef_basis_suite(void)
{
    Suite *s = suite_create("infer_coef_basis");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_basis_r_and_aliasing);
    tcase_add_test(tc, test_fit_invariant_to_shift_and_scale);
    tcase_add_test(tc, test_joint_prior_centred);
    tcase_add_test(tc, test_lincomb_var_dense);
    suite_add_tcase(s, tc);
    return s;
}
