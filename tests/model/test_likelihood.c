/* test_likelihood.c -- observation models: the table, spec parsing with
 * error offsets, data checks naming the row, log p against GSL's densities,
 * d1..d3 and the parameter gradients against GSL's central differences
 * (gsl_deriv_central, whose error estimate -- truncation of its 3-point
 * formula plus rounding of the values and of x +- h -- sets the tolerance;
 * see fd_compare for how the rounding of cancelling terms enters it),
 * the tails (|f| = 600) and the Poisson limit of the negative binomial, the
 * Gauss-Hermite rules (exact moments), and every expectation against GSL's
 * adaptive quadrature (QAGS) of log p times the normal density. */
#include <check.h>
#include <float.h>
#include <gsl/gsl_deriv.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/likelihood.h"
#include "support/tu_model.h"

#define EPS DBL_EPSILON

/* Set CK_VERBOSITY=verbose to see the measured errors. */
static int verbose(void)
{
    const char *v = getenv("CK_VERBOSITY");
    return v && strcmp(v, "verbose") == 0;
}

/* ---- table --------------------------------------------------------------------- */

START_TEST(test_table)
{
    const char *names[] = {"gaussian", "poisson", "binomial", "bernoulli", "negbinomial",
                           "studentt"};
    const char *rowq[] = {NULL, "exposure", "trials", NULL, "exposure", NULL};
    const char *resp[] = {NULL, "rate", "prob", "prob", "rate", NULL};
    const int conjugate[] = {1, 0, 0, 0, 0, 0};
    const size_t nparam[] = {1, 0, 0, 0, 1, 2};
    ck_assert_uint_eq(gmm_lik_ntypes(), 6);
    for (size_t i = 0; i < 6; i++) {
        const gmm_lik_type *t = gmm_lik_type_at(i);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_ptr_eq(gmm_lik_type_find(names[i]), t);
        ck_assert(rowq[i] ? t->rowq && !strcmp(t->rowq, rowq[i]) : !t->rowq);
        ck_assert(resp[i] ? t->resp && !strcmp(t->resp, resp[i]) : !t->resp);
        ck_assert(!t->rowq == !t->check_e);
        ck_assert(t->link && t->working && t->intercept);
        ck_assert(!t->nparam == !t->defaults);
        ck_assert_int_eq(!!t->conjugate, conjugate[i]);
        ck_assert_uint_eq(t->nparam, nparam[i]);
        ck_assert(t->nparam <= GMM_LIK_MAXPARAM);
        ck_assert(t->eval != NULL && t->mean != NULL);
    }
    ck_assert_ptr_null(gmm_lik_type_at(6));
    ck_assert_ptr_null(gmm_lik_type_find("poison"));
    ck_assert_ptr_null(gmm_lik_type_find(NULL));
    ck_assert(gmm_lik_type_find("gaussian")->expect != NULL);
    ck_assert(gmm_lik_type_find("poisson")->expect != NULL);
    ck_assert(gmm_lik_type_find("bernoulli")->expect == NULL);
    ck_assert(gmm_lik_type_find("negbinomial")->expect == NULL);

    /* means, including the logistic's tails */
    double par[GMM_LIK_MAXPARAM] = {2.0, 2.0};
    ck_assert(gmm_lik_type_find("gaussian")->mean(par, 1.0, -0.3) == -0.3);
    ck_assert(fabs(gmm_lik_type_find("poisson")->mean(par, 2.5, 0.7) - 2.5 * exp(0.7))
              <= 4 * EPS * 2.5 * exp(0.7));
    ck_assert(fabs(gmm_lik_type_find("negbinomial")->mean(par, 0.5, -1.2) - 0.5 * exp(-1.2))
              <= 4 * EPS * 0.5 * exp(-1.2));
    const gmm_lik_type *b = gmm_lik_type_find("bernoulli");
    ck_assert(b->mean(par, 1.0, 0.0) == 0.5);
    ck_assert(b->mean(par, 1.0, 800.0) == 1.0);
    ck_assert(b->mean(par, 1.0, -800.0) == 0.0);
    ck_assert(fabs(b->mean(par, 1.0, -40.0) - exp(-40.0)) <= 4 * EPS * exp(-40.0));
    ck_assert(fabs(b->mean(par, 1.0, 1.5) - 1.0 / (1.0 + exp(-1.5))) <= 4 * EPS);
}
END_TEST

/* ---- spec ---------------------------------------------------------------------- */

START_TEST(test_parse)
{
    gmm_lik l = tu_lik_of("poisson", NAN);
    ck_assert_ptr_eq(l.type, gmm_lik_type_find("poisson"));
    l = tu_lik_of("gaussian(variance=2)", NAN);
    ck_assert_ptr_eq(l.type, gmm_lik_type_find("gaussian"));
    ck_assert(l.par[0] == 2.0);
    l = tu_lik_of("  negbinomial( dispersion = 0.5 ) ", NAN);
    ck_assert(l.par[0] == 0.5);
    l = tu_lik_of("(bernoulli)", NAN);
    ck_assert_ptr_eq(l.type, gmm_lik_type_find("bernoulli"));
    l = tu_lik_of("negbinomial", NAN);
    ck_assert(isnan(l.par[0]));
    l = tu_lik_of("gaussian()", NAN);
    ck_assert(isnan(l.par[0]));

    /* defaults */
    double y[6] = {1.0, NAN, 3.0, 2.0, 6.0, 3.0};
    double var = (4.0 + 0.0 + 1.0 + 9.0 + 0.0) / 4.0; /* mean 3 */
    gmm_lik_fill_defaults(&l, y, 6);
    ck_assert(fabs(l.par[0] - 0.1 * var) <= 4 * EPS * var);
    l = tu_lik_of("gaussian(variance=5)", NAN);
    gmm_lik_fill_defaults(&l, y, 6);
    ck_assert(l.par[0] == 5.0);
    l = tu_lik_of("gaussian", NAN);
    gmm_lik_fill_defaults(&l, y, 1);
    ck_assert(l.par[0] == 1.0);
    double yc[3] = {2.0, NAN, 2.0};
    l = tu_lik_of("gaussian", NAN);
    gmm_lik_fill_defaults(&l, yc, 3);
    ck_assert(fabs(l.par[0] - 0.1) <= EPS);
    l = tu_lik_of("negbinomial", NAN);
    gmm_lik_fill_defaults(&l, y, 6);
    ck_assert(l.par[0] == 1.0);

    char buf[64];
    l = tu_lik_of("negbinomial", NAN);
    ck_assert_str_eq(gmm_lik_param_name(&l, 0, buf), "likelihood.dispersion");
    ck_assert_ptr_null(gmm_lik_param_name(&l, 1, buf));
    l = tu_lik_of("gaussian", NAN);
    ck_assert_str_eq(gmm_lik_param_name(&l, 0, buf), "likelihood.variance");
    l = tu_lik_of("poisson", NAN);
    ck_assert_ptr_null(gmm_lik_param_name(&l, 0, buf));
}
END_TEST

START_TEST(test_parse_errors)
{
    static const struct {
        const char *text;
        size_t index;
        const char *msg; /* a substring of the message */
    } cases[] = {
        {"poison", 0, "unknown likelihood 'poison' (likelihoods: gaussian, poisson, binomial, "
                      "bernoulli, negbinomial, studentt)"},
        {"  poison(x=1)", 2, "unknown likelihood"},
        {"gaussian(scale=1)", 9, "unknown parameter 'scale' of gaussian (parameters: variance)"},
        {"poisson(variance=1)", 8, "(poisson has none)"},
        {"gaussian(variance=0)", 9, "variance must be positive"},
        {"negbinomial(dispersion=-2)", 12, "dispersion must be positive"},
        {"negbinomial(dispersion=1e-400)", 12, "dispersion must be positive"},
        {"gaussian(variance=1, variance=2)", 21, "given twice"},
        {"poisson + gaussian", 8, "not a sum"},
        {"poisson*bernoulli", 7, "not a product"},
        {"(poisson + gaussian) * bernoulli", 9, "not a product"},
        {"poisson + ( (gaussian))", 8, "not a sum"},
        {"poisson(", 8, ""},
        {"", 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gmm_lik l = {NULL, {42.0, 42.0}};
        gmm_error_clear();
        gmm_status st = gmm_lik_parse(cases[i].text, &l);
        ck_assert_msg(st == GMM_EPARSE, "'%s': status %d", cases[i].text, (int)st);
        ck_assert_msg(gmm_error_index() == cases[i].index, "'%s': index %zu, expected %zu (%s)",
                      cases[i].text, gmm_error_index(), cases[i].index, gmm_error_message());
        ck_assert_msg(strstr(gmm_error_message(), cases[i].msg), "'%s': message '%s'",
                      cases[i].text, gmm_error_message());
        ck_assert_ptr_null(l.type); /* *out untouched on failure */
        ck_assert(l.par[0] == 42.0);
    }
    gmm_lik l;
    ck_assert_int_eq(gmm_lik_parse(NULL, &l), GMM_EINVAL);
    ck_assert_int_eq(gmm_lik_parse("poisson", NULL), GMM_EINVAL);
}
END_TEST

/* Every allocation failure inside the spec parser comes back as GMM_ENOMEM
 * with *out untouched (leaks: the sanitizer build). */
START_TEST(test_parse_out_of_memory)
{
    int ok = 0;
    for (long k = 0; k < 100 && !ok; k++) {
        gmm_lik l = {NULL, {42.0, 42.0}};
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_lik_parse("negbinomial(dispersion=2.5)", &l);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            ck_assert(l.type == gmm_lik_type_find("negbinomial") && l.par[0] == 2.5);
            ok = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert(l.type == NULL && l.par[0] == 42.0);
        }
    }
    ck_assert(ok);
}
END_TEST

