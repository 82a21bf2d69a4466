/* cmd_loo.c -- `gmm-infer loo DRAWS.csv...`: PSIS-LOO and WAIC from the
 * pointwise log-likelihood columns log_lik[i] of MCMC draws (hmc
 * --log-lik), as R's loo 2.5.1 computes them (loo.h), over the chains of
 * every file merged by chain id (draws.h). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/loo.h"

static const char *CMD = "loo";

static void usage(FILE *f)
{
    fputs("Usage: gmm-infer loo [OPTIONS] DRAWS.csv...\n"
          "\n"
          "Leave-one-out cross-validation by Pareto-smoothed importance sampling (PSIS-LOO)\n"
          "and WAIC from the pointwise log-likelihood columns log_lik[1], log_lik[2], ...\n"
          "of MCMC draws (written by 'gmm-infer hmc --log-lik'), computed as R's\n"
          "loo::loo(ll, r_eff = loo::relative_eff(exp(ll))) and loo::waic(ll) (loo\n"
          "2.5.1).  Prints JSON: elpd_loo, p_loo, looic, elpd_waic, p_waic, waic, each\n"
          "with its standard error (se_...), the Monte Carlo SE of elpd_loo\n"
          "(mcse_elpd_loo, loo's; null when some k > 0.7), n_obs, n_draws, n_chains,\n"
          "the Pareto k of every observation (null where no tail could be fitted) and\n"
          "their counts\n"
          "(good k <= 0.5, ok <= 0.7, bad <= 1, very bad > 1); warns on stderr when\n"
          "some k > 0.7 (those observations' PSIS-LOO is unreliable) or some p_waic\n"
          "> 0.4.  Files ('-' for stdin) are read and merged as 'summary' does; other\n"
          "columns are ignored.\n"
          "\n"
          "Options:\n"
          "  -o, --output FILE     write the JSON to FILE (atomically) instead of stdout\n"
          "  -p, --pointwise FILE  write CSV per observation to FILE (atomically):\n"
          "                        variable,elpd_loo,p_loo,looic,pareto_k,r_eff,\n"
          "                        elpd_waic,p_waic,waic,mcse_elpd_loo\n"
          "  -h, --help            show this help and exit\n"
          "\n"
          "Exit status: 0 success, 1 bad input or I/O error, 2 usage error,\n"
          "130/143 interrupted.\n",
          f);
}

static int is_log_lik(const char *name)
{
    return strncmp(name, "log_lik[", 8) == 0;
}

/* A number, or null where JSON has none (an infinite k, an SE of one
 * observation). */
static gmm_status set_num(json_t *o, const char *key, double x)
{
    return isfinite(x) ? gmm_json_set_number(o, key, x) : gmm_json_set_new(o, key, json_null());
}

static gmm_status write_json(FILE *f, const gmm_loo *t, size_t nchain, const gmm_loo_point *p)
{
    json_t *root = json_object(), *counts = json_object(), *k = json_array();
    gmm_status st = root && counts && k ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    const struct {
        const char *name;
        double v;
    } f_[] = {{"elpd_loo", t->elpd_loo},   {"se_elpd_loo", t->se_elpd_loo},
              {"p_loo", t->p_loo},         {"se_p_loo", t->se_p_loo},
              {"looic", t->looic},         {"se_looic", t->se_looic},
              {"mcse_elpd_loo", t->mcse_elpd_loo},
              {"elpd_waic", t->elpd_waic}, {"se_elpd_waic", t->se_elpd_waic},
              {"p_waic", t->p_waic},       {"se_p_waic", t->se_p_waic},
              {"waic", t->waic},           {"se_waic", t->se_waic}};
    for (size_t i = 0; st == GMM_OK && i < sizeof f_ / sizeof f_[0]; i++)
        st = set_num(root, f_[i].name, f_[i].v);
    const struct {
        const char *name;
        size_t n;
    } c_[] = {{"good", t->k_good}, {"ok", t->k_ok}, {"bad", t->k_bad},
              {"very_bad", t->k_very_bad}};
    for (size_t i = 0; st == GMM_OK && i < 4; i++)
        st = gmm_json_set_new(counts, c_[i].name, json_integer((json_int_t)c_[i].n));
    for (size_t i = 0; st == GMM_OK && i < t->nobs; i++) {
        json_t *v = isfinite(p[i].pareto_k) ? json_real(p[i].pareto_k) : json_null();
        if (!v || json_array_append_new(k, v) != 0)
            st = gmm_error(GMM_ENOMEM, "out of memory");
    }
    if (st == GMM_OK)
        st = gmm_json_set_new(root, "n_obs", json_integer((json_int_t)t->nobs));
    if (st == GMM_OK)
        st = gmm_json_set_new(root, "n_draws", json_integer((json_int_t)t->ndraw));
    if (st == GMM_OK)
        st = gmm_json_set_new(root, "n_chains", json_integer((json_int_t)nchain));
    if (st == GMM_OK) {
        st = gmm_json_set_new(root, "pareto_k_counts", counts);
        counts = NULL;
    }
    if (st == GMM_OK) {
        st = gmm_json_set_new(root, "pareto_k", k);
        k = NULL;
    }
    if (st == GMM_OK)
        st = gmm_json_write(f, root, "-");
    json_decref(counts);
    json_decref(k);
    json_decref(root);
    return st;
}

