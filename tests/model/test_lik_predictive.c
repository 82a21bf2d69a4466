/* test_lik_predictive.c -- gmm_lik_predictive and gmm_lik_response against
 * GSL adaptive quadrature of the same integrals. */
#include <check.h>
#include <gsl/gsl_integration.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/likelihood.h"

typedef struct {
    const gmm_lik *lik;
    double y, e, mu, s2, shift;
    int mean; /* 1: integrate E[y | f] N(f) instead of p(y | f) N(f) */
} pq;

static double integrand(double f, void *vp)
{
    const pq *q = vp;
    double out[4], r = f - q->mu;
    double ln = -0.5 * log(2.0 * M_PI * q->s2) - 0.5 * r * r / q->s2;
    if (q->mean)
        return q->lik->type->mean(q->lik->par, 1.0, f) * exp(ln);
    gmm_lik_eval(q->lik, q->y, q->e, f, out, NULL);
    return exp(out[0] + ln - q->shift);
}

START_TEST(test_predictive_vs_quadrature)
{
    const char *liks[] = {"poisson", "bernoulli", "negbinomial(dispersion=2.5)",
                          "gaussian(variance=0.4)", "binomial", "studentt(df=3, scale=0.3)",
                          "studentt(df=40, scale=0.05)"};
    /* studentt at y = 9: a t peak far out in the normal's tail, two modes */
    const double ys[][3] = {{0, 3, 250}, {0, 1, 1}, {0, 4, 60}, {-1.2, 0.3, 4.0},
                            {0, 5, 12}, {-1.2, 0.3, 9.0}, {-1.2, 0.3, 9.0}};
    const double mus[] = {-1.0, 0.7, 4.5}, s2s[] = {0.01, 0.5, 3.0};
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(2000);
    double worst = 0.0;
    for (size_t l = 0; l < 7; l++) {
        gmm_lik lik;
        ck_assert_int_eq(gmm_lik_parse(liks[l], &lik), GMM_OK);
        for (size_t iy = 0; iy < 3; iy++)
            for (size_t im = 0; im < 3; im++)
                for (size_t is = 0; is < 3; is++) {
                    double y = ys[l][iy], mu = mus[im], s2 = s2s[is], e = 1.3, lpd;
                    if (!lik.type->rowq)
                        e = 1.0;
                    else if (!strcmp(lik.type->rowq, "trials"))
                        e = 12.0;
                    ck_assert_int_eq(gmm_lik_predictive(&lik, y, e, mu, s2, &lpd), GMM_OK);
                    pq q = {&lik, y, e, mu, s2, lpd, 0};
                    gsl_function F = {integrand, &q};
                    double r, err;
                    /* the integrand is O(1) near the mode after the shift; a
                     * narrow likelihood peak far from mu (250 counts) is
                     * missed by qagi: break the range at mu and at the
                     * likelihood's own peak */
                    double ly = !lik.type->resp ? y
                                : lik.type->rowq && !strcmp(lik.type->rowq, "trials")
                                    ? gmm_lik_link(&lik, (y + 0.5) / (e + 1.0))
                                    : log((y + 0.5) / e);
                    double pts[4] = {-60.0, fmin(mu, ly), fmax(mu, ly), 60.0};
                    if (pts[1] == pts[2])
                        pts[2] += 1e-3;
                    ck_assert_int_eq(gsl_integration_qagp(&F, pts, 4, 1e-14, 1e-12, 2000, ws, &r,
                                                          &err),
                                     0);
                    double d = fabs(log(r)); /* lpd - log(quadrature) */
                    worst = fmax(worst, d);
                    /* 40-point adaptive Gauss-Hermite: measured worst 1.0e-8 (a
                     * zero count under a wide Gaussian: the likelihood's
                     * cliff is not polynomial) */
                    ck_assert_msg(d < 1e-7, "%s y=%g mu=%g s2=%g: lpd %.12g, quadrature %.12g",
                                  liks[l], y, mu, s2, lpd, lpd + log(r));
                }
    }
    gsl_integration_workspace_free(ws);
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "predictive density: worst |log ratio| to quadrature %.2g\n", worst);
}
END_TEST

START_TEST(test_response_mean)
{
    const char *liks[] = {"poisson", "bernoulli", "negbinomial(dispersion=2.5)", "binomial"};
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(2000);
    /* identity link: the mean is mu, the interval mu -/+ z sd */
    gmm_lik t;
    ck_assert_int_eq(gmm_lik_parse("studentt(df=3, scale=0.3)", &t), GMM_OK);
    double o[3];
    ck_assert_int_eq(gmm_lik_response(&t, 0.7, 0.25, 1.96, o), GMM_OK);
    ck_assert(o[0] == 0.7 && o[1] == 0.7 - 1.96 * 0.5 && o[2] == 0.7 + 1.96 * 0.5);
    for (size_t l = 0; l < 4; l++) {
        gmm_lik lik;
        ck_assert_int_eq(gmm_lik_parse(liks[l], &lik), GMM_OK);
        if (isnan(lik.par[0]))
            lik.par[0] = 1.0;
        for (double mu = -2.0; mu <= 2.0; mu += 2.0)
            for (double s2 = 0.1; s2 < 5.0; s2 *= 4.0) {
                double out[3];
                ck_assert_int_eq(gmm_lik_response(&lik, mu, s2, 1.96, out), GMM_OK);
                pq q = {&lik, 0, 1, mu, s2, 0, 1};
                gsl_function F = {integrand, &q};
                double r, err;
                double a = mu - 40.0 * sqrt(s2), b = mu + 40.0 * sqrt(s2);
                ck_assert_int_eq(gsl_integration_qags(&F, a, b, 0.0, 1e-11, 2000, ws, &r, &err),
                                 0);
                ck_assert_msg(fabs(out[0] - r) <= 1e-9 * fabs(r), "%s mu=%g s2=%g: %.12g vs %.12g",
                              liks[l], mu, s2, out[0], r);
                ck_assert(out[1] <= out[2]);
            }
    }
    gsl_integration_workspace_free(ws);
}
END_TEST

Suite *model_lik_predictive_suite(void)
{
    Suite *s = suite_create("model_lik_predictive");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_predictive_vs_quadrature);
    tcase_add_test(tc, test_response_mean);
    suite_add_tcase(s, tc);
    return s;
}
