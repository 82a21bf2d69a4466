/* bench_ssm_accuracy.c -- where the state-space log-likelihood stops agreeing
 * with the dense GP, per kernel, as inputs get closer than the lengthscale;
 * the zero-process-noise regularisation against the undamped dense GP; and
 * the time of one loglik + gradient versus n.
 *
 * Table 1: n = 300 inputs on a regular grid dt = r * lengthscale; y drawn
 * from the dense GP (GSL Cholesky) at noise/variance 0.01, 0.1 and 1 and
 * three seeds; the WORST relative loglik error over those 9 data sets, per
 * r.  "limit" is the smallest r of the sweep whose worst error, and that of
 * every larger r, is <= 1e-6.
 * Table 2: the default damping of zero-noise kernels, n = 300, error against
 * the dense GP of the undamped kernel, per noise/variance.
 * Table 3: loglik + gradient time of the paper's CO2 model (matern32 +
 * quasiperiodic(harmonics=2), d = 6) on weekly inputs, n = 1e3 .. 1e5.
 *
 * Table 4: the gradient against the dense GP's analytic gradient (long
 * double, tests/support/tu_dense_gp.h): n = 300 regular grids from dt =
 * 0.1 down to 1e-10 lengthscales, y drawn from the (damped) dense GP at
 * noise/variance 0.01, 0.1 and 1 and three seeds; the WORST error of the
 * parameters' gradients in units of max(|g|, 1), and the form used (the
 * automatic choice, or FACTOR's).
 *
 * BENCH_QUICK=1: one seed, fewer sizes; SKIP1=1 / SKIP3=1 / SKIP4=1 skip
 * tables 1 / 3 / 4.
 * FACTOR=chol|rows: force one factorisation in tables 1, 2 and 4 (default: the
 * automatic choice -- the Cholesky above its limit, the square-root form below).
 * DAMP_REL=x: table 2 at that damp_rel instead of the default.
 * Output is plain text.
 *
 * WHAT THESE TABLES DECIDED (ssm.h states the contract; the measurements
 * live beside the benchmark that made them).
 *
 * ZERO PROCESS NOISE.  Factors with Q = 0 (constant, cosine, periodic) are
 * damped by exp(-|tau| damp) (kernel.h): Q_k is then (1 - exp(-2 damp dt))
 * Pinf for such a factor, a minimal process noise proportional to Pinf, and
 * the model is an exact stationary GP (the regularised kernel), not an
 * approximation inside the algebra.  A damped model is always factorised
 * in the square-root form (FACTORISATION): its precision holds entries ~
 * 1/(damp dt), whose rounding in the Cholesky costs ~1/damp_rel of
 * accuracy: a damping large enough for it (0.4 sqrt(eps K)) misses 1e-6 at
 * noise/variance 0.01 by its bias.  In the square-root form the rounding is
 * negligible (the error stayed proportional to damp_rel from 1e-5 down to
 * 1e-10, 1.4e-9 there) and what is left is the bias of the damped kernel
 * over the data, proportional to damp_rel = damp * span (span = t_{K-1} -
 * t_0).  What a small damping cost instead was the GRADIENT while it was
 * chained through the precision's entries: its rounding grew like K^2 /
 * damp_rel (the rounding bound of FACTORISATION is ~ eps K^2 / damp_rel).
 * The default balances the two: damp_rel = max(2e-8, 800 eps K^2)
 * (GMM_SSM_DAMP_REL, GMM_SSM_DAMP_K2): 2e-8 up to K ~ 340 states, then
 * growing so that that gradient's rounding stayed near 1e-2 of log
 * likelihood, where fits converge (the square-root form's gradient no
 * longer needs it: GRADIENT).  Measured against the UNDAMPED dense GP
 * at n = 300 (tests/bench/bench_ssm_accuracy.c, Table 2;
 * tests/model/test_ssm.c asserts 1e-6 at noise/variance 0.01 and 0.1):
 * worst relative loglik error 2.8e-7 at noise/variance 0.01, 1.1e-7 at 0.1,
 * 1.8e-9 at 1 (the bias grows with the signal-to-noise ratio).  On the CO2
 * training weeks (K = 2075, damp_rel 7.6e-7), `fit --kernel 'matern32 +
 * periodic(period=1, harmonics=3)'` converges, its loglik 1.0e-5 relative
 * from the undamped dense GP's; with damp_rel 2e-8 it stopped on rounding
 * (bound 0.38), with 2.7e-7 it converged too.  A product with a factor
 * that has process noise (periodic * matern32) is not damped and has no
 * bias.
 *
 * FACTORISATION.  The posterior precision P = Q_prior + H'H/noise is
 * factorised either by the banded Cholesky of P assembled in the band (the
 * paper's algorithm, fastest), or in the SQUARE-ROOT FORM: from the rows
 * C_k (x_{k+1} - A_k x_k), C_k = chol(Q_k)^-1, and H/sqrt(noise), never
 * forming P (gmm_marglik_eval_rows; the same factor).  The
 * Cholesky is only as accurate as P's stored entries: where they are huge
 * against the information the data add -- inputs close together relative
 * to a lengthscale, a long smooth record -- their rounding alone costs up
 * to eps sum_i P_ii Pinf_ii of log-likelihood (the Cholesky's rounding
 * BOUND; over 300 configurations the error was at most 0.84 of it where
 * it exceeded 1e-6, and below 4e-8 elsewhere).  On
 * the CO2 model fitted to data/co2_train.csv the bound is 9e-4: the
 * Cholesky's loglik is off by 1.3e-4 (dense GP: -957.453203327; Cholesky
 * -957.453074495; square-root form -957.453203331), and `fit` with it stops
 * on rounding unconverged, where the square-root form converges.  The
 * square-root form costs about 3x the Cholesky (2d Householder reflections
 * per state; marglik.h).  GMM_SSM_FACTOR_AUTO (default) takes the Cholesky while its
 * bound is at most GMM_SSM_CHOL_TOL per observation, the inputs are no
 * closer than its spacing limit below and nothing is damped; else the
 * square-root form.  The choice depends on theta only, and where it
 * switches the two differ by less than the Cholesky's bound.
 *
 * CLOSE INPUTS.  Q_k becomes nearly singular when dt << lengthscale (its
 * small eigenvalues scale like dt^(2 nu)).  A(dt) and Q(dt) themselves are
 * computed to a few ulps at any dt (kernel_matern.c), so what limits the
 * Cholesky is the rounding of P's entries ~ (lengthscale/dt)^(2 nu) /
 * variance.  Measured worst relative loglik error against the dense GP
 * over 9 data sets of n = 300 (tests/bench/bench_ssm_accuracy.c, Table 1):
 *
 *   dt/l        1e-1    1e-2    1e-3    1e-4    1e-6    1e-8    1e-10
 *   Cholesky:
 *   matern12    5e-14   2e-13   9e-13   5e-13   1e-11   6e-9    9e-9
 *   matern32    3e-13   8e-10   5e-7    3e-5    --      --      --
 *   matern52    4e-11   9e-6    2e-2    --      --      --      --
 *   square-root form:
 *   matern12    5e-14   2e-13   1e-13   1e-13   3e-12   4e-12   5e-12
 *   matern32    3e-13   3e-13   3e-12   4e-12   3e-12   2e-12   9e-14
 *   matern52    1e-13   7e-13   6e-11   3e-10   3e-11   8e-14   7e-13
 *
 * (every kernel of the table, products and sums included, stays below 4e-9
 * in the square-root form down to 1e-10).  Each kernel type records the
 * smallest dt/l measured accurate to 1e-6 for each form
 * (gmm_kernel_type.min_dt_rel, _rows): Cholesky Matern-3/2 3e-4 (2e-3 in a
 * product with an oscillator), Matern-5/2 2e-2; square-root form 1e-10 for
 * Matern-3/2 and -5/2 (alone or combined) -- not a failure but the end of
 * what was measured -- and none for Matern-1/2 and quasiperiodic, whose
 * precision grows only like l/dt.  Below the Cholesky's limit the automatic choice takes the
 * square-root form; below 1e-10 (or below the Cholesky's limit with
 * GMM_SSM_FACTOR_CHOL) check_spacing refuses the evaluation with GMM_EDOM
 * and a message naming the inputs, the parameter and the remedies (merge
 * near-ties with merge_tol, or a shorter lengthscale) -- never a wrong
 * number.
 *
 * GRADIENT (Table 4).  The Cholesky's gradient is chained through
 * dlogp/dQ_prior = -(Sigma + mu mu')/2 and the precision's blocks W = Q^-1,
 * W A, A'WA, so its rounding grows like (l/dt)^(2 nu), as the Cholesky's
 * log likelihood's does: FACTOR=chol, worst of 9 data sets, in units of
 * max(|g|, 1) (-- : not finite),
 *
 *   dt/l        1e-1    1e-2    1e-3    1e-4    1e-5    1e-6
 *   matern12    2e-11   2e-11   4e-11   2e-9    4e-8    6e-7
 *   matern32    5e-10   4e-7    2e-4    1.3     2e3     --
 *   matern52    5e-7    4e-2    2e3     --      --      --
 *   damped      2e-3 .. 8e-2 already at dt = 0.1 (matern32 + periodic,
 *               cosine * periodic, (matern12 + cosine) * constant).
 *
 * Where these errors enter was measured by feeding
 * gmm_kernel_rev the exact (dense GP) moments of the whitened transition
 * rows v = C_k (x_{k+1} - A_k x_k), C_k = chol(Q_k)^-1, chained by Fisher's
 * identity through Qbar = C'(E[v v'] - I) C / 2 and Abar = C'E[v x_k']:
 * right to 1e-13 at every spacing.  With E[v v'] instead formed from
 * Sigma's band, C (Sigma_{k+1,k+1} - A Sigma_{k,k+1} - Sigma_{k+1,k} A' + A
 * Sigma_kk A') C', Matern-5/2's error is 1.2e3 at dt/l = 1e-4 and 6e12 at
 * 1e-6 (eps (l/dt)^(2 nu): a difference of entries each rounded to eps
 * |Sigma|, times |C|^2); with E[v x_k'] from Sigma (the A term; C dA ~
 * (dt/l)^(1/2) is small) 7e-6 at 1e-4 and 8e-4 at 1e-6 (eps (l/dt)^(nu -
 * 1/2)).  Chaining dlogp/dG = -(G Sigma + G mu mu') over the rows of G
 * instead gains only the square root of the first (4.7e-2 at 1e-3, 53 at
 * 1e-4): the sum over G's huge entries cancels as well.  So the square-root
 * form takes both moments from the fold's orthogonal map (band.h TAPE,
 * marglik.h ROW MOMENTS), where they are of order 1 and never differenced,
 * and chains them as above (ssm_prior.c, ROWS GRADIENT).  Table 4 with the
 * automatic choice (the square-root form wherever the Cholesky's bound
 * exceeds GMM_SSM_CHOL_GRAD_TOL):
 *
 *   dt/l        1e-1    1e-2    1e-3    1e-4    1e-5    1e-6    1e-8    1e-10
 *   matern12    2e-11   2e-11   4e-11   2e-9    4e-8    4e-10   7e-10   2e-9
 *   matern32    5e-10   2e-12   4e-11   8e-10   2e-10   2e-11   3e-11   1e-11
 *   matern52    3e-11   8e-11   4e-9    9e-8    2e-7    2e-10   6e-12   6e-12
 *   quasiper.   2e-10   2e-10   5e-10   7e-9    8e-11   4e-10   7e-10   2e-9
 *   m32 + qp    3e-10   5e-10   1e-9    2e-10   1e-10   2e-10   7e-10   2e-9
 *   m32 * m12   6e-11   4e-11   1e-10   2e-11   8e-11   4e-10   7e-10   2e-9
 *   m52 * m32   4e-10   4e-12   6e-11   2e-10   3e-10   9e-11   6e-11   8e-12
 *   m32 * per.  3e-9    5e-11   4e-10   7e-9    1e-9    3e-9    3e-10   8e-11
 *   m32 + per.  4e-10   8e-11   1e-10   2e-10   1e-10   2e-9    2e-10   3e-9
 *   cos * per.  4e-10   5e-10   1e-9    7e-10   3e-10   3e-10   2e-11   1e-9
 *   (m12+cos)*c 4e-12   7e-12   4e-12   9e-12   4e-11   2e-10   4e-10   2e-9
 *
 * (the periodic kernels' dt in units of 1): the gradient is as accurate as
 * the square-root form's log likelihood (Table 1) and shares its spacing
 * limit (1e-10 for Matern-3/2 and -5/2); the worst, 2e-7 for Matern-5/2 at
 * dt/l = 1e-5, is that log likelihood's own rounding (2.8e-9 relative
 * there).  On the CO2 fit's optimum (n = 2016) the gradient is within 2e-9
 * per unit log of the dense GP's for every parameter (the Cholesky's chain
 * is off by 3.5e-4 in the matern32 lengthscale).  Damped kernels lose the rounding that
 * grew like K^2 / damp_rel: on the 2075 CO2 weeks, matern32 +
 * periodic(harmonics=3) at damp_rel 2e-8 is within 3e-9 per unit log of
 * the dense GP's gradient, where the Cholesky's chain is off by 1.5 in the
 * period: the square-root form's fits do not need the K^2 term of the
 * default damping (ZERO PROCESS NOISE); removing it needs Table 2 measured
 * at large K.  The cost: the fold is recorded (about 2d (d + 8) doubles per
 * state) and undone once on about d + 2 lanes (tests/bench/bench_ssm.c
 * times it).
 */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/kernel.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"
