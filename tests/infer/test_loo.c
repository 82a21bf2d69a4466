/* test_loo.c -- PSIS-LOO and WAIC against the R package loo (2.5.1): the
 * fixtures in tests/fixtures/loo/ hold pointwise log-likelihood draws and
 * loo::loo(ll, r_eff = loo::relative_eff(exp(ll))) and loo::waic(ll) of
 * them, made by scripts/make-loo-fixtures.R (R is not needed to run these
 * tests).  Every pointwise value (mcse_elpd_loo among them) and every total
 * and SE must agree to 1e-8 relative (Pareto k Inf where loo says Inf; the
 * total mcse_elpd_loo NA where loo says NA).  Then argument errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/loo.h"

#define FIXTURES "tests/fixtures/loo/"
#define REL_TOL 1e-8

static const char *const pcol[] = {"elpd_loo", "p_loo",     "looic",  "pareto_k",
                                   "r_eff",    "elpd_waic", "p_waic", "waic",
                                   "mcse_elpd_loo"};
#define NP (sizeof pcol / sizeof pcol[0])
static const char *const tname[] = {"elpd_loo", "p_loo", "looic", "elpd_waic", "p_waic", "waic"};
#define NT (sizeof tname / sizeof tname[0])

static double worst_p[NP], worst_t[2 * NT], worst_mcse;

static double rel(double got, double want)
{
    if (isnan(want)) /* R's NA */
        return isnan(got) ? 0.0 : INFINITY;
    if (isinf(want))
        return got == want ? 0.0 : INFINITY;
    double d = fabs(got - want);
    return want != 0.0 ? d / fabs(want) : d;
}

