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
#include "gmm/problem.h"

static const char usage_text[] =
    "Usage: gmm-infer score --model MODEL.json TEST.csv [--draws DRAWS.csv]... [--rows FILE]\n"
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
    "                      or node column, the outcome, and the exposure column of\n"
    "                      a count model (from this file, not the training data)\n"
    "  --draws FILE        score under these draws instead (repeatable); they must\n"
    "                      be this model's: hmc -o FILE records it in FILE.json\n"
    "  --rows FILE         write the per-row log predictive densities as CSV\n"
    "  -h, --help          this help\n"
    "Rows with a missing outcome are skipped; a file with none observed is an error.\n";

/* A data input and its row, ordered by input. */
typedef struct {
    double x;
    size_t row;
} xrow;

static int cmp_xrow(const void *a, const void *b)
{
    double x = ((const xrow *)a)->x, y = ((const xrow *)b)->x;
    return (x > y) - (x < y);
}

/* The column named `name` of d, or d->nvar. */
static size_t draws_var(const gmm_draws *d, const char *name)
{
    size_t v;
    for (v = 0; v < d->nvar && strcmp(d->name[v], name); v++)
        ;
    return v;
}

/* log of the mean of exp(l[0..N)), without overflow. */
static double log_mean_exp(const double *l, size_t N)
{
    double mx = -INFINITY, sum = 0.0;
    for (size_t k = 0; k < N; k++)
        if (l[k] > mx)
            mx = l[k];
    if (!isfinite(mx))
        return mx;
    for (size_t k = 0; k < N; k++)
        sum += exp(l[k] - mx);
    return mx + log(sum / (double)N);
}

/* Test rows per bridge call: its per-draw normals take 2 N SCORE_BLOCK
 * doubles. */
#define SCORE_BLOCK 256

/* The lpd of every observed test row under the draws:
 *   log mean_s E[p(y | f) | draw s]
 * with the likelihood at each draw's parameters (sampled columns, else the
 * model's).  Draw s fixes f at a data row (column f[row] or f[node]): then
 * E[p(y | f) | s] = p(y | f_s).  A state-space model at other inputs needs
 * the draw's latent states x[1..n] (hmc --states): f | s is the Markov
 * bridge's normal N(m_s, v_s) and E[p(y | f) | s] is gmm_lik_predictive's
 * (exact for the Gaussian, adaptive quadrature otherwise); with the states
 * every row goes that way (at a data input v_s = 0).  An exit code. */