#include "support/tu_dense_gp.h"
#include "support/tu_ssm.h"

static uint64_t rng_s;
static double unif(void)
{
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}
static double normal(void)
{
    double u = unif(), v = unif();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static gmm_kernel *kernel_of(const char *text)
{
    gmm_spec_node *s = NULL;
    gmm_kernel *k = NULL;
    if (gmm_spec_parse(text, &s) || gmm_kernel_from_spec(s, &k)) {
        fprintf(stderr, "bench_ssm_accuracy: %s: %s\n", text, gmm_error_message());
        exit(1);
    }
    gmm_spec_free(s);
    return k;
}

/* Dense GP: draw y (when draw) and return the loglik of y. */
static double dense(const gmm_kernel *k, const double *th, double damp, const double *x, double *y,
                    size_t n, double noise, int draw)
{
    gsl_matrix *L = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(L, i, j, gmm_kernel_cov(k, th, damp, x[i] - x[j]) + (i == j ? noise : 0));
    if (gsl_linalg_cholesky_decomp1(L)) {
        gsl_matrix_free(L);
        return NAN;
    }
    if (draw) {
        double *z = malloc(n * sizeof *z);
        for (size_t i = 0; i < n; i++)
            z[i] = normal();
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t j = 0; j <= i; j++)
                s += gsl_matrix_get(L, i, j) * z[j];
            y[i] = s;
        }
        free(z);
    }
    double ld = 0.0, q = 0.0, *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        double t = y[i];
        for (size_t l = 0; l < i; l++)
            t -= gsl_matrix_get(L, i, l) * b[l];
        b[i] = t / gsl_matrix_get(L, i, i);
        q += b[i] * b[i];
        ld += 2.0 * log(gsl_matrix_get(L, i, i));
    }
    free(b);
    gsl_matrix_free(L);
    return -0.5 * q - 0.5 * ld - 0.5 * (double)n * log(2.0 * M_PI);
}

