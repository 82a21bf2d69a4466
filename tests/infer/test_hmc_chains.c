/* test_hmc_chains.c -- the chain runner (hmc_chains.h) on a 12-node Poisson
 * graph: rows through the sink in chain order, the same bytes on 1 and 2
 * threads, f = x + intercept in every row, a cancel cutting whole chains to
 * the shortest one's count (equal to the uncut run's first rows), a sink's
 * error stopping the replay, and the default priors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/graph.h"
#include "gmm/hmc_chains.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/objective.h"
#include "gmm/problem.h"
#include "gmm/spec.h"

#define NN 12

typedef struct {
    gmm_graph *g;
    gmm_spec_node *s;
    gmm_gmrf *gm;
    gmm_latent *lat[2];
    gmm_lik lik; /* borrowed by the problems */
    gmm_problem *p[2];
} fixture;

static void fixture_make(fixture *fx)
{
    size_t ei[NN + 2], ej[NN + 2], node[NN];
    double y[NN] = {0, 2, 5, 1, 0, 0, 3, 7, 2, 0, 1, 4};
    for (size_t i = 0; i < NN; i++) {
        ei[i] = i;
        ej[i] = (i + 1) % NN;
        node[i] = i;
    }
    ei[NN] = 0, ej[NN] = 6;
    ei[NN + 1] = 3, ej[NN + 1] = 9;
    memset(fx, 0, sizeof *fx);
    ck_assert_int_eq(gmm_graph_from_edges(NN, NN + 2, ei, ej, NULL, NULL, NULL, &fx->g), GMM_OK);
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.5, lengthscale=3)", &fx->s), GMM_OK);
    ck_assert_int_eq(gmm_gmrf_alloc(fx->g, fx->s, NULL, &fx->gm), GMM_OK);
    ck_assert_int_eq(gmm_lik_parse("poisson", &fx->lik), GMM_OK);
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(gmm_latent_gmrf_alloc(fx->gm, NN, node, &fx->lat[t]), GMM_OK);
        ck_assert_int_eq(gmm_problem_alloc(fx->lat[t], &fx->lik, y, NULL, 1, 0.3, &fx->p[t]), GMM_OK);
    }
}

static void fixture_free(fixture *fx)
{
    for (int t = 0; t < 2; t++) {
        gmm_problem_free(fx->p[t]);
        gmm_latent_free(fx->lat[t]);
    }
    gmm_gmrf_free(fx->gm);
    gmm_spec_free(fx->s);
    gmm_graph_free(fx->g);
}

/* Every row, with its chain id and iteration, in the order received. */
typedef struct {
    double *v;
    size_t nrow, cap, ncol;
    uint64_t *id;
    size_t *it;
    size_t nbegin, nend;
    size_t fail_at; /* nonzero: the row callback fails at this row */
} rows;

static gmm_status on_begin(void *user, const gmm_hmc_chain_info *c)
{
    (void)c;
    ((rows *)user)->nbegin++;
    return GMM_OK;
}

static gmm_status on_end(void *user, const gmm_hmc_chain_info *c)
{
    (void)c;
    ((rows *)user)->nend++;
    return GMM_OK;
}

static gmm_status on_row(void *user, const gmm_hmc_chain_info *c, size_t it, const double *row,
                         size_t ncol)
{
    rows *r = user;
    if (r->fail_at && r->nrow + 1 == r->fail_at)
        return gmm_error(GMM_EIO, "sink: full");
    if (r->nrow == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = realloc(r->v, r->cap * ncol * sizeof *r->v);
        r->id = realloc(r->id, r->cap * sizeof *r->id);
        r->it = realloc(r->it, r->cap * sizeof *r->it);
        ck_assert(r->v && r->id && r->it);
    }
    r->ncol = ncol;
    memcpy(r->v + r->nrow * ncol, row, ncol * sizeof *row);
    r->id[r->nrow] = c->id;
    r->it[r->nrow] = it;
    r->nrow++;
    return GMM_OK;
}

static void rows_free(rows *r)
{
    free(r->v);
    free(r->id);
    free(r->it);
}

static void collect(const gmm_hmc_chains *ch, rows *r)
{
    gmm_hmc_sink sk = {on_begin, on_row, on_end, r};
    ck_assert_int_eq(gmm_hmc_chains_write(ch, &sk), GMM_OK);
}

static void params(gmm_hmc_run_params *rp, gmm_problem *p)
{
    gmm_hmc_run_params_init(rp);
    rp->hmc.warmup = 30;
    rp->hmc.draws = 25;
    rp->hmc.seed = 7;
    rp->nchain = 3;
    rp->chain0 = 1;
    rp->theta = gmm_problem_objective(p)->value;
    rp->offset = 2.5;
    rp->states = 1;
}

