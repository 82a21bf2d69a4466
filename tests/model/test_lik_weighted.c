/* test_lik_weighted.c -- prior weights in a row's likelihood
 * (gmm_lik_eval_weighted): the Gaussian's N(y; f, variance / w) against
 * GSL's density and its closed-form derivatives, every other family's w
 * times gmm_lik_eval's row, the gradient in the parameters against GSL's
 * central differences (gsl_deriv_central, its error estimate in the
 * tolerance), the row constants' path equal to the plain one, and w = 0 a
 * row that contributes nothing. */
#include <check.h>
#include <float.h>
#include <gsl/gsl_deriv.h>
#include <gsl/gsl_randist.h>
#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#include "gmm/likelihood.h"
#include "support/tu_model.h"

#define EPS DBL_EPSILON

static const double W[] = {0.0, 0.3, 1.0, 2.5, 17.0};
#define NW (sizeof W / sizeof W[0])

/* |a - b| <= tol max(1, |b|) */
static int near(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1.0, fabs(b)); }

START_TEST(test_gaussian_is_variance_over_w)
{
    gmm_lik l = tu_lik_of("gaussian(variance=0.7)", NAN);
    double v = l.par[0], y = 1.9, f = -0.4, r = y - f;
    for (size_t i = 1; i < NW; i++) {
        double w = W[i], out[4], dp[3];
        gmm_lik_eval_weighted(&l, y, 1.0, w, NULL, f, out, dp);
        double s2 = v / w;
        ck_assert_msg(near(out[0], log(gsl_ran_gaussian_pdf(r, sqrt(s2))), 32 * EPS),
                      "w=%g: %.17g", w, out[0]);
        ck_assert(near(out[1], w * r / v, 32 * EPS));
        ck_assert(near(out[2], -w / v, 32 * EPS));
        ck_assert(fabs(out[3]) == 0.0);
        /* d/dv of -log(2 pi v / w) / 2 - w r^2 / (2 v) and of d1, d2 */
        ck_assert(near(dp[0], -0.5 / v + 0.5 * w * r * r / (v * v), 64 * EPS));
        ck_assert(near(dp[1], -w * r / (v * v), 64 * EPS));
        ck_assert(near(dp[2], w / (v * v), 64 * EPS));
    }
}
END_TEST

START_TEST(test_others_are_w_times_the_row)
{
    const char *specs[] = {"poisson", "binomial", "bernoulli", "negbinomial(dispersion=1.7)",
                           "studentt(df=3, scale=0.8)"};
    const double ys[] = {3.0, 2.0, 1.0, 5.0, -0.6}, es[] = {2.5, 7.0, 1.0, 0.4, 1.0};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        gmm_lik l = tu_lik_of(specs[k], NAN);
        size_t np = l.type->nparam;
        double one[4], dp1[3 * GMM_LIK_MAXPARAM] = {0};
        gmm_lik_eval(&l, ys[k], es[k], 0.35, one, np ? dp1 : NULL);
        for (size_t i = 0; i < NW; i++) {
            double out[4], dp[3 * GMM_LIK_MAXPARAM] = {0};
            gmm_lik_eval_weighted(&l, ys[k], es[k], W[i], NULL, 0.35, out, np ? dp : NULL);
            for (int j = 0; j < 4; j++)
                ck_assert_msg(out[j] == W[i] * one[j], "%s w=%g out[%d] %.17g, w x %.17g",
                              specs[k], W[i], j, out[j], W[i] * one[j]);
            for (size_t j = 0; j < 3 * np; j++)
                ck_assert(dp[j] == W[i] * dp1[j]);
        }
    }
}
END_TEST

typedef struct {
    gmm_lik lik;
    double y, e, w, f;
    int which;
} wfd;

static double wfd_fn(double x, void *p)
{
    wfd *c = p;
    gmm_lik l = c->lik;
    double out[4];
    l.par[0] = x;
    gmm_lik_eval_weighted(&l, c->y, c->e, c->w, NULL, c->f, out, NULL);
    return out[c->which];
}

/* d out[0..2] / d par[0] against central differences: the Gaussian's chain
 * rule through variance / w, the negative binomial's w times its own */
