/* test_problem_sparse.c -- the sparse path of a problem
 * (gmm_problem_alloc_sparse) against the band path on the same model:
 * crossed iid effects (7 x 5 levels, a covariate), Gaussian (the band's
 * exact marginal likelihood against the sparse path's one-step Laplace),
 * Poisson and with a random walk beside them; the objective and its
 * gradient to 1e-10 relative, the sparse gradient against central
 * differences, and the rows' posterior moments (a missing row whose pair
 * of levels no observed row has: a posterior solve).  The same on a graph latent (a 6 x 6 lattice,
 * edge-ou), and its nodes' moments.  Small: 35 and 40 rows. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/latent.h"
#include "gmm/spec.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/stack.h"
#include "support/testutil.h"
#include "support/tu_model.h"

#define NA 7
#define NB 5
#define NR (NA * NB)

typedef struct {
    double X[2 * NR], y[NR], e[NR], t[NR];
    size_t a[NR], b[NR];
} data;

static void make_data(data *d, int counts)
{
    for (size_t r = 0; r < NR; r++) {
        d->a[r] = r % NA;
        d->b[r] = r / NA;
        d->t[r] = (double)(r % 9);
        double z = sin(1.3 * (double)r);
        d->X[2 * r] = 1.0;
        d->X[2 * r + 1] = z;
        d->e[r] = 1.0 + 0.1 * (double)(r % 3);
        d->y[r] = counts ? (double)((r * 7) % 5)
                         : 0.4 * z + 0.3 * cos(2.1 * (double)d->a[r]) - 0.2 * (double)d->b[r] +
                               0.1 * sin(5.3 * (double)r);
    }
    /* a missing row at a pair (a, b) no observed row has: its variance
     * leaves the kept pattern (a posterior solve; conditioned on the
     * walk's constraint with three terms) */
    d->y[NA + 2] = NAN;
}

/* nterm 2: the crossed iid terms; 3: and a random walk over t. */
static gmm_latent *make_latent(const data *d, size_t nterm)
{
    gmm_stack_term t[3] = {
        {.model = GMM_STACK_IID, .name = "f.a", .nlevel = NA, .level = d->a, .variance = 0.7},
        {.model = GMM_STACK_IID, .name = "f.b", .nlevel = NB, .level = d->b, .variance = 0.4},
        {.model = GMM_STACK_RW1, .name = "f.t", .value = d->t, .variance = 0.3}};
    gmm_latent *lat = NULL;
    ck_assert_msg(gmm_latent_stack_alloc(NR, nterm, t, 0, &lat) == GMM_OK, "%s",
                  gmm_error_message());
    return lat;
}

static gmm_problem *make_problem(data *d, const gmm_lik *lik, gmm_latent *lat, int sparse)
{
    static const char *names[] = {"intercept", "coef.z"};
    double start[2] = {0.1, 0.2};
    gmm_problem_design des = {2, d->X, names, start, 0};
    gmm_problem *p = NULL;
    const double *e = lik->type->rowq ? d->e : NULL;
    gmm_status s = sparse ? gmm_problem_alloc_sparse(lat, lik, d->y, e, &des, &p)
                          : gmm_problem_alloc_design(lat, lik, d->y, e, &des, &p);
    ck_assert_msg(s == GMM_OK, "%s", gmm_error_message());
    ck_assert_int_eq(gmm_problem_sparse(p), sparse);
    return p;
}

/* The Gaussian model of nterm terms on both storages: sparse (s), band (b). */
typedef struct {
    data d;
    gmm_lik lik;
    gmm_latent *ls, *lb;
    gmm_problem *ps, *pb;
} gauss_pair;

static void pair_make(gauss_pair *q, size_t nterm)
{
    make_data(&q->d, 0);
    q->lik = tu_lik_of("gaussian(variance=0.3)", NAN);
    q->ls = make_latent(&q->d, nterm);
    q->lb = make_latent(&q->d, nterm);
    q->ps = make_problem(&q->d, &q->lik, q->ls, 1);
    q->pb = make_problem(&q->d, &q->lik, q->lb, 0);
}

