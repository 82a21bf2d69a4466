/* dense_gp_score -- the held-out log predictive density of a Gaussian
 * state-space model file, computed as a dense GP: an independent reference
 * for `gmm-infer score` (tests/cli/cases/70_score.sh).
 *
 *   dense_gp_score MODEL.json TEST.csv    prints sum_i log N(y*_i; m_i, v_i + s2)
 *   dense_gp_score MODEL.json TEST.csv DRAWS.csv
 *                     prints sum_i log mean_s N(y*_i; c + m_si, v_si + s2)
 *
 * with K = k(X, X) + s2 I over the model's observed training rows, m = c +
 * k*' K^-1 (y - c), v = k** - k*' K^-1 k* (c the file's centre, s2 its
 * likelihood.variance).  Kernels: sums of matern12 and matern32 terms,
 * read from the file's "parameters" ("<i>.matern12.variance", ...).  Reads
 * the JSON with jansson and the CSVs with its own reader; factorises with
 * GSL's dense Cholesky: nothing of the tool is used.
 *
 * With DRAWS.csv (hmc --states of a one-term matern12 model, whose state
 * x[j] is f - c at the j-th distinct input in increasing order): m_si and
 * v_si are the dense conditional normal of f(x*_i) - c given all of draw
 * s's states, k*' K^-1 x_s and k** - k*' K^-1 k* with K = k(X, X). */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <jansson.h>

#include "refcsv.h"

typedef struct {
    int nu32; /* 0: matern12, 1: matern32 */
    double s2, ell;
} term;

