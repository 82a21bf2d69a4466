/* cli_vi_opts.c -- the options of `gmm-infer vi` (cli_vi.h): its usage,
 * its option table, and the checks of the options alone. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_vi.h"

static const char usage_text[] =
    "Usage: gmm-infer vi DATA.csv [MODEL OPTIONS] -o MODEL.json [options]\n"
    "       gmm-infer vi --model MODEL.json [DATA.csv] -o OUT.json [options]\n"
    "Fit q(x) = N(m, (L L')^-1), L a lower band matrix, to the posterior of the\n"
    "latent field by maximising the ELBO (L-BFGS on its exact gradient), from the\n"
    "Laplace approximation.  Writes the model (JSON, as fit does, with \"elbo\" and\n"
    "\"variational\") and q's parameters to OUT.q.csv beside it; predict, score and\n"
    "--init read them back.\n\n"
    "  --model FILE          start from a model (fit's or vi's output) instead of\n"
    "                        model options\n"
    "  -o, --output FILE     the model file to write (required)\n"
    "  --bandwidth B         L's lower bandwidth (default: the prior precision's,\n"
    "                        or the starting vi result's; 0: mean-field)\n"
    "  --learn-hyper         also optimise the free hyperparameters (kernel or\n"
    "                        precision, likelihood, intercept) jointly\n"
    "  --init FILE           resume from a vi result (its q, q's bandwidth unless\n"
    "                        --bandwidth is given, and its hyperparameters)\n"
    "  --quadrature-points K Gauss-Hermite points per row for likelihoods without\n"
    "                        a closed form (default: chosen per row);\n"
    "                        refused when the rule's error in the ELBO, estimated\n"
    "                        against twice the points, exceeds 1e-8 max(1, |ELBO|)\n"
    "  --max-iter N          L-BFGS iterations, N >= 1 (default 2000)\n"
    "  --tol T               end the first phase when the ELBO rises by at most T\n"
    "                        relative over 3 iterations (default 1e-9); a final run\n"
    "                        goes on to the gradient test, the only one that counts\n"
    "                        as converged\n"
    "  --posterior FILE      also write the posterior of f per data row or node (CSV\n"
    "                        as predict prints it: mean, var, lower, upper; rate or\n"
    "                        probability too; level)\n"
    "  --level P             --posterior's interval probability, in (0, 1) (default\n"
    "                        0.9)\n"
    "  --quiet               no progress on stderr\n"
    "  -h, --help            this help\n";

enum {
    OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_BANDWIDTH, OPT_LEARN, OPT_INIT, OPT_QUAD,
    OPT_MAXIT, OPT_TOL, OPT_POSTERIOR, OPT_LEVEL, OPT_QUIET
};
static const struct option longopts[] = {
    CLI_MODEL_LONGOPTS,
    {"model", required_argument, NULL, OPT_MODEL},
    {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
    {"learn-hyper", no_argument, NULL, OPT_LEARN},
    {"init", required_argument, NULL, OPT_INIT},
    {"quadrature-points", required_argument, NULL, OPT_QUAD},
    {"max-iter", required_argument, NULL, OPT_MAXIT},
    {"tol", required_argument, NULL, OPT_TOL},
    {"posterior", required_argument, NULL, OPT_POSTERIOR},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option of vi's own: 0 or the exit code after the message. */
static int vi_opt(const char *cmd, int c, const char *arg, cli_vi_args *a)
{
    gmm_vi_params *par = &a->par;
    switch (c) {
    case OPT_MODEL: a->model_path = arg; return 0;
    case OPT_BANDWIDTH:
        a->bw_given = 1;
        return cli_parse_size(cmd, "bandwidth", arg, 0, 100000000, &par->bandwidth);
    case OPT_LEARN: par->learn_hyper = 1; return 0;
    case OPT_INIT: a->init = arg; return 0;
    case OPT_QUAD:
        return cli_parse_size(cmd, "quadrature-points", arg, 0, GMM_LIK_QUAD_MAX, &par->nquad);
    case OPT_MAXIT: return cli_parse_size(cmd, "max-iter", arg, 1, 100000000, &par->max_iter);
    case OPT_TOL: return cli_parse_nonneg(cmd, "tol", arg, &par->tol);
    case OPT_POSTERIOR: a->post = arg; return 0;
    case OPT_LEVEL: return cli_parse_level(cmd, arg, &a->level);
    case OPT_QUIET: a->quiet = 1; return 0;
    case 'o': a->out = arg; return 0;
    default: return CLI_EXIT_USAGE;
    }
}

int cli_vi_args_parse(const char *cmd, int argc, char **argv, cli_vi_args *a)
{
    memset(a, 0, sizeof *a);
    cli_model_opts_init(&a->model);
    gmm_vi_params_init(&a->par);
    a->level = NAN;
    int c, rc = 0;
    optind = 1;
    while ((c = cli_model_getopt(&a->model, cmd, argc, argv, "ho:", longopts, usage_text,
                                 &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP) {
            a->stop = 1;
            return rc;
        }
        if ((rc = vi_opt(cmd, c, optarg, a)) != 0)
            return rc;
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &a->model)) != 0)
        return rc;
    if (!a->out || !strcmp(a->out, "-")) {
        cli_msg(cmd, "-o MODEL.json is required: q's parameters are written beside it");
        return CLI_EXIT_USAGE;
    }
    if (!isnan(a->level) && !a->post) {
        cli_msg(cmd, "--level applies to --posterior's intervals");
        return CLI_EXIT_USAGE;
    }
    gmm_status s = gmm_vi_params_check(&a->par);
    if (s != GMM_OK) {
        cli_fail(cmd, s);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

void cli_vi_args_free(cli_vi_args *a) { cli_model_opts_free(&a->model); }