static void pair_free(gauss_pair *q)
{
    gmm_problem_free(q->ps);
    gmm_problem_free(q->pb);
    gmm_latent_free(q->ls);
    gmm_latent_free(q->lb);
}

static int close_to(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(1.0, fabs(b));
}

START_TEST(test_sparse_equals_band)
{
    const char *specs[] = {"gaussian(variance=0.3)", "poisson"};
    for (size_t k = 0; k < 2; k++)
        for (size_t nterm = 2; nterm <= 3; nterm++) {
            data d;
            make_data(&d, k == 1);
            gmm_lik lik = tu_lik_of(specs[k], NAN);
            gmm_latent *lb = make_latent(&d, nterm), *ls = make_latent(&d, nterm);
            gmm_problem *pb = make_problem(&d, &lik, lb, 0), *ps = make_problem(&d, &lik, ls, 1);
            gmm_objective *ob = gmm_problem_objective(pb), *os = gmm_problem_objective(ps);
            ck_assert_uint_eq(ob->nparam, os->nparam);
            size_t np = ob->nparam;
            double theta[8], gb[8], gs[8], fb, fs;
            memcpy(theta, ob->value, np * sizeof *theta);
            theta[np - 1] = -0.3;
            ck_assert_msg(ob->eval(ob->ctx, theta, &fb, gb) == GMM_OK, "%s", gmm_error_message());
            ck_assert_msg(os->eval(os->ctx, theta, &fs, gs) == GMM_OK, "%s", gmm_error_message());
            ck_assert_msg(close_to(fs, fb, 1e-10), "%s, %zu terms: sparse %.17g, band %.17g",
                          specs[k], nterm, fs, fb);
            for (size_t j = 0; j < np; j++) {
                ck_assert_msg(close_to(gs[j], gb[j], 1e-10),
                              "%s, %zu terms: gradient %zu (%s) sparse %.17g, band %.17g",
                              specs[k], nterm, j, os->name[j], gs[j], gb[j]);
                /* and the sparse gradient against its own central differences */
                double h = 1e-5 * fmax(1.0, fabs(theta[j])), th[8], fp, fm;
                memcpy(th, theta, np * sizeof *th);
                th[j] = theta[j] + h;
                ck_assert_int_eq(os->eval(os->ctx, th, &fp, NULL), GMM_OK);
                th[j] = theta[j] - h;
                ck_assert_int_eq(os->eval(os->ctx, th, &fm, NULL), GMM_OK);
                double num = (fp - fm) / (2.0 * h);
                ck_assert_msg(close_to(gs[j], num, 1e-6), "%s: gradient %zu %.17g, central %.17g",
                              specs[k], j, gs[j], num);
            }
            /* the rows' posterior moments, the missing one included */
            double mb[NR], vb[NR], ms[NR], vs[NR];
            ck_assert_msg(gmm_problem_predict_rows(pb, theta, mb, vb) == GMM_OK, "%s",
                          gmm_error_message());
            ck_assert_msg(gmm_problem_predict_rows(ps, theta, ms, vs) == GMM_OK, "%s",
                          gmm_error_message());
            for (size_t r = 0; r < NR; r++)
                ck_assert_msg(close_to(ms[r], mb[r], 1e-9) && close_to(vs[r], vb[r], 1e-9),
                              "%s, %zu terms: row %zu sparse %.17g (%.17g), band %.17g (%.17g)",
                              specs[k], nterm, r, ms[r], vs[r], mb[r], vb[r]);
            gmm_problem_free(pb);
            gmm_problem_free(ps);
            gmm_latent_free(lb);
            gmm_latent_free(ls);
        }
}
END_TEST

/* Dense inverse of the symmetric positive definite A (n x n) in place. */
static void spd_inverse(double *A, size_t n)
{
    gsl_matrix_view m = gsl_matrix_view_array(A, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&m.matrix), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&m.matrix), 0);
}

#define NL 24 /* latents of the three terms, at most */

