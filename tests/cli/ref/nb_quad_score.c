/* nb_quad_score -- the held-out log predictive density of negative-binomial
 * counts by adaptive quadrature: an independent reference for `gmm-infer
 * score` (tests/cli/cases/70_score.sh).
 *
 *   nb_quad_score PRED.csv TEST.csv Y E R
 *
 * PRED.csv is `gmm-infer predict`'s output at TEST.csv's rows, in order
 * (columns mean and var of the linear predictor eta); Y and E name TEST's
 * count and exposure columns ("-": exposure 1); R is the dispersion.
 * Prints sum_i log integral NB(y_i | e_i exp(eta), R) N(eta; mean_i, var_i)
 * d eta, by GSL's QAGS over mean +- 40 sd (relative error 1e-13). */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_gamma.h>

#include "refcsv.h"

typedef struct {
    double y, e, r, m, v, shift;
} row;

static double log_nb(const row *w, double eta)
{
    double lmu = log(w->e) + eta;
    /* log(r / (r + mu)) and log(mu / (r + mu)) without overflow */
    double l1p = lmu > log(w->r) ? lmu + log1p(w->r * exp(-lmu)) : log(w->r) + log1p(exp(lmu) / w->r);
    return gsl_sf_lngamma(w->y + w->r) - gsl_sf_lngamma(w->r) - gsl_sf_lngamma(w->y + 1.0) +
           w->r * (log(w->r) - l1p) + w->y * (lmu - l1p);
}

static double integrand(double eta, void *p)
{
    const row *w = p;
    double z = (eta - w->m) / sqrt(w->v);
    return exp(log_nb(w, eta) - 0.5 * z * z - 0.5 * log(2.0 * M_PI * w->v) - w->shift);
}

int main(int argc, char **argv)
{
    if (argc != 6)
        ref_die("usage: nb_quad_score PRED.csv TEST.csv Y E R", NULL);
    ref_csv pr, te;
    ref_csv_read(argv[1], &pr);
    ref_csv_read(argv[2], &te);
    if (pr.nrow != te.nrow)
        ref_die("row counts differ:", argv[1]);
    size_t pm = ref_csv_col(&pr, "mean"), pv = ref_csv_col(&pr, "var");
    size_t ty = ref_csv_col(&te, argv[3]);
    int has_e = strcmp(argv[4], "-") != 0;
    size_t tex = has_e ? ref_csv_col(&te, argv[4]) : 0;
    double r = strtod(argv[5], NULL), lpd = 0.0;
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(1000);
    gsl_set_error_handler_off();
    for (size_t i = 0; i < te.nrow; i++) {
        row w = {te.x[i * te.ncol + ty], has_e ? te.x[i * te.ncol + tex] : 1.0, r,
                 pr.x[i * pr.ncol + pm], pr.x[i * pr.ncol + pv], 0.0};
        if (isnan(w.y))
            continue;
        double sd = sqrt(w.v), best = -INFINITY;
        /* scale by the integrand's largest log value on a fine grid */
        for (int k = -4000; k <= 4000; k++) {
            double eta = w.m + 40.0 * sd * k / 4000.0, z = (eta - w.m) / sd;
            double l = log_nb(&w, eta) - 0.5 * z * z - 0.5 * log(2.0 * M_PI * w.v);
            if (l > best)
                best = l;
        }
        w.shift = best;
        gsl_function F = {integrand, &w};
        double val, err;
        if (gsl_integration_qags(&F, w.m - 40.0 * sd, w.m + 40.0 * sd, 0.0, 1e-13, 1000, ws, &val,
                                 &err) && err > 1e-11 * val)
            ref_die("quadrature did not converge at row", NULL);
        lpd += log(val) + best;
    }
    printf("%.17g\n", lpd);
    gsl_integration_workspace_free(ws);
    ref_csv_free(&pr);
    ref_csv_free(&te);
    return 0;
}