static double *theta_of(const gmm_kernel *k, double noise)
{
    size_t np = gmm_kernel_nparam(k);
    double *th = malloc((np + 1) * sizeof *th);
    memcpy(th, gmm_kernel_values_const(k), np * sizeof *th);
    th[np] = noise;
    return th;
}

/* Relative loglik error of the state-space model on data (x, y). */
static double ssm_err(const gmm_kernel *k, double *th, const double *x, const double *y,
                      size_t n, double ref, const gmm_ssm_params *par)
{
    gmm_ssm *m = NULL;
    double ll;
    if (tu_ssm_alloc(k, x, y, n, par, &m))
        return INFINITY;
    gmm_status st = tu_ssm_loglik(m, th, &ll, NULL);
    gmm_ssm_free(m);
    return st ? INFINITY : fabs(ll - ref) / fabs(ref);
}

static const struct {
    const char *spec;
    double ell; /* the lengthscale dt is measured in */
} sweep[] = {
    {"matern12(variance=1, lengthscale=1)", 1.0},
    {"matern32(variance=1, lengthscale=1)", 1.0},
    {"matern52(variance=1, lengthscale=1)", 1.0},
    {"quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)", 1.0},
    {"matern32(variance=1, lengthscale=1) + quasiperiodic(variance=0.5, lengthscale=1, "
     "period=0.3, harmonics=2)",
     1.0},
    {"matern32(variance=1, lengthscale=1) * matern12(variance=1, lengthscale=1)", 1.0},
    {"matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)", 1.0},
    {"matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, period=0.5, "
     "harmonics=2)",
     1.0},
};