/* ---- data checks ---------------------------------------------------------------------- */

static void check_fails(const char *spec, const double *y, const double *e, size_t n,
                        size_t row, const char *msg)
{
    gmm_lik l = tu_lik_of(spec, NAN);
    gmm_error_clear();
    ck_assert_int_eq(gmm_lik_check_data(&l, y, e, n), GMM_EINVAL);
    ck_assert_msg(gmm_error_index() == row, "%s: row %zu, expected %zu (%s)", spec,
                  gmm_error_index(), row, gmm_error_message());
    ck_assert_msg(strcmp(gmm_error_message(), msg) == 0, "%s: '%s', expected '%s'", spec,
                  gmm_error_message(), msg);
}

START_TEST(test_check_data)
{
    double y1[] = {0.0, 3.0, NAN, -1.0, 2.5};
    check_fails("poisson", y1, NULL, 5, 3, "y = -1 is not a non-negative integer (poisson)");
    double y2[] = {1.0, 2.5, -1.0};
    check_fails("negbinomial", y2, NULL, 3, 1,
                "y = 2.5 is not a non-negative integer (negbinomial)");
    double y3[] = {2.0 + 1.0 / 1024 / 1024 / 1024 / 1024};
    check_fails("poisson", y3, NULL, 1, 0,
                "y = 2.0000000000009095 is not a non-negative integer (poisson)");
    double y4[] = {0.0, 1.0, NAN, 1.0, 2.0, 0.5};
    check_fails("bernoulli", y4, NULL, 6, 4, "y = 2 is not 0 or 1 (bernoulli)");
    double y5[] = {1.0, INFINITY};
    check_fails("gaussian", y5, NULL, 2, 1, "y = inf is not finite");

    /* exposures: only on observed rows */
    double y6[] = {1.0, 2.0, 0.0, NAN, 4.0};
    double e6[] = {1.0, 2.0, 0.0, 1.0, 1.0};
    check_fails("poisson", y6, e6, 5, 2, "exposure = 0 must be positive and finite");
    double e7[] = {1.0, 2.0, 0.5, -3.0, NAN};
    check_fails("negbinomial", y6, e7, 5, 4, "missing exposure for an observed outcome");
    double e8[] = {1.0, INFINITY, 0.5, 1.0, 1.0};
    check_fails("poisson", y6, e8, 5, 1, "exposure = inf must be positive and finite");
    double y9[] = {0.0, 1.0}, e9[] = {1.0, 1.0};
    check_fails("bernoulli", y9, e9, 2, GMM_NO_INDEX, "the bernoulli likelihood takes no exposure");
    check_fails("gaussian", y9, e9, 2, GMM_NO_INDEX, "the gaussian likelihood takes no exposure");

    /* trials: a count k in 0..n, n a positive integer */
    double yb[] = {0.0, 3.0, NAN, 5.0}, eb[] = {1.0, 3.0, 0.0, 3.0};
    check_fails("binomial", yb, eb, 4, 3, "y = 5 exceeds trials = 3 (binomial)");
    double eb2[] = {1.0, 0.0, 1.0, 9.0};
    check_fails("binomial", yb, eb2, 4, 1, "trials = 0 must be a positive integer");
    double eb3[] = {1.0, 3.5, 1.0, 9.0};
    check_fails("binomial", yb, eb3, 4, 1, "trials = 3.5 must be a positive integer");
    double eb4[] = {NAN, 3.0, 1.0, 9.0};
    check_fails("binomial", yb, eb4, 4, 0, "missing trials for an observed outcome");
    double yb5[] = {0.0, 1.5}, eb5[] = {2.0, 2.0};
    check_fails("binomial", yb5, eb5, 2, 1, "y = 1.5 is not a non-negative integer (binomial)");
    check_fails("binomial", yb, NULL, 4, 1, "y = 3 exceeds trials = 1 (binomial)");
    check_fails("studentt", y5, NULL, 2, 1, "y = inf is not finite");
    check_fails("studentt", y9, e9, 2, GMM_NO_INDEX, "the studentt likelihood takes no exposure");
    {
        gmm_lik l = tu_lik_of("binomial", NAN);
        double e = 3.0, eb0 = 0.0;
        int col = -1;
        ck_assert_int_eq(gmm_lik_check_row(&l, 3.0, &e, &col), GMM_OK);
        ck_assert_int_eq(gmm_lik_check_row(&l, NAN, &eb0, &col), GMM_OK);
        ck_assert_int_eq(gmm_lik_check_row(&l, 4.0, &e, &col), GMM_EINVAL);
        ck_assert_int_eq(col, 0);
        ck_assert_str_eq(gmm_error_message(), "y = 4 exceeds trials = 3 (binomial)");
        ck_assert_int_eq(gmm_lik_check_row(&l, 0.0, &eb0, &col), GMM_EINVAL);
        ck_assert_int_eq(col, 1);
        l = tu_lik_of("poisson", NAN);
        ck_assert_int_eq(gmm_lik_check_row(&l, 2.0, &eb0, &col), GMM_EINVAL);
        ck_assert_int_eq(col, 1);
        ck_assert_str_eq(gmm_error_message(), "exposure = 0 must be positive and finite");
        l = tu_lik_of("bernoulli", NAN);
        ck_assert_int_eq(gmm_lik_check_row(&l, 1.0, &e, &col), GMM_EINVAL);
        ck_assert_int_eq(gmm_lik_check_row(&l, 1.0, NULL, &col), GMM_OK);
    }

    /* good data: NaN rows skipped whatever their exposure */
    gmm_lik l = tu_lik_of("poisson", NAN);
    double y10[] = {NAN, 0.0, 7.0, NAN, 1e300}, e10[] = {0.0, 1e-300, 3.0, NAN, 1.0};
    ck_assert_int_eq(gmm_lik_check_data(&l, y10, e10, 5), GMM_OK);
    ck_assert_int_eq(gmm_lik_check_data(&l, y10, NULL, 5), GMM_OK);
    l = tu_lik_of("bernoulli", NAN);
    double y11[] = {NAN, 0.0, 1.0, NAN};
    ck_assert_int_eq(gmm_lik_check_data(&l, y11, NULL, 4), GMM_OK);
    l = tu_lik_of("gaussian", NAN);
    double y12[] = {-2.5, NAN, 1e-300, 3.7};
    ck_assert_int_eq(gmm_lik_check_data(&l, y12, NULL, 4), GMM_OK);
    ck_assert_int_eq(gmm_lik_check_data(&l, NULL, NULL, 0), GMM_OK);
}
END_TEST

/* ---- evaluation: densities and tails -------------------------------------------------- */

/* log p against GSL's densities.  GSL's own error is the yardstick: it
 * forms exp(lngamma terms + k log(mu) - mu) (poisson) or exp(lngamma terms +
 * r log p + k log1p(-p)), p = r / (r + m) (negbinomial), and we take its
 * logarithm, so its absolute error is ~eps times (1 + the sum of those
 * terms' magnitudes), plus k eps p / (1 - p) = k eps r / m from 1 - p in
 * log1p(-p).
 * Tolerance: 8 times that sum. */
