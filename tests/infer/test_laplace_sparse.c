/* test_laplace_sparse.c -- the Laplace approximation's sparse form
 * (laplace.h, THE SPARSE FORM) against the assembled band form on the same
 * problems (log q, the mode and every gradient output to 1e-10 relative),
 * against finite differences of log q in Q's values, against a dense
 * inverse of P for the posterior's entries, and its draws against P (and
 * the constraints) by exact identities.  Problems: a Poisson GMRF on a
 * grid graph, crossed iid effects (rows reading two latents far apart), a
 * besag-like intrinsic Q under a sum-to-zero constraint with a pin, a
 * negative binomial with its parameter, prior weights. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/laplace.h"
#include "gmm/likelihood.h"
#include "gmm/sparse.h"
#include "support/testutil.h"

/* One problem in every storage: Q dense (n x n) with its band and sparse
 * copies, the rows (dense windows or sparse rows), constraints. */
typedef struct {
    size_t n, kl;
    double *Qd;
    gmm_band *Qb;
    gmm_sparse *Qs;
    gmm_laplace_obs obs;
    size_t *offset, *rowptr, *pos;
    double *coef, *y, *e, *wt;
    gmm_lik lik;
    double b, logdet_q;
    size_t k;
    double *A;
    size_t *pin;
} prob;

static double rel(double a, double b) { return fabs(a - b) / fmax(1.0, fmax(fabs(a), fabs(b))); }

/* Band and sparse copies of Qd (the sparse pattern: Qd's nonzeros). */
static void make_q(prob *p)
{
    size_t n = p->n, m = 0;
    size_t *ei = calloc(n * n, sizeof *ei), *ej = calloc(n * n, sizeof *ej);
    p->kl = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + 1; i < n; i++)
            if (p->Qd[i * n + j] != 0.0) {
                ei[m] = i;
                ej[m++] = j;
                p->kl = i - j > p->kl ? i - j : p->kl;
            }
    ck_assert_int_eq(gmm_sparse_from_entries(n, m, ei, ej, &p->Qs), GMM_OK);
    free(ei);
    free(ej);
    for (size_t j = 0; j < n; j++)
        for (size_t q = p->Qs->colptr[j]; q < p->Qs->colptr[j + 1]; q++)
            p->Qs->val[q] = p->Qd[p->Qs->rowind[q] * n + j];
}

/* The band copy at bandwidth kl (>= Q's and the rows' width - 1). */
static void make_band(prob *p, size_t kl)
{
    size_t n = p->n;
    p->kl = kl;
    p->Qb = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    ck_assert_ptr_nonnull(p->Qb);
    gmm_band_set_zero(p->Qb);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + kl; i++)
            *gmm_band_ptr(p->Qb, i, j) = p->Qd[i * n + j];
}

static void prob_free(prob *p)
{
    free(p->Qd);
    gmm_band_free(p->Qb);
    gmm_sparse_free(p->Qs);
    free(p->offset);
    free(p->rowptr);
    free(p->pos);
    free(p->coef);
    free(p->y);
    free(p->e);
    free(p->wt);
    free(p->A);
    free(p->pin);
}

/* A k x k grid graph's D - W (4-neighbours) into Q (n = k^2). */
static void grid_laplacian(size_t k, double scale, double *Q)
{
    size_t n = k * k;
    for (size_t r = 0; r < k; r++)
        for (size_t c = 0; c < k; c++) {
            size_t i = r * k + c;
            if (c + 1 < k) {
                Q[i * n + i + 1] = Q[(i + 1) * n + i] = -scale;
                Q[i * n + i] += scale;
                Q[(i + 1) * n + i + 1] += scale;
            }
            if (r + 1 < k) {
                Q[i * n + i + k] = Q[(i + k) * n + i] = -scale;
                Q[i * n + i] += scale;
                Q[(i + k) * n + i + k] += scale;
            }
        }
}

/* Counts from a smooth f (deterministic). */
static double count_at(size_t i, double ei)
{
    double f = 0.7 * sin(0.37 * (double)i) + 0.4 * cos(1.1 * (double)i);
    return floor(ei * exp(f + 0.3) + 0.5 * (1.0 + sin(2.3 * (double)i)));
}

/* Rows in dense windows of width wd at offsets 0.., coefficients 1 and
 * then smaller, exposures in [0.5, 2]. */