START_TEST(test_chains_threads_and_rows)
{
    fixture fx;
    fixture_make(&fx);
    gmm_hmc_run_params rp;
    params(&rp, fx.p[0]);
    rows r1 = {0}, r2 = {0};
    gmm_hmc_chains *c1 = NULL, *c2 = NULL;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 1, &rp, &c1), GMM_OK);
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 2, &rp, &c2), GMM_OK);
    /* 7 sampler values, f at the 12 nodes, x at the 12 nodes */
    ck_assert_uint_eq(gmm_hmc_chains_ncol(c1), GMM_HMC_NSAMPLER + 2 * NN);
    ck_assert_uint_eq(gmm_hmc_chains_kept(c1), 25);
    ck_assert(!gmm_hmc_chains_cut(c1));
    collect(c1, &r1);
    collect(c2, &r2);
    ck_assert_uint_eq(r1.nrow, 3 * 25);
    ck_assert_uint_eq(r1.nbegin, 3);
    ck_assert_uint_eq(r1.nend, 3);
    ck_assert_uint_eq(r2.nrow, r1.nrow);
    /* the bytes do not depend on the threads */
    ck_assert(!memcmp(r1.v, r2.v, r1.nrow * r1.ncol * sizeof *r1.v));
    const double b = gmm_problem_objective(fx.p[0])->value[gmm_problem_objective(fx.p[0])->nparam - 1];
    size_t ndiv[3] = {0}, nleap[3] = {0};
    for (size_t k = 0; k < r1.nrow; k++) {
        const double *row = r1.v + k * r1.ncol;
        ck_assert_uint_eq(r1.id[k], 1 + k / 25);
        ck_assert_uint_eq(r1.it[k], 1 + k % 25);
        ck_assert(isfinite(row[0]) && row[1] >= 0.0 && row[1] <= 1.0 && row[2] > 0.0);
        ndiv[k / 25] += row[5] != 0.0;
        nleap[k / 25] += (size_t)row[4];
        /* node i's f is its latent (in the latent's order) plus the
         * intercept, plus the offset */
        for (size_t i = 0; i < NN; i++) {
            size_t xi = gmm_latent_node_index(fx.lat[0], i);
            double f = row[GMM_HMC_NSAMPLER + i], x = row[GMM_HMC_NSAMPLER + NN + xi];
            ck_assert_msg(fabs(f - (x + b + 2.5)) <= 1e-12 * (1.0 + fabs(f)),
                          "row %zu node %zu: f %.17g, x + b + offset %.17g", k, i, f, x + b + 2.5);
        }
    }
    /* the chains differ (own streams and starts), and their accounts add up */
    ck_assert(memcmp(r1.v, r1.v + 25 * r1.ncol, r1.ncol * sizeof *r1.v));
    for (size_t c = 0; c < 3; c++) {
        const gmm_hmc_chain_info *ci = gmm_hmc_chains_info(c1, c);
        ck_assert_uint_eq(ci->id, c + 1);
        ck_assert_uint_eq(ci->ndone, 25);
        ck_assert_uint_eq(ci->divergences, ndiv[c]);
        ck_assert_uint_eq(ci->leapfrog[1], nleap[c]);
        ck_assert_uint_eq(ci->metric_dim, NN);
        ck_assert(ci->stepsize > 0.0 && ci->leapfrog[0] >= 30);
        /* the diagnostics from the rows: depth at 3 (a low limit, so that
         * some transitions reach it), E-BFMI from energy__ */
        gmm_hmc_chain_diag dg;
        ck_assert_int_eq(gmm_hmc_chains_diagnose(c1, c, 3, &dg), GMM_OK);
        size_t hits = 0;
        double m = 0.0, num = 0.0, den = 0.0;
        for (size_t k = 0; k < 25; k++) {
            const double *row = r1.v + (c * 25 + k) * r1.ncol;
            hits += row[3] >= 3.0;
            m += row[6] / 25.0;
        }
        for (size_t k = 0; k < 25; k++) {
            const double *row = r1.v + (c * 25 + k) * r1.ncol;
            den += (row[6] - m) * (row[6] - m);
            if (k > 0)
                num += (row[6] - row[6 - r1.ncol]) * (row[6] - row[6 - r1.ncol]);
        }
        ck_assert_uint_eq(dg.draws, 25);
        ck_assert_uint_eq(dg.divergences, ndiv[c]);
        ck_assert_uint_eq(dg.depth_hits, hits);
        ck_assert_msg(fabs(dg.ebfmi - num / den) <= 1e-12 * num / den, "E-BFMI %.17g, by hand %.17g",
                      dg.ebfmi, num / den);
    }
    rows_free(&r1);
    rows_free(&r2);
    gmm_hmc_chains_free(c1);
    gmm_hmc_chains_free(c2);
    /* under the Laplace map too, the bytes do not depend on the threads */
    rp.metric = GMM_METRIC_LAPLACE;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 1, &rp, &c1), GMM_OK);
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 2, &rp, &c2), GMM_OK);
    rows l1 = {0}, l2 = {0};
    collect(c1, &l1);
    collect(c2, &l2);
    ck_assert_uint_eq(l1.nrow, 3 * 25);
    ck_assert_uint_eq(l2.nrow, l1.nrow);
    ck_assert(!memcmp(l1.v, l2.v, l1.nrow * l1.ncol * sizeof *l1.v));
    rows_free(&l1);
    rows_free(&l2);
    gmm_hmc_chains_free(c1);
    gmm_hmc_chains_free(c2);
    fixture_free(&fx);
}
END_TEST