/* The objective's information (obj->info, the average information) against
 * its definition computed densely: V = sigma^2 W^-1 + H S H' over the
 * observed rows, S the prior covariance conditioned on the walk's
 * constraint (P (Q + C'C)^-1 P, P the projection off C's rows), the blocks
 * found by which entries of Q move when a variance does, w_k = dV_k V^-1 r,
 * M_jk = w_j'V^-1 w_k / 2 for variances, X'V^-1 X for the coefficients, 0
 * between; on both storages (the band's exact path has none: NULL), with
 * and without weights, at a theta off the start.  Poisson: none. */
START_TEST(test_information)
{
    for (int weighted = 0; weighted <= 1; weighted++)
        for (size_t nterm = 2; nterm <= 3; nterm++) {
            gauss_pair q;
            pair_make(&q, nterm);
            const data *d = &q.d;
            gmm_latent *ls = q.ls;
            gmm_problem *ps = q.ps, *pb = q.pb;
            double wt[NR];
            for (size_t r = 0; r < NR; r++)
                wt[r] = weighted ? 0.5 + 0.25 * (double)(r % 4) : 1.0;
            if (weighted) {
                ck_assert_int_eq(gmm_problem_set_weights(ps, wt), GMM_OK);
                ck_assert_int_eq(gmm_problem_set_weights(pb, wt), GMM_OK);
            }
            gmm_objective *o = gmm_problem_objective(ps);
            /* the band's exact path has no mode to read; weighted, it is Laplace's */
            ck_assert(o->info != NULL);
            ck_assert((gmm_problem_objective(pb)->info != NULL) == weighted);
            size_t np = o->nparam, nl = nterm, n = gmm_latent_dim(ls);
            ck_assert(n <= NL);
            double theta[8], g[8], f, M[64];
            memcpy(theta, o->value, np * sizeof *theta);
            for (size_t j = 0; j < nl; j++)
                theta[j] *= 1.0 + 0.3 * (double)j;
            theta[nl] = 0.45;
            theta[np - 2] = 0.05;
            theta[np - 1] = -0.3;
            ck_assert_msg(o->eval(o->ctx, theta, &f, g) == GMM_OK, "%s", gmm_error_message());
            ck_assert_msg(o->info(o->ctx, theta, M) == GMM_OK, "%s", gmm_error_message());

            /* dense Q and its blocks */
            gmm_band *Q = gmm_band_alloc(n, gmm_latent_bandwidth(ls), 0, GMM_BAND_SYMMETRIC);
            double ld, blk[NL];
            ck_assert_int_eq(gmm_latent_prior(ls, theta, Q, &ld), GMM_OK);
            double *Qd = tu_band_to_dense(Q);
            ck_assert(Qd != NULL);
            for (size_t k = 0; k < nl; k++) {
                double th[8];
                memcpy(th, theta, np * sizeof *th);
                th[k] *= 2.0;
                ck_assert_int_eq(gmm_latent_prior(ls, th, Q, &ld), GMM_OK);
                for (size_t i = 0; i < n; i++)
                    if (gmm_band_get(Q, i, i) != Qd[i * n + i])
                        blk[i] = (double)k;
            }
            gmm_band_free(Q);
            /* S = P (Q + C'C)^-1 P */
            size_t kc = gmm_latent_nconstr(ls);
            const double *C = gmm_latent_constraints(ls);
            double A[NL * NL], P[NL * NL], S[NL * NL];
            memcpy(A, Qd, n * n * sizeof *A);
            free(Qd);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                    double p = i == j ? 1.0 : 0.0;
                    for (size_t c = 0; c < kc; c++) {
                        double cc = 0.0;
                        for (size_t t = 0; t < n; t++)
                            cc += C[c * n + t] * C[c * n + t];
                        A[i * n + j] += C[c * n + i] * C[c * n + j];
                        p -= C[c * n + i] * C[c * n + j] / cc; /* one constraint per block */
                    }
                    P[i * n + j] = p;
                }
            spd_inverse(A, n);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                    double v = 0.0;
                    for (size_t a = 0; a < n; a++)
                        for (size_t b = 0; b < n; b++)
                            v += P[i * n + a] * A[a * n + b] * P[b * n + j];
                    S[i * n + j] = v;
                }
            /* H, r and X over the observed rows */
            gmm_obsmap map = gmm_latent_obs_map(ls);
            double coef[4 * NR], H[NR * NL], r[NR], X[2 * NR];
            ck_assert_int_eq(gmm_latent_obs_values(ls, theta, coef), GMM_OK);
            size_t no = 0, orow[NR];
            for (size_t row = 0; row < NR; row++) {
                if (isnan(d->y[row]))
                    continue;
                memset(H + no * n, 0, n * sizeof *H);
                size_t lo = gmm_obsmap_row_lo(&map, row), hi = gmm_obsmap_row_hi(&map, row);
                for (size_t e = lo; e < hi; e++)
                    H[no * n + map.offset[row] + gmm_obsmap_row_pos(&map, e, lo)] += coef[e];
                r[no] = d->y[row] - d->X[2 * row] * theta[np - 2] -
                        d->X[2 * row + 1] * theta[np - 1];
                X[2 * no] = d->X[2 * row];
                X[2 * no + 1] = d->X[2 * row + 1];
                orow[no++] = row;
            }
            /* V, its inverse, and each variance's dV */
            static double V[NR * NR], Vi[NR * NR], dV[4][NR * NR];
            for (size_t a = 0; a < no; a++)
                for (size_t b = 0; b < no; b++) {
                    double v = a == b ? theta[nl] / wt[orow[a]] : 0.0;
                    for (size_t k = 0; k <= nl; k++)
                        dV[k][a * no + b] = k == nl && a == b ? 1.0 / wt[orow[a]] : 0.0;
                    for (size_t i = 0; i < n; i++)
                        for (size_t j = 0; j < n; j++) {
                            double h = H[a * n + i] * S[i * n + j] * H[b * n + j];
                            v += h;
                            if (blk[i] == blk[j])
                                dV[(size_t)blk[i]][a * no + b] += h / theta[(size_t)blk[i]];
                        }
                    V[a * no + b] = v;
                }
            memcpy(Vi, V, no * no * sizeof *V);
            spd_inverse(Vi, no);
            double Vr[NR], w[6][NR], Vw[6][NR];
            for (size_t a = 0; a < no; a++) {
                Vr[a] = 0.0;
                for (size_t b = 0; b < no; b++)
                    Vr[a] += Vi[a * no + b] * r[b];
            }
            for (size_t k = 0; k < np; k++)
                for (size_t a = 0; a < no; a++) {
                    double v = 0.0;
                    for (size_t b = 0; b < no; b++)
                        v += k <= nl ? dV[k][a * no + b] * Vr[b] : 0.0;
                    w[k][a] = k <= nl ? v : X[2 * a + (k - nl - 1)];
                }
            for (size_t k = 0; k < np; k++)
                for (size_t a = 0; a < no; a++) {
                    Vw[k][a] = 0.0;
                    for (size_t b = 0; b < no; b++)
                        Vw[k][a] += Vi[a * no + b] * w[k][b];
                }
            double big = 0.0;
            for (size_t j = 0; j < np * np; j++)
                big = fmax(big, fabs(M[j]));
            for (size_t j = 0; j < np; j++)
                for (size_t k = 0; k < np; k++) {
                    double ref = 0.0;
                    if ((j <= nl) == (k <= nl)) {
                        for (size_t a = 0; a < no; a++)
                            ref += w[j][a] * Vw[k][a];
                        if (j <= nl)
                            ref *= 0.5;
                    }
                    ck_assert_msg(fabs(M[j * np + k] - ref) <= 1e-10 * big,
                                  "weights %d, %zu terms: M[%s, %s] = %.17g, dense %.17g",
                                  weighted, nterm, o->name[j], o->name[k], M[j * np + k], ref);
                }
            pair_free(&q);
        }
    /* Poisson: no information */
    data d;
    make_data(&d, 1);
    gmm_lik lik = tu_lik_of("poisson", NAN);
    gmm_latent *l = make_latent(&d, 3);
    gmm_problem *p = make_problem(&d, &lik, l, 1);
    ck_assert(gmm_problem_objective(p)->info == NULL);
    gmm_problem_free(p);
    gmm_latent_free(l);
}
END_TEST