static void windows(prob *p, size_t nobs, size_t wd)
{
    p->offset = malloc(nobs * sizeof *p->offset);
    p->coef = malloc(nobs * wd * sizeof *p->coef);
    p->y = malloc(nobs * sizeof *p->y);
    p->e = malloc(nobs * sizeof *p->e);
    for (size_t i = 0; i < nobs; i++) {
        p->offset[i] = (i * 7) % (p->n - wd + 1);
        for (size_t a = 0; a < wd; a++)
            p->coef[i * wd + a] = a == 0 ? 1.0 : 0.3 + 0.1 * sin((double)(i + a));
        p->e[i] = 1.25 + 0.75 * sin(0.9 * (double)i);
        p->y[i] = count_at(i, p->e[i]);
    }
    p->obs.map = (gmm_obsmap){nobs, wd, p->offset, NULL, NULL, p->coef};
    p->obs.y = p->y;
    p->obs.e = p->e;
}

static void grid_problem(prob *p, size_t k, int intrinsic)
{
    memset(p, 0, sizeof *p);
    p->n = k * k;
    p->Qd = calloc(p->n * p->n, sizeof *p->Qd);
    grid_laplacian(k, 1.7, p->Qd);
    if (!intrinsic)
        for (size_t i = 0; i < p->n; i++)
            p->Qd[i * p->n + i] += 0.05;
    make_q(p);
    windows(p, p->n + 5, 2);
    make_band(p, k);
    p->lik = (gmm_lik){gmm_lik_type_find("poisson"), {0}};
    p->b = 0.2;
    p->logdet_q = NAN;
}

/* Crossed iid effects: na + nb latents, row r reads a_(r mod na) and
 * b_(r mod nb) with coefficient 1 (sparse rows at offset 0). */
static void crossed_problem(prob *p, size_t na, size_t nb, size_t nobs)
{
    memset(p, 0, sizeof *p);
    size_t n = p->n = na + nb;
    p->Qd = calloc(n * n, sizeof *p->Qd);
    for (size_t i = 0; i < n; i++)
        p->Qd[i * n + i] = i < na ? 2.0 : 0.8;
    make_q(p);
    p->offset = calloc(nobs, sizeof *p->offset);
    p->rowptr = malloc((nobs + 1) * sizeof *p->rowptr);
    p->pos = malloc(2 * nobs * sizeof *p->pos);
    p->coef = malloc(2 * nobs * sizeof *p->coef);
    p->y = malloc(nobs * sizeof *p->y);
    p->e = malloc(nobs * sizeof *p->e);
    for (size_t r = 0; r < nobs; r++) {
        p->rowptr[r] = 2 * r;
        p->pos[2 * r] = r % na;
        p->pos[2 * r + 1] = na + (r * 3) % nb;
        p->coef[2 * r] = p->coef[2 * r + 1] = 1.0;
        p->e[r] = 1.0 + 0.5 * cos((double)r);
        p->y[r] = count_at(r, p->e[r]);
    }
    p->rowptr[nobs] = 2 * nobs;
    p->obs.map = (gmm_obsmap){nobs, n, p->offset, p->rowptr, p->pos, p->coef};
    p->obs.y = p->y;
    p->obs.e = p->e;
    make_band(p, n - 1);
    p->lik = (gmm_lik){gmm_lik_type_find("poisson"), {0}};
    p->b = 0.1;
    p->logdet_q = NAN;
}

/* Both forms' log q and gradients. */
typedef struct {
    double logq, bbar, parbar[GMM_LIK_MAXPARAM];
    double *mode, *coefbar, *shiftbar;
    gmm_band *Qbar_b;
    gmm_sparse *Qbar_s;
} result;

static void result_free(result *r)
{
    free(r->mode);
    free(r->coefbar);
    free(r->shiftbar);
    gmm_band_free(r->Qbar_b);
    gmm_sparse_free(r->Qbar_s);
}

static void result_alloc(const prob *p, result *r)
{
    memset(r, 0, sizeof *r);
    r->mode = calloc(p->n, sizeof *r->mode);
    r->coefbar = calloc(gmm_obsmap_nnz(&p->obs.map), sizeof *r->coefbar);
    r->shiftbar = calloc(p->obs.map.nrows, sizeof *r->shiftbar);
}

