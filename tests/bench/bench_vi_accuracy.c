/* bench_vi_accuracy.c -- the ELBO's gradient through the prior's square-root
 * rows (vi.h) as the spacing shrinks against the lengthscale.
 *
 *   n = 60 inputs on a regular grid dt = r * lengthscale (lengthscale 1,
 *   variance 1), matern32 and matern52, y drawn from the dense GP at
 *   noise 0.1 (tests/support/tu_dense_gp.h), Gaussian likelihood, three
 *   seeds; r = 1e-1 .. 1e-6.
 *
 * THETA.  q is the exact posterior (gmm_vi_start_laplace: its mean by the
 * latent's square-root form, L folded from the prior's rows and the
 * observations), where the ELBO equals log p(y | theta) and, q being optimal
 * for theta, its partial gradient in theta equals d log p(y | theta)/dtheta
 * (the envelope theorem).  The oracle is that gradient of the dense GP in
 * long double (tu_dense_grad: K + noise I is well conditioned at any
 * spacing); q's own rounding moves the ELBO's gradient only at second
 * order.  Printed: the worst error over the parameters (variance,
 * lengthscale, noise) in units of max(|g|, 1), worst over the seeds.  That
 * order is not negligible at the closest spacings: m is stored in doubles,
 * and moving it by its rounding moves the exact gradient by about eps
 * (l/dt)^(nu + 1/2) |m| per row (G's entries times m's last bit).  The row
 * "theta, m's last bit" shows how far the gradient moves when each m_j is
 * moved by one ulp at random: where it reaches the error, the envelope
 * oracle has no more digits to give (matern52 below dt/l = 1e-4).
 *
 * MEAN.  At the posterior and with q's mean moved by 1%, the gradient in m
 * against sum_r a_r h_r - G'(G m) in binary128 from the same rows G (the
 * exact gradient of the ELBO the library evaluates, whose rows are doubles);
 * printed relative to max(|ref|_inf, |sum_r a_r h_r|_inf).
 *
 * L.  At the posterior, and with L's diagonal moved by 5% and the rest of
 * its band by 1%, the gradient in L's band (lambda's: log-diagonal) against Sigma (Q +
 * H'H / noise) L^-T - diag(1 / L_jj) (the Gaussian likelihood's ELBO), Q =
 * G'G, in binary128 from the same rows and L; column j scaled by L_jj (a
 * move of L(i, j) by L_jj, the diagonal's by a factor e), in units of
 * max(|ref|, 1).
 *
 * Time: a few seconds (binary128 in software).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/rng.h"
#include "gmm/spec.h"
#include "gmm/vi.h"
#include "support/tu_dense_gp.h"

#if defined(__SIZEOF_FLOAT128__)
__extension__ typedef __float128 qreal;
#else
typedef long double qreal;
#endif

#define N 60
#define NOISE 0.1

static void die(const char *what)
{
    fprintf(stderr, "bench_vi_accuracy: %s: %s\n", what, gmm_error_message());
    exit(1);
}

/* max_j |mbar_j - ref_j| / max(|ref|_inf, |sum a h|_inf), ref in qreal from
 * the same rows. */
