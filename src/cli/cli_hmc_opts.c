/* cli_hmc_opts.c -- the options of `gmm-infer hmc` (cli_hmc.h): its
 * usage, its option table, and every check of the options alone, made
 * before anything is read or printed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_hmc.h"
#include "cli_model.h"
#include "gmm/alloc.h"

static const char usage_text[] =
    "Usage: gmm-infer hmc DATA.csv [MODEL OPTIONS] [options]\n"
    "       gmm-infer hmc --model MODEL.json [DATA.csv] [options]\n"
    "Draw from the posterior of the latent field at fixed hyperparameters (the\n"
    "model's values) by whitened HMC: x = W(theta) v, v ~ N(0, I) a priori.\n"
    "Prints CSV: .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,\n"
    "treedepth__,n_leapfrog__,divergent__,energy__, then f[i] (the linear\n"
    "predictor at data row i, 1-based) or f[node] for graph models.\n\n"
    "  --model FILE        the model (fit's output); otherwise model options\n"
    "  --chains K          chains (default 4)\n"
    "  --threads T         threads (default 1); the output does not depend on T\n"
    "  --seed S            random seed (default 1)\n"
    "  --chain-id C        number the chains C, C+1, ... (default 1); each chain id\n"
    "                      has its own random stream, so jobs with distinct ids\n"
    "                      make distinct chains that `gmm-infer summary` merges\n"
    "  --warmup W          warm-up iterations, adapting (default 1000); with 0 the\n"
    "                      step size is Stan's initial search's (one leapfrog step\n"
    "                      accepted with probability about 0.8), never adapted\n"
    "  --draws D           draws kept per chain (default 1000)\n"
    "  --sampler S         nuts (default) or hmc (fixed length, --steps L)\n"
    "  --steps L           leapfrog steps of --sampler hmc (default 10)\n"
    "  --max-depth N       NUTS tree depth limit (default 10)\n"
    "  --target-accept A   step-size adaptation target in warm-up (default 0.8,\n"
    "                      0.651 under the laplace metric; refused with --warmup 0)\n"
    "  --stepsize-jitter J after warm-up, each iteration's step size drawn uniformly\n"
    "                      from eps (1 - J, 1 + J), 0 <= J < 1 (default 0)\n"
    "  -o, --output FILE   write the draws to FILE (atomically), and how they were\n"
    "                      made (settings, priors, step sizes) to FILE.json when FILE\n"
    "                      is a regular file; interrupted: whole chains, cut to the\n"
    "                      same length, in FILE.partial (and FILE.partial.json)\n"
    "  --format F          csv (default): one file, the layout of posterior's\n"
    "                      as_draws_df; cmdstan: CmdStan's output CSV, one file per\n"
    "                      chain, FILE_1.csv, FILE_2.csv, ... (needs -o FILE)\n"
    "  --summary FILE      also write the posterior summary (as `gmm-infer summary`)\n"
    "  --metric M          prior, laplace (whitened by the Laplace posterior: for\n"
    "                      informative data) or auto (default; see the man page)\n"
    "  --sample-hyper      also sample the free hyperparameters (kernel or precision,\n"
    "                      likelihood, intercept; not those held by --fix), on the\n"
    "                      log scale for positive ones, logit in (0, 1)\n"
    "  --marginal M        with --sample-hyper: none (default: theta and x jointly),\n"
    "                      laplace (NUTS on theta's marginal, x drawn given it) or\n"
    "                      laplace-mh (that corrected to the exact posterior)\n"
    "  --mh-draws M        laplace-mh: latents drawn per proposal, one kept by\n"
    "                      weight (default 32; more: fewer rejections)\n"
    "  --prior NAME=D      prior of a sampled parameter: lognormal(MU,SIGMA) (its\n"
    "                      log ~ N(MU, SIGMA^2)), logitnormal (bym2's phi: its\n"
    "                      logit), atanhnormal (a correlation: its atanh) or\n"
    "                      normal (a coefficient); default: MU the\n"
    "                      value on that scale, SIGMA 1 (normal: 2)\n"
    "  --latent-subset S   write f only at these data rows (1-based numbers and\n"
    "                      ranges A-B) or nodes (labels), comma-separated\n"
    "  --states            also write the latent states x[1..n] of each draw (what\n"
    "                      `predict --draws --at/--grid` needs for new inputs)\n"
    "  --log-lik           also write log p(y_r | f_r, theta) of each observed data\n"
    "                      row r, log_lik[r] (what `gmm-infer loo` reads)\n"
    "  --init FILE         start the chains at q's mean of a vi result (default:\n"
    "                      the posterior mode, exact or Laplace), jittered\n"
    "  --quiet             no progress on stderr\n"
    "  -h, --help          this help\n";

enum {
    OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_CHAINS, OPT_THREADS, OPT_SEED, OPT_CHAIN_ID,
    OPT_WARMUP, OPT_DRAWS, OPT_SAMPLER, OPT_STEPS, OPT_MAX_DEPTH, OPT_TARGET_ACCEPT,
    OPT_SUMMARY, OPT_QUIET, OPT_SAMPLE_HYPER, OPT_PRIOR, OPT_SUBSET, OPT_STATES, OPT_LOG_LIK, OPT_INIT,
    OPT_FORMAT, OPT_MARGINAL, OPT_MH_DRAWS, OPT_METRIC, OPT_JITTER
};
static const struct option longopts[] = {
    CLI_MODEL_LONGOPTS,
    {"model", required_argument, NULL, OPT_MODEL},
    {"chains", required_argument, NULL, OPT_CHAINS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"chain-id", required_argument, NULL, OPT_CHAIN_ID},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"draws", required_argument, NULL, OPT_DRAWS},
    {"sampler", required_argument, NULL, OPT_SAMPLER},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
    {"target-accept", required_argument, NULL, OPT_TARGET_ACCEPT},
    {"stepsize-jitter", required_argument, NULL, OPT_JITTER},
    {"summary", required_argument, NULL, OPT_SUMMARY},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"sample-hyper", no_argument, NULL, OPT_SAMPLE_HYPER},
    {"prior", required_argument, NULL, OPT_PRIOR},
    {"latent-subset", required_argument, NULL, OPT_SUBSET},
    {"states", no_argument, NULL, OPT_STATES},
    {"log-lik", no_argument, NULL, OPT_LOG_LIK},
    {"init", required_argument, NULL, OPT_INIT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"marginal", required_argument, NULL, OPT_MARGINAL},
    {"mh-draws", required_argument, NULL, OPT_MH_DRAWS},
    {"metric", required_argument, NULL, OPT_METRIC},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* The sampler's settings: 1 when c is one of them (*rc 0 or the exit code
 * after the message), else 0. */