static double kern(const term *t, size_t nt, double a, double b)
{
    double r = fabs(a - b), k = 0.0;
    for (size_t i = 0; i < nt; i++) {
        if (t[i].nu32) {
            double z = sqrt(3.0) * r / t[i].ell;
            k += t[i].s2 * (1.0 + z) * exp(-z);
        } else {
            k += t[i].s2 * exp(-r / t[i].ell);
        }
    }
    return k;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int draws_score(const term *t, size_t nt, double noise, double c, double *X, size_t n,
                       const ref_csv *te, size_t ex, size_t ey, const char *path)
{
    if (nt != 1 || t[0].nu32)
        ref_die("draws: a one-term matern12 model only", NULL);
    qsort(X, n, sizeof *X, cmp_double);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || X[i] != X[k - 1])
            X[k++] = X[i];
    n = k;
    ref_csv d;
    ref_csv_read(path, &d);
    size_t x1 = ref_csv_col(&d, "x[1]");
    gsl_matrix *K = gsl_matrix_alloc(n, n);
    gsl_vector *kv = gsl_vector_alloc(n), *w = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(K, i, j, kern(t, nt, X[i], X[j]));
    gsl_set_error_handler_off();
    if (gsl_linalg_cholesky_decomp1(K))
        ref_die("K is not positive definite", NULL);
    double lpd = 0.0, *l = malloc(d.nrow * sizeof *l);
    for (size_t q = 0; q < te->nrow; q++) {
        double xs = te->x[q * te->ncol + ex], ys = te->x[q * te->ncol + ey];
        if (isnan(ys))
            continue;
        /* w = K^-1 k*, v = k** - k*' w */
        for (size_t i = 0; i < n; i++)
            gsl_vector_set(kv, i, kern(t, nt, xs, X[i]));
        gsl_vector_memcpy(w, kv);
        gsl_linalg_cholesky_svx(K, w);
        double kw;
        gsl_blas_ddot(kv, w, &kw);
        double v = kern(t, nt, xs, xs) - kw;
        if (v < 0.0)
            v = 0.0;
        double mx = -INFINITY, sum = 0.0;
        for (size_t s = 0; s < d.nrow; s++) {
            double m = c;
            for (size_t i = 0; i < n; i++)
                m += gsl_vector_get(w, i) * d.x[s * d.ncol + x1 + i];
            l[s] = -0.5 * log(2.0 * M_PI * (v + noise)) - 0.5 * (ys - m) * (ys - m) / (v + noise);
            if (l[s] > mx)
                mx = l[s];
        }
        for (size_t s = 0; s < d.nrow; s++)
            sum += exp(l[s] - mx);
        lpd += mx + log(sum / (double)d.nrow);
    }
    printf("%.17g\n", lpd);
    free(l);
    ref_csv_free(&d);
    gsl_matrix_free(K);
    gsl_vector_free(kv);
    gsl_vector_free(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        ref_die("usage: dense_gp_score MODEL.json TEST.csv [DRAWS.csv]", NULL);
    json_error_t jerr;
    json_t *root = json_load_file(argv[1], 0, &jerr);
    if (!root)
        ref_die("cannot parse", argv[1]);
    json_t *par = json_object_get(root, "parameters"), *data = json_object_get(root, "data");
    if (!par || !data || strcmp(json_string_value(json_object_get(root, "likelihood")),
                                "gaussian"))
        ref_die("not a Gaussian model file:", argv[1]);
    term t[8];
    size_t nt = 0;
    double noise = json_number_value(json_object_get(par, "likelihood.variance"));
    for (int i = 0; i < 8; i++) {
        char key[64];
        for (int nu = 0; nu < 2; nu++) {
            snprintf(key, sizeof key, "%d.%s.variance", i, nu ? "matern32" : "matern12");
            json_t *v = json_object_get(par, key);
            if (!v)
                continue;
            snprintf(key, sizeof key, "%d.%s.lengthscale", i, nu ? "matern32" : "matern12");
            t[nt].nu32 = nu;
            t[nt].s2 = json_number_value(v);
            t[nt].ell = json_number_value(json_object_get(par, key));
            nt++;
        }
    }
    if (nt == 0 || !(noise > 0))
        ref_die("no matern12/matern32 terms or no likelihood.variance in", argv[1]);
    json_t *cj = json_object_get(root, "center");
    double c = cj && json_is_number(cj) ? json_number_value(cj) : 0.0;
    ref_csv tr, te;
    ref_csv_read(json_string_value(json_object_get(data, "file")), &tr);
    ref_csv_read(argv[2], &te);
    const char *xn = json_string_value(json_object_get(data, "x"));
    const char *yn = json_string_value(json_object_get(data, "y"));
    size_t tx = ref_csv_col(&tr, xn), ty = ref_csv_col(&tr, yn);
    size_t ex = ref_csv_col(&te, xn), ey = ref_csv_col(&te, yn);
    double *X = malloc(tr.nrow * sizeof *X), *Y = malloc(tr.nrow * sizeof *Y);
    size_t n = 0;
    for (size_t r = 0; r < tr.nrow; r++)
        if (!isnan(tr.x[r * tr.ncol + ty])) {
            X[n] = tr.x[r * tr.ncol + tx];
            Y[n++] = tr.x[r * tr.ncol + ty] - c;
        }
    if (argc == 4) {
        int rc = draws_score(t, nt, noise, c, X, n, &te, ex, ey, argv[3]);
        free(X);
        free(Y);
        ref_csv_free(&tr);
        ref_csv_free(&te);
        json_decref(root);
        return rc;
    }
    gsl_matrix *K = gsl_matrix_alloc(n, n);
    gsl_vector *alpha = gsl_vector_alloc(n), *kv = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(K, i, j, kern(t, nt, X[i], X[j]) + (i == j ? noise : 0.0));
    gsl_set_error_handler_off();
    if (gsl_linalg_cholesky_decomp1(K))
        ref_die("K is not positive definite", NULL);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(alpha, i, Y[i]);
    gsl_linalg_cholesky_svx(K, alpha);
    double lpd = 0.0;
    for (size_t q = 0; q < te.nrow; q++) {
        double xs = te.x[q * te.ncol + ex], ys = te.x[q * te.ncol + ey];
        if (isnan(ys))
            continue;
        double m = c, v;
        for (size_t i = 0; i < n; i++) {
            double k = kern(t, nt, xs, X[i]);
            gsl_vector_set(kv, i, k);
            m += k * gsl_vector_get(alpha, i);
        }
        /* v = k** - |L^-1 k*|^2 */
        gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, K, kv);
        double dd;
        gsl_blas_ddot(kv, kv, &dd);
        v = kern(t, nt, xs, xs) - dd + noise;
        lpd += -0.5 * log(2.0 * M_PI * v) - 0.5 * (ys - m) * (ys - m) / v;
    }
    printf("%.17g\n", lpd);
    gsl_matrix_free(K);
    gsl_vector_free(alpha);
    gsl_vector_free(kv);
    free(X);
    free(Y);
    ref_csv_free(&tr);
    ref_csv_free(&te);
    json_decref(root);
    return 0;
}