/* Cancel when chain 2 reaches iteration 30 + 5 (its fifth draw). */
static int cancel_at(void *user, const gmm_hmc_progress *p)
{
    size_t *calls = user;
    ++*calls;
    return p->chain == 2 && p->iteration == 35;
}

START_TEST(test_chains_cancel_cuts_whole_chains)
{
    fixture fx;
    fixture_make(&fx);
    gmm_hmc_run_params rp;
    params(&rp, fx.p[0]);
    gmm_hmc_chains *full = NULL, *cut = NULL;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 1, &rp, &full), GMM_OK);
    size_t calls = 0;
    rp.progress = cancel_at;
    rp.user = &calls;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 1, &rp, &cut), GMM_ECANCEL);
    /* one thread: chain 1 finished, chain 2 stopped at its fifth draw (the
     * cancelled iteration's draw is kept), chain 3 never started */
    ck_assert_uint_eq(calls, 55 + 35);
    ck_assert(gmm_hmc_chains_cut(cut));
    ck_assert_uint_eq(gmm_hmc_chains_kept(cut), 5);
    ck_assert_uint_eq(gmm_hmc_chains_info(cut, 0)->ndone, 25);
    ck_assert_uint_eq(gmm_hmc_chains_info(cut, 1)->ndone, 5);
    ck_assert(gmm_hmc_chains_has_draws(cut, 0) && gmm_hmc_chains_has_draws(cut, 1));
    ck_assert(!gmm_hmc_chains_has_draws(cut, 2));
    rows rf = {0}, rc = {0};
    collect(full, &rf);
    collect(cut, &rc);
    ck_assert_uint_eq(rc.nrow, 10);
    ck_assert_uint_eq(rc.nbegin, 2);
    size_t ncol = rc.ncol;
    for (size_t c = 0; c < 2; c++) {
        size_t leap = 0;
        /* the kept rows are the uncut run's first rows */
        ck_assert(!memcmp(rc.v + c * 5 * ncol, rf.v + c * 25 * ncol, 5 * ncol * sizeof *rc.v));
        for (size_t k = 0; k < 5; k++)
            leap += (size_t)rc.v[(c * 5 + k) * ncol + 4];
        ck_assert_uint_eq(gmm_hmc_chains_info(cut, c)->leapfrog[1], leap);
    }
    ck_assert_uint_eq(gmm_hmc_chains_info(cut, 0)->leapfrog[0],
                      gmm_hmc_chains_info(full, 0)->leapfrog[0]);
    rows_free(&rf);
    rows_free(&rc);
    gmm_hmc_chains_free(full);
    gmm_hmc_chains_free(cut);
    fixture_free(&fx);
}
END_TEST

static int cancel_first(void *user, const gmm_hmc_progress *p)
{
    (void)user;
    (void)p;
    return 1;
}

START_TEST(test_chains_cancel_in_warmup_keeps_nothing)
{
    fixture fx;
    fixture_make(&fx);
    gmm_hmc_run_params rp;
    params(&rp, fx.p[0]);
    rp.progress = cancel_first;
    gmm_hmc_chains *ch = NULL;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 2, &rp, &ch), GMM_ECANCEL);
    ck_assert_uint_eq(gmm_hmc_chains_kept(ch), 0);
    rows r = {0};
    collect(ch, &r);
    ck_assert_uint_eq(r.nrow, 0);
    ck_assert_uint_eq(r.nbegin, 0);
    gmm_hmc_chains_free(ch);
    fixture_free(&fx);
}
END_TEST

