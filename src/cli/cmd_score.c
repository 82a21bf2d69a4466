/* cmd_score.c -- `gmm-infer score`: the log pointwise predictive density of
 * held-out outcomes, sum_i log E[p(y*_i | f_i)], under a model's posterior
 * (exact or Laplace, from a fit) or under MCMC draws (--draws): total as
 * JSON on stdout, per row as CSV with --rows; with --loo, the model's own
 * data left out one row at a time (gmm_mdl_score_loo). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/likelihood.h"
#include "gmm/modelfile.h"
#include "gmm/problem.h"

static const char usage_text[] =
    "Usage: gmm-infer score --model MODEL.json TEST.csv [--draws DRAWS.csv]... [--rows FILE]\n"
    "       gmm-infer score --model MODEL.json --loo [--rows FILE]\n"
    "Print the log pointwise predictive density of the held-out outcomes of TEST.csv,\n"
    "sum_i log E[p(y_i | f_i)], as JSON (\"lpd\", \"n\", \"mean_lpd\", \"posterior\"):\n"
    "under the model's posterior (the exact Gaussian one, or the Laplace\n"
    "approximation for other likelihoods) given its own data, or under MCMC draws\n"
    "(gmm-infer hmc's output): log mean_s E[p(y_i | f_i) | draw s], from the f[node]\n"
    "columns of graph models, the f[row] columns at test inputs that are data\n"
    "inputs, or the latent states x[1..n] (hmc --states) at any input, where f\n"
    "given a draw is the Markov bridge's normal.\n\n"
    "  --model FILE        the model (fit's output; required)\n"
    "  TEST.csv            held-out data with the model's columns: the input (x)\n"
    "                      or node column (a formula: every term's, covariate's and\n"
    "                      factor's column), the outcome, and the exposure column\n"
    "                      of a count model (from this file, not the training data)\n"
    "  --draws FILE        score under these draws instead (repeatable); they must\n"
    "                      be this model's: hmc -o FILE records it in FILE.json\n"
    "  --loo               leave-one-out over the model's own data instead:\n"
    "                      log p(y_i | y_-i) per observed row, as JSON \"elpd_loo\",\n"
    "                      \"n\", \"mean_elpd_loo\", \"posterior\", \"method\": \"exact\"\n"
    "                      (Gaussian) or \"cavity\" (the row's Gaussian site removed\n"
    "                      from the Laplace or VI posterior: an approximation)\n"
    "  --rows FILE         write the per-row log predictive densities as CSV\n"
    "  -h, --help          this help\n"
    "Rows with a missing outcome are skipped; a file with none observed is an error.\n";

/* The report root on stdout and the rows file of set (when --rows opened
 * one), committed together: a report that cannot be written (stdout on a
 * full disk) leaves no rows file.  s: the report's status so far (not OK:
 * nothing is written).  Takes set. */
static int commit_report(const char *cmd, gmm_outset *set, json_t *root, gmm_status s)
{
    gmm_outfile *so = NULL;
    if (s == GMM_OK && !root)
        s = gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK && (s = gmm_outset_open(set, NULL, &so)) == GMM_OK &&
        (s = gmm_json_write(gmm_outfile_stream(so), root, "-")) == GMM_OK) {
        s = gmm_outset_commit(set);
        set = NULL;
    }
    gmm_outset_abort(set);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

/* score --loo: the JSON and the rows of gmm_mdl_score_loo. */
static int score_loo(const char *cmd, gmm_mdl *m, const char *rows_path)
{
    size_t n;
    gmm_mdl_data_x(m, &n);
    double *lpd = gmm_malloc(n ? n : 1, sizeof *lpd);
    gmm_outset *set = NULL;
    gmm_outfile *of = NULL;
    json_t *root = NULL;
    int rc = 0;
    gmm_status s = lpd ? gmm_mdl_score_loo(m, lpd) : GMM_ENOMEM;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    double total = 0.0;
    size_t nobs = 0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(lpd[r])) {
            total += lpd[r];
            nobs++;
        }
    if ((s = gmm_outset_alloc(&set)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (rows_path) {
        if ((s = gmm_outset_open(set, rows_path, &of)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        FILE *f = gmm_outfile_stream(of);
        fprintf(f, "line,%s,%s,elpd_loo\n", gmm_mdl_data_site_name(m), gmm_mdl_data_y_name(m));
        for (size_t r = 0; r < n; r++) {
            size_t line, site;
            double y;
            char buf[96];
            if (isnan(lpd[r]))
                continue;
            gmm_mdl_data_row(m, r, &line, &y, &site);
            fprintf(f, "%zu,", line);
            gmm_csv_put_field(f, gmm_mdl_site_label(m, site, buf));
            fprintf(f, ",%.17g,%.17g\n", y, lpd[r]);
        }
    }
    const char *post = gmm_mdl_posterior_kind(m);
    root = json_object();
    s = root ? gmm_json_set_number(root, "elpd_loo", total) : GMM_OK;
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "n", json_integer((json_int_t)nobs));
    if (root && s == GMM_OK)
        s = gmm_json_set_number(root, "mean_elpd_loo", total / (double)nobs);
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "posterior", json_string(post));
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "method", json_string(gmm_mdl_loo_method(m)));
    rc = commit_report(cmd, set, root, s);
    set = NULL;
done:
    json_decref(root);
    gmm_outset_abort(set);
    gmm_free(lpd);
    return rc;
}

