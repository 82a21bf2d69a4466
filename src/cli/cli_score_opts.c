/* cli_score_opts.c -- the options of `gmm-infer score` (cli_score.h): its
 * usage, its option table and the checks of the options alone. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_score.h"
#include "gmm/alloc.h"

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
    "  --factor F          auto, band or sparse: how the posterior precision is\n"
    "                      stored and factorised (default: the model's)\n"
    "  -h, --help          this help\n"
    "Rows with a missing outcome are skipped; a file with none observed is an error.\n";

enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_DRAWS, OPT_ROWS, OPT_LOO, OPT_FACTOR };
static const struct option longopts[] = {{"model", required_argument, NULL, OPT_MODEL},
                                         {"draws", required_argument, NULL, OPT_DRAWS},
                                         {"rows", required_argument, NULL, OPT_ROWS},
                                         {"loo", no_argument, NULL, OPT_LOO},
                                         {"factor", required_argument, NULL, OPT_FACTOR},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};

/* One option: 0, or an exit code after the message (-1: --help printed). */
static int score_opt(const char *cmd, int c, const char *arg, cli_score_args *a)
{
    switch (c) {
    case CLI_OPT_REPEATED: return CLI_EXIT_USAGE;
    case OPT_MODEL: a->model_path = arg; return 0;
    case OPT_ROWS: a->rows = arg; return 0;
    case OPT_LOO: a->loo = 1; return 0;
    case OPT_FACTOR: {
        int ssm;
        gmm_model_factor f;
        if (cli_model_parse_factor(cmd, arg, 1, &ssm, &f))
            return CLI_EXIT_USAGE;
        a->storage = (int)f;
        return 0;
    }
    case OPT_DRAWS: {
        const char **dd = gmm_realloc((void *)a->draws, a->ndraws + 1, sizeof *dd);
        if (!dd)
            return cli_fail(cmd, GMM_ENOMEM);
        dd[a->ndraws++] = arg;
        a->draws = dd;
        return 0;
    }
    case 'h': fputs(usage_text, stdout); return -1;
    default:
        fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
        return CLI_EXIT_USAGE;
    }
}

int cli_score_args_parse(const char *cmd, int argc, char **argv, cli_score_args *a)
{
    static const int repeatable[] = {OPT_DRAWS, 0};
    cli_opt_seen seen = {repeatable, {0}, 0};
    memset(a, 0, sizeof *a);
    a->storage = CLI_MODEL_FILE_FACTOR;
    int c, rc;
    optind = 1;
    while ((c = cli_getopt(cmd, &seen, argc, argv, "h", longopts)) != -1)
        if ((rc = score_opt(cmd, c, optarg, a)) != 0) {
            a->stop = rc < 0;
            return rc < 0 ? 0 : rc;
        }
    if (optind < argc)
        a->test = argv[optind++];
    if (a->loo && (a->test || a->ndraws)) {
        cli_msg(cmd, "--loo scores the model's own data: no TEST.csv or --draws");
        return CLI_EXIT_USAGE;
    }
    if (optind < argc || !a->model_path || (!a->test && !a->loo)) {
        cli_msg(cmd, optind < argc ? "unexpected argument '%s'"
                                   : "--model MODEL.json and TEST.csv are required%s",
                optind < argc ? argv[optind] : "");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

void cli_score_args_free(cli_score_args *a) { gmm_free((void *)a->draws); }