START_TEST(test_dpar_fd)
{
    const char *specs[] = {"gaussian(variance=0.7)", "negbinomial(dispersion=1.7)"};
    const double ys[] = {1.9, 4.0}, es[] = {1.0, 1.5};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 1; i < NW; i++) {
            wfd c = {tu_lik_of(specs[k], NAN), ys[k], es[k], W[i], 0.2, 0};
            double out[4], dp[3 * GMM_LIK_MAXPARAM];
            gmm_lik_eval_weighted(&c.lik, c.y, c.e, c.w, NULL, c.f, out, dp);
            for (int j = 0; j < 3; j++) {
                c.which = j;
                gsl_function F = {wfd_fn, &c};
                double fd, abserr, x = c.lik.par[0];
                gsl_deriv_central(&F, x, 1e-2 * x, &fd, &abserr);
                ck_assert_msg(fabs(fd - dp[j]) <= 2 * abserr + 64 * EPS * fmax(1.0, fabs(fd)),
                              "%s w=%g d out[%d]/dpar: %.17g, fd %.17g (abserr %.2g)", specs[k],
                              W[i], j, dp[j], fd, abserr);
            }
        }
}
END_TEST

START_TEST(test_constants_and_zero_weight)
{
    const char *specs[] = {"gaussian(variance=2)", "poisson", "negbinomial(dispersion=0.5)",
                           "binomial"};
    const double ys[] = {0.3, 4.0, 6.0, 3.0}, es[] = {1.0, 2.0, 0.5, 8.0};
    for (size_t k = 0; k < 4; k++) {
        gmm_lik l = tu_lik_of(specs[k], NAN);
        double c[GMM_LIK_MAXCONST + 1];
        gmm_lik_row_const(&l, ys[k], es[k], c);
        for (size_t i = 0; i < NW; i++) {
            double a[4], b[4], da[3 * GMM_LIK_MAXPARAM], db[3 * GMM_LIK_MAXPARAM];
            size_t np = l.type->nparam;
            gmm_lik_eval_weighted(&l, ys[k], es[k], W[i], NULL, -0.8, a, np ? da : NULL);
            gmm_lik_eval_weighted(&l, ys[k], es[k], W[i], c, -0.8, b, np ? db : NULL);
            for (int j = 0; j < 4; j++) {
                ck_assert_msg(a[j] == b[j], "%s w=%g out[%d]: %.17g vs %.17g with constants",
                              specs[k], W[i], j, a[j], b[j]);
                if (W[i] == 0.0)
                    ck_assert(a[j] == 0.0);
            }
            for (size_t j = 0; j < 3 * np; j++)
                ck_assert(da[j] == db[j] && (W[i] != 0.0 || da[j] == 0.0));
        }
    }
}
END_TEST

/* gmm_lik_expect_weighted: the Gaussian's E log N(y; f, v / w) in closed
 * form, -log(2 pi v / w) / 2 - w ((y - mu)^2 + s2) / (2 v), and its
 * derivatives; the others w times gmm_lik_expect. */
START_TEST(test_expect_weighted)
{
    gmm_lik g = tu_lik_of("gaussian(variance=0.7)", NAN);
    double v = g.par[0], y = 1.1, mu = 0.2, s2 = 0.3;
    for (size_t i = 1; i < NW; i++) {
        double w = W[i], out[3], dp[1];
        ck_assert_int_eq(gmm_lik_expect_weighted(&g, y, 1.0, w, mu, s2, 0, out, dp), GMM_OK);
        double q = (y - mu) * (y - mu) + s2;
        ck_assert(near(out[0], -0.5 * log(2.0 * M_PI * v / w) - 0.5 * w * q / v, 32 * EPS));
        ck_assert(near(out[1], w * (y - mu) / v, 32 * EPS));
        ck_assert(near(out[2], -0.5 * w / v, 32 * EPS));
        ck_assert(near(dp[0], -0.5 / v + 0.5 * w * q / (v * v), 64 * EPS));
    }
    gmm_lik nb = tu_lik_of("negbinomial(dispersion=1.3)", NAN);
    double one[3], d1[1];
    ck_assert_int_eq(gmm_lik_expect(&nb, 4.0, 1.5, 0.4, 0.2, 20, one, d1), GMM_OK);
    for (size_t i = 0; i < NW; i++) {
        double out[3], dp[1];
        ck_assert_int_eq(gmm_lik_expect_weighted(&nb, 4.0, 1.5, W[i], 0.4, 0.2, 20, out, dp),
                         GMM_OK);
        for (int j = 0; j < 3; j++)
            ck_assert(out[j] == W[i] * one[j]);
        ck_assert(dp[0] == W[i] * d1[0]);
    }
}
END_TEST

extern Suite *model_lik_weighted_suite(void);
Suite *model_lik_weighted_suite(void)
{
    Suite *s = suite_create("model_lik_weighted");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_gaussian_is_variance_over_w);
    tcase_add_test(tc, test_others_are_w_times_the_row);
    tcase_add_test(tc, test_dpar_fd);
    tcase_add_test(tc, test_constants_and_zero_weight);
    tcase_add_test(tc, test_expect_weighted);
    suite_add_tcase(s, tc);
    return s;
}