int cmd_score(int argc, char **argv)
{
    const char *cmd = "score";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_DRAWS, OPT_ROWS, OPT_LOO };
    static const struct option longopts[] = {{"model", required_argument, NULL, OPT_MODEL},
                                             {"draws", required_argument, NULL, OPT_DRAWS},
                                             {"rows", required_argument, NULL, OPT_ROWS},
                                             {"loo", no_argument, NULL, OPT_LOO},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *rows_path = NULL, *test = NULL;
    const char **draws = NULL;
    size_t ndraws = 0;
    int c, rc = 0, loo = 0;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl *m = NULL;
    gmm_mdl_test *tt = NULL;
    gmm_draws *d = NULL;
    gmm_outset *set = NULL;
    double *lpd = NULL;
    cli_io io;
    cli_io_init(&io);
    json_t *root = NULL;
    gmm_status s;

    static const int repeatable[] = {OPT_DRAWS, 0};
    cli_opt_seen seen = {repeatable, {0}, 0};
    optind = 1;
    while ((c = cli_getopt(cmd, &seen, argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED: rc = CLI_EXIT_USAGE; goto done;
        case OPT_MODEL: model_path = optarg; break;
        case OPT_ROWS: rows_path = optarg; break;
        case OPT_LOO: loo = 1; break;
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
    if (loo && (test || ndraws)) {
        cli_msg(cmd, "--loo scores the model's own data: no TEST.csv or --draws");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (optind < argc || !model_path || (!test && !loo)) {
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
    /* --rows never replaces what is read */
    cli_io_output(&io, "--rows", rows_path, NULL);
    cli_model_file_inputs(&io, &mf, model_path, NULL, "the model file");
    cli_io_input(&io, "the test file", test);
    cli_io_draws(&io, draws, ndraws);
    if ((rc = cli_io_check(cmd, &io)) != 0)
        goto done;
    if ((rc = cli_model_from_file(cmd, &mf, model_path, NULL, 0, 0, &m)) != 0)
        goto done;
    if (loo) {
        rc = score_loo(cmd, m, rows_path);
        goto done;
    }
    if ((s = gmm_mdl_test_read(m, test, &tt)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    size_t n = tt->n, nobs = tt->nobs;
    const double *y = tt->y;
    if (!(lpd = gmm_malloc(n ? n : 1, sizeof *lpd))) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    const char *source;
    if (ndraws) {
        source = "draws";
        if ((s = gmm_draws_read(draws, ndraws, &d)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        if ((rc = cli_model_check_draws(cmd, m, draws, ndraws, d)) != 0)
            goto done;
        s = gmm_mdl_score_draws(m, tt, d, draws[0], lpd);
    } else {
        source = gmm_mdl_posterior_kind(m);
        s = gmm_mdl_score(m, tt, lpd);
    }
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    double total = 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r]))
            total += lpd[r];
    if ((s = gmm_outset_alloc(&set)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (rows_path) {
        gmm_outfile *of = NULL;
        if ((s = gmm_outset_open(set, rows_path, &of)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        FILE *f = gmm_outfile_stream(of);
        fprintf(f, "line,%s,%s,lpd\n", gmm_mdl_data_site_name(m), gmm_mdl_data_y_name(m));
        for (size_t r = 0; r < n; r++) {
            char buf[64];
            if (isnan(y[r]))
                continue;
            fprintf(f, "%zu,", tt->table->line[r]);
            gmm_csv_put_field(f, gmm_mdl_test_label(m, tt, r, buf));
            fprintf(f, ",%.17g,%.17g\n", y[r], lpd[r]);
        }
    }
    root = json_object();
    s = root ? gmm_json_set_number(root, "lpd", total) : GMM_OK;
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "n", json_integer((json_int_t)nobs));
    if (root && s == GMM_OK)
        s = gmm_json_set_number(root, "mean_lpd", total / (double)nobs);
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "posterior", json_string(source));
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "test", json_string(test));
    rc = commit_report(cmd, set, root, s);
    set = NULL;
done:
    json_decref(root);
    gmm_outset_abort(set);
    cli_io_free(&io);
    gmm_draws_free(d);
    gmm_mdl_test_free(tt);
    gmm_free(lpd);
    gmm_free((void *)draws);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    return rc;
}