/* gmm_fit takes scoring steps where the objective has its information:
 * the crossed model (Gaussian) fitted on the sparse path (scoring, which
 * ended the search) and on the band's exact path (L-BFGS, no information):
 * both converged, the same loglik to 1e-9 relative and the same parameters
 * to 1e-4 of their size (a decrement of 1e-8 moves them about that), the
 * scoring run in fewer evaluations.  With the walk beside them its
 * variance's maximum is at 0: the scoring steps hand over to L-BFGS, and
 * both runs end converged with the walk at its bound and the same loglik,
 * the scoring steps handing over within 8.  A cancel from the progress
 * callback during the scoring steps ends the fit (GMM_ECANCEL, the start
 * kept). */
static int cancel_first(void *user, const gmm_fit_progress *p)
{
    (void)p;
    return ++*(int *)user == 1;
}

START_TEST(test_scoring_fit)
{
    /* a cancel from the progress callback during the scoring steps */
    {
        data d;
        make_data(&d, 0);
        gmm_lik lik = tu_lik_of("gaussian(variance=0.3)", NAN);
        gmm_latent *l = make_latent(&d, 2);
        gmm_problem *p = make_problem(&d, &lik, l, 1);
        gmm_objective *o = gmm_problem_objective(p);
        double start[8];
        memcpy(start, o->value, o->nparam * sizeof *start);
        gmm_fit_params fp;
        gmm_fit_params_init(&fp);
        int calls = 0;
        fp.progress = cancel_first;
        fp.user = &calls;
        gmm_fit_result r;
        ck_assert_int_eq(gmm_fit(o, &fp, &r), GMM_ECANCEL);
        ck_assert_int_eq(calls, 1);
        for (size_t j = 0; j < o->nparam; j++)
            ck_assert(o->value[j] == start[j]);
        gmm_problem_free(p);
        gmm_latent_free(l);
    }
    for (size_t nterm = 2; nterm <= 3; nterm++) {
        gauss_pair q;
        pair_make(&q, nterm);
        gmm_objective *os = gmm_problem_objective(q.ps), *ob = gmm_problem_objective(q.pb);
        ck_assert(os->info && !ob->info);
        gmm_fit_params fp;
        gmm_fit_params_init(&fp);
        int bs[8], bb[8];
        gmm_fit_result rs, rb;
        fp.boundary = bs;
        ck_assert_msg(gmm_fit(os, &fp, &rs) == GMM_OK, "%s", gmm_error_message());
        fp.boundary = bb;
        ck_assert_msg(gmm_fit(ob, &fp, &rb) == GMM_OK, "%s", gmm_error_message());
        ck_assert(rs.converged && rb.converged);
        ck_assert_msg(close_to(rs.loglik, rb.loglik, 1e-9), "%zu terms: scoring %.17g, L-BFGS %.17g",
                      nterm, rs.loglik, rb.loglik);
        if (nterm == 3) {
            /* handed over within a few steps, not at the steps' limit */
            ck_assert_str_ne(rs.lbfgs_stop, "scoring");
            ck_assert_uint_le(rs.scoring_steps, 8);
            ck_assert(bs[2] == 1 && bb[2] == 1 && rs.nboundary == 1 && rb.nboundary == 1);
        } else {
            ck_assert_str_eq(rs.lbfgs_stop, "scoring");
            ck_assert_msg(rs.evaluations < rb.evaluations, "scoring %zu evaluations, L-BFGS %zu",
                          rs.evaluations, rb.evaluations);
            for (size_t j = 0; j < os->nparam; j++)
                ck_assert_msg(fabs(os->value[j] - ob->value[j]) <=
                                  1e-4 * fmax(1.0, fabs(ob->value[j])),
                              "%s: scoring %.17g, L-BFGS %.17g", os->name[j], os->value[j],
                              ob->value[j]);
        }
        pair_free(&q);
    }
}
END_TEST