START_TEST(test_chains_sink_error_and_hyper)
{
    fixture fx;
    fixture_make(&fx);
    gmm_problem *p = fx.p[0];
    const gmm_objective *o = gmm_problem_objective(p);
    size_t np = o->nparam;
    int *sampled = calloc(np, sizeof *sampled);
    gmm_prior *prior = calloc(np, sizeof *prior);
    gmm_hmc_default_priors(p, sampled, prior);
    size_t ns = 0;
    for (size_t k = 0; k < np; k++) {
        ck_assert_int_eq(sampled[k], !o->fixed[k]);
        ns += sampled[k] != 0;
        if (k == np - 1) { /* the intercept: at the family's from the data, not the value */
            double b0;
            ck_assert_int_eq(gmm_lik_default_intercept(gmm_problem_lik(p), gmm_problem_y(p),
                                                       gmm_problem_exposure(p),
                                                       gmm_latent_nrows(gmm_problem_latent(p)),
                                                       &b0),
                             GMM_OK);
            ck_assert_int_eq(prior[k].kind, GMM_PRIOR_NORMAL);
            ck_assert(prior[k].mu == b0 && prior[k].sigma == 2.5);
        } else {
            ck_assert_int_eq(prior[k].kind, GMM_PRIOR_LOGNORMAL);
            ck_assert(prior[k].mu == log(o->value[k]) && prior[k].sigma == 1.0);
        }
    }
    ck_assert_uint_eq(ns, np);
    size_t bad = 99;
    ck_assert_int_eq(gmm_hmc_check_priors(p, o->value, sampled, prior, &bad), GMM_OK);
    double th0[8];
    ck_assert(np <= 8);
    memcpy(th0, o->value, np * sizeof *th0);
    th0[1] = 0.0; /* a variance or lengthscale at 0: not on the log scale */
    ck_assert_int_eq(gmm_hmc_check_priors(p, th0, sampled, prior, &bad), GMM_EINVAL);
    ck_assert_uint_eq(bad, 1);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), o->name[1]));

    gmm_hmc_run_params rp;
    params(&rp, p);
    rp.states = 0;
    rp.nchain = 2;
    rp.sampled = sampled;
    rp.prior = prior;
    unsigned char keep[NN] = {0};
    keep[3] = keep[7] = 1;
    rp.keep = keep;
    gmm_hmc_chains *ch = NULL;
    rp.metric = GMM_METRIC_LAPLACE; /* built at one theta: refused when theta moves */
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 2, &rp, &ch), GMM_EINVAL);
    ck_assert_ptr_null(ch);
    rp.metric = GMM_METRIC_PRIOR;
    ck_assert_int_eq(gmm_hmc_run_chains(fx.p, 2, &rp, &ch), GMM_OK);
    ck_assert_uint_eq(gmm_hmc_chains_ncol(ch), GMM_HMC_NSAMPLER + ns + 2);
    ck_assert_uint_eq(gmm_hmc_chains_info(ch, 0)->metric_dim, NN + ns);
    rows r = {0};
    collect(ch, &r);
    for (size_t k = 0; k < r.nrow; k++) /* positive parameters stay positive */
        for (size_t j = 0; j + 1 < ns; j++)
            ck_assert(r.v[k * r.ncol + GMM_HMC_NSAMPLER + j] > 0.0);
    /* a sink that fails stops the replay with its status */
    rows rf = {0};
    rf.fail_at = 30;
    gmm_hmc_sink sk = {on_begin, on_row, on_end, &rf};
    ck_assert_int_eq(gmm_hmc_chains_write(ch, &sk), GMM_EIO);
    ck_assert_uint_eq(rf.nrow, 29);
    ck_assert_uint_eq(rf.nend, 1);
    rows_free(&r);
    rows_free(&rf);
    gmm_hmc_chains_free(ch);
    free(sampled);
    free(prior);
    fixture_free(&fx);
}
END_TEST

Suite *infer_hmc_chains_suite(void)
{
    Suite *s = suite_create("infer_hmc_chains");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_chains_threads_and_rows);
    tcase_add_test(tc, test_chains_cancel_cuts_whole_chains);
    tcase_add_test(tc, test_chains_cancel_in_warmup_keeps_nothing);
    tcase_add_test(tc, test_chains_sink_error_and_hyper);
    suite_add_tcase(s, tc);
    return s;
}
