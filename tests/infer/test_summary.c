/* test_summary.c -- posterior summaries against the R package posterior
 * (1.4.0): the fixtures in tests/fixtures/summary/ hold fixed draws and
 * posterior::summarise_draws() of them, made by
 * scripts/make-summary-fixtures.R (R is not needed to run these tests).
 * Every measure must agree to 1e-8 relative (NA where posterior says NA).
 * Then: ESS of long AR(1) chains against n (1 - rho) / (1 + rho), the
 * single-measure functions against compute, argument errors and
 * out-of-memory paths.
 *
 * The fixtures are found relative to the working directory, which is the
 * repository root under `make check` (as for the data/ files other suites
 * read). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/summary.h"
#include "support/testutil.h"

#define FIXTURES "tests/fixtures/summary/"
#define REL_TOL 1e-8

/* The summary columns, in fixture order; the last is ess_mean. */
static const char *const measure[] = {"mean", "median", "sd",       "mad",      "q5",      "q95",
                                      "rhat", "ess_bulk", "ess_tail", "ess_mean"};
#define NMEASURE (sizeof measure / sizeof measure[0])

static void as_array(const gmm_summary *s, double ess_mean, double *a)
{
    double v[NMEASURE] = {s->mean, s->median, s->sd,       s->mad,      s->q5,
                          s->q95,  s->rhat,   s->ess_bulk, s->ess_tail, ess_mean};
    memcpy(a, v, sizeof v);
}

/* Largest relative difference seen per measure over all fixtures, for the
 * report (GMM_TEST_REPORT=1). */
static double worst[NMEASURE];