static double mean_error(gmm_latent *lat, const double *m, const double *y, double noise,
                         const double *mbar)
{
    size_t n = gmm_latent_dim(lat), kl = gmm_latent_bandwidth(lat);
    size_t w = gmm_latent_obs_width(lat), nr = gmm_latent_nrows(lat);
    const double *th = gmm_latent_param_start(lat);
    gmm_prior_rows G;
    if (gmm_latent_prior_rows(lat, th, &G, NULL))
        die("rows");
    qreal *ref = calloc(n, sizeof *ref), *ah = calloc(n, sizeof *ah);
    double *row = malloc((kl + 1) * sizeof *row), *coef = malloc(nr * w * sizeof *coef);
    for (size_t i = 0; i < G.nrows; i++) {
        size_t first, wi = G.row(G.ctx, i, &first, row);
        qreal t = 0;
        for (size_t a = 0; a < wi; a++)
            t += (qreal)row[a] * (qreal)m[first + a];
        for (size_t a = 0; a < wi; a++)
            ref[first + a] -= t * (qreal)row[a];
    }
    if (gmm_latent_obs_coef(lat, th, coef))
        die("coefficients");
    const size_t *off = gmm_latent_obs_offset(lat);
    for (size_t r = 0; r < nr; r++) {
        qreal mu = 0;
        for (size_t a = 0; a < w; a++)
            mu += (qreal)coef[r * w + a] * (qreal)m[off[r] + a];
        qreal ar = ((qreal)y[r] - mu) / (qreal)noise;
        for (size_t a = 0; a < w; a++)
            ah[off[r] + a] += ar * (qreal)coef[r * w + a];
    }
    double scale = 0.0, err = 0.0;
    for (size_t j = 0; j < n; j++) {
        ref[j] += ah[j];
        scale = fmax(scale, fmax(fabs((double)ref[j]), fabs((double)ah[j])));
        err = fmax(err, fabs(mbar[j] - (double)ref[j]));
    }
    free(ref);
    free(ah);
    free(row);
    free(coef);
    return err / scale;
}

/* The L-gradient's error (L above). */
static double l_error(gmm_latent *lat, gmm_vi *v, double noise, const double *lambar)
{
    size_t n = gmm_latent_dim(lat), kl = gmm_latent_bandwidth(lat), b = gmm_vi_bandwidth(v);
    size_t w = gmm_latent_obs_width(lat), nr = gmm_latent_nrows(lat);
    const double *th = gmm_latent_param_start(lat);
    gmm_prior_rows G;
    if (gmm_latent_prior_rows(lat, th, &G, NULL))
        die("rows");
    gmm_band *Lb = gmm_band_alloc(n, b, 0, GMM_BAND_LOWER);
    if (!Lb || gmm_vi_factor(v, Lb))
        die("factor");
    qreal *P = calloc(n * n, sizeof *P), *Li = calloc(n * n, sizeof *Li);
    qreal *T = calloc(n * n, sizeof *T), *gq = malloc(n * sizeof *gq);
    double *row = malloc((kl + 1) * sizeof *row), *coef = malloc(nr * w * sizeof *coef);
    for (size_t i = 0; i < G.nrows; i++) { /* P = G'G + H'H / noise */
        size_t first, wi = G.row(G.ctx, i, &first, row);
        for (size_t a = 0; a < wi; a++)
            for (size_t c = 0; c < wi; c++)
                P[(first + a) * n + first + c] += (qreal)row[a] * (qreal)row[c];
    }
    if (gmm_latent_obs_coef(lat, th, coef))
        die("coefficients");
    const size_t *off = gmm_latent_obs_offset(lat);
    for (size_t r = 0; r < nr; r++)
        for (size_t a = 0; a < w; a++)
            for (size_t c = 0; c < w; c++)
                P[(off[r] + a) * n + off[r] + c] +=
                    (qreal)coef[r * w + a] * (qreal)coef[r * w + c] / (qreal)noise;
    for (size_t j = 0; j < n; j++) /* Li = L^-1, column by column */
        for (size_t i = j; i < n; i++) {
            qreal t = i == j ? 1 : 0;
            for (size_t k = j; k < i; k++)
                t -= (qreal)gmm_band_get(Lb, i, k) * Li[k * n + j];
            Li[i * n + j] = t / (qreal)gmm_band_get(Lb, i, i);
        }
    for (size_t i = 0; i < n; i++) /* T = P L^-T */
        for (size_t j = 0; j < n; j++) {
            qreal t = 0;
            for (size_t k = 0; k <= j; k++)
                t += P[i * n + k] * Li[j * n + k];
            T[i * n + j] = t;
        }
    for (size_t j = 0; j < n; j++) { /* T <- L^-1 T, then L^-T T: Sigma P L^-T */
        for (size_t i = 0; i < n; i++) {
            qreal t = 0;
            for (size_t k = 0; k <= i; k++)
                t += Li[i * n + k] * T[k * n + j];
            gq[i] = t;
        }
        for (size_t i = 0; i < n; i++) {
            qreal t = 0;
            for (size_t k = i; k < n; k++)
                t += Li[k * n + i] * gq[k];
            P[i * n + j] = t;
        }
    }
    gmm_band lb;
    gmm_band_view(&lb, (double *)lambar + n, n, b, 0, GMM_BAND_LOWER);
    double err = 0.0, scale = 1.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i <= j + b && i < n; i++) {
            double ljj = gmm_band_get(Lb, j, j);
            qreal ref = P[i * n + j] - (i == j ? 1 / (qreal)ljj : 0);
            double rs = (double)ref * ljj, got = gmm_band_get(&lb, i, j) * (i == j ? 1.0 : ljj);
            scale = fmax(scale, fabs(rs));
            err = fmax(err, fabs(got - rs));
        }
    gmm_band_free(Lb);
    free(P);
    free(Li);
    free(T);
    free(gq);
    free(row);
    free(coef);
    return err / scale;
}