START_TEST(test_eval_vs_gsl_densities)
{
    double out[4], worst = 0.0; /* |log p - ref| / (the error sum) */
    int nchecked = 0;
    gmm_lik g = tu_lik_of("gaussian(variance=0.7)", NAN);
    for (double y = -3.0; y <= 3.0; y += 0.75)
        for (double f = -2.0; f <= 2.0; f += 0.5) {
            gmm_lik_eval(&g, y, 1.0, f, out, NULL);
            double ref = log(gsl_ran_gaussian_pdf(y - f, sqrt(0.7)));
            double B = EPS * (1.0 + fabs(log(2.0 * M_PI * 0.7)) / 2 + fabs(ref));
            ck_assert_msg(fabs(out[0] - ref) <= 8 * B, "gaussian y=%g f=%g", y, f);
            worst = fmax(worst, fabs(out[0] - ref) / B);
        }
    gmm_lik p = tu_lik_of("poisson", NAN);
    for (unsigned k = 0; k < 60; k += 7)
        for (double f = -3.0; f <= 4.0; f += 0.5)
            for (double e = 0.25; e < 20.0; e *= 4.0) {
                gmm_lik_eval(&p, k, e, f, out, NULL);
                double m = e * exp(f), ref = log(gsl_ran_poisson_pdf(k, m));
                if (!(ref > -700.0)) /* GSL's pdf is subnormal or 0 */
                    continue;
                nchecked++;
                double B = EPS * (1.0 + k * fabs(log(m)) + m + lgamma(k + 1.0));
                ck_assert_msg(fabs(out[0] - ref) <= 8 * B, "poisson y=%u e=%g f=%g", k, e, f);
                worst = fmax(worst, fabs(out[0] - ref) / B);
            }
    gmm_lik b = tu_lik_of("bernoulli", NAN);
    for (unsigned k = 0; k < 2; k++)
        for (double f = -6.0; f <= 6.0; f += 0.5) {
            gmm_lik_eval(&b, k, 1.0, f, out, NULL);
            double pp = 1.0 / (1.0 + exp(-f)), ref = log(gsl_ran_bernoulli_pdf(k, pp));
            double B = EPS * (1.0 + fabs(ref) + (k ? 0.0 : pp / (1.0 - pp))); /* 1 - p */
            ck_assert_msg(fabs(out[0] - ref) <= 8 * B, "bernoulli y=%u f=%g", k, f);
            worst = fmax(worst, fabs(out[0] - ref) / B);
        }
    for (double r = 0.3; r < 100.0; r *= 3.0) {
        gmm_lik nb = {gmm_lik_type_find("negbinomial"), {r, 0.0}};
        for (unsigned k = 0; k < 80; k += 9)
            for (double f = -3.0; f <= 4.0; f += 0.5)
                for (double e = 0.25; e < 20.0; e *= 4.0) {
                    gmm_lik_eval(&nb, k, e, f, out, NULL);
                    double m = e * exp(f), pp = r / (r + m);
                    double ref = log(gsl_ran_negative_binomial_pdf(k, pp, r));
                    if (!(ref > -700.0))
                        continue;
                    nchecked++;
                    double B = EPS * (1.0 + fabs(lgamma(k + r)) + fabs(lgamma(r))
                                      + lgamma(k + 1.0) + r * fabs(log(pp))
                                      + k * fabs(log1p(-pp)) + k * r / m);
                    ck_assert_msg(fabs(out[0] - ref) <= 8 * B, "negbinomial y=%u e=%g f=%g r=%g",
                                  k, e, f, r);
                    worst = fmax(worst, fabs(out[0] - ref) / B);
                }
    }
    if (verbose())
        printf("log p vs GSL densities: %d count points, worst |difference| / (GSL's error "
               "sum) %.2f\n",
               nchecked, worst);
    ck_assert_int_ge(nchecked, 700);
}
END_TEST

/* binomial against GSL's pmf (R's dbinom: the full log C(n, k)), and
 * studentt against GSL's t density of (y - f) / s over s (R's dt with a
 * scale).  GSL's error: eps times the magnitudes of the log terms it
 * exponentiates; tolerance 8 times that. */
START_TEST(test_eval_binomial_studentt)
{
    double out[4];
    int nchecked = 0;
    gmm_lik b = tu_lik_of("binomial", NAN);
    const unsigned ns[] = {1, 2, 7, 40, 300};
    for (size_t in = 0; in < 5; in++)
        for (unsigned k = 0; k <= ns[in]; k += 1 + ns[in] / 9)
            for (double f = -4.0; f <= 4.0; f += 0.5) {
                double n = ns[in];
                gmm_lik_eval(&b, k, n, f, out, NULL);
                double pp = 1.0 / (1.0 + exp(-f)), ref = log(gsl_ran_binomial_pdf(k, pp, ns[in]));
                if (!(ref > -700.0))
                    continue;
                nchecked++;
                double B = EPS * (1.0 + 3.0 * lgamma(n + 1.0) + n * (fabs(f) + 1.0)
                                  + k * pp / (1.0 - pp) + fabs(ref));
                ck_assert_msg(fabs(out[0] - ref) <= 8 * B, "binomial k=%u n=%g f=%g: %.17g vs %.17g",
                              k, n, f, out[0], ref);
                double lc = gsl_sf_lnchoose(ns[in], k);
                ck_assert_msg(fabs(out[0] - (lc + k * log(pp) + (n - k) * log1p(-pp)))
                                  <= 8 * B, "binomial k=%u n=%g f=%g", k, n, f);
            }
    const double nus[] = {0.5, 1.0, 3.0, 30.0, 1e6}, ss[] = {0.05, 1.0, 20.0};
    for (size_t iv = 0; iv < 5; iv++)
        for (size_t is = 0; is < 3; is++) {
            gmm_lik t = {gmm_lik_type_find("studentt"), {nus[iv], ss[is]}};
            for (double y = -3.0; y <= 3.0; y += 1.5)
                for (double f = -2.0; f <= 2.0; f += 0.5) {
                    gmm_lik_eval(&t, y, 1.0, f, out, NULL);
                    double z = (y - f) / ss[is];
                    double ref = log(gsl_ran_tdist_pdf(z, nus[iv]) / ss[is]);
                    nchecked++;
                    /* GSL's lngamma difference loses eps nu log nu for large nu */
                    double B = EPS * (1.0 + fabs(ref) + fabs(log(ss[is]))
                                      + nus[iv] * log1p(nus[iv]) + (nus[iv] + 1) * z * z);
                    ck_assert_msg(fabs(out[0] - ref) <= 8 * B,
                                  "studentt nu=%g s=%g y=%g f=%g: %.17g vs %.17g", nus[iv],
                                  ss[is], y, f, out[0], ref);
                }
        }
    ck_assert_int_ge(nchecked, 600);
}
END_TEST

/* bernoulli, and binomial with one trial, give the bits of the Bernoulli
 * evaluation below (the family's formulas before it was one case of the
 * binomial): fits of 0/1 data are unchanged to the last digit. */
static void bernoulli_ref(double y, double f, double out[4])
{
    double t = exp(-fabs(f)), p, q;
    if (f >= 0.0) {
        p = 1.0 / (1.0 + t);
        q = t * p;
    } else {
        q = 1.0 / (1.0 + t);
        p = t * q;
    }
    double l = log1p(t);
    out[0] = y == 1.0 ? -(fmax(-f, 0.0) + l) : -(fmax(f, 0.0) + l);
    out[1] = y == 1.0 ? q : -p;
    out[2] = -p * q;
    out[3] = p * q * tanh(0.5 * f);
}

START_TEST(test_bernoulli_is_binomial)
{
    gmm_lik b = tu_lik_of("bernoulli", NAN), bn = tu_lik_of("binomial", NAN);
    ck_assert(b.type != bn.type && b.type->eval == bn.type->eval);
    for (double y = 0.0; y <= 1.0; y += 1.0)
        for (double f = -750.0; f <= 750.0; f += 0.37) {
            double ref[4], o1[4], o2[4];
            bernoulli_ref(y, f, ref);
            gmm_lik_eval(&b, y, 1.0, f, o1, NULL);
            gmm_lik_eval(&bn, y, 1.0, f, o2, NULL);
            for (int k = 0; k < 4; k++)
                ck_assert_msg(o1[k] == ref[k] && o2[k] == ref[k] &&
                                  signbit(o1[k]) == signbit(ref[k]),
                              "y=%g f=%.17g out[%d]: %.17g %.17g vs %.17g", y, f, k, o1[k], o2[k],
                              ref[k]);
            ck_assert(b.type->mean(b.par, 1.0, f) == bn.type->mean(bn.par, 1.0, f));
        }
}
END_TEST