static void check_fixture(const char *set)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "draws_%s.csv", set);
    const char *paths[1] = {path};
    gmm_draws *d = NULL;
    ck_assert_msg(gmm_draws_read(paths, 1, &d) == GMM_OK, "%s (run from the repository root)",
                  gmm_error_message());
    gmm_table *tp = NULL, *tt = NULL;
    snprintf(path, sizeof path, FIXTURES "pointwise_%s.csv", set);
    ck_assert_msg(gmm_table_read(path, &tp) == GMM_OK, "%s", gmm_error_message());
    snprintf(path, sizeof path, FIXTURES "totals_%s.csv", set);
    ck_assert_msg(gmm_table_read(path, &tt) == GMM_OK, "%s", gmm_error_message());

    size_t nobs = tp->nrow;
    ck_assert_uint_eq(d->nvar, nobs + 1); /* lp__ first */
    double *ref = malloc(NP * nobs * sizeof *ref);
    gmm_loo_point *pt = malloc(nobs * sizeof *pt);
    ck_assert(ref && pt);
    for (size_t k = 0; k < NP; k++) {
        size_t col;
        ck_assert_msg(gmm_table_column(tp, pcol[k], &col) == GMM_OK, "%s", gmm_error_message());
        for (size_t i = 0; i < nobs; i++) /* strtod: R writes Inf */
            ref[k * nobs + i] =
                strcmp(tp->cell[i][col], "NA") == 0 ? NAN : strtod(tp->cell[i][col], NULL);
    }
    gmm_loo_work *w = NULL;
    ck_assert(gmm_loo_work_alloc(d->nchain, d->niter, &w) == GMM_OK);
    for (size_t i = 0; i < nobs; i++) {
        char name[32];
        snprintf(name, sizeof name, "log_lik[%zu]", i + 1);
        ck_assert_str_eq(d->name[i + 1], name);
        gmm_loo_point *p = pt + i;
        ck_assert_msg(gmm_loo_point_compute(gmm_draws_variable(d, i + 1), d->nchain, d->niter, w,
                                            p) == GMM_OK,
                      "%s", gmm_error_message());
        const double got[NP] = {p->elpd_loo, p->p_loo,     p->looic,  p->pareto_k,
                                p->r_eff,    p->elpd_waic, p->p_waic, p->waic,
                                p->mcse_elpd_loo};
        for (size_t k = 0; k < NP; k++) {
            double want = ref[k * nobs + i], r = rel(got[k], want);
            if (r > worst_p[k])
                worst_p[k] = r;
            ck_assert_msg(r <= REL_TOL, "%s obs %zu %s: %.17g, loo %.17g (rel %.3g)", set, i + 1,
                          pcol[k], got[k], want, r);
        }
    }
    gmm_loo tot;
    ck_assert(gmm_loo_totals(pt, nobs, d->nchain * d->niter, &tot) == GMM_OK);
    ck_assert_uint_eq(tot.nobs, nobs);
    ck_assert_uint_eq(tot.k_good + tot.k_ok + tot.k_bad + tot.k_very_bad, nobs);
    const double got[2 * NT] = {tot.elpd_loo,  tot.se_elpd_loo,  tot.p_loo,  tot.se_p_loo,
                                tot.looic,     tot.se_looic,     tot.elpd_waic, tot.se_elpd_waic,
                                tot.p_waic,    tot.se_p_waic,    tot.waic,   tot.se_waic};
    size_t mcol, ecol, scol;
    ck_assert(gmm_table_column(tt, "measure", &mcol) == GMM_OK);
    ck_assert(gmm_table_column(tt, "estimate", &ecol) == GMM_OK);
    ck_assert(gmm_table_column(tt, "se", &scol) == GMM_OK);
    ck_assert_uint_eq(tt->nrow, NT + 1);
    for (size_t k = 0; k < NT; k++) {
        ck_assert_str_eq(tt->cell[k][mcol], tname[k]);
        double want[2] = {strtod(tt->cell[k][ecol], NULL), strtod(tt->cell[k][scol], NULL)};
        for (size_t j = 0; j < 2; j++) {
            double r = rel(got[2 * k + j], want[j]);
            if (r > worst_t[2 * k + j])
                worst_t[2 * k + j] = r;
            ck_assert_msg(r <= REL_TOL, "%s %s %s: %.17g, loo %.17g (rel %.3g)", set, tname[k],
                          j ? "se" : "estimate", got[2 * k + j], want[j], r);
        }
    }
    /* loo's mcse_loo, NA (some k > 0.7) or a number */
    ck_assert_str_eq(tt->cell[NT][mcol], "mcse_elpd_loo");
    if (strcmp(tt->cell[NT][ecol], "NA") == 0) {
        ck_assert_msg(isnan(tot.mcse_elpd_loo), "%s mcse_elpd_loo: %.17g, loo NA", set,
                      tot.mcse_elpd_loo);
    } else {
        double want = strtod(tt->cell[NT][ecol], NULL), r = rel(tot.mcse_elpd_loo, want);
        worst_mcse = fmax(worst_mcse, r);
        ck_assert_msg(r <= REL_TOL, "%s mcse_elpd_loo: %.17g, loo %.17g (rel %.3g)", set,
                      tot.mcse_elpd_loo, want, r);
    }
    gmm_loo_work_free(w);
    free(pt);
    free(ref);
    gmm_table_free(tp);
    gmm_table_free(tt);
    gmm_draws_free(d);
}

/* 4 x 250 AR(1) draws of a normal model's mu and log sigma (r_eff < 1), 30
 * observations with two outliers (k > 0.7). */
START_TEST(test_fixture_normal) { check_fixture("normal"); }
END_TEST

/* One chain of 301 antithetic draws (r_eff > 1, tail shortened). */
START_TEST(test_fixture_one) { check_fixture("one"); }
END_TEST

/* Heavy-tailed ratios: k > 1. */
START_TEST(test_fixture_heavy) { check_fixture("heavy"); }
END_TEST

/* 3 x 349 with shifted chains: nextn(349) = 360 scales loo's within-chain
 * autocovariances against the between-chain variance; r_eff ~ 0.5 sets the
 * tail length. */
START_TEST(test_fixture_mixed) { check_fixture("mixed"); }
END_TEST

/* 4 x 250 draws, every k <= 0.7: loo's total mcse_elpd_loo is a number. */
START_TEST(test_fixture_clean) { check_fixture("clean"); }
END_TEST

/* Rounded log-likelihoods (tied ratios, constant tails: k = Inf) and a
 * constant observation. */
