/* cli_pred.c -- the prediction table of predict and vi --posterior
 * (cli.h): SITE,mean,var,lower,upper[,R,R_lower,R_upper],level, one row per
 * prediction, written whole or not at all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/model.h"

static void pred_header(FILE *f, const char *site, const char *r)
{
    fprintf(f, "%s,mean,var,lower,upper", site);
    if (r)
        fprintf(f, ",%s,%s_lower,%s_upper", r, r, r);
    fputs(",level\n", f);
}

static void pred_row(FILE *f, const char *label, double x, const gmm_summary_pred *p,
                     const char *resp, double level)
{
    if (label)
        gmm_csv_put_field(f, label);
    else
        gmm_csv_put_number(f, x);
    const double col[] = {p->mean, p->var, p->lower, p->upper};
    for (size_t k = 0; k < 4; k++) {
        fputc(',', f);
        gmm_csv_put_number(f, col[k]);
    }
    if (resp) {
        const double rc[] = {p->resp, p->resp_lower, p->resp_upper};
        for (size_t k = 0; k < 3; k++) {
            fputc(',', f);
            gmm_csv_put_number(f, rc[k]);
        }
    }
    /* 0.9, not 0.90000000000000002: the level as the user typed it */
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", level);
    if (strtod(buf, NULL) != level)
        snprintf(buf, sizeof buf, "%.17g", level);
    fprintf(f, ",%s\n", buf);
}

/* cli_pred_write's table, the site column from x, from the test rows' own
 * site cells (t), or from the model's sites. */
static int pred_write(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                      const double *x, const size_t *site, const gmm_mdl_test *t,
                      const gmm_summary_pred *pr, size_t n, double level)
{
    gmm_outfile *of = NULL;
    gmm_status s = set ? gmm_outset_open(set, path, &of) : gmm_outfile_open(path, &of);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    FILE *f = gmm_outfile_stream(of);
    const char *resp = gmm_mdl_response_name(m);
    pred_header(f, gmm_mdl_site_column(m), resp);
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        const char *label = x ? NULL
                            : t ? gmm_mdl_test_label(m, t, i, buf)
                                : gmm_mdl_site_label(m, site ? site[i] : i, buf);
        pred_row(f, label, x ? x[i] : 0.0, &pr[i], resp, level);
    }
    if (!set && (s = gmm_outfile_commit(of)) != GMM_OK)
        return cli_fail(cmd, s);
    return 0;
}

int cli_pred_write(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                   const double *x, const size_t *site, const gmm_summary_pred *pr, size_t n,
                   double level)
{
    return pred_write(cmd, set, path, m, x, site, NULL, pr, n, level);
}

int cli_pred_write_rows(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                        const gmm_mdl_test *t, const gmm_summary_pred *pr, double level)
{
    return pred_write(cmd, set, path, m, gmm_mdl_test_inputs(m, t), NULL, t, pr, t->n, level);
}

int cli_pred_rows(const char *cmd, gmm_outset *set, const char *path, gmm_mdl *m,
                  const gmm_mdl_test *t, double level, int observed)
{
    gmm_summary_pred *pr = gmm_malloc(t->n ? t->n : 1, sizeof *pr);
    if (!pr)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = gmm_mdl_predict_test_summary(m, t, level, observed, pr);
    int rc = s != GMM_OK ? cli_fail(cmd, s) : cli_pred_write_rows(cmd, set, path, m, t, pr, level);
    gmm_free(pr);
    return rc;
}

int cli_pred_normal(const char *cmd, gmm_outset *set, const char *path, gmm_mdl *m,
                    const double *xq, size_t nq, double level, int observed)
{
    gmm_summary_pred *pr = gmm_malloc(nq ? nq : 1, sizeof *pr);
    if (!pr)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = gmm_mdl_predict_summary(m, xq, nq, level, observed, pr);
    int rc = s != GMM_OK ? cli_fail(cmd, s) : cli_pred_write(cmd, set, path, m, xq, NULL, pr, nq, level);
    gmm_free(pr);
    return rc;
}

int cli_pred_fixed(const char *cmd, const char *path, gmm_mdl *m, const gmm_mdl_test *t,
                   const double *xq, size_t nq, double level, int observed)
{
    size_t n = t ? t->n : nq;
    gmm_summary_pred *pr = gmm_malloc(n ? n : 1, sizeof *pr);
    if (!pr)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = gmm_mdl_predict_fixed_summary(m, t, xq, nq, level, observed, pr);
    int rc = s != GMM_OK ? cli_fail(cmd, s)
             : t         ? cli_pred_write_rows(cmd, NULL, path, m, t, pr, level)
                         : cli_pred_write(cmd, NULL, path, m, xq, NULL, pr, nq, level);
    gmm_free(pr);
    return rc;
}