/* What callers ask of a family instead of its name. */
START_TEST(test_behaviour)
{
    const double y[] = {3.0, NAN, 0.0, 5.0, 1.0}, e[] = {4.0, 2.0, 1.0, 8.0, 2.0};
    double b;
    gmm_lik l = tu_lik_of("poisson", NAN);
    ck_assert_int_eq(gmm_lik_default_intercept(&l, y, e, 5, &b), GMM_OK);
    ck_assert(fabs(b - log(9.5 / 15.0)) <= 4 * EPS);
    ck_assert(fabs(gmm_lik_working(&l, 3.0, 4.0) - log(3.5 / 4.0)) <= 4 * EPS);
    ck_assert(isnan(gmm_lik_working(&l, NAN, 4.0)));
    l = tu_lik_of("binomial", NAN);
    ck_assert_int_eq(gmm_lik_default_intercept(&l, y, e, 5, &b), GMM_OK);
    ck_assert(fabs(b - log(9.5 / 16.0 / (1.0 - 9.5 / 16.0))) <= 8 * EPS);
    ck_assert(gmm_lik_working(&l, 3.0, 4.0) == 0.5);
    l = tu_lik_of("bernoulli", NAN); /* no trials: e is ignored, as the family reads none */
    const double y01[] = {1.0, NAN, 0.0, 1.0, 1.0};
    ck_assert_int_eq(gmm_lik_default_intercept(&l, y01, e, 5, &b), GMM_OK);
    ck_assert(fabs(b - log(3.5 / 5.0 / (1.0 - 3.5 / 5.0))) <= 8 * EPS);
    ck_assert(gmm_lik_working(&l, 1.0, 1.0) == 1.0 && gmm_lik_working(&l, 0.0, 1.0) == -1.0);
    l = tu_lik_of("gaussian", NAN);
    ck_assert_int_eq(gmm_lik_default_intercept(&l, y, NULL, 5, &b), GMM_OK);
    ck_assert(fabs(b - 2.25) <= 4 * EPS);
    /* studentt: the median, which an outlier does not move */
    l = tu_lik_of("studentt", NAN);
    const double yo[] = {1.0, 1e6, NAN, -2.0, 0.5, 0.75};
    ck_assert_int_eq(gmm_lik_default_intercept(&l, yo, NULL, 6, &b), GMM_OK);
    ck_assert(b == 0.75);
    ck_assert_int_eq(gmm_lik_default_intercept(&l, yo, NULL, 5, &b), GMM_OK);
    ck_assert(b == 0.75); /* 1, 1e6, -2, 0.5: (0.5 + 1) / 2 */
    ck_assert_int_eq(gmm_lik_default_intercept(&l, yo + 2, NULL, 1, &b), GMM_OK);
    ck_assert(b == 0.0);
    /* defaults: df 4, scale 1.4826 MAD / sqrt(10) (MAD of 1, 1e6, -2, 0.5,
     * 0.75 about 0.75: 0.25) */
    ck_assert_int_eq(gmm_lik_fill_defaults(&l, yo, 6), GMM_OK);
    ck_assert(l.par[0] == 4.0 && fabs(l.par[1] - 1.4826 * 0.25 * sqrt(0.1)) <= 4 * EPS);
    l = tu_lik_of("studentt(scale=2)", NAN);
    ck_assert_int_eq(gmm_lik_fill_defaults(&l, yo, 6), GMM_OK);
    ck_assert(l.par[0] == 4.0 && l.par[1] == 2.0);
    /* data that cannot be fitted: the maximum likelihood on a boundary */
    static const struct {
        const char *spec;
        double y[3], e[3];
        int trials;
        const char *msg; /* NULL: fine */
    } fits[] = {
        {"gaussian", {2.5, NAN, 2.5}, {0}, 0,
         "every observed c is 2.5: there is no variation to fit (its variance would go to 0)"},
        {"gaussian", {2.5, NAN, 2.0}, {0}, 0, NULL},
        {"studentt", {-1.0, -1.0, -1.0}, {0}, 0,
         "every observed c is -1: there is no variation to fit (its scale would go to 0)"},
        {"poisson", {0.0, NAN, 0.0}, {0}, 0,
         "every observed count in 'c' is 0: the rate's maximum likelihood is 0 (the intercept "
         "would go to -infinity)"},
        {"negbinomial", {0.0, 1.0, 0.0}, {0}, 0, NULL},
        {"bernoulli", {1.0, NAN, 1.0}, {0}, 0,
         "every observed 'c' is 1: the probability's maximum likelihood is 1 (the intercept "
         "would go to +infinity)"},
        {"bernoulli", {0.0, 0.0, 0.0}, {0}, 0,
         "every observed 'c' is 0: the probability's maximum likelihood is 0 (the intercept "
         "would go to -infinity)"},
        {"binomial", {2.0, 5.0, 1.0}, {2.0, 5.0, 1.0}, 1,
         "every observed 'c' equals its trials: the probability's maximum likelihood is 1 (the "
         "intercept would go to +infinity)"},
        {"binomial", {2.0, 2.0, 2.0}, {2.0, 5.0, 3.0}, 1, NULL},
        {"binomial", {0.0, NAN, 0.0}, {2.0, 5.0, 3.0}, 1,
         "every observed 'c' is 0: the probability's maximum likelihood is 0 (the intercept "
         "would go to -infinity)"},
    };
    for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
        l = tu_lik_of(fits[i].spec, NAN);
        gmm_status st = gmm_lik_check_fit_data(&l, fits[i].y, fits[i].trials ? fits[i].e : NULL,
                                               3, "c");
        ck_assert_msg(fits[i].msg ? st == GMM_EINVAL && !strcmp(gmm_error_message(), fits[i].msg)
                                  : st == GMM_OK,
                      "%s case %zu: %s", fits[i].spec, i, st ? gmm_error_message() : "ok");
    }
    /* link and inverse link */
    const char *specs[] = {"gaussian(variance=1)", "poisson", "binomial", "bernoulli",
                           "negbinomial(dispersion=2)", "studentt(df=3, scale=1)"};
    for (size_t i = 0; i < 6; i++) {
        l = tu_lik_of(specs[i], NAN);
        for (double f = -3.0; f <= 3.0; f += 0.5)
            ck_assert_msg(fabs(gmm_lik_link(&l, gmm_lik_inv_link(&l, f)) - f) <= 16 * EPS * 4.0,
                          "%s f=%g", specs[i], f);
    }
}
END_TEST

/* gmm_lik_eval_const given gmm_lik_row_const's constants is gmm_lik_eval
 * to the bit, parameter gradients included, for every family, on counts
 * either side of the negative binomial's switch (32), binomial rows with 0,
 * some and all successes, and f from -6 to 6; and the Poisson and binomial
 * log p are, to the bit, the expressions that form every term at each
 * evaluation (a cached constant must not regroup the sum: the samplers'
 * draws would change). */
START_TEST(test_eval_const_bitwise)
{
    const double ys[] = {0, 1, 2, 3, 7, 31, 32, 33, 60, 150, 1000, -1.5, 0.25};
    const double es[] = {1, 2.5, 5, 60, 1e4};
    size_t compared = 0;
    for (size_t i = 0; i < gmm_lik_ntypes(); i++) {
        const gmm_lik_type *t = gmm_lik_type_at(i);
        ck_assert_uint_le(t->nconst, GMM_LIK_MAXCONST);
        ck_assert_int_eq(t->nconst == 0, t->row_const == NULL);
        ck_assert_int_eq(t->nconst == 0, t->eval_const == NULL);
        gmm_lik l = {t, {0.8, 3.0}};
        for (size_t a = 0; a < sizeof ys / sizeof *ys; a++)
            for (size_t b = 0; b < (t->rowq ? sizeof es / sizeof *es : 1); b++) {
                double y = ys[a], e = es[b];
                if (gmm_lik_check_row(&l, y, t->rowq ? &e : NULL, NULL) != GMM_OK)
                    continue;
                double c[GMM_LIK_MAXCONST];
                gmm_lik_row_const(&l, y, e, c);
                for (double f = -6.0; f <= 6.0; f += 0.37) {
                    double o1[4], o2[4], d1[3 * GMM_LIK_MAXPARAM], d2[3 * GMM_LIK_MAXPARAM];
                    memset(d1, 0, sizeof d1);
                    memset(d2, 0, sizeof d2);
                    gmm_lik_eval(&l, y, e, f, o1, t->nparam ? d1 : NULL);
                    gmm_lik_eval_const(&l, y, e, c, f, o2, t->nparam ? d2 : NULL);
                    ck_assert_msg(memcmp(o1, o2, sizeof o1) == 0 && memcmp(d1, d2, sizeof d1) == 0,
                                  "%s y = %g e = %g f = %g: log p %.17g, with constants %.17g",
                                  t->name, y, e, f, o1[0], o2[0]);
                    double ref = o2[0];
                    if (strcmp(t->name, "poisson") == 0)
                        ref = (y > 0.0 ? y * (log(e) + f) - lgamma(y + 1.0) : 0.0) - e * exp(f);
                    if (strcmp(t->name, "binomial") == 0 && y > 0.0 && y < e) {
                        double sn = fmax(-f, 0.0) + log1p(exp(-fabs(f)));
                        double sp = fmax(f, 0.0) + log1p(exp(-fabs(f)));
                        ref = lgamma(e + 1.0) - lgamma(y + 1.0) - lgamma(e - y + 1.0)
                              - (y * sn + (e - y) * sp);
                    }
                    ck_assert_msg(memcmp(&ref, o2, sizeof ref) == 0,
                                  "%s y = %g e = %g f = %g: log p %.17g, term by term %.17g",
                                  t->name, y, e, f, o2[0], ref);
                    compared++;
                }
            }
    }
    ck_assert_uint_gt(compared, 1000);
}
END_TEST

/* gmm_lik_sum_const over many rows is gmm_lik_eval_const row by row to
 * the bit: out[0] summed in row order, out[1] per row, with and without
 * the gradient (the samplers' draws must not change). */