static void write_pointwise(FILE *f, const gmm_draws *d, const size_t *var,
                            const gmm_loo_point *p, size_t nobs)
{
    fputs("variable,elpd_loo,p_loo,looic,pareto_k,r_eff,elpd_waic,p_waic,waic,mcse_elpd_loo\n",
          f);
    for (size_t i = 0; i < nobs; i++) {
        const double col[] = {p[i].elpd_loo,  p[i].p_loo,  p[i].looic, p[i].pareto_k,
                              p[i].r_eff,     p[i].elpd_waic, p[i].p_waic, p[i].waic,
                              p[i].mcse_elpd_loo};
        gmm_csv_put_field(f, d->name[var[i]]);
        for (size_t j = 0; j < sizeof col / sizeof col[0]; j++) {
            fputc(',', f);
            gmm_csv_put_number(f, col[j]);
        }
        fputc('\n', f);
    }
}

static gmm_status run(const gmm_draws *d, const char *out_path, const char *pw_path)
{
    size_t nobs = 0;
    for (size_t v = 0; v < d->nvar; v++)
        nobs += is_log_lik(d->name[v]) != 0;
    if (nobs == 0)
        return gmm_error(GMM_EPARSE, "no log_lik[i] columns in the draws (hmc --log-lik "
                                     "writes them)");
    if (d->niter < 2)
        return gmm_error(GMM_EPARSE, "chains of %zu draw: loo needs at least 2 per chain",
                         d->niter);
    size_t *var = gmm_malloc(nobs, sizeof *var);
    gmm_loo_point *p = gmm_malloc(nobs, sizeof *p);
    gmm_outset *set = NULL;
    gmm_outfile *of = NULL, *pf = NULL;
    gmm_status st = var && p ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t v = 0, i = 0; st == GMM_OK && v < d->nvar; v++)
        if (is_log_lik(d->name[v]))
            var[i++] = v;
    gmm_loo t;
    if (st == GMM_OK)
        st = gmm_loo_draws(d, var, nobs, cli_stop_requested, p, &t);
    /* the table and the report are committed together: one that cannot be
     * written leaves neither */
    if (st == GMM_OK)
        st = gmm_outset_alloc(&set);
    if (st == GMM_OK && pw_path) {
        st = gmm_outset_open(set, pw_path, &pf);
        if (st == GMM_OK)
            write_pointwise(gmm_outfile_stream(pf), d, var, p, nobs);
    }
    if (st == GMM_OK)
        st = gmm_outset_open(set, out_path, &of);
    if (st == GMM_OK)
        st = write_json(gmm_outfile_stream(of), &t, d->nchain, p);
    if (st == GMM_OK) {
        st = gmm_outset_commit(set);
        set = NULL;
    }
    if (st == GMM_OK) {
        size_t high = t.k_bad + t.k_very_bad, big_p = 0;
        for (size_t i = 0; i < nobs; i++)
            big_p += p[i].p_waic > 0.4;
        if (high)
            cli_msg(CMD, "warning: %zu of %zu observations have Pareto k > 0.7 (%zu > 1): "
                         "PSIS-LOO is unreliable for them; more draws may help, or refit "
                         "without each (exact LOO)",
                    high, nobs, t.k_very_bad);
        if (big_p)
            cli_msg(CMD, "warning: %zu of %zu observations have p_waic > 0.4: WAIC is "
                         "unreliable; prefer PSIS-LOO",
                    big_p, nobs);
    }
    gmm_outset_abort(set);
    gmm_free(p);
    gmm_free(var);
    return st;
}

int cmd_loo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"pointwise", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *pw_path = NULL;
    int c;

    optind = 1;
    opterr = 0;
    cli_opt_seen seen = {NULL, {0}, 0};
    while ((c = cli_getopt(CMD, &seen, argc, argv, ":ho:p:", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED:
            return CLI_EXIT_USAGE;
        case 'o':
            out_path = optarg;
            break;
        case 'p':
            pw_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error(CMD, "option '%s' needs an argument", argv[optind - 1]);
        default:
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind == argc)
        return cli_usage_error(CMD, "missing DRAWS.csv");
    size_t nstdin = 0;
    for (int i = optind; i < argc; i++)
        nstdin += argv[i][0] == '-' && !argv[i][1];
    if (nstdin > 1)
        return cli_usage_error(CMD, "'-' (stdin) given %zu times", nstdin);

    /* -o and --pointwise never replace a draws file or its sidecar */
    cli_io io;
    cli_io_init(&io);
    cli_io_output(&io, "-o", out_path, NULL);
    cli_io_output(&io, "--pointwise", pw_path, NULL);
    cli_io_draws(&io, (const char *const *)(argv + optind), (size_t)(argc - optind));
    int rc = cli_io_check(CMD, &io);
    cli_io_free(&io);
    if (rc)
        return rc;
    if (cli_install_signals() != 0)
        cli_msg(CMD, "warning: cannot catch SIGINT/SIGTERM");
    gmm_draws *d = NULL;
    gmm_status st = gmm_draws_read((const char *const *)(argv + optind), (size_t)(argc - optind),
                                   &d);
    if (st == GMM_OK)
        st = run(d, out_path, pw_path);
    gmm_draws_free(d);
    return st == GMM_OK ? CLI_EXIT_OK : cli_fail(CMD, st);
}