/* A stop that answers yes from its limit-th poll on. */
typedef struct {
    int polls, limit;
} stopper;

static int stop_after(void *user)
{
    stopper *s = user;
    return ++s->polls >= s->limit;
}

/* gmm_problem_set_stop: a stop polled between Newton steps ends an
 * evaluation with GMM_ECANCEL on either storage (the Poisson model with
 * three terms: a few Newton steps); gmm_fit then returns GMM_ECANCEL with
 * the start values kept; without the stop the next evaluation equals a
 * fresh problem's (the cancelled one left no half-made mode behind). */
START_TEST(test_stop)
{
    for (int sparse = 0; sparse <= 1; sparse++) {
        data d;
        make_data(&d, 1);
        gmm_lik lik = tu_lik_of("poisson", NAN);
        gmm_latent *l1 = make_latent(&d, 3), *l2 = make_latent(&d, 3);
        gmm_problem *p = make_problem(&d, &lik, l1, sparse), *q = make_problem(&d, &lik, l2, sparse);
        gmm_objective *o = gmm_problem_objective(p), *oq = gmm_problem_objective(q);
        size_t np = o->nparam;
        double theta[8], start[8], g[8], gq[8], f, fq;
        memcpy(theta, o->value, np * sizeof *theta);
        memcpy(start, o->value, np * sizeof *start);
        stopper s = {0, 2};
        gmm_problem_set_stop(p, stop_after, &s);
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, g), GMM_ECANCEL);
        ck_assert_int_eq(s.polls, 2);
        gmm_fit_params fp;
        gmm_fit_params_init(&fp);
        gmm_fit_result res;
        s = (stopper){0, 5};
        ck_assert_int_eq(gmm_fit(o, &fp, &res), GMM_ECANCEL);
        for (size_t j = 0; j < np; j++)
            ck_assert(o->value[j] == start[j]);
        gmm_problem_set_stop(p, NULL, NULL);
        ck_assert_int_eq(o->eval(o->ctx, theta, &f, g), GMM_OK);
        ck_assert_int_eq(oq->eval(oq->ctx, theta, &fq, gq), GMM_OK);
        ck_assert_msg(close_to(f, fq, 1e-12), "storage %d: after a cancelled evaluation "
                      "%.17g, fresh %.17g", sparse, f, fq);
        for (size_t j = 0; j < np; j++)
            ck_assert(close_to(g[j], gq[j], 1e-10));
        gmm_problem_free(p);
        gmm_problem_free(q);
        gmm_latent_free(l1);
        gmm_latent_free(l2);
    }
}
END_TEST