START_TEST(test_sum_const_bitwise)
{
    const double ys[] = {0, 1, 2, 3, 7, 31, 32, 33, 60, 150, 1000, -1.5, 0.25};
    const double es[] = {1, 2.5, 5, 60, 1e4};
    enum { MAXROW = 2000 };
    double *y = malloc(MAXROW * sizeof *y), *e = malloc(MAXROW * sizeof *e);
    double *f = malloc(MAXROW * sizeof *f), *g = malloc(MAXROW * sizeof *g);
    double *c = malloc(MAXROW * GMM_LIK_MAXCONST * sizeof *c);
    for (size_t i = 0; i < gmm_lik_ntypes(); i++) {
        const gmm_lik_type *t = gmm_lik_type_at(i);
        gmm_lik l = {t, {0.8, 3.0}};
        size_t m = 0, nc = t->nconst;
        for (size_t a = 0; a < sizeof ys / sizeof *ys; a++)
            for (size_t b = 0; b < (t->rowq ? sizeof es / sizeof *es : 1); b++) {
                double yy = ys[a], ee = t->rowq ? es[b] : 1.0;
                if (gmm_lik_check_row(&l, yy, t->rowq ? &ee : NULL, NULL) != GMM_OK)
                    continue;
                for (double ff = -6.0; ff <= 6.0 && m < MAXROW; ff += 0.37) {
                    y[m] = yy;
                    e[m] = ee;
                    f[m] = ff + 0.01 * (double)a;
                    gmm_lik_row_const(&l, yy, ee, c + m * nc);
                    m++;
                }
            }
        ck_assert_uint_gt(m, 60);
        double want = 0.0, out[4];
        for (size_t r = 0; r < m; r++) {
            if (nc)
                gmm_lik_eval_const(&l, y[r], e[r], c + r * nc, f[r], out, NULL);
            else
                gmm_lik_eval(&l, y[r], e[r], f[r], out, NULL);
            want += out[0];
            g[r] = NAN;
        }
        double got = gmm_lik_sum_const(&l, m, y, e, c, f, g);
        double got0 = gmm_lik_sum_const(&l, m, y, e, c, f, NULL);
        ck_assert_msg(memcmp(&got, &want, sizeof got) == 0 && memcmp(&got0, &want, sizeof got) == 0,
                      "%s: sum %.17g and %.17g, row by row %.17g", t->name, got, got0, want);
        for (size_t r = 0; r < m; r++) {
            if (nc)
                gmm_lik_eval_const(&l, y[r], e[r], c + r * nc, f[r], out, NULL);
            else
                gmm_lik_eval(&l, y[r], e[r], f[r], out, NULL);
            ck_assert_msg(memcmp(&g[r], &out[1], sizeof out[1]) == 0,
                          "%s row %zu: d log p / df %.17g, row by row %.17g", t->name, r, g[r],
                          out[1]);
        }
    }
    free(y);
    free(e);
    free(f);
    free(g);
    free(c);
}
END_TEST

START_TEST(test_eval_tails)
{
    double out[4];
    gmm_lik b = tu_lik_of("bernoulli", NAN);
    /* log sigma(f) and its derivatives keep full relative accuracy in both tails */
    gmm_lik_eval(&b, 1.0, 1.0, 600.0, out, NULL);
    ck_assert(fabs(out[0] + exp(-600.0)) <= 4 * EPS * exp(-600.0));
    ck_assert(fabs(out[1] - exp(-600.0)) <= 4 * EPS * exp(-600.0));
    ck_assert(fabs(out[2] + exp(-600.0)) <= 4 * EPS * exp(-600.0));
    ck_assert(fabs(out[3] - exp(-600.0)) <= 4 * EPS * exp(-600.0));
    gmm_lik_eval(&b, 0.0, 1.0, 600.0, out, NULL);
    ck_assert(out[0] == -600.0 && out[1] == -1.0);
    gmm_lik_eval(&b, 1.0, 1.0, -600.0, out, NULL);
    ck_assert(out[0] == -600.0 && out[1] == 1.0);
    ck_assert(fabs(out[3] + exp(-600.0)) <= 4 * EPS * exp(-600.0));
    gmm_lik_eval(&b, 0.0, 1.0, -35.0, out, NULL);
    ck_assert(fabs(out[0] + log1p(exp(-35.0))) <= 4 * EPS * exp(-35.0));
    ck_assert(fabs(out[1] + exp(-35.0) / (1.0 + exp(-35.0))) <= 4 * EPS * exp(-35.0));

    /* everything finite at |f| = 699 for every family, y = 0 and y > 0 */
    for (size_t i = 0; i < gmm_lik_ntypes(); i++) {
        gmm_lik l = {gmm_lik_type_at(i), {0.8, 0.8}};
        double dp[3 * GMM_LIK_MAXPARAM];
        for (int s = -1; s <= 1; s += 2)
            for (double y = 0.0; y <= 1.0; y += 1.0) {
                gmm_lik_eval(&l, y, 1.0, s * 699.0, out, dp);
                for (int k = 0; k < 4; k++)
                    ck_assert_msg(isfinite(out[k]), "%s y=%g f=%g out[%d]=%g", l.type->name,
                                  y, s * 699.0, k, out[k]);
                for (size_t k = 0; k < 3 * l.type->nparam; k++)
                    ck_assert_msg(isfinite(dp[k]), "%s dpar[%zu]", l.type->name, k);
            }
    }

    /* poisson at f = -600: log p = y (log e + f) - log y! to the last digits */
    gmm_lik p = tu_lik_of("poisson", NAN);
    gmm_lik_eval(&p, 3.0, 2.0, -600.0, out, NULL);
    ck_assert(fabs(out[0] - (3.0 * (log(2.0) - 600.0) - log(6.0))) <= 4 * EPS * 1800.0);
    ck_assert(out[1] == 3.0);
}
END_TEST

/* The negative binomial tends to the Poisson as r -> inf:
 * log NB - log P = ((y - m)^2 - y) / (2 r) + O(r^-2), so
 * d/dr log NB = -((y - m)^2 - y) / (2 r^2) (1 + O(max(y, m) / r)). */
START_TEST(test_negbinomial_poisson_limit)
{
    gmm_lik p = tu_lik_of("poisson", NAN);
    double out[4], ref[4], dp[3];
    for (double y = 0.0; y < 40.0; y += 3.0)
        for (double f = -1.0; f <= 3.0; f += 1.0) {
            double m = 1.5 * exp(f), c = 0.5 * ((y - m) * (y - m) - y);
            gmm_lik_eval(&p, y, 1.5, f, ref, NULL);
            double r = 1e12;
            gmm_lik nb = {gmm_lik_type_find("negbinomial"), {r, 0.0}};
            gmm_lik_eval(&nb, y, 1.5, f, out, NULL);
            /* the O(1/r) shift, plus rounding of terms of size y log r */
            ck_assert_msg(fabs(out[0] - ref[0] - c / r) <= 1e-12 + 64 * EPS * (y * 28 + m),
                          "y=%g f=%g: %.17g vs %.17g", y, f, out[0], ref[0]);
            /* d1 = (y - m) / (1 + m / r), d2 = -m (1 + y / r) / (1 + m / r)^2: shifts
             * -(y - m) m / r and -m (y - 2 m) / r, to O(r^-2), plus rounding */
            ck_assert(fabs(out[1] - ref[1] + (y - m) * m / r) <= 1e-15 + 64 * EPS * (y + m));
            ck_assert(fabs(out[2] - ref[2] + m * (y - 2 * m) / r) <= 1e-15 + 64 * EPS * m);
            /* the r-gradient, O(1/r^2), without cancellation: at r = 1e8 to
             * O(max(y, m) / r) = 1e-6 relative (tolerance 1e-5) */
            if (fabs(c) < 1.0)
                continue;
            r = 1e8;
            nb.par[0] = r;
            gmm_lik_eval(&nb, y, 1.5, f, out, dp);
            double want = -c / (r * r);
            ck_assert_msg(fabs(dp[0] - want) <= 1e-5 * fabs(want), "y=%g f=%g: %.6e vs %.6e",
                          y, f, dp[0], want);
        }
}
END_TEST

/* ---- derivatives against central differences ------------------------------------------- */

/* Size of the terms that make up out[which] (before any cancellation):
 * its rounding error is a few eps times this.  GSL's error estimate assumes
 * the function is correct to eps relative to its value, which a sum of
 * cancelling terms (the log-gammas of the negative binomial, y (log e + f)
 * against e exp(f)) is not. */