static void run_band(const prob *p, result *r)
{
    result_alloc(p, r);
    gmm_laplace *w = gmm_laplace_alloc(p->n, p->kl, p->kl, p->obs.map.nrows, p->obs.map.width);
    ck_assert_ptr_nonnull(w);
    gmm_laplace_set_weights(w, p->wt);
    if (p->k)
        ck_assert_int_eq(gmm_laplace_constrain(w, p->k, p->A, p->pin), GMM_OK);
    ck_assert_int_eq(gmm_laplace_eval(w, p->Qb, p->logdet_q, &p->obs, &p->lik, p->b, NULL, 0,
                                      NULL, &r->logq),
                     GMM_OK);
    r->Qbar_b = gmm_band_alloc(p->n, p->kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band_set_zero(r->Qbar_b);
    ck_assert_int_eq(gmm_laplace_grad(w, r->Qbar_b, &r->bbar, r->parbar, r->coefbar,
                                      r->shiftbar),
                     GMM_OK);
    ck_assert_int_eq(gmm_laplace_posterior(w, r->mode, NULL), GMM_OK);
    gmm_laplace_free(w);
}

static gmm_laplace *eval_sparse(const prob *p, const gmm_sparse *Q, double *logq)
{
    gmm_laplace *w = gmm_laplace_alloc_sparse(Q, &p->obs.map);
    ck_assert_ptr_nonnull(w);
    gmm_laplace_set_weights(w, p->wt);
    if (p->k)
        ck_assert_int_eq(gmm_laplace_constrain(w, p->k, p->A, p->pin), GMM_OK);
    ck_assert_int_eq(gmm_laplace_eval_sparse(w, Q, p->logdet_q, &p->obs, &p->lik, p->b, NULL, 0,
                                             NULL, logq),
                     GMM_OK);
    return w;
}

static void run_sparse(const prob *p, result *r)
{
    result_alloc(p, r);
    gmm_laplace *w = eval_sparse(p, p->Qs, &r->logq);
    r->Qbar_s = gmm_sparse_alloc_like(p->Qs);
    ck_assert_int_eq(gmm_laplace_grad_sparse(w, r->Qbar_s, &r->bbar, r->parbar, r->coefbar,
                                             r->shiftbar),
                     GMM_OK);
    ck_assert_int_eq(gmm_laplace_posterior_sparse(w, r->mode, NULL), GMM_OK);
    gmm_laplace_free(w);
}

/* Every output of the two forms to 1e-10 relative; Qbar entry by entry. */
static void compare_forms(const prob *p)
{
    result rb, rs;
    run_band(p, &rb);
    run_sparse(p, &rs);
    const double tol = 1e-10;
    ck_assert_msg(rel(rb.logq, rs.logq) < tol, "logq band %.17g sparse %.17g", rb.logq, rs.logq);
    ck_assert_msg(tu_max_rel_diff(rb.mode, rs.mode, p->n) < tol, "mode");
    ck_assert_msg(rel(rb.bbar, rs.bbar) < tol, "bbar %.17g %.17g", rb.bbar, rs.bbar);
    for (size_t k = 0; k < p->lik.type->nparam; k++)
        ck_assert_msg(rel(rb.parbar[k], rs.parbar[k]) < tol, "parbar %.17g %.17g", rb.parbar[k],
                      rs.parbar[k]);
    ck_assert_msg(tu_max_rel_diff(rb.coefbar, rs.coefbar, gmm_obsmap_nnz(&p->obs.map)) < tol,
                  "coefbar");
    ck_assert_msg(tu_max_rel_diff(rb.shiftbar, rs.shiftbar, p->obs.map.nrows) < tol,
                  "shiftbar");
    const gmm_sparse *S = rs.Qbar_s;
    double scale = 0.0;
    for (size_t q = 0; q < S->nnz; q++)
        scale = fmax(scale, fabs(S->val[q]));
    for (size_t j = 0; j < p->n; j++)
        for (size_t q = S->colptr[j]; q < S->colptr[j + 1]; q++) {
            double bv = gmm_band_get(rb.Qbar_b, S->rowind[q], j);
            ck_assert_msg(fabs(bv - S->val[q]) < tol * fmax(1.0, scale),
                          "Qbar(%zu, %zu) band %.17g sparse %.17g", S->rowind[q], j, bv,
                          S->val[q]);
        }
    result_free(&rb);
    result_free(&rs);
}

/* Sum-to-zero over the latents, pinned at latent 0; logdet_q: any fixed
 * value (both forms and the differences take the same). */
static void sum_to_zero(prob *p)
{
    p->k = 1;
    p->A = malloc(p->n * sizeof *p->A);
    for (size_t j = 0; j < p->n; j++)
        p->A[j] = 1.0;
    p->pin = calloc(1, sizeof *p->pin);
    p->logdet_q = 3.25;
}

START_TEST(test_grid_poisson)
{
    prob p;
    grid_problem(&p, 5, 0);
    compare_forms(&p);
    p.logdet_q = 1.5; /* the caller's log|Q|: no Q^-1 term in Qbar */
    compare_forms(&p);
    prob_free(&p);
}
END_TEST

START_TEST(test_crossed_iid)
{
    prob p;
    crossed_problem(&p, 7, 4, 40);
    compare_forms(&p);
    prob_free(&p);
}
END_TEST

START_TEST(test_besag_constrained)
{
    prob p;
    grid_problem(&p, 5, 1);
    sum_to_zero(&p);
    compare_forms(&p);
    prob_free(&p);
}
END_TEST

/* The cold start (laplace.c, COLD START; forced: these small problems'
 * factorisations are cheap) against Newton from x = 0 (cold -1): the
 * same log q, mode and gradient to 1e-10, in no more Newton steps -- rows
 * reading one latent (crossed iid, each of two), two (the grid's
 * windows), under a sum-to-zero constraint (where a start off A x = 0,
 * its projection failing, would lead Newton, which keeps A x, to another
 * point).  Then the default (cold 0)
 * leaves these small problems' start at 0: the same steps as from 0.
 * GMM_TEST_REPORT=1 prints the steps. */
START_TEST(test_cold_start)
{
    for (int c = 0; c < 3; c++) {
        prob p;
        if (c == 2)
            crossed_problem(&p, 7, 4, 40);
        else
            grid_problem(&p, 5, c);
        if (c == 1)
            sum_to_zero(&p);
        double lq[2], bbar[2] = {0.0, 0.0}, pbar[2][GMM_LIK_MAXPARAM] = {{0.0}}; /* += */
        double *mode[2] = {calloc(p.n, sizeof(double)), calloc(p.n, sizeof(double))};
        size_t it[3];
        for (int z = 0; z < 3; z++) {
            gmm_laplace_params par;
            gmm_laplace_params_init(&par);
            par.cold = z == 0 ? 1 : z == 1 ? -1 : 0;
            gmm_laplace *w = gmm_laplace_alloc_sparse(p.Qs, &p.obs.map);
            ck_assert_ptr_nonnull(w);
            gmm_laplace_set_weights(w, p.wt);
            if (p.k)
                ck_assert_int_eq(gmm_laplace_constrain(w, p.k, p.A, p.pin), GMM_OK);
            double lq2;
            ck_assert_int_eq(gmm_laplace_eval_sparse(w, p.Qs, p.logdet_q, &p.obs, &p.lik, p.b,
                                                     NULL, 0, &par, z < 2 ? &lq[z] : &lq2),
                             GMM_OK);
            it[z] = gmm_laplace_iterations(w);
            if (z == 2) {
                gmm_laplace_free(w);
                break;
            }
            ck_assert_int_eq(gmm_laplace_grad_sparse(w, NULL, &bbar[z], pbar[z], NULL, NULL),
                             GMM_OK);
            ck_assert_int_eq(gmm_laplace_posterior_sparse(w, mode[z], NULL), GMM_OK);
            gmm_laplace_free(w);
        }
        if (getenv("GMM_TEST_REPORT"))
            fprintf(stderr, "cold start, problem %d: %zu Newton steps (from 0: %zu)\n", c, it[0],
                    it[1]);
        ck_assert_msg(rel(lq[0], lq[1]) < 1e-10, "logq %.17g from 0 %.17g", lq[0], lq[1]);
        ck_assert_msg(tu_max_rel_diff(mode[0], mode[1], p.n) < 1e-10, "mode");
        ck_assert_msg(rel(bbar[0], bbar[1]) < 1e-10, "bbar %.17g %.17g", bbar[0], bbar[1]);
        ck_assert_uint_le(it[0], it[1]);
        if (c == 2) /* 3 steps against 5: the start did run */
            ck_assert_uint_lt(it[0], it[1]);
        ck_assert_uint_eq(it[2], it[1]);
        free(mode[0]);
        free(mode[1]);
        prob_free(&p);
    }
}
END_TEST

START_TEST(test_negbinomial_weights)
{
    prob p;
    grid_problem(&p, 4, 0);
    p.lik = (gmm_lik){gmm_lik_type_find("negbinomial"), {2.5}};
    p.wt = malloc(p.obs.map.nrows * sizeof *p.wt);
    for (size_t i = 0; i < p.obs.map.nrows; i++)
        p.wt[i] = 0.5 + (double)(i % 3) * 0.75;
    compare_forms(&p);
    prob_free(&p);
}
END_TEST

/* ---- finite differences of log q in Q's values, through the sparse form -- */

typedef struct {
    prob *p;
    gmm_sparse *Q, *D;
} fd_ctx;

static double logq_at(fd_ctx *c, double t)
{
    for (size_t q = 0; q < c->Q->nnz; q++)
        c->Q->val[q] = c->p->Qs->val[q] + t * c->D->val[q];
    double lq;
    gmm_laplace *w = eval_sparse(c->p, c->Q, &lq);
    gmm_laplace_free(w);
    return lq;
}

static void fd_check(prob *p)
{
    fd_ctx c = {p, gmm_sparse_alloc_like(p->Qs), gmm_sparse_alloc_like(p->Qs)};
    for (size_t q = 0; q < p->Qs->nnz; q++) /* a direction on Q's pattern */
        c.D->val[q] = 0.1 * sin(1.7 * (double)q + 0.3) * (1.0 + fabs(p->Qs->val[q]));
    result r;
    run_sparse(p, &r);
    double an = 0.0;
    for (size_t q = 0; q < p->Qs->nnz; q++)
        an += r.Qbar_s->val[q] * c.D->val[q];
    const double h = 1e-4;
    double f1 = logq_at(&c, h), f_1 = logq_at(&c, -h), f2 = logq_at(&c, 2 * h),
           f_2 = logq_at(&c, -2 * h);
    double fd = (8.0 * (f1 - f_1) - (f2 - f_2)) / (12.0 * h);
    ck_assert_msg(fabs(fd - an) < 1e-7 * fmax(1.0, fabs(an)), "dlogq along D: %.12g, fd %.12g",
                  an, fd);
    result_free(&r);
    gmm_sparse_free(c.Q);
    gmm_sparse_free(c.D);
}

START_TEST(test_fd_q)
{
    prob p;
    grid_problem(&p, 4, 0); /* log|Q| computed here: the Q^-1 term */
    fd_check(&p);
    prob_free(&p);
    crossed_problem(&p, 5, 3, 24);
    fd_check(&p);
    prob_free(&p);
    grid_problem(&p, 4, 1);
    sum_to_zero(&p);
    fd_check(&p);
    prob_free(&p);
}
END_TEST

/* ---- the posterior and draws against dense P --------------------------------- */

/* P = Q + H'WH at the mode (dense, n x n), W from the likelihood there. */
static double *dense_p(const prob *p, const double *mode)
{
    size_t n = p->n;
    double *P = malloc(n * n * sizeof *P), out[4];
    memcpy(P, p->Qd, n * n * sizeof *P);
    const gmm_obsmap *m = &p->obs.map;
    double *h = malloc(m->width * sizeof *h);
    for (size_t i = 0; i < m->nrows; i++) {
        double f = p->b + gmm_obsmap_row_dot(m, i, mode);
        if (p->wt)
            gmm_lik_eval_weighted(&p->lik, p->y[i], p->e[i], p->wt[i], NULL, f, out, NULL);
        else
            gmm_lik_eval(&p->lik, p->y[i], p->e[i], f, out, NULL);
        gmm_obsmap_row_window(m, i, h);
        size_t o = m->offset[i];
        for (size_t a = 0; a < m->width; a++)
            for (size_t c = 0; c < m->width; c++)
                P[(o + a) * n + o + c] += -out[2] * h[a] * h[c];
    }
    free(h);
    return P;
}

/* The covariance: P^-1, conditioned on A x = 0 when there are constraints. */
static double *dense_cov(const prob *p, const double *P)
{
    size_t n = p->n;
    double *S = malloc(n * n * sizeof *S);
    gsl_matrix *M = gsl_matrix_alloc(n, n);
    memcpy(M->data, P, n * n * sizeof *S);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(M), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(M), 0);
    memcpy(S, M->data, n * n * sizeof *S);
    gsl_matrix_free(M);
    if (p->k == 1) { /* S - S a a' S / a'S a */
        double *sa = calloc(n, sizeof *sa), asa = 0.0;
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < n; j++)
                sa[i] += S[i * n + j] * p->A[j];
            asa += p->A[i] * sa[i];
        }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                S[i * n + j] -= sa[i] * sa[j] / asa;
        free(sa);
    }
    return S;
}