int main(void)
{
    static const char *kernels[] = {"matern32(variance=1, lengthscale=1)",
                                    "matern52(variance=1, lengthscale=1)"};
    static const double rs[] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6};
    size_t nr = sizeof rs / sizeof rs[0];
    printf("%-9s %-22s", "kernel", "quantity");
    for (size_t i = 0; i < nr; i++)
        printf(" %8.0e", rs[i]);
    printf("\n");
    for (size_t ik = 0; ik < 2; ik++) {
        gmm_spec_node *s = NULL;
        gmm_kernel *k = NULL;
        if (gmm_spec_parse(kernels[ik], &s) || gmm_kernel_from_spec(s, &k))
            die("kernel");
        double eth[6] = {0}, eul[6] = {0}, em0[6] = {0}, em1[6] = {0}, eL[6] = {0}, eL1[6] = {0};
        for (size_t ir = 0; ir < nr; ir++) {
            for (unsigned seed = 1; seed <= 3; seed++) {
                double x[N], y[N], th[8];
                for (size_t i = 0; i < N; i++)
                    x[i] = rs[ir] * (double)i;
                memcpy(th, gmm_kernel_values_const(k), gmm_kernel_nparam(k) * sizeof *th);
                gmm_rng rng;
                gmm_rng_seed(&rng, seed, 0);
                long double *Ld = malloc(N * N * sizeof *Ld);
                double z[N];
                for (size_t i = 0; i < N; i++)
                    z[i] = gmm_rng_normal(&rng);
                if (tu_dense_chol(k, th, NOISE, 0.0, x, N, Ld))
                    die("dense cholesky");
                for (size_t i = 0; i < N; i++) {
                    long double t = 0;
                    for (size_t j = 0; j <= i; j++)
                        t += Ld[i * N + j] * z[j];
                    y[i] = (double)t;
                }
                free(Ld);
                size_t nk = gmm_kernel_nparam(k);
                double gd[8];
                if (tu_dense_grad(k, th, NOISE, 0.0, x, y, N, gd, NULL))
                    die("dense gradient");
                gmm_latent *lat = NULL;
                if (gmm_latent_ssm_alloc(k, x, N, NULL, &lat))
                    die("latent");
                gmm_lik lik;
                char ls[64];
                snprintf(ls, sizeof ls, "gaussian(variance=%g)", NOISE);
                if (gmm_lik_parse(ls, &lik))
                    die("likelihood");
                gmm_problem *p = NULL;
                if (gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p))
                    die("problem");
                gmm_vi_params par;
                gmm_vi_params_init(&par);
                par.prior = GMM_VI_PRIOR_ROWS;
                gmm_vi *v = NULL;
                if (gmm_vi_alloc(p, &par, &v) || gmm_vi_start_laplace(v, NULL))
                    die("vi");
                size_t nv = gmm_vi_nvar(v), np = gmm_vi_nparam(v), n = gmm_vi_dim(v);
                double *lam = malloc(nv * sizeof *lam), *gl = malloc(nv * sizeof *gl);
                double gt[8], elbo;
                memcpy(lam, gmm_vi_lambda(v), nv * sizeof *lam);
                if (gmm_vi_elbo(v, gmm_vi_theta(v), lam, &elbo, gl, gt))
                    die("elbo");
                for (size_t i = 0; i < np; i++) {
                    double ref = i < nk ? gd[i] : gd[nk];
                    eth[ir] = fmax(eth[ir], fabs(gt[i] - ref) / fmax(fabs(ref), 1.0));
                }
                double gu[8];
                for (size_t j = 0; j < n; j++)
                    lam[j] = nextafter(lam[j], gmm_rng_uniform(&rng) < 0.5 ? -INFINITY
                                                                           : INFINITY);
                if (gmm_vi_elbo(v, gmm_vi_theta(v), lam, &elbo, NULL, gu))
                    die("elbo");
                for (size_t i = 0; i < np; i++)
                    eul[ir] = fmax(eul[ir], fabs(gu[i] - gt[i]) / fmax(fabs(gt[i]), 1.0));
                memcpy(lam, gmm_vi_lambda(v), n * sizeof *lam);
                if (gmm_vi_elbo(v, gmm_vi_theta(v), lam, &elbo, gl, NULL))
                    die("elbo");
                em0[ir] = fmax(em0[ir], mean_error(lat, lam, y, NOISE, gl));
                eL[ir] = fmax(eL[ir], l_error(lat, v, NOISE, gl));
                /* L moved: its diagonal by 5%, the rest by 1% */
                gmm_band *L1 = gmm_band_alloc(n, gmm_vi_bandwidth(v), 0, GMM_BAND_LOWER);
                if (!L1 || gmm_vi_factor(v, L1))
                    die("factor");
                for (size_t j = 0; j < n; j++)
                    for (size_t i = j; i <= j + gmm_vi_bandwidth(v) && i < n; i++)
                        *gmm_band_ptr(L1, i, j) *= i == j ? 1.05 : 1.01;
                if (gmm_vi_set_state(v, gmm_vi_theta(v), lam, L1) ||
                    gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &elbo, gl, NULL))
                    die("elbo");
                eL1[ir] = fmax(eL1[ir], l_error(lat, v, NOISE, gl));
                gmm_band_free(L1);
                for (size_t j = 0; j < n; j++)
                    lam[j] *= 1.01;
                if (gmm_vi_elbo(v, gmm_vi_theta(v), lam, &elbo, gl, NULL))
                    die("elbo");
                em1[ir] = fmax(em1[ir], mean_error(lat, lam, y, NOISE, gl));
                free(lam);
                free(gl);
                gmm_vi_free(v);
                gmm_problem_free(p);
                gmm_latent_free(lat);
            }
        }
        const char *kn = ik ? "matern52" : "matern32";
        const char *lab[] = {"theta (envelope)", "theta, m's last bit", "m at the posterior",
                             "m, mean moved 1%", "L at the posterior", "L moved"};
        double *rowsv[] = {eth, eul, em0, em1, eL, eL1};
        for (size_t q = 0; q < 6; q++) {
            printf("%-9s %-22s", kn, lab[q]);
            for (size_t i = 0; i < nr; i++)
                printf(" %8.1e", rowsv[q][i]);
            printf("\n");
        }
        gmm_kernel_free(k);
        gmm_spec_free(s);
    }
    return 0;
}