static int sampler_opt(const char *cmd, int c, const char *arg, cli_hmc_args *a, int *rc)
{
    gmm_hmc_params *par = &a->rp.hmc;
    size_t tmp = 0;
    int tmpi = 0;
    char *end;
    switch (c) {
    case OPT_CHAINS: *rc = cli_parse_size(cmd, "chains", arg, 1, 4096, &a->rp.nchain); break;
    case OPT_THREADS: *rc = cli_parse_size(cmd, "threads", arg, 1, 1024, &a->nthread); break;
    case OPT_SEED:
        *rc = cli_parse_size(cmd, "seed", arg, 0, 0, &tmp);
        par->seed = tmp;
        break;
    case OPT_CHAIN_ID:
        *rc = cli_parse_size(cmd, "chain-id", arg, 1, (size_t)1 << 40, &tmp);
        a->rp.chain0 = tmp;
        break;
    case OPT_WARMUP: *rc = cli_parse_size(cmd, "warmup", arg, 0, 100000000, &par->warmup); break;
    case OPT_DRAWS: *rc = cli_parse_size(cmd, "draws", arg, 1, 100000000, &par->draws); break;
    case OPT_SAMPLER:
        if (!(*rc = cli_parse_choice(cmd, "sampler", arg, "nuts", "hmc", &tmpi)))
            par->sampler = tmpi ? GMM_HMC_STATIC : GMM_HMC_NUTS;
        break;
    case OPT_STEPS: *rc = cli_parse_size(cmd, "steps", arg, 1, 10000000, &par->steps); break;
    case OPT_MAX_DEPTH:
        *rc = cli_parse_size(cmd, "max-depth", arg, 1, 30, &tmp);
        par->max_depth = (unsigned)tmp;
        break;
    case OPT_TARGET_ACCEPT:
        a->target_given = 1;
        par->target_accept = strtod(arg, &end);
        if (end == arg || *end || !(par->target_accept > 0.0 && par->target_accept < 1.0)) {
            cli_msg(cmd, "--target-accept: '%s' is not a number in (0, 1)", arg);
            *rc = CLI_EXIT_USAGE;
        }
        break;
    case OPT_JITTER:
        par->stepsize_jitter = strtod(arg, &end);
        if (end == arg || *end || !(par->stepsize_jitter >= 0.0 && par->stepsize_jitter < 1.0)) {
            cli_msg(cmd, "--stepsize-jitter: '%s' is not a number in [0, 1)", arg);
            *rc = CLI_EXIT_USAGE;
        }
        break;
    default: return 0;
    }
    return 1;
}