static void check_posterior_draws(const prob *p)
{
    size_t n = p->n;
    double lq;
    gmm_laplace *w = eval_sparse(p, p->Qs, &lq);
    double *mode = malloc(n * sizeof *mode);
    gmm_sparse *S = gmm_sparse_alloc_like(p->Qs);
    ck_assert_int_eq(gmm_laplace_posterior_sparse(w, mode, S), GMM_OK);
    double *P = dense_p(p, mode), *C = dense_cov(p, P);
    for (size_t j = 0; j < n; j++)
        for (size_t q = S->colptr[j]; q < S->colptr[j + 1]; q++)
            ck_assert_msg(fabs(S->val[q] - C[S->rowind[q] * n + j]) < 1e-10,
                          "cov(%zu, %zu) %.17g dense %.17g", S->rowind[q], j, S->val[q],
                          C[S->rowind[q] * n + j]);
    /* Sigma e_1 by gmm_laplace_posterior_solve: the covariance's column 1 */
    double *v = calloc(n, sizeof *v);
    v[1] = 1.0;
    ck_assert_int_eq(gmm_laplace_posterior_solve(w, v), GMM_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(v[i] - C[i * n + 1]) < 1e-10, "Sigma e_1 at %zu: %.17g vs %.17g", i,
                      v[i], C[i * n + 1]);
    free(v);
    /* draws: x - mode = T z, linear in z; T T' is the covariance */
    double *T = malloc(n * n * sizeof *T), *z = malloc(n * sizeof *z), *x = malloc(n * sizeof *x);
    for (size_t c = 0; c < n; c++) {
        memset(z, 0, n * sizeof *z);
        z[c] = 1.0;
        ck_assert_int_eq(gmm_laplace_draw(w, z, x, NULL), GMM_OK);
        for (size_t r = 0; r < n; r++)
            T[r * n + c] = x[r] - mode[r];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double tt = 0.0;
            for (size_t c = 0; c < n; c++)
                tt += T[i * n + c] * T[j * n + c];
            ck_assert_msg(fabs(tt - C[i * n + j]) < 1e-10, "draw cov(%zu, %zu) %.17g vs %.17g",
                          i, j, tt, C[i * n + j]);
        }
    /* one draw: (x - x^)'P(x - x^) = z'z, and A x = 0 with constraints */
    double zz = 0.0, logw;
    for (size_t j = 0; j < n; j++) {
        z[j] = sin(1.3 * (double)j + 0.2) + 0.5 * cos(0.7 * (double)j);
        zz += z[j] * z[j];
    }
    ck_assert_int_eq(gmm_laplace_draw(w, z, x, &logw), GMM_OK);
    double dpd = 0.0, ax = 0.0, ax_scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++)
            dpd += (x[i] - mode[i]) * P[i * n + j] * (x[j] - mode[j]);
        if (p->k) {
            ax += p->A[i] * x[i];
            ax_scale += fabs(p->A[i] * x[i]);
        }
    }
    if (p->k)
        ck_assert_msg(fabs(ax) < 1e-12 * fmax(1.0, ax_scale), "A x = %g", ax);
    else
        ck_assert_msg(rel(dpd, zz) < 1e-10, "d'Pd %.17g, z'z %.17g", dpd, zz);
    /* logw = Psi(x) - Psi(x^) + d'Pd/2 (dense) */
    double psi_x = 0.0, psi_m = 0.0, out[4];
    for (size_t i = 0; i < p->obs.map.nrows; i++) {
        gmm_lik_eval(&p->lik, p->y[i], p->e[i], p->b + gmm_obsmap_row_dot(&p->obs.map, i, x),
                     out, NULL);
        psi_x += out[0];
        gmm_lik_eval(&p->lik, p->y[i], p->e[i], p->b + gmm_obsmap_row_dot(&p->obs.map, i, mode),
                     out, NULL);
        psi_m += out[0];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            psi_x -= 0.5 * x[i] * p->Qd[i * n + j] * x[j];
            psi_m -= 0.5 * mode[i] * p->Qd[i * n + j] * mode[j];
        }
    ck_assert_msg(rel(logw, psi_x - psi_m + 0.5 * dpd) < 1e-9, "logw %.17g dense %.17g", logw,
                  psi_x - psi_m + 0.5 * dpd);
    ck_assert(p->k ? gmm_laplace_factor(w) == NULL : gmm_laplace_factor(w) != NULL);
    free(T);
    free(z);
    free(x);
    free(P);
    free(C);
    free(mode);
    gmm_sparse_free(S);
    gmm_laplace_free(w);
}