static void check_fixture(const char *set)
{
    char dpath[256], spath[256];
    snprintf(dpath, sizeof dpath, FIXTURES "draws_%s.csv", set);
    snprintf(spath, sizeof spath, FIXTURES "summary_%s.csv", set);
    const char *paths[1] = {dpath};
    gmm_draws *d = NULL;
    gmm_table *t = NULL;
    ck_assert_msg(gmm_draws_read(paths, 1, &d) == GMM_OK, "%s (run from the repository root)",
                  gmm_error_message());
    ck_assert_msg(gmm_table_read(spath, &t) == GMM_OK, "%s", gmm_error_message());
    ck_assert_uint_eq(t->nrow, d->nvar);

    double *ref = malloc(NMEASURE * t->nrow * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    for (size_t k = 0; k < NMEASURE; k++) {
        size_t col;
        ck_assert_msg(gmm_table_column(t, measure[k], &col) == GMM_OK, "%s", gmm_error_message());
        ck_assert(gmm_table_column_double(t, col, 1, ref + k * t->nrow) == GMM_OK);
    }
    size_t namecol;
    ck_assert(gmm_table_column(t, "variable", &namecol) == GMM_OK);

    gmm_summary_work *w = NULL;
    ck_assert(gmm_summary_work_alloc(d->nchain, d->niter, &w) == GMM_OK);
    size_t N = d->nchain * d->niter;
    double *copy = malloc(N * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    gmm_lik lik;
    ck_assert(gmm_lik_parse("gaussian(variance=1)", &lik) == GMM_OK);
    for (size_t v = 0; v < d->nvar; v++) {
        ck_assert_str_eq(d->name[v], t->cell[v][namecol]);
        const double *x = gmm_draws_variable(d, v);
        gmm_summary s;
        double ess_mean, got[NMEASURE];
        ck_assert(gmm_summary_compute(x, d->nchain, d->niter, w, &s) == GMM_OK);
        ck_assert(gmm_summary_ess_mean(x, d->nchain, d->niter, w, &ess_mean) == GMM_OK);
        as_array(&s, ess_mean, got);
        /* predict --draws at level 0.9: posterior's mean, sd^2, q5 and q95 */
        gmm_summary_pred pr;
        memcpy(copy, x, N * sizeof *copy);
        ck_assert(gmm_summary_pred_draws(&lik, copy, N, 0.9, &pr) == GMM_OK);
        const double pg[4] = {pr.mean, sqrt(pr.var), pr.lower, pr.upper};
        const size_t pk[4] = {0, 2, 4, 5};
        for (size_t j = 0; j < 4; j++) {
            double want = ref[pk[j] * t->nrow + v];
            if (N == 1 && pk[j] == 2)
                want = 0.0; /* one draw: var 0 where sd is NA */
            if (isnan(want)) {
                ck_assert_msg(isnan(pg[j]) || (pk[j] == 2 && isnan(ref[v])), "%s %s pred %s",
                              set, d->name[v], measure[pk[j]]);
                continue;
            }
            double diff = fabs(pg[j] - want), rel = want != 0.0 ? diff / fabs(want) : diff;
            ck_assert_msg(rel <= REL_TOL, "%s %s pred %s: %.17g, posterior %.17g", set,
                          d->name[v], measure[pk[j]], pg[j], want);
        }
        for (size_t k = 0; k < NMEASURE; k++) {
            double want = ref[k * t->nrow + v];
            if (isnan(want)) {
                ck_assert_msg(isnan(got[k]), "%s %s %s: %.17g, posterior NA", set, d->name[v],
                              measure[k], got[k]);
                continue;
            }
            double diff = fabs(got[k] - want), rel = want != 0.0 ? diff / fabs(want) : diff;
            if (rel > worst[k])
                worst[k] = rel;
            ck_assert_msg(rel <= REL_TOL, "%s %s %s: %.17g, posterior %.17g (rel %.3g)", set,
                          d->name[v], measure[k], got[k], want, rel);
        }
    }
    gmm_summary_work_free(w);
    free(copy);
    free(ref);
    gmm_table_free(t);
    gmm_draws_free(d);
}

/* 4 x 200: AR(1) with rho 0.3, 0.9, -0.6 (ESS capped), gamma, t(1.5),
 * shifted chains, one wide chain, Poisson ties, a constant, 1e-20 noise,
 * an NA. */
START_TEST(test_fixture_main) { check_fixture("main"); }
END_TEST

/* 3 x 101: the middle draw of each chain is left out when splitting. */
START_TEST(test_fixture_odd) { check_fixture("odd"); }
END_TEST

/* One chain of 50. */
START_TEST(test_fixture_one) { check_fixture("one"); }
END_TEST

/* 4 x 8: split chains of 4, Geyer's loop does not run (tau = 2). */
START_TEST(test_fixture_short) { check_fixture("short"); }
END_TEST

/* 2 x 5: split chains of 2, ESS NA, R-hat defined. */
START_TEST(test_fixture_few)
{
    check_fixture("few");
    if (getenv("GMM_TEST_REPORT"))
        for (size_t k = 0; k < NMEASURE; k++)
            fprintf(stderr, "summary vs posterior: %-8s max rel diff %.3g\n", measure[k],
                    worst[k]);
}
END_TEST

/* C chains of S from a stationary AR(1) x_t = rho x_{t-1} + e_t. */
static double *ar1_chains(size_t C, size_t S, double rho, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    double *x = malloc(C * S * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t c = 0; c < C; c++) {
        double *y = x + c * S;
        y[0] = tu_normal(&r) / sqrt(1.0 - rho * rho);
        for (size_t s = 1; s < S; s++)
            y[s] = rho * y[s - 1] + tu_normal(&r);
    }
    return x;
}

/* The ESS of the mean of an AR(1) chain of n draws tends to n (1 - rho) /
 * (1 + rho).  With 4 chains of 50000 the estimate's relative error over 60
 * seeds (GMM_TEST_SEED 0-59, far apart) had sd 1.31% at rho = 0.3, 1.47% at
 * 0.6, 1.39% at -0.3 and 3.25% at 0.9 (longer truncation lag, noisier sum;
 * means -0.3 .. -0.7%), ess_bulk's the same (rank normalisation changes
 * Gaussian draws little).  The tolerances are 5.3 of those sds with 15% for
 * the sd's own uncertainty: 8 checks x 2 Q(5.3) = 9e-7 (normal errors).  The
 * chains mix: R-hat - 1 was at most 9.3e-4 (rho = 0.9: mean 3.8e-4, sd 2e-4),
 * 1.005 is 22 sd above. */
START_TEST(test_ar1_ess)
{
    const size_t C = 4, S = 50000;
    const double rhos[] = {0.3, 0.6, 0.9, -0.3}, tol[] = {0.08, 0.09, 0.20, 0.085};
    gmm_summary_work *w = NULL;
    ck_assert(gmm_summary_work_alloc(C, S, &w) == GMM_OK);
    for (size_t k = 0; k < sizeof rhos / sizeof rhos[0]; k++) {
        double rho = rhos[k];
        double *x = ar1_chains(C, S, rho, tu_seed(1000 + k));
        double expect = (double)(C * S) * (1.0 - rho) / (1.0 + rho);
        gmm_summary s;
        double ess_mean;
        ck_assert(gmm_summary_compute(x, C, S, w, &s) == GMM_OK);
        ck_assert(gmm_summary_ess_mean(x, C, S, w, &ess_mean) == GMM_OK);
        if (getenv("GMM_TEST_REPORT"))
            fprintf(stderr, "AR(1) rho %+.1f: ESS expected %.0f, mean %.0f (%+.1f%%), bulk %.0f "
                            "(%+.1f%%), tail %.0f, rhat %.5f\n",
                    rho, expect, ess_mean, 100 * (ess_mean / expect - 1), s.ess_bulk,
                    100 * (s.ess_bulk / expect - 1), s.ess_tail, s.rhat);
        ck_assert_msg(fabs(ess_mean / expect - 1.0) < tol[k], "rho %g: ess_mean %g, expected %g",
                      rho, ess_mean, expect);
        ck_assert_msg(fabs(s.ess_bulk / expect - 1.0) < tol[k], "rho %g: ess_bulk %g, expected %g",
                      rho, s.ess_bulk, expect);
        ck_assert_msg(s.rhat > 0.999 && s.rhat < 1.005, "rho %g: rhat %g", rho, s.rhat);
        free(x);
    }
    gmm_summary_work_free(w);
}
END_TEST

/* The one-measure functions give what compute gives, with or without a
 * workspace; a workspace serves many variables. */
START_TEST(test_single_measures)
{
    const size_t C = 3, S = 40;
    double *x = ar1_chains(C, S, 0.5, 7);
    gmm_summary s, s2;
    double r, eb, et, em, em2;
    gmm_summary_work *w = NULL;
    ck_assert(gmm_summary_work_alloc(C, S, &w) == GMM_OK);
    ck_assert(gmm_summary_compute(x, C, S, NULL, &s) == GMM_OK);
    ck_assert(gmm_summary_compute(x, C, S, w, &s2) == GMM_OK);
    ck_assert(memcmp(&s, &s2, sizeof s) == 0);
    ck_assert(gmm_summary_rhat(x, C, S, w, &r) == GMM_OK);
    ck_assert(gmm_summary_ess_bulk(x, C, S, NULL, &eb) == GMM_OK);
    ck_assert(gmm_summary_ess_tail(x, C, S, w, &et) == GMM_OK);
    ck_assert(gmm_summary_ess_mean(x, C, S, w, &em) == GMM_OK);
    ck_assert(gmm_summary_ess_mean(x, C, S, NULL, &em2) == GMM_OK);
    ck_assert(r == s.rhat && eb == s.ess_bulk && et == s.ess_tail && em == em2);
    free(x);
    gmm_summary_work_free(w);
}
END_TEST

/* Tiny shapes: one draw, one chain of three, NaN anywhere. */
START_TEST(test_small_and_nan)
{
    gmm_summary s;
    double one = 2.5;
    ck_assert(gmm_summary_compute(&one, 1, 1, NULL, &s) == GMM_OK);
    ck_assert(s.mean == 2.5 && s.median == 2.5 && s.q5 == 2.5 && s.q95 == 2.5 && s.mad == 0.0);
    ck_assert(isnan(s.sd) && isnan(s.rhat) && isnan(s.ess_bulk) && isnan(s.ess_tail));

    double three[3] = {1, 2, 4};
    ck_assert(gmm_summary_compute(three, 1, 3, NULL, &s) == GMM_OK);
    ck_assert(s.median == 2.0 && isnan(s.rhat) && isnan(s.ess_bulk));
    ck_assert(fabs(s.q5 - 1.1) < 1e-15 && fabs(s.q95 - 3.8) < 1e-15);

    double *x = ar1_chains(2, 30, 0.2, 3);
    x[45] = NAN;
    ck_assert(gmm_summary_compute(x, 2, 30, NULL, &s) == GMM_OK);
    ck_assert(isnan(s.mean) && isnan(s.median) && isnan(s.q5) && isnan(s.mad));
    ck_assert(isnan(s.rhat) && isnan(s.ess_bulk) && isnan(s.ess_tail));
    free(x);

    const double sorted[4] = {1, 2, 3, 10};
    ck_assert(gmm_summary_quantile_sorted(sorted, 4, 0.0) == 1.0);
    ck_assert(gmm_summary_quantile_sorted(sorted, 4, 1.0) == 10.0);
    ck_assert(fabs(gmm_summary_quantile_sorted(sorted, 4, 0.9) - 7.9) < 1e-14);
    ck_assert(isnan(gmm_summary_quantile_sorted(sorted, 0, 0.5)));
    ck_assert(isnan(gmm_summary_quantile_sorted(sorted, 4, 1.5)));
    ck_assert(isnan(gmm_summary_quantile_sorted(sorted, 4, NAN)));
}
END_TEST

/* The prediction summaries: central intervals at the level (normal
 * quantiles from tables; R's type 7 by hand), the response through the
 * inverse link, NaN draws, bad levels. */
START_TEST(test_pred)
{
    gmm_lik pois, bern;
    ck_assert(gmm_lik_parse("poisson", &pois) == GMM_OK);
    ck_assert(gmm_lik_parse("bernoulli", &bern) == GMM_OK);
    gmm_summary_pred p;
    /* Phi^-1(0.95) = 1.6448536269514722, Phi^-1(0.975) = 1.959963984540054 */
    const double lv[2] = {0.9, 0.95}, z[2] = {1.6448536269514722, 1.959963984540054};
    for (size_t k = 0; k < 2; k++) {
        ck_assert(gmm_summary_pred_normal(&pois, 0.3, 0.25, lv[k], &p) == GMM_OK);
        ck_assert(p.mean == 0.3 && p.var == 0.25);
        ck_assert(fabs(p.lower - (0.3 - 0.5 * z[k])) < 1e-15);
        ck_assert(fabs(p.upper - (0.3 + 0.5 * z[k])) < 1e-15);
        ck_assert(fabs(p.resp - exp(0.3 + 0.125)) < 1e-15);
        ck_assert(p.resp_lower == exp(p.lower) && p.resp_upper == exp(p.upper));
    }
    ck_assert(gmm_summary_pred_normal(&bern, -1.0, 1.0, 0.5, &p) == GMM_OK);
    ck_assert(fabs(p.lower - (-1.0 - 0.6744897501960817)) < 1e-15);
    ck_assert(fabs(p.resp_lower - 1.0 / (1.0 + exp(-p.lower))) < 1e-16);
    ck_assert(p.resp_lower < p.resp && p.resp < p.resp_upper);

    /* 1..5 shuffled: type 7 at 0.25 and 0.75 (level 0.5) is 2 and 4; at
     * 0.1 and 0.9 (level 0.8) 1.4 and 4.6 */
    double f[5] = {5, 1, 4, 2, 3};
    ck_assert(gmm_summary_pred_draws(&pois, f, 5, 0.5, &p) == GMM_OK);
    ck_assert(p.mean == 3.0 && p.var == 2.5 && p.lower == 2.0 && p.upper == 4.0);
    double r = (exp(1) + exp(2) + exp(3) + exp(4) + exp(5)) / 5.0;
    ck_assert(fabs(p.resp - r) < 1e-14 * r);
    ck_assert(p.resp_lower == exp(2.0) && p.resp_upper == exp(4.0));
    ck_assert(gmm_summary_pred_draws(&pois, f, 5, 0.8, &p) == GMM_OK);
    ck_assert(fabs(p.lower - 1.4) < 1e-14 && fabs(p.upper - 4.6) < 1e-14);
    double one = 2.0;
    ck_assert(gmm_summary_pred_draws(&pois, &one, 1, 0.9, &p) == GMM_OK);
    ck_assert(p.mean == 2.0 && p.var == 0.0 && p.lower == 2.0 && p.upper == 2.0);
    f[3] = NAN;
    ck_assert(gmm_summary_pred_draws(&pois, f, 5, 0.9, &p) == GMM_OK);
    ck_assert(isnan(p.mean) && isnan(p.lower) && isnan(p.resp_upper));

    const double bad[] = {0.0, 1.0, -0.5, 1.5, NAN};
    for (size_t k = 0; k < 5; k++) {
        ck_assert_int_eq(gmm_summary_pred_normal(&pois, 0.0, 1.0, bad[k], &p), GMM_EINVAL);
        ck_assert_int_eq(gmm_summary_pred_draws(&pois, &one, 1, bad[k], &p), GMM_EINVAL);
    }
    ck_assert_int_eq(gmm_summary_pred_normal(&pois, 0.0, -1.0, 0.9, &p), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_pred_draws(&pois, f, 0, 0.9, &p), GMM_EINVAL);
}
END_TEST

/* Infinite draws: ranks stay finite (rhat, ess_bulk), ess_tail is NA. */
START_TEST(test_infinite)
{
    double *x = ar1_chains(2, 40, 0.2, 5);
    x[10] = INFINITY;
    gmm_summary s;
    ck_assert(gmm_summary_compute(x, 2, 40, NULL, &s) == GMM_OK);
    ck_assert(isinf(s.mean) && isnan(s.sd) && isfinite(s.median));
    ck_assert(isfinite(s.rhat) && isfinite(s.ess_bulk) && isnan(s.ess_tail));
    free(x);
}
END_TEST

START_TEST(test_argument_errors)
{
    double x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, v;
    gmm_summary s;
    gmm_summary_work *w = NULL;
    ck_assert_int_eq(gmm_summary_work_alloc(0, 5, &w), GMM_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(gmm_summary_work_alloc(2, 0, &w), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_work_alloc((size_t)1 << 40, (size_t)1 << 40, &w), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_work_alloc(2, 4, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_compute(NULL, 2, 4, NULL, &s), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_compute(x, 2, 4, NULL, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_compute(x, 0, 4, NULL, &s), GMM_EINVAL);
    ck_assert_int_eq(gmm_summary_rhat(x, 2, 0, NULL, &v), GMM_EINVAL);
    ck_assert(gmm_summary_work_alloc(2, 4, &w) == GMM_OK);
    ck_assert_int_eq(gmm_summary_compute(x, 4, 2, w, &s), GMM_EDIM);
    ck_assert_str_eq(gmm_error_message(),
                     "summary: workspace for 2 chains of 4 draws given 4 of 2");
    ck_assert_int_eq(gmm_summary_ess_tail(x, 1, 8, w, &v), GMM_EDIM);
    gmm_summary_work_free(w);
    gmm_summary_work_free(NULL);
}
END_TEST

/* Every allocation failure returns GMM_ENOMEM and leaks nothing (the
 * sanitizer build checks the leaks). */
START_TEST(test_out_of_memory)
{
    double *x = ar1_chains(2, 30, 0.4, 9);
    gmm_summary s;
    gmm_status st = GMM_ENOMEM;
    long k;
    for (k = 0; k < 100 && st != GMM_OK; k++) {
        gmm_alloc_fail_after(k);
        st = gmm_summary_compute(x, 2, 30, NULL, &s);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK || st == GMM_ENOMEM, "k = %ld: %s", k, gmm_strerror(st));
    }
    ck_assert_int_eq(st, GMM_OK);
    ck_assert(k > 3);
    free(x);
}
END_TEST

static int stop_now(void) { return 1; }

/* The table gmm_summary_write prints: the header, a row per variable
 * (quoted names, NA for a constant's R-hat), and a stop that cancels. */
START_TEST(test_write)
{
    char *name[] = {"lp__", "f[a,b]"};
    long chain[] = {1, 2};
    double x[16];
    for (size_t k = 0; k < 8; k++) {
        x[k] = (double)((k * 5) % 8);
        x[8 + k] = 2.0;
    }
    gmm_draws d = {2, 2, 4, name, chain, x, 0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gmm_summary_write(f, &d, NULL), GMM_OK);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_ptr_nonnull(strstr(buf, "variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,"
                                      "ess_tail\nlp__,3.5,"));
    ck_assert_ptr_nonnull(strstr(buf, "\n\"f[a,b]\",2,2,0,0,2,2,NA,NA,NA\n"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(gmm_summary_write(f, &d, stop_now), GMM_ECANCEL);
    fclose(f);
    free(buf);
}
END_TEST

Suite *infer_summary_suite(void)
{
    Suite *s = suite_create("infer_summary");
    TCase *tc = tcase_create("posterior");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fixture_main);
    tcase_add_test(tc, test_fixture_odd);
    tcase_add_test(tc, test_fixture_one);
    tcase_add_test(tc, test_fixture_short);
    tcase_add_test(tc, test_fixture_few);
    tcase_add_test(tc, test_ar1_ess);
    tcase_add_test(tc, test_single_measures);
    tcase_add_test(tc, test_small_and_nan);
    tcase_add_test(tc, test_infinite);
    tcase_add_test(tc, test_pred);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_write);
    suite_add_tcase(s, tc);
    return s;
}