START_TEST(test_fixture_ties)
{
    check_fixture("ties");
    if (getenv("GMM_TEST_REPORT")) {
        for (size_t k = 0; k < NP; k++)
            fprintf(stderr, "loo vs R: %-9s max rel diff %.3g\n", pcol[k], worst_p[k]);
        for (size_t k = 0; k < NT; k++)
            fprintf(stderr, "loo vs R: total %-9s %.3g, se %.3g\n", tname[k], worst_t[2 * k],
                    worst_t[2 * k + 1]);
        fprintf(stderr, "loo vs R: total mcse_elpd_loo %.3g\n", worst_mcse);
    }
}
END_TEST

START_TEST(test_errors)
{
    gmm_loo_work *w = NULL;
    ck_assert_int_eq(gmm_loo_work_alloc(2, 1, &w), GMM_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(gmm_loo_work_alloc(0, 10, &w), GMM_EINVAL);
    ck_assert(gmm_loo_work_alloc(1, 10, &w) == GMM_OK);
    double ll[10] = {-1, -2, -1, -3, -1, -2, -1, -2, -1, -2};
    gmm_loo_point p;
    ck_assert_int_eq(gmm_loo_point_compute(ll, 2, 5, w, &p), GMM_EDIM);
    ll[3] = INFINITY;
    ck_assert_int_eq(gmm_loo_point_compute(ll, 1, 10, w, &p), GMM_EDOM);
    ll[3] = NAN;
    ck_assert_int_eq(gmm_loo_point_compute(ll, 1, 10, w, &p), GMM_EDOM);
    ck_assert_int_eq(gmm_loo_point_compute(NULL, 1, 10, w, &p), GMM_EINVAL);
    gmm_loo tot;
    ck_assert_int_eq(gmm_loo_totals(&p, 0, 10, &tot), GMM_EINVAL);
    gmm_loo_work_free(w);
}
END_TEST

static int stop_now(void) { return 1; }

/* gmm_loo_draws: the chosen variables' pointwise results, as
 * gmm_loo_point_compute gives them one by one, and their totals; a stop
 * cancels. */
START_TEST(test_draws)
{
    enum { NC = 2, NI = 50 };
    static double x[3 * NC * NI];
    for (size_t k = 0; k < 3 * NC * NI; k++)
        x[k] = -1.0 - 0.5 * sin(0.7 * (double)k) - 0.1 * (double)(k % 7);
    char *name[] = {"lp__", "log_lik[1]", "log_lik[2]"};
    long chain[] = {1, 2};
    gmm_draws d = {3, NC, NI, name, chain, x, 0};
    const size_t var[] = {1, 2};
    gmm_loo_point p[2], one;
    gmm_loo t, t1;
    gmm_loo_work *w = NULL;
    ck_assert_int_eq(gmm_loo_work_alloc(NC, NI, &w), GMM_OK);
    ck_assert_int_eq(gmm_loo_draws(&d, var, 2, NULL, p, &t), GMM_OK);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(gmm_loo_point_compute(gmm_draws_variable(&d, var[i]), NC, NI, w, &one),
                         GMM_OK);
        ck_assert_double_eq(p[i].elpd_loo, one.elpd_loo);
        ck_assert_double_eq(p[i].p_waic, one.p_waic);
    }
    ck_assert_int_eq(gmm_loo_totals(p, 2, NC * NI, &t1), GMM_OK);
    ck_assert_double_eq(t.elpd_loo, t1.elpd_loo);
    ck_assert_int_eq(gmm_loo_draws(&d, var, 2, stop_now, p, &t), GMM_ECANCEL);
    gmm_loo_work_free(w);
}
END_TEST

Suite *infer_loo_suite(void)
{
    Suite *s = suite_create("infer_loo");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_fixture_normal);
    tcase_add_test(tc, test_fixture_one);
    tcase_add_test(tc, test_fixture_heavy);
    tcase_add_test(tc, test_fixture_mixed);
    tcase_add_test(tc, test_fixture_clean);
    tcase_add_test(tc, test_fixture_ties);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_draws);
    suite_add_tcase(s, tc);
    return s;
}