static double term_scale(const gmm_lik *l, double y, double e, double f, int which)
{
    const char *name = l->type->name;
    double r = l->par[0], m = e * exp(f);
    if (!strcmp(name, "gaussian"))
        return which == 0   ? 0.5 * fabs(log(2.0 * M_PI * r)) + 0.5 * (y - f) * (y - f) / r
               : which == 1 ? (fabs(y) + fabs(f)) / r
                            : 1.0 / r;
    if (!strcmp(name, "poisson"))
        return which == 0 ? y * (fabs(log(e)) + fabs(f)) + m + lgamma(y + 1.0)
               : which == 1 ? y + m
                            : m;
    if (!strcmp(name, "binomial")) {
        double p = 1.0 / (1.0 + exp(-f)), q = 1.0 / (1.0 + exp(f));
        double sn = log1p(exp(-f)), sp = log1p(exp(f));
        if (!isfinite(sn))
            sn = -f;
        if (!isfinite(sp))
            sp = f;
        return which == 0 ? lgamma(e + 1.0) + lgamma(y + 1.0) + lgamma(e - y + 1.0) + y * sn
                                + (e - y) * sp
               : which == 1 ? y * q + (e - y) * p
                            : e * p * q;
    }
    if (!strcmp(name, "studentt")) {
        double nu = l->par[0], s = l->par[1], a = nu * s * s, r2 = (y - f) * (y - f);
        return which == 0   ? 0.5 * nu * log1p(nu) + fabs(log(s)) + 0.5 * (nu + 1) * log1p(r2 / a)
               : which == 1 ? (nu + 1) * fabs(y - f) / (a + r2)
                            : (nu + 1) / (a + r2);
    }
    if (!strcmp(name, "bernoulli")) { /* no cancellation anywhere */
        double out[4];
        gmm_lik_eval(l, y, e, f, out, NULL);
        return fabs(out[which]);
    }
    /* negbinomial: the log-gamma part as summed for y < 32, by Stirling's
     * series for r > y >= 32, else as three log-gammas */
    double lg = 0.0;
    if (y < 32.0)
        for (double j = 0.0; j < y; j += 1.0)
            lg += fabs(log((r + j) / (j + 1.0)));
    else if (r > y)
        lg = y * (log(y + r) + 2.0) + lgamma(y + 1.0);
    else
        lg = fabs(lgamma(y + r)) + fabs(lgamma(r)) + lgamma(y + 1.0);
    double lz = f + log(e) - log(r), sp = log1p(exp(lz)), sn = log1p(exp(-lz));
    double p = 1.0 / (1.0 + exp(-lz)), q = 1.0 / (1.0 + exp(lz));
    return which == 0   ? lg + r * sp + (y > 0.0 ? y * sn : 0.0)
           : which == 1 ? y * q + r * p
                        : (y + r) * p * q;
}

typedef struct {
    gmm_lik lik;
    double y, e, f;
    int which;     /* out[which] */
    int param;     /* -1: vary f, else vary par[param] */
    double offset; /* added to the value (see fd_compare) */
} fd_ctx;

static double fd_fn(double x, void *p)
{
    fd_ctx *c = p;
    gmm_lik l = c->lik;
    double out[4], f = c->f;
    if (c->param < 0)
        f = x;
    else
        l.par[c->param] = x;
    gmm_lik_eval(&l, c->y, c->e, f, out, NULL);
    return out[c->which] + c->offset;
}

typedef struct {
    double worst;      /* max |a - fd| / tol */
    double worst_rel;  /* max |a - fd| / |a| where |a| >= 1e-3 */
    int n, coarse;     /* checks, of which limited by cancellation */
} fd_stats;

/* Differentiate out[which] + 4 T, T = term_scale, a constant shift that
 * makes GSL's rounding estimate (eps times the values) see the rounding of
 * the cancelling terms, and check
 *   |analytic - fd| <= 2 abserr + 32 eps max(|a|, |fd|, T / xs):
 * abserr is GSL's estimate for its 5-point result (the 3-point formula's
 * truncation error -- an over-estimate -- plus the rounding of the values
 * and of x +- h), factor 2 margin; the last term is the analytic value's
 * own rounding, its terms being ~ T / (the scale of x: 1 for f, x for a
 * parameter).  The check must mean something: abserr <= 1e-6 max(|a|, 1e-3),
 * or else (a derivative near 0, or a differenced value that is a
 * cancellation, d1 = y - lambda with lambda << y) abserr <= 1e-8 T: within
 * 300 times the eps^(2/3) T that central differences reach at best. */
static void fd_compare(fd_ctx *c, double x, double h, double analytic, fd_stats *s,
                       const char *what)
{
    gmm_lik l = c->lik;
    double f = c->f;
    if (c->param < 0)
        f = x;
    else
        l.par[c->param] = x;
    double T = term_scale(&l, c->y, c->e, f, c->which);
    c->offset = 4.0 * T;
    gsl_function F = {fd_fn, c};
    double fd, abserr;
    gsl_deriv_central(&F, x, h, &fd, &abserr);
    double xs = c->param < 0 ? 1.0 : x;
    double tol = 2.0 * abserr + 32 * EPS * fmax(fmax(fabs(analytic), fabs(fd)), T / xs);
    double err = fabs(analytic - fd);
    ck_assert_msg(err <= tol,
                  "%s %s y=%g e=%g f=%g par=%g: analytic %.17g, fd %.17g (abserr %.3g)",
                  c->lik.type->name, what, c->y, c->e, c->f, c->lik.par[0], analytic, fd,
                  abserr);
    int coarse = abserr > 1e-6 * fmax(fabs(analytic), 1e-3);
    ck_assert_msg(!coarse || abserr <= 1e-8 * T,
                  "%s %s y=%g e=%g f=%g par=%g: abserr %.3g for %.6g", c->lik.type->name, what,
                  c->y, c->e, c->f, c->lik.par[0], abserr, analytic);
    s->coarse += coarse;
    s->worst = fmax(s->worst, err / tol);
    if (fabs(analytic) >= 1e-3)
        s->worst_rel = fmax(s->worst_rel, err / fabs(analytic));
    s->n++;
}

static const double F_GRID[] = {-600.0, -30.0, -5.0, -0.7, 0.0, 0.3, 2.0, 8.0, 30.0, 600.0};
#define NF (sizeof F_GRID / sizeof F_GRID[0])

static void check_family_fd(const char *spec, const double *ys, size_t ny, const double *es,
                            size_t ne, fd_stats *s)
{
    gmm_lik l = tu_lik_of(spec, NAN);
    for (size_t iy = 0; iy < ny; iy++)
        for (size_t ie = 0; ie < ne; ie++)
            for (size_t jf = 0; jf < NF; jf++) {
                fd_ctx c = {l, ys[iy], es[ie], F_GRID[jf], 0, -1, 0.0};
                double out[4], dp[3 * GMM_LIK_MAXPARAM];
                gmm_lik_eval(&l, c.y, c.e, c.f, out, dp);
                for (int k = 0; k < 3; k++) {
                    c.which = k;
                    /* first step 2^-7; GSL adapts it */
                    fd_compare(&c, c.f, 0x1p-7, out[k + 1], s,
                               k == 0 ? "d1" : k == 1 ? "d2" : "d3");
                }
                for (size_t p = 0; p < l.type->nparam; p++)
                    for (int k = 0; k < 3; k++) {
                        c.which = k;
                        c.param = (int)p;
                        double x = l.par[p];
                        fd_compare(&c, x, 1e-2 * x, dp[3 * p + (size_t)k], s, "dpar");
                    }
            }
}

START_TEST(test_derivatives_fd)
{
    static const double yg[] = {-1.3, 0.0, 2.7}, yc[] = {0, 1, 3, 17, 31, 32, 250},
                        yb[] = {0, 1}, e1[] = {1.0}, ec[] = {1.0, 0.25, 40.0},
                        ybn[] = {0, 1, 3, 17}, ebn[] = {17.0, 40.0, 250.0},
                        yt[] = {-1.3, 0.0, 2.7, 40.0};
    const char *specs[] = {"gaussian(variance=0.7)", "gaussian(variance=3)", "poisson",
                           "bernoulli", "negbinomial(dispersion=0.3)",
                           "negbinomial(dispersion=2.5)", "negbinomial(dispersion=40)",
                           "negbinomial(dispersion=1000)", "binomial",
                           "studentt(df=0.7, scale=0.2)", "studentt(df=3, scale=1.5)",
                           "studentt(df=60, scale=0.05)"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        fd_stats s = {0};
        const char *sp = specs[i];
        if (!strncmp(sp, "gaussian", 8))
            check_family_fd(sp, yg, 3, e1, 1, &s);
        else if (!strcmp(sp, "bernoulli"))
            check_family_fd(sp, yb, 2, e1, 1, &s);
        else if (!strcmp(sp, "binomial")) {
            check_family_fd(sp, yb, 2, e1, 1, &s);
            check_family_fd(sp, ybn, 4, ebn, 3, &s);
        } else if (!strncmp(sp, "studentt", 8))
            check_family_fd(sp, yt, 4, e1, 1, &s);
        else
            check_family_fd(sp, yc, 7, ec, 3, &s);
        if (verbose())
            printf("%-28s %4d checks (%3d coarse): worst |a - fd| / tol %.2f, relative "
                   "%.1e (|a| >= 1e-3)\n",
                   sp, s.n, s.coarse, s.worst, s.worst_rel);
    }
}
END_TEST