/* Any other option of hmc's own: 0 or the exit code after the message. */
static int run_opt(const char *cmd, int c, const char *arg, cli_hmc_args *a)
{
    int rc = 0;
    switch (c) {
    case OPT_MODEL: a->model_path = arg; break;
    case OPT_SUMMARY: a->summary = arg; break;
    case OPT_QUIET: a->quiet = 1; break;
    case OPT_SAMPLE_HYPER: a->sample_hyper = 1; break;
    case OPT_SUBSET: a->subset = arg; break;
    case OPT_STATES: a->rp.states = 1; break;
    case OPT_LOG_LIK: a->rp.log_lik = 1; break;
    case OPT_INIT: a->init = arg; break;
    case OPT_FORMAT: rc = cli_parse_choice(cmd, "format", arg, "csv", "cmdstan", &a->cmdstan); break;
    case OPT_PRIOR: a->prior[a->nprior++] = arg; break;
    case OPT_MH_DRAWS:
        a->mh_given = 1;
        rc = cli_parse_size(cmd, "mh-draws", arg, 1, 1000000, &a->rp.mh_draws);
        break;
    case OPT_MARGINAL:
        if (!strcmp(arg, "none")) {
            a->rp.marginal = GMM_MARGINAL_NONE;
        } else if (!strcmp(arg, "laplace")) {
            a->rp.marginal = GMM_MARGINAL_LAPLACE;
        } else if (!strcmp(arg, "laplace-mh")) {
            a->rp.marginal = GMM_MARGINAL_LAPLACE_MH;
        } else {
            cli_msg(cmd, "--marginal: '%s' is not none, laplace or laplace-mh", arg);
            rc = CLI_EXIT_USAGE;
        }
        break;
    case OPT_METRIC: a->metric = arg; break;
    case 'o': a->out = arg; break;
    default: rc = CLI_EXIT_USAGE; break;
    }
    return rc;
}

int cli_hmc_metric_check(const char *cmd, const char *arg, int sample_hyper)
{
    const char *name = arg ? arg : "auto";
    if (strcmp(name, "auto") && strcmp(name, "laplace") && strcmp(name, "prior")) {
        cli_msg(cmd, "--metric: '%s' is not laplace, prior or auto", name);
        return CLI_EXIT_USAGE;
    }
    if (sample_hyper && !strcmp(name, "laplace")) {
        cli_msg(cmd, "--metric laplace holds the hyperparameters at the model's values: it "
                     "cannot be used with --sample-hyper (use --metric prior)");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* The checks of the options against each other. */
static int check_args(const char *cmd, int argc, char **argv, cli_hmc_args *a)
{
    gmm_hmc_params *par = &a->rp.hmc;
    gmm_status s = gmm_hmc_params_check(par);
    if (s != GMM_OK) {
        int rc = cli_fail(cmd, s);
        return rc == CLI_EXIT_ERROR ? CLI_EXIT_USAGE : rc;
    }
    if (a->target_given && par->warmup == 0) {
        cli_msg(cmd, "--target-accept adapts the step size during warm-up: it does nothing "
                     "with --warmup 0");
        return CLI_EXIT_USAGE;
    }
    if (a->mh_given && a->rp.marginal != GMM_MARGINAL_LAPLACE_MH) {
        cli_msg(cmd, "--mh-draws applies with --marginal laplace-mh");
        return CLI_EXIT_USAGE;
    }
    if ((a->nprior || a->rp.marginal) && !a->sample_hyper) {
        cli_msg(cmd, "--%s applies with --sample-hyper", a->nprior ? "prior" : "marginal");
        return CLI_EXIT_USAGE;
    }
    int rc = cli_hmc_metric_check(cmd, a->metric, a->sample_hyper);
    return rc ? rc : cli_model_positional(cmd, argc, argv, &a->model);
}

int cli_hmc_args_parse(const char *cmd, int argc, char **argv, cli_hmc_args *a)
{
    static const int repeatable[] = {CLI_OPT_FIX, OPT_PRIOR, 0};
    memset(a, 0, sizeof *a);
    cli_model_opts_init(&a->model);
    a->model.seen.repeatable = repeatable;
    gmm_hmc_run_params_init(&a->rp);
    a->nthread = 1;
    if (!(a->prior = gmm_calloc((size_t)argc, sizeof *a->prior)))
        return cli_fail(cmd, GMM_ENOMEM);
    int c, rc = 0;
    optind = 1;
    while ((c = cli_model_getopt(&a->model, cmd, argc, argv, "ho:", longopts, usage_text, &rc)) !=
           -1) {
        if (c == CLI_MODEL_OPT_STOP) {
            a->stop = 1;
            return rc;
        }
        if (!sampler_opt(cmd, c, optarg, a, &rc))
            rc = run_opt(cmd, c, optarg, a);
        if (rc)
            return rc;
    }
    return check_args(cmd, argc, argv, a);
}

void cli_hmc_args_free(cli_hmc_args *a)
{
    cli_model_opts_free(&a->model);
    gmm_free((void *)a->prior);
}
