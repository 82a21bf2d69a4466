/* cmd_score.c -- `gmm-infer score`: the log pointwise predictive density of
 * held-out outcomes, sum_i log E[p(y*_i | f_i)], under a model's posterior
 * (exact or Laplace, from a fit) or under MCMC draws (--draws): total as
 * JSON on stdout, per row as CSV with --rows. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/likelihood.h"
#include "gmm/modelfile.h"

static const char usage_text[] =
    "Usage: gmm-infer score --model MODEL.json TEST.csv [--draws DRAWS.csv]... [--rows FILE]\n"
    "Print the log pointwise predictive density of the held-out outcomes of TEST.csv,\n"
    "sum_i log E[p(y_i | f_i)], as JSON (\"lpd\", \"n\", \"mean_lpd\", \"posterior\"):\n"
    "under the model's posterior (the exact Gaussian one, or the Laplace\n"
    "approximation for other likelihoods) given its own data, or under MCMC draws\n"
    "of f (gmm-infer hmc's output; graph models: f[node] columns).\n\n"
    "  --model FILE        the model (fit's output; required)\n"
    "  TEST.csv            held-out data with the model's columns: the input (x)\n"
    "                      or node column, the outcome, and the exposure column of\n"
    "                      a count model (from this file, not the training data)\n"
    "  --draws FILE        score under these draws instead (repeatable)\n"
    "  --rows FILE         write the per-row log predictive densities as CSV\n"
    "  -h, --help          this help\n"
    "Rows with a missing outcome are skipped.\n";

int cmd_score(int argc, char **argv)
{
    const char *cmd = "score";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_DRAWS, OPT_ROWS };
    static const struct option longopts[] = {{"model", required_argument, NULL, OPT_MODEL},
                                             {"draws", required_argument, NULL, OPT_DRAWS},
                                             {"rows", required_argument, NULL, OPT_ROWS},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *rows_path = NULL, *test = NULL;
    const char **draws = NULL;
    size_t ndraws = 0;
    int c, rc = 0;
    gmm_model mf;
    gmm_model_init(&mf);
    cli_model *m = NULL;
    gmm_table *t = NULL;
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    double *site = NULL, *y = NULL, *e = NULL, *mean = NULL, *var = NULL, *lpd = NULL;
    double *fcol = NULL;
    size_t *idx = NULL;
    json_t *root = NULL;
    gmm_status s;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL: model_path = optarg; break;
        case OPT_ROWS: rows_path = optarg; break;
        case OPT_DRAWS: {
            const char **dd = gmm_realloc((void *)draws, ndraws + 1, sizeof *dd);
            if (!dd) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                goto done;
            }
            dd[ndraws++] = optarg;
            draws = dd;
            break;
        }
        case 'h': fputs(usage_text, stdout); goto done;
        default:
            fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc)
        test = argv[optind++];
    if (optind < argc || !model_path || !test) {
        cli_msg(cmd, optind < argc ? "unexpected argument '%s'"
                                   : "--model MODEL.json and TEST.csv are required%s",
                optind < argc ? argv[optind] : "");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (rows_path && (s = gmm_outfile_check(rows_path)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if ((s = gmm_model_read(model_path, &mf)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if ((rc = cli_model_from_file(cmd, &mf, model_path, NULL, 0, 0, &m)) != 0)
        goto done;
    const gmm_lik *lik = cli_model_likelihood(m);
    int inputs = cli_model_has_inputs(m);
    if (ndraws && inputs) {
        cli_msg(cmd, "--draws holds f at the training rows only; scoring held-out inputs of a "
                     "state-space model needs the latent states (score without --draws uses "
                     "the exact or Laplace posterior)");
        rc = CLI_EXIT_USAGE;
        goto done;
    }

    /* the test data: site (x or node), outcome, exposure */
    if ((s = gmm_table_read(test, &t)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    size_t cs, cy, ce = 0, n = t->nrow;
    const char *ename = cli_model_data_exposure_name(m);
    if ((s = gmm_table_column(t, cli_model_data_site_name(m), &cs)) != GMM_OK ||
        (s = gmm_table_column(t, cli_model_data_y_name(m), &cy)) != GMM_OK ||
        (ename && (s = gmm_table_column(t, ename, &ce)) != GMM_OK)) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    size_t nn = n ? n : 1;
    site = gmm_malloc(nn, sizeof *site);
    y = gmm_malloc(nn, sizeof *y);
    e = gmm_malloc(nn, sizeof *e);
    lpd = gmm_malloc(nn, sizeof *lpd);
    idx = gmm_malloc(nn, sizeof *idx);
    if (!site || !y || !e || !lpd || !idx) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((s = gmm_table_column_double(t, cy, 1, y)) != GMM_OK ||
        (inputs && (s = gmm_table_column_double(t, cs, 0, site)) != GMM_OK) ||
        (ename && (s = gmm_table_column_double(t, ce, 1, e)) != GMM_OK)) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    for (size_t r = 0; r < n; r++) {
        if (!ename)
            e[r] = 1.0;
        if (!inputs && !cli_model_site_find(m, t->cell[r][cs], &idx[r])) {
            cli_msg(cmd, "%s:%zu: column '%s': node '%s' is not a node of the model's graph",
                    t->file, t->line[r], t->header[cs], t->cell[r][cs]);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
    }
    size_t nobs = 0;
    for (size_t r = 0; r < n; r++) {
        if (isnan(y[r]))
            continue;
        nobs++;
        if (ename && isnan(e[r])) {
            cli_msg(cmd, "%s:%zu: column '%s': missing exposure for an observed outcome",
                    t->file, t->line[r], ename);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
    }
    if (nobs == 0) {
        if (n == 0)
            cli_msg(cmd, "%s: no data rows: nothing to score", t->file);
        else
            cli_msg(cmd, "%s: column '%s' is missing on all %zu rows: nothing to score",
                    t->file, t->header[cy], n);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    if ((s = gmm_lik_check_data(lik, y, ename ? e : NULL, n)) != GMM_OK) {
        size_t r = gmm_error_index();
        if (r < n)
            cli_msg(cmd, "%s:%zu: column '%s': %s", t->file, t->line[r],
                    strstr(gmm_error_message(), "exposure") && ename ? ename : t->header[cy],
                    gmm_error_message());
        else
            cli_fail(cmd, s);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    double center = cli_model_center(m, NULL);
    const char *source;
    if (ndraws) {
        source = "draws";
        if ((s = gmm_draws_read(draws, ndraws, &d)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        size_t N = d->nchain * d->niter;
        char name[96], buf[64];
        for (size_t r = 0; r < n; r++) {
            if (isnan(y[r]))
                continue;
            snprintf(name, sizeof name, "f[%s]", cli_model_site_label(m, idx[r], buf));
            size_t v;
            for (v = 0; v < d->nvar && strcmp(d->name[v], name); v++)
                ;
            if (v == d->nvar) {
                cli_msg(cmd, "%s: no column '%s' for the node of %s:%zu", draws[0], name, t->file,
                        t->line[r]);
                rc = CLI_EXIT_ERROR;
                goto done;
            }
            /* the draws are of f + the centre (Gaussian data) */
            if (!fcol && !(fcol = gmm_malloc(N, sizeof *fcol))) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                goto done;
            }
            for (size_t k = 0; k < N; k++)
                fcol[k] = gmm_draws_variable(d, v)[k] - center;
            if ((s = gmm_lik_predictive_draws(lik, y[r] - center, e[r], fcol, N, &lpd[r])) !=
                GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
        }
    } else {
        source = cli_model_posterior_kind(m);
        size_t nq = inputs ? n : cli_model_nsites(m);
        mean = gmm_malloc(nq ? nq : 1, sizeof *mean);
        var = gmm_malloc(nq ? nq : 1, sizeof *var);
        if (!mean || !var) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        if ((s = cli_model_predict(m, site, nq, mean, var)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        for (size_t r = 0; r < n; r++) {
            if (isnan(y[r]))
                continue;
            size_t q = inputs ? r : idx[r];
            if ((s = gmm_lik_predictive(lik, y[r] - center, e[r], mean[q] - center, var[q],
                                        &lpd[r])) != GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
        }
    }
    double total = 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r]))
            total += lpd[r];
    if (rows_path) {
        if ((s = gmm_outfile_open(rows_path, &of)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        FILE *f = gmm_outfile_stream(of);
        fprintf(f, "line,%s,%s,lpd\n", cli_model_data_site_name(m), cli_model_data_y_name(m));
        for (size_t r = 0; r < n; r++) {
            if (isnan(y[r]))
                continue;
            fprintf(f, "%zu,", t->line[r]);
            cli_put_csv_field(f, t->cell[r][cs]);
            fprintf(f, ",%.17g,%.17g\n", y[r], lpd[r]);
        }
        s = gmm_outfile_commit(of);
        of = NULL;
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
    }
    root = json_object();
    if (!root || (s = gmm_json_set_number(root, "lpd", total)) != GMM_OK ||
        (s = gmm_json_set_new(root, "n", json_integer((json_int_t)nobs))) != GMM_OK ||
        (s = gmm_json_set_number(root, "mean_lpd", total / (double)nobs)) != GMM_OK ||
        (s = gmm_json_set_new(root, "posterior", json_string(source))) != GMM_OK ||
        (s = gmm_json_set_new(root, "test", json_string(test))) != GMM_OK ||
        (s = gmm_json_write(stdout, root, "-")) != GMM_OK) {
        rc = cli_fail(cmd, root ? s : GMM_ENOMEM);
        goto done;
    }
done:
    json_decref(root);
    gmm_outfile_abort(of);
    gmm_draws_free(d);
    gmm_table_free(t);
    gmm_free(site);
    gmm_free(y);
    gmm_free(e);
    gmm_free(mean);
    gmm_free(var);
    gmm_free(lpd);
    gmm_free(idx);
    gmm_free(fcol);
    gmm_free((void *)draws);
    cli_model_free(m);
    gmm_model_free(&mf);
    return rc;
}