static const char *zero_noise[] = {
    "constant(variance=1)",
    "cosine(variance=1, period=1.7)",
    "periodic(variance=1, lengthscale=1, period=1.7, harmonics=3)",
    "matern32(variance=1, lengthscale=3) + periodic(variance=0.6, lengthscale=1.2, period=3.1, "
    "harmonics=3)",
    "cosine(variance=1, period=1.3) * periodic(variance=1, lengthscale=1, period=2.9, "
    "harmonics=2)",
    "constant(variance=1) * cosine(variance=1, period=2.9)",
};

int main(void)
{
    gsl_set_error_handler_off();
    int quick = getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") != '0';
    size_t n = 300, nseed = quick ? 1 : 3;
    double noises[3] = {0.01, 0.1, 1.0};
    double rs[] = {1, 0.3, 0.1, 0.03, 0.02, 0.015, 0.01, 0.007, 0.005, 0.003, 0.002, 0.001,
                   3e-4, 1e-4, 3e-5, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10};
    size_t nr = sizeof rs / sizeof rs[0];
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    const char *fe = getenv("FACTOR");
    gmm_ssm_factor factor = !fe                   ? GMM_SSM_FACTOR_AUTO
                            : !strcmp(fe, "chol") ? GMM_SSM_FACTOR_CHOL
                            : !strcmp(fe, "rows") ? GMM_SSM_FACTOR_ROWS
                                                  : GMM_SSM_FACTOR_AUTO;
    par.check_spacing = 0;
    par.factor = factor;

    if (!getenv("SKIP1")) {
    printf("Table 1: worst relative loglik error vs the dense GP, n = %zu, regular dt = r * "
           "lengthscale\n%-8s", n, "r");
    for (size_t ir = 0; ir < nr; ir++)
        printf(" %8.3g", rs[ir]);
    printf("  limit(1e-6)\n");
    for (size_t ik = 0; ik < sizeof sweep / sizeof sweep[0]; ik++) {
        gmm_kernel *k = kernel_of(sweep[ik].spec);
        double limit = NAN;
        int ok = 1;
        printf("%-8.8s", sweep[ik].spec);
        for (size_t ir = 0; ir < nr; ir++) {
            double worst = 0.0;
            for (size_t is = 0; is < nseed; is++)
                for (size_t inz = 0; inz < 3; inz++) {
                    rng_s = 1000 * is + 17 * inz + ir;
                    double *th = theta_of(k, noises[inz]);
                    for (size_t i = 0; i < n; i++)
                        x[i] = 10.0 + (double)i * rs[ir] * sweep[ik].ell;
                    double ref = dense(k, th, 0.0, x, y, n, noises[inz], 1);
                    double e = ssm_err(k, th, x, y, n, ref, &par);
                    worst = fmax(worst, isnan(e) ? INFINITY : e);
                    free(th);
                }
            printf(" %8.1e", worst);
            ok = ok && worst <= 1e-6;
            if (ok)
                limit = rs[ir];
        }
        printf("  %g   %s\n", limit, sweep[ik].spec);
        gmm_kernel_free(k);
    }

    }
    printf("\nTable 2: default damping of zero-noise kernels, n = %zu, dt = 0.1: relative "
           "loglik error vs the UNDAMPED dense GP, worst over %zu seeds\n%-12s", n, nseed,
           "noise/var");
    for (size_t inz = 0; inz < 3; inz++)
        printf(" %9g", noises[inz]);
    printf("\n");
    gmm_ssm_params_init(&par);
    par.factor = factor;
    if (getenv("DAMP_REL"))
        par.damp_rel = atof(getenv("DAMP_REL"));
    for (size_t ik = 0; ik < sizeof zero_noise / sizeof zero_noise[0]; ik++) {
        gmm_kernel *k = kernel_of(zero_noise[ik]);
        printf("%-12.12s", zero_noise[ik]);
        for (size_t inz = 0; inz < 3; inz++) {
            double worst = 0.0;
            for (size_t is = 0; is < nseed; is++) {
                rng_s = 7000 + 100 * is + inz;
                double *th = theta_of(k, noises[inz]);
                for (size_t i = 0; i < n; i++)
                    x[i] = 10.0 + 0.1 * (double)i;
                double ref = dense(k, th, 0.0, x, y, n, noises[inz], 1);
                worst = fmax(worst, ssm_err(k, th, x, y, n, ref, &par));
                free(th);
            }
            printf(" %9.1e", worst);
        }
        printf("   %s\n", zero_noise[ik]);
        gmm_kernel_free(k);
    }

    if (!getenv("SKIP4")) {
        /* Table 4: the gradient against the dense GP's analytic gradient */
        static const char *gk[] = {
            "matern12(variance=1, lengthscale=1)",
            "matern32(variance=1, lengthscale=1)",
            "matern52(variance=1, lengthscale=1)",
            "quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)",
            "matern32(variance=1, lengthscale=1) + quasiperiodic(variance=0.5, lengthscale=1, "
            "period=0.3, harmonics=2)",
            "matern32(variance=1, lengthscale=1) * matern12(variance=1, lengthscale=1)",
            "matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)",
            "matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, "
            "period=0.5, harmonics=2)",
            "matern32(variance=1, lengthscale=3) + periodic(variance=0.6, lengthscale=1, "
            "period=3.1, harmonics=3)",
            "cosine(variance=1, period=1.3) * periodic(variance=1, lengthscale=1, period=2.9, "
            "harmonics=2)",
            "(matern12(variance=1, lengthscale=1) + cosine(variance=1, period=1.1)) * "
            "constant(variance=1)",
        };
        double gr[] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-10};
        size_t ngr = sizeof gr / sizeof gr[0];
        printf("\nTable 4: worst gradient error vs the dense GP's analytic gradient, in units of "
               "max(|g|, 1), n = %zu, regular dt = r * lengthscale (the periodic kernels' r in "
               "units of 1), %zu data sets\n%-8s",
               n, 3 * nseed, "r");
        for (size_t ir = 0; ir < ngr; ir++)
            printf(" %8.3g", gr[ir]);
        printf("  limit(1e-6)\n");
        gmm_ssm_params_init(&par);
        par.check_spacing = 0;
        par.factor = factor;
        for (size_t ik = 0; ik < sizeof gk / sizeof gk[0]; ik++) {
            gmm_kernel *k = kernel_of(gk[ik]);
            size_t np = gmm_kernel_nparam(k);
            double limit = NAN, *z = malloc(n * sizeof *z), g[16], gd[16];
            int ok = 1, rows_all = 1, chol_any = 0;
            printf("%-8.8s", gk[ik]);
            for (size_t ir = 0; ir < ngr; ir++) {
                double worst = 0.0;
                for (size_t is = 0; is < nseed; is++)
                    for (size_t inz = 0; inz < 3; inz++) {
                        rng_s = 4000 + 1000 * is + 17 * inz + ir;
                        double *th = theta_of(k, noises[inz] * gmm_kernel_cov(k, NULL, 0.0, 0.0));
                        for (size_t i = 0; i < n; i++) {
                            x[i] = 10.0 + (double)i * gr[ir];
                            z[i] = normal();
                        }
                        gmm_ssm *m = NULL;
                        double ll, e = INFINITY;
                        if (!gmm_ssm_alloc(k, x, n, &par, &m)) {
                            double damp = gmm_ssm_damp(m);
                            if (!tu_dense_draw(k, th, th[np], damp, x, n, z, y) &&
                                !gmm_ssm_set_y(m, y) && !tu_ssm_loglik(m, th, &ll, g) &&
                                !tu_dense_grad(k, th, th[np], damp, x, y, n, gd, NULL)) {
                                e = 0.0;
                                for (size_t p = 0; p <= np; p++)
                                    e = fmax(e, fabs(g[p] - gd[p]) / fmax(fabs(gd[p]), 1.0));
                                rows_all &= gmm_ssm_used_rows(m);
                                chol_any |= !gmm_ssm_used_rows(m);
                            }
                        }
                        gmm_ssm_free(m);
                        worst = fmax(worst, isnan(e) ? INFINITY : e);
                        free(th);
                    }
                printf(" %8.1e", worst);
                ok = ok && worst <= 1e-6;
                if (ok)
                    limit = gr[ir];
            }
            printf("  %g  %s  %s\n", limit,
                   rows_all ? "square-root" : chol_any && factor != GMM_SSM_FACTOR_CHOL
                                                  ? "both"
                                                  : "Cholesky",
                   gk[ik]);
            free(z);
            gmm_kernel_free(k);
        }
    }

    if (getenv("SKIP3"))
        return 0;
    printf("\nTable 3: loglik + gradient time, matern32 + quasiperiodic(harmonics=2), weekly "
           "inputs (d = 6, bandwidth 7)\n");
    gmm_kernel *k = kernel_of("matern32(variance=100, lengthscale=20) + quasiperiodic("
                              "variance=5, lengthscale=50, period=1, harmonics=2)");
    size_t sizes[] = {1000, 3000, 10000, 100000};
    for (size_t is = 0; is < (quick ? 2 : 4); is++) {
        size_t nn = sizes[is];
        double *xx = malloc(nn * sizeof *xx), *yy = malloc(nn * sizeof *yy);
        for (size_t i = 0; i < nn; i++) {
            xx[i] = 1958.0 + (double)i * 7.0 / 365.25;
            yy[i] = (i % 40 == 3) ? NAN : sin(xx[i] * 6.283185307179586) + 0.01 * (double)i;
        }
        double *th = theta_of(k, 0.1), g[6], ll;
        gmm_ssm *m = NULL;
        if (tu_ssm_alloc(k, xx, yy, nn, NULL, &m) || tu_ssm_loglik(m, th, &ll, g)) {
            fprintf(stderr, "bench_ssm_accuracy: %s\n", gmm_error_message());
            return 1;
        }
        int reps = nn <= 3000 ? 200 : nn <= 10000 ? 40 : 5;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int r = 0; r < reps; r++)
            tu_ssm_loglik(m, th, &ll, g);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("n = %6zu  loglik+gradient %8.3f ms  (%zu cached intervals)\n", nn,
               1e3 * sec / reps, gmm_ssm_nintervals(m));
        gmm_ssm_free(m);
        free(th);
        free(xx);
        free(yy);
    }
    gmm_kernel_free(k);
    free(x);
    free(y);
    return 0;
}