START_TEST(test_posterior_draws)
{
    prob p;
    grid_problem(&p, 4, 0);
    check_posterior_draws(&p);
    prob_free(&p);
    crossed_problem(&p, 5, 3, 24);
    check_posterior_draws(&p);
    prob_free(&p);
    grid_problem(&p, 4, 1);
    sum_to_zero(&p);
    check_posterior_draws(&p);
    prob_free(&p);
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

START_TEST(test_errors)
{
    prob p;
    grid_problem(&p, 3, 0);
    double lq;
    gmm_laplace *w = gmm_laplace_alloc_sparse(p.Qs, &p.obs.map);
    ck_assert_ptr_nonnull(w);
    /* no evaluation yet */
    ck_assert_int_eq(gmm_laplace_grad_sparse(w, NULL, NULL, NULL, NULL, NULL), GMM_EINVAL);
    ck_assert_ptr_null(gmm_laplace_factor(w));
    /* the band functions refuse a sparse workspace */
    ck_assert_int_eq(gmm_laplace_eval(w, p.Qb, NAN, &p.obs, &p.lik, p.b, NULL, 0, NULL, &lq),
                     GMM_EINVAL);
    /* another pattern of Q */
    gmm_sparse *D = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(p.n, 0, NULL, NULL, &D), GMM_OK);
    for (size_t j = 0; j < p.n; j++)
        D->val[D->colptr[j]] = 1.0;
    ck_assert_int_eq(gmm_laplace_eval_sparse(w, D, NAN, &p.obs, &p.lik, p.b, NULL, 0, NULL, &lq),
                     GMM_EDIM);
    /* rows reading other latents */
    p.offset[0] += 1;
    ck_assert_int_eq(
        gmm_laplace_eval_sparse(w, p.Qs, NAN, &p.obs, &p.lik, p.b, NULL, 0, NULL, &lq),
        GMM_EDIM);
    p.offset[0] -= 1;
    /* Q not positive definite */
    gmm_sparse *N = gmm_sparse_alloc_like(p.Qs);
    for (size_t q = 0; q < N->nnz; q++)
        N->val[q] = -p.Qs->val[q];
    ck_assert_int_eq(gmm_laplace_eval_sparse(w, N, NAN, &p.obs, &p.lik, p.b, NULL, 0, NULL, &lq),
                     GMM_ENOTPD);
    /* a sparse evaluation, then a band call on it */
    ck_assert_int_eq(
        gmm_laplace_eval_sparse(w, p.Qs, NAN, &p.obs, &p.lik, p.b, NULL, 0, NULL, &lq), GMM_OK);
    ck_assert_int_eq(gmm_laplace_grad(w, p.Qb, NULL, NULL, NULL, NULL), GMM_EINVAL);
    /* Qbar missing one of Q's entries */
    ck_assert_int_eq(gmm_laplace_grad_sparse(w, D, NULL, NULL, NULL, NULL), GMM_EDIM);
    gmm_sparse_free(D);
    gmm_sparse_free(N);
    gmm_laplace_free(w);
    prob_free(&p);
}
END_TEST

Suite *infer_laplace_sparse_suite(void)
{
    Suite *s = suite_create("infer_laplace_sparse");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_grid_poisson);
    tcase_add_test(tc, test_crossed_iid);
    tcase_add_test(tc, test_besag_constrained);
    tcase_add_test(tc, test_cold_start);
    tcase_add_test(tc, test_negbinomial_weights);
    tcase_add_test(tc, test_fd_q);
    tcase_add_test(tc, test_posterior_draws);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