/* The objective and gradient of pb and ps at their start to 1e-10, and
 * the rows' moments; nr rows. */
static void compare(gmm_problem *pb, gmm_problem *ps, size_t nr, const char *what)
{
    gmm_objective *ob = gmm_problem_objective(pb), *os = gmm_problem_objective(ps);
    size_t np = ob->nparam;
    double gb[8], gs[8], fb, fs, mb[64], vb[64], ms[64], vs[64];
    ck_assert_msg(ob->eval(ob->ctx, ob->value, &fb, gb) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(os->eval(os->ctx, os->value, &fs, gs) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(close_to(fs, fb, 1e-10), "%s: sparse %.17g, band %.17g", what, fs, fb);
    for (size_t j = 0; j < np; j++)
        ck_assert_msg(close_to(gs[j], gb[j], 1e-10), "%s: gradient %zu sparse %.17g, band %.17g",
                      what, j, gs[j], gb[j]);
    ck_assert_int_eq(gmm_problem_predict_rows(pb, ob->value, mb, vb), GMM_OK);
    ck_assert_msg(gmm_problem_predict_rows(ps, os->value, ms, vs) == GMM_OK, "%s",
                  gmm_error_message());
    for (size_t r = 0; r < nr; r++)
        ck_assert_msg(close_to(ms[r], mb[r], 1e-9) && close_to(vs[r], vb[r], 1e-9),
                      "%s: row %zu sparse %.17g (%.17g), band %.17g (%.17g)", what, r, ms[r],
                      vs[r], mb[r], vb[r]);
}

START_TEST(test_graph_sparse_equals_band)
{
    enum { K = 6, N = K * K, R = N + 4 };
    size_t ei[2 * N], ej[2 * N], m = 0, node[R];
    double len[2 * N], y[R], e[R];
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++) {
            if (j + 1 < K)
                ei[m] = i * K + j, ej[m] = i * K + j + 1, len[m++] = 1.0;
            if (i + 1 < K)
                ei[m] = i * K + j, ej[m] = (i + 1) * K + j, len[m++] = 1.0;
        }
    for (size_t r = 0; r < R; r++) {
        node[r] = (r * 7) % N;
        e[r] = 1.0 + 0.1 * (double)(r % 3);
    }
    gmm_graph *g = NULL;
    gmm_spec_node *spec = NULL;
    gmm_gmrf *gm = NULL;
    const char *text = "edge-ou(variance=1.3, lengthscale=2)";
    ck_assert_int_eq(gmm_graph_from_edges(N, m, ei, ej, len, NULL, NULL, &g), GMM_OK);
    ck_assert_int_eq(gmm_spec_parse(text, &spec), GMM_OK);
    ck_assert_msg(gmm_gmrf_alloc(g, spec, text, &gm) == GMM_OK, "%s", gmm_error_message());
    const char *specs[] = {"gaussian(variance=0.3)", "poisson"};
    for (size_t k = 0; k < 2; k++) {
        for (size_t r = 0; r < R; r++)
            y[r] = k ? (double)((r * 5) % 4) : sin(0.7 * (double)r);
        y[3] = NAN;
        gmm_lik lik = tu_lik_of(specs[k], NAN);
        static const char *names[] = {"intercept"};
        double one[R], start[1] = {0.1};
        for (size_t r = 0; r < R; r++)
            one[r] = 1.0;
        gmm_problem_design des = {1, one, names, start, 0};
        gmm_latent *lb = NULL, *ls = NULL;
        gmm_problem *pb = NULL, *ps = NULL;
        ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, R, node, &lb), GMM_OK);
        ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, R, node, &ls), GMM_OK);
        ck_assert_int_eq(gmm_problem_alloc_design(lb, &lik, y, k ? e : NULL, &des, &pb), GMM_OK);
        ck_assert_msg(gmm_problem_alloc_sparse(ls, &lik, y, k ? e : NULL, &des, &ps) == GMM_OK,
                      "%s", gmm_error_message());
        compare(pb, ps, R, specs[k]);
        ck_assert(!gmm_latent_scale_blocks(ls, NULL)); /* edge-ou: not scale blocks */
        /* the latent at the nodes */
        double mb[N], vb[N], ms[N], vs[N];
        const double *th = gmm_problem_objective(pb)->value;
        ck_assert_int_eq(gmm_problem_predict_latent(pb, th, NULL, 0, mb, vb), GMM_OK);
        ck_assert_int_eq(gmm_problem_predict_latent(ps, th, NULL, 0, ms, vs), GMM_OK);
        for (size_t v = 0; v < N; v++)
            ck_assert_msg(close_to(ms[v], mb[v], 1e-9) && close_to(vs[v], vb[v], 1e-9),
                          "%s: node %zu sparse %.17g (%.17g), band %.17g (%.17g)", specs[k], v,
                          ms[v], vs[v], mb[v], vb[v]);
        gmm_problem_free(pb);
        gmm_problem_free(ps);
        gmm_latent_free(lb);
        gmm_latent_free(ls);
    }
    gmm_gmrf_free(gm);
    gmm_spec_free(spec);
    gmm_graph_free(g);
}
END_TEST

Suite *problem_sparse_suite(void)
{
    Suite *s = suite_create("problem_sparse");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sparse_equals_band);
    tcase_add_test(tc, test_graph_sparse_equals_band);
    tcase_add_test(tc, test_stop);
    tcase_add_test(tc, test_information);
    tcase_add_test(tc, test_scoring_fit);
    suite_add_tcase(s, tc);
    return s;
}