/* ---- Gauss-Hermite rules ----------------------------------------------------------------- */

/* A test family: log p = f^k, or |f|^k when par[1] != 0 (k = par[0]); its
 * expectation is E f^k. */
static void power_eval(const double *par, double y, double e, double f, double out[4],
                       double *dpar)
{
    (void)y;
    (void)e;
    (void)dpar;
    out[0] = pow(par[1] != 0.0 ? fabs(f) : f, par[0]);
    out[1] = out[2] = out[3] = 0.0;
}

static const gmm_lik_type power_type = {
    .name = "power", .nparam = 1, .eval = power_eval,
};

START_TEST(test_gauss_hermite_moments)
{
    double worst = 0.0;
    for (size_t n = 1; n <= GMM_LIK_QUAD_MAX; n++) {
        double dfact = 1.0; /* (k - 1)!! */
        for (size_t k = 0; k < 2 * n && k <= 80; k++) {
            if (k >= 2 && k % 2 == 0)
                dfact *= (double)(k - 1);
            gmm_lik l = {&power_type, {(double)k, 0.0}};
            double out[3], abs_out[3];
            ck_assert_int_eq(gmm_lik_expect(&l, 0.0, 1.0, 0.0, 1.0, n, out, NULL), GMM_OK);
            /* scale: E|t|^k by the same rule (the sum of |terms|), = (k-1)!! for even k */
            gmm_lik la = {&power_type, {(double)k, 1.0}};
            ck_assert_int_eq(gmm_lik_expect(&la, 0.0, 1.0, 0.0, 1.0, n, abs_out, NULL), GMM_OK);
            double want = k % 2 ? 0.0 : dfact;
            double err = out[0] == want ? 0.0 : fabs(out[0] - want) / (k % 2 ? abs_out[0] : dfact);
            if (err > worst)
                worst = err;
            /* sum of n positive terms, nodes to ~1 ulp: k * n * eps */
            ck_assert_msg(err <= (double)(k + 2) * (double)n * EPS,
                          "n=%zu k=%zu: %.17g vs %.17g (rel %.3g)", n, k, out[0], want, err);
        }
    }
    if (verbose())
        printf("Gauss-Hermite moments k < 2n (k <= 80), n <= %d: worst relative error %.2e\n",
               GMM_LIK_QUAD_MAX, worst);
    /* shift and scale: E (mu + s t)^2 = mu^2 + s2 */
    gmm_lik l = {&power_type, {2.0, 0.0}};
    double out[3];
    ck_assert_int_eq(gmm_lik_expect(&l, 0.0, 1.0, 1.5, 0.49, 7, out, NULL), GMM_OK);
    ck_assert(fabs(out[0] - (2.25 + 0.49)) <= 16 * EPS * 2.74);
}
END_TEST

typedef struct {
    size_t start;
    double v[GMM_LIK_QUAD_MAX + 1][3];
} thread_job;

static void *thread_run(void *p)
{
    thread_job *j = p;
    gmm_lik l = {gmm_lik_type_find("bernoulli"), {0.0, 0.0}};
    for (size_t i = 0; i < GMM_LIK_QUAD_MAX; i++) {
        size_t n = 1 + (j->start + i) % GMM_LIK_QUAD_MAX;
        if (gmm_lik_expect(&l, 1.0, 1.0, 0.3, 2.0, n, j->v[n], NULL) != GMM_OK)
            j->v[n][0] = NAN;
    }
    return NULL;
}

/* Rules built concurrently by several threads (each fork of this test starts
 * with an empty cache) equal the ones built afterwards, bit for bit. */
START_TEST(test_rules_threads)
{
    enum { NT = 4 };
    static thread_job job[NT];
    pthread_t th[NT];
    for (size_t i = 0; i < NT; i++) {
        job[i].start = i % 2 ? 0 : 37 * i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_run, &job[i]), 0);
    }
    for (size_t i = 0; i < NT; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    gmm_lik l = {gmm_lik_type_find("bernoulli"), {0.0, 0.0}};
    for (size_t n = 1; n <= GMM_LIK_QUAD_MAX; n++) {
        double out[3];
        ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.3, 2.0, n, out, NULL), GMM_OK);
        for (size_t i = 0; i < NT; i++)
            ck_assert(memcmp(out, job[i].v[n], sizeof out) == 0);
    }
}
END_TEST

/* ---- expectations against adaptive quadrature ------------------------------------------- */

/* Integrands in t, f = mu + sd t, times the standard normal density:
 * kind 0: log p; 1: log p t / sd (d/dmu); 2: log p (t^2 - 1) / (2 s2) (d/ds2);
 * 3: dlogp/dpar_0; 4..7: |d1|, |d2| / 2, |dlogp/dpar_0|, |log p| (scales). */
typedef struct {
    const gmm_lik *lik;
    double y, e, mu, s2;
    int kind;
} ex_ctx;

static double ex_fn(double t, void *p)
{
    ex_ctx *c = p;
    double sd = sqrt(c->s2), out[4], dp[3 * GMM_LIK_MAXPARAM] = {0.0};
    gmm_lik_eval(c->lik, c->y, c->e, c->mu + sd * t, out, c->lik->type->nparam ? dp : NULL);
    double g;
    switch (c->kind) {
    case 0: g = out[0]; break;
    case 1: g = out[0] * t / sd; break;
    case 2: g = out[0] * (t * t - 1.0) / (2.0 * c->s2); break;
    case 3: g = dp[0]; break;
    case 4: g = fabs(out[1]); break;
    case 5: g = 0.5 * fabs(out[2]); break;
    case 6: g = fabs(dp[0]); break;
    default: g = fabs(out[0]); break;
    }
    return g * exp(-0.5 * t * t) / sqrt(2.0 * M_PI);
}

/* QAGS on t in [-38, 38] (the normal density is below 1e-310 outside). */
static double qags(ex_ctx *c, int kind, gsl_integration_workspace *ws, double *abserr)
{
    gsl_function F = {ex_fn, c};
    double r;
    c->kind = kind;
    /* identity link: p(y | f) peaks at f = y, narrowly for a small studentt
     * scale: break the range there */
    double ty = (c->y - c->mu) / sqrt(c->s2), pts[3] = {-38.0, ty, 38.0};
    int st = !c->lik->type->resp && fabs(ty) < 38.0
                 ? gsl_integration_qagp(&F, pts, 3, 0.0, 1e-13, ws->limit, ws, &r, abserr)
                 : gsl_integration_qags(&F, -38.0, 38.0, 0.0, 1e-13, ws->limit, ws, &r, abserr);
    ck_assert_msg(st == GSL_SUCCESS || st == GSL_EROUND, "qags: %s", gsl_strerror(st));
    return r;
}

typedef struct {
    double worst_rel; /* max |gh - ref| / S over value, d/dmu, d/ds2, dpar */
    double worst_ref; /* max reference abserr / S */
    int n;
} ex_stats;

/* Check gmm_lik_expect(nquad) at one point against QAGS: each of value,
 * d/dmu, d/ds2, dpar to tol * S, S = the integral of |integrand| in its
 * Stein form (E|log p|, E|d1|, E|d2|/2, E|dlogp/dpar|; = |reference| when
 * the integrand keeps one sign, as log p and d2 do). */
static void check_expect(const gmm_lik *l, double y, double e, double mu, double s2,
                         size_t nquad, double tol, gsl_integration_workspace *ws, ex_stats *s)
{
    ex_ctx c = {l, y, e, mu, s2, 0};
    double out[3], dp[GMM_LIK_MAXPARAM];
    ck_assert_int_eq(gmm_lik_expect(l, y, e, mu, s2, nquad, out, dp), GMM_OK);
    const int ref_kind[4] = {0, 1, 2, 3}, scale_kind[4] = {7, 4, 5, 6};
    const double got[4] = {out[0], out[1], out[2], dp[0]};
    const char *what[4] = {"value", "d/dmu", "d/ds2", "dpar"};
    for (int q = 0; q < (l->type->nparam ? 4 : 3); q++) {
        double ae, ae2;
        double ref = qags(&c, ref_kind[q], ws, &ae);
        double S = fmax(qags(&c, scale_kind[q], ws, &ae2), 1e-300);
        ck_assert_msg(ae <= 1e-10 * S, "%s %s y=%g mu=%g s2=%g par=%g,%g: reference error %.3g of scale %.3g",
                      l->type->name, what[q], y, mu, s2, l->par[0], l->par[1], ae, S);
        double err = fabs(got[q] - ref) / S;
        ck_assert_msg(err <= tol,
                      "%s %s y=%g e=%g mu=%g s2=%g n=%zu: %.17g vs %.17g (%.3g of scale %.3g)",
                      l->type->name, what[q], y, e, mu, s2, nquad, got[q], ref, err, S);
        s->worst_rel = fmax(s->worst_rel, err);
        s->worst_ref = fmax(s->worst_ref, ae / S);
    }
    s->n++;
}