static int score_draws(const char *cmd, gmm_mdl *m, const gmm_table *t, size_t cs,
                       const double *y, const double *e, const double *site, const size_t *idx,
                       const gmm_draws *d, const char *dpath, double *lpd)
{
    gmm_problem *p = gmm_mdl_problem(m);
    gmm_objective *o = gmm_mdl_objective(m);
    size_t n = t->nrow, N = d->nchain * d->niter, np = o->nparam;
    size_t nlat = gmm_latent_dim(gmm_problem_latent(p));
    int inputs = gmm_mdl_has_inputs(m), rc = 0;
    double c0 = gmm_mdl_center(m, NULL);
    double *th = gmm_malloc(N * (np ? np : 1), sizeof *th), *l = gmm_malloc(N, sizeof *l);
    gmm_lik *lik = gmm_malloc(N, sizeof *lik);
    double *xs = NULL, *xq = NULL, *M = NULL, *V = NULL;
    xrow *xsort = NULL;
    size_t *rq = NULL;
    gmm_status s;
    if (!th || !l || !lik) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    for (size_t k2 = 0; k2 < np; k2++) {
        size_t v = draws_var(d, o->name[k2]);
        for (size_t k = 0; k < N; k++)
            th[k * np + k2] = v < d->nvar ? gmm_draws_variable(d, v)[k] : o->value[k2];
    }
    for (size_t k = 0; k < N; k++)
        if ((s = gmm_problem_lik_at(p, th + k * np, &lik[k])) != GMM_OK) {
            cli_msg(cmd, "%s: draw %zu: %s", dpath, k + 1, gmm_error_message());
            rc = CLI_EXIT_ERROR;
            goto done;
        }
    size_t x1 = inputs ? draws_var(d, "x[1]") : d->nvar;
    int states = x1 < d->nvar && x1 + nlat <= d->nvar;
    if (states) {
        char name[48];
        snprintf(name, sizeof name, "x[%zu]", nlat);
        states = !strcmp(d->name[x1 + nlat - 1], name);
    }
    if (states) {
        xs = gmm_malloc(N * nlat, sizeof *xs);
        xq = gmm_malloc(SCORE_BLOCK, sizeof *xq);
        rq = gmm_malloc(SCORE_BLOCK, sizeof *rq);
        M = gmm_malloc(N * SCORE_BLOCK, sizeof *M);
        V = gmm_malloc(N * SCORE_BLOCK, sizeof *V);
        if (!xs || !xq || !rq || !M || !V) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        for (size_t j = 0; j < nlat; j++) {
            const double *col = gmm_draws_variable(d, x1 + j);
            for (size_t k = 0; k < N; k++)
                xs[k * nlat + j] = col[k];
        }
        for (size_t r0 = 0; r0 < n;) {
            size_t nq = 0;
            for (; r0 < n && nq < SCORE_BLOCK; r0++)
                if (!isnan(y[r0])) {
                    xq[nq] = site[r0];
                    rq[nq++] = r0;
                }
            if ((s = gmm_problem_predict_at_draws_normal(p, th, np, xs, N, xq, nq, M, V)) !=
                GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
            for (size_t q = 0; q < nq; q++) {
                size_t r = rq[q];
                for (size_t k = 0; k < N; k++)
                    if ((s = gmm_lik_predictive(&lik[k], y[r] - c0, e[r], M[k * nq + q],
                                                V[k * nq + q], &l[k])) != GMM_OK) {
                        rc = cli_fail(cmd, s);
                        goto done;
                    }
                lpd[r] = log_mean_exp(l, N);
            }
        }
        goto done;
    }
    /* f at the data rows: a test input must be one of the data's */
    size_t nx = 0;
    const double *x = inputs ? gmm_mdl_data_x(m, &nx) : NULL;
    if (inputs) {
        xsort = gmm_malloc(nx ? nx : 1, sizeof *xsort);
        if (!xsort) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        for (size_t i = 0; i < nx; i++)
            xsort[i] = (xrow){x[i], i};
        qsort(xsort, nx, sizeof *xsort, cmp_xrow);
    }
    for (size_t r = 0; r < n; r++) {
        if (isnan(y[r]))
            continue;
        char name[96], buf[64];
        if (inputs) {
            /* rows at one input share its state, so any of them serves */
            const xrow key = {site[r], 0}, *hit = bsearch(&key, xsort, nx, sizeof *xsort,
                                                          cmp_xrow);
            if (!hit) {
                cli_msg(cmd, "%s:%zu: column '%s': %.17g is not an input of the model's data, "
                             "and %s has no latent states x[1..%zu]: scoring new inputs under "
                             "draws needs them (gmm-infer hmc --states)",
                        t->file, t->line[r], t->header[cs], site[r], dpath, nlat);
                rc = CLI_EXIT_ERROR;
                goto done;
            }
            snprintf(name, sizeof name, "f[%zu]", hit->row + 1);
        } else {
            snprintf(name, sizeof name, "f[%s]", gmm_mdl_site_label(m, idx[r], buf));
        }
        size_t v = draws_var(d, name);
        if (v == d->nvar) {
            cli_msg(cmd, "%s: no column '%s' (the %s of %s:%zu); draws made with "
                         "--latent-subset must include it",
                    dpath, name, inputs ? "data row at the input" : "node", t->file,
                    t->line[r]);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        /* the draws are of f + the centre (Gaussian data) */
        const double *f = gmm_draws_variable(d, v);
        for (size_t k = 0; k < N; k++)
            if ((s = gmm_lik_predictive(&lik[k], y[r] - c0, e[r], f[k] - c0, 0.0, &l[k])) !=
                GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
        lpd[r] = log_mean_exp(l, N);
    }
done:
    gmm_free(th);
    gmm_free(l);
    gmm_free(lik);
    gmm_free(xs);
    gmm_free(xq);
    gmm_free(rq);
    gmm_free(M);
    gmm_free(V);
    gmm_free(xsort);
    return rc;
}

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
    gmm_mdl *m = NULL;
    gmm_table *t = NULL;
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    double *site = NULL, *y = NULL, *e = NULL, *mean = NULL, *var = NULL, *lpd = NULL;
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
    const gmm_lik *lik = gmm_mdl_likelihood(m);
    int inputs = gmm_mdl_has_inputs(m);
    /* the test data: site (x or node), outcome, exposure */
    if ((s = gmm_table_read(test, &t)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    size_t cs, cy, ce = 0, n = t->nrow;
    const char *ename = gmm_mdl_data_exposure_name(m);
    if ((s = gmm_table_column(t, gmm_mdl_data_site_name(m), &cs)) != GMM_OK ||
        (s = gmm_table_column(t, gmm_mdl_data_y_name(m), &cy)) != GMM_OK ||
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
        if (!inputs && !gmm_mdl_site_find(m, t->cell[r][cs], &idx[r])) {
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
    double center = gmm_mdl_center(m, NULL);
    const char *source;
    if (ndraws) {
        source = "draws";
        if ((s = gmm_draws_read(draws, ndraws, &d)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        if ((rc = cli_model_check_draws(cmd, m, draws, ndraws, d)) != 0 ||
            (rc = score_draws(cmd, m, t, cs, y, e, site, idx, d, draws[0], lpd)) != 0)
            goto done;
    } else {
        source = gmm_mdl_posterior_kind(m);
        size_t nq = inputs ? n : gmm_mdl_nsites(m);
        mean = gmm_malloc(nq ? nq : 1, sizeof *mean);
        var = gmm_malloc(nq ? nq : 1, sizeof *var);
        if (!mean || !var) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        if ((s = gmm_mdl_predict(m, site, nq, mean, var)) != GMM_OK) {
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
        fprintf(f, "line,%s,%s,lpd\n", gmm_mdl_data_site_name(m), gmm_mdl_data_y_name(m));
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
    gmm_free((void *)draws);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    return rc;
}