static void expect_sweep(const char *spec, int closed_as_quad, const double *ys, size_t ny,
                         const double *s2s, size_t ns, size_t nquad, double tol,
                         gsl_integration_workspace *ws)
{
    static const double mus[] = {-3.0, -1.0, 0.0, 0.5, 2.0, 4.0};
    gmm_lik l = tu_lik_of(spec, NAN);
    gmm_lik_type copy;
    if (closed_as_quad) { /* the same family through Gauss-Hermite */
        copy = *l.type;
        copy.expect = NULL;
        l.type = &copy;
    }
    ex_stats s = {0};
    for (size_t iy = 0; iy < ny; iy++)
        for (size_t im = 0; im < sizeof mus / sizeof mus[0]; im++)
            for (size_t is = 0; is < ns; is++) {
                double e = !l.type->rowq                     ? 1.0
                           : !strcmp(l.type->rowq, "trials") ? (im % 2 ? 20.0 : 3.0)
                                                             : (im % 2 ? 0.6 : 2.0);
                check_expect(&l, ys[iy], e, mus[im], s2s[is], nquad, tol, ws, &s);
            }
    if (verbose())
        printf("E log p %-28s%s n=%3zu: %3d points, worst %.2e of scale (reference %.1e)\n",
               spec, closed_as_quad ? " (quadrature)" : "", nquad, s.n, s.worst_rel,
               s.worst_ref);
}

START_TEST(test_expectations)
{
    gsl_set_error_handler_off();
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(2000);
    static const double yg[] = {-1.3, 2.7}, yc[] = {0, 2, 17}, yb[] = {0, 1}, ybn[] = {0, 1, 3};
    /* The rule's error decays like exp(-c sqrt(n) / sqrt(s2)): log p of
     * bernoulli and negbinomial has complex singularities at distance pi
     * from the real f axis (those of log(1 + exp(f))).  Measured worst
     * relative errors (value, d/dmu, d/ds2):
     *   s2      0.3      1       2       4       9
     *   n = 20  6e-15   6e-9    2e-6    1e-4    5e-3
     *   n = 40  1e-15   1e-13   8e-10   6e-7    2e-4
     *   n = 100 1e-15   1e-15   1e-15   1e-11   1e-7
     * Tolerance 1e-8 of the scale below except at s2 = 9 (1e-6). */
    static const double moderate[] = {0.05, 0.3, 0.6}, mid[] = {1.0, 2.0}, large[] = {4.0},
                        huge[] = {9.0};
    /* moderate s2, default rule (20 points) */
    expect_sweep("gaussian(variance=0.7)", 0, yg, 2, moderate, 3, 0, 1e-8, ws);
    expect_sweep("poisson", 0, yc, 3, moderate, 3, 0, 1e-8, ws);
    expect_sweep("bernoulli", 0, yb, 2, moderate, 3, 0, 1e-8, ws);
    expect_sweep("negbinomial(dispersion=2.5)", 0, yc, 3, moderate, 3, 0, 1e-8, ws);
    expect_sweep("negbinomial(dispersion=0.4)", 0, yc, 3, moderate, 3, 0, 1e-8, ws);
    expect_sweep("binomial", 0, ybn, 3, moderate, 3, 0, 1e-8, ws);
    /* the closed forms agree with the quadrature, and with their own Gauss-Hermite */
    static const double all[] = {0.05, 0.6, 2.0, 4.0, 9.0};
    expect_sweep("gaussian(variance=0.7)", 0, yg, 2, all, 5, 0, 1e-8, ws);
    expect_sweep("poisson", 0, yc, 3, all, 5, 0, 1e-8, ws);
    expect_sweep("gaussian(variance=0.7)", 1, yg, 2, all, 5, 0, 1e-8, ws);
    expect_sweep("poisson", 1, yc, 3, moderate, 3, 0, 1e-8, ws);
    expect_sweep("poisson", 1, yc, 3, mid, 2, 40, 1e-8, ws);
    /* studentt: its own rule, graded towards the poles at y -/+ i scale
     * sqrt(df), whatever s2 and nquad -- scales far below sd included
     * (measured worst 6e-13 of scale) */
    static const double yt[] = {-1.3, 0.4, 2.7, 6.0};
    expect_sweep("studentt(df=3, scale=1)", 0, yt, 4, all, 5, 0, 1e-10, ws);
    expect_sweep("studentt(df=0.8, scale=0.02)", 0, yt, 4, all, 5, 0, 1e-10, ws);
    expect_sweep("studentt(df=50, scale=0.3)", 0, yt, 4, all, 5, 0, 1e-10, ws);
    /* larger s2 needs more points */
    expect_sweep("bernoulli", 0, yb, 2, mid, 2, 40, 1e-8, ws);
    expect_sweep("negbinomial(dispersion=2.5)", 0, yc, 3, mid, 2, 40, 1e-8, ws);
    expect_sweep("bernoulli", 0, yb, 2, large, 1, GMM_LIK_QUAD_MAX, 1e-8, ws);
    expect_sweep("negbinomial(dispersion=2.5)", 0, yc, 3, large, 1, GMM_LIK_QUAD_MAX, 1e-8, ws);
    expect_sweep("bernoulli", 0, yb, 2, huge, 1, GMM_LIK_QUAD_MAX, 1e-6, ws);
    expect_sweep("negbinomial(dispersion=2.5)", 0, yc, 3, huge, 1, GMM_LIK_QUAD_MAX, 1e-6, ws);
    gsl_integration_workspace_free(ws);
}
END_TEST

START_TEST(test_expect_edges)
{
    double out[3], ref[4], dp[GMM_LIK_MAXPARAM], dref[3 * GMM_LIK_MAXPARAM];
    /* s2 = 0: the point mass at mu; d/ds2 = d2 / 2 */
    for (size_t i = 0; i < gmm_lik_ntypes(); i++) {
        gmm_lik l = {gmm_lik_type_at(i), {1.7, 1.7}};
        double y = 1.0;
        ck_assert_int_eq(gmm_lik_expect(&l, y, 1.0, 0.4, 0.0, 0, out, dp), GMM_OK);
        gmm_lik_eval(&l, y, 1.0, 0.4, ref, dref);
        ck_assert(fabs(out[0] - ref[0]) <= 4 * EPS * fabs(ref[0]));
        ck_assert(fabs(out[1] - ref[1]) <= 4 * EPS * fabs(ref[1]));
        ck_assert(fabs(out[2] - 0.5 * ref[2]) <= 4 * EPS * fabs(ref[2]));
        for (size_t k = 0; k < l.type->nparam; k++)
            ck_assert(fabs(dp[k] - dref[3 * k]) <= 4 * EPS * fabs(dref[3 * k]));
    }
    gmm_lik l = tu_lik_of("bernoulli", NAN);
    double a[3], b[3];
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, 0.8, 0, a, NULL), GMM_OK);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, 0.8, GMM_LIK_QUAD_DEFAULT, b, NULL),
                     GMM_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, 0.8, GMM_LIK_QUAD_MAX + 1, a, NULL),
                     GMM_EINVAL);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, -1e-300, 0, a, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, NAN, 0, a, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_lik_expect(NULL, 1.0, 1.0, 0.2, 1.0, 0, a, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, 1.0, 0, NULL, NULL), GMM_EINVAL);
    l = tu_lik_of("poisson", NAN);
    ck_assert_int_eq(gmm_lik_expect(&l, 1.0, 1.0, 0.2, -1.0, 0, a, NULL), GMM_EINVAL);
}
END_TEST

extern Suite *model_likelihood_suite(void);
Suite *model_likelihood_suite(void)
{
    Suite *s = suite_create("model_likelihood");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_parse_out_of_memory);
    tcase_add_test(tc, test_check_data);
    tcase_add_test(tc, test_eval_vs_gsl_densities);
    tcase_add_test(tc, test_eval_binomial_studentt);
    tcase_add_test(tc, test_bernoulli_is_binomial);
    tcase_add_test(tc, test_behaviour);
    tcase_add_test(tc, test_eval_const_bitwise);
    tcase_add_test(tc, test_sum_const_bitwise);
    tcase_add_test(tc, test_eval_tails);
    tcase_add_test(tc, test_negbinomial_poisson_limit);
    tcase_add_test(tc, test_derivatives_fd);
    tcase_add_test(tc, test_gauss_hermite_moments);
    tcase_add_test(tc, test_rules_threads);
    tcase_add_test(tc, test_expectations);
    tcase_add_test(tc, test_expect_edges);
    suite_add_tcase(s, tc);
    return s;
}
