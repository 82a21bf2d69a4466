/* cmd_hmc.c -- `gmm-infer hmc`: posterior draws of the latent field by
 * whitened HMC (NUTS by default) at fixed hyperparameters, or with them.
 * The chains are the library's (gmm_hmc_run_chains: one model per thread,
 * output independent of the number of threads, whole chains cut to equal
 * length on SIGINT/SIGTERM, exit 130/143); the files are cli_hmc.c's. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_hmc.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/hmc_chains.h"
#include "gmm/modelfile.h"

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
    "                      logit) or normal (a coefficient); default: MU the\n"
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

/* Progress on stderr every 200 iterations; a signal cancels the run. */
static int progress(void *user, const gmm_hmc_progress *p)
{
    if (cli_stop_requested())
        return 1;
    if (*(const int *)user && (p->iteration % 200 == 0 || p->iteration == p->total))
        fprintf(stderr, "gmm-infer hmc: chain %llu: iteration %zu/%zu (%s), step size %.3g, "
                        "%zu divergences\n",
                (unsigned long long)p->chain, p->iteration, p->total,
                p->draw->warmup ? "warm-up" : "sampling", p->draw->stepsize, p->divergences);
    return 0;
}

int cmd_hmc(int argc, char **argv)
{
    const char *cmd = "hmc";
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
    static const int repeatable[] = {CLI_OPT_FIX, OPT_PRIOR, 0};
    cli_model_opts o;
    cli_model_opts_init(&o);
    o.seen.repeatable = repeatable;
    gmm_hmc_run_params rp;
    gmm_hmc_run_params_init(&rp);
    gmm_hmc_params *par = &rp.hmc;
    const char *model_path = NULL, *out_path = NULL, *summary_path = NULL;
    size_t nthread = 1, tmp = 0;
    int quiet = 0, sample_hyper = 0, target_given = 0, mh_given = 0, c, rc = 0;
    const char **prior_args = gmm_calloc((size_t)argc, sizeof *prior_args);
    size_t nprior_args = 0;
    int *sampled = NULL;
    gmm_prior *priors = NULL;
    const char *subset = NULL, *init = NULL, *metric = NULL;
    double *x0 = NULL;
    unsigned char *keep = NULL;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl **models = NULL;
    gmm_problem **probs = NULL;
    gmm_hmc_chains *ch = NULL;
    int cmdstan = 0, tmpi = 0;
    cli_io io;
    cli_io_init(&io);

    if (!prior_args)
        return cli_fail(cmd, GMM_ENOMEM);
    optind = 1;
    while ((c = cli_model_getopt(&o, cmd, argc, argv, "ho:", longopts, usage_text, &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP)
            goto done;
        switch (c) {
        case OPT_MODEL: model_path = optarg; break;
        case OPT_CHAINS: rc = cli_parse_size(cmd, "chains", optarg, 1, 4096, &rp.nchain); break;
        case OPT_THREADS: rc = cli_parse_size(cmd, "threads", optarg, 1, 1024, &nthread); break;
        case OPT_SEED:
            rc = cli_parse_size(cmd, "seed", optarg, 0, 0, &tmp);
            par->seed = tmp;
            break;
        case OPT_CHAIN_ID:
            rc = cli_parse_size(cmd, "chain-id", optarg, 1, (size_t)1 << 40, &tmp);
            rp.chain0 = tmp;
            break;
        case OPT_WARMUP:
            rc = cli_parse_size(cmd, "warmup", optarg, 0, 100000000, &par->warmup);
            break;
        case OPT_DRAWS: rc = cli_parse_size(cmd, "draws", optarg, 1, 100000000, &par->draws); break;
        case OPT_SAMPLER:
            if (!(rc = cli_parse_choice(cmd, "sampler", optarg, "nuts", "hmc", &tmpi)))
                par->sampler = tmpi ? GMM_HMC_STATIC : GMM_HMC_NUTS;
            break;
        case OPT_STEPS: rc = cli_parse_size(cmd, "steps", optarg, 1, 10000000, &par->steps); break;
        case OPT_MAX_DEPTH:
            rc = cli_parse_size(cmd, "max-depth", optarg, 1, 30, &tmp);
            par->max_depth = (unsigned)tmp;
            break;
        case OPT_TARGET_ACCEPT: {
            char *end;
            target_given = 1;
            par->target_accept = strtod(optarg, &end);
            if (end == optarg || *end || !(par->target_accept > 0.0 && par->target_accept < 1.0)) {
                cli_msg(cmd, "--target-accept: '%s' is not a number in (0, 1)", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        }
        case OPT_JITTER: {
            char *end;
            par->stepsize_jitter = strtod(optarg, &end);
            if (end == optarg || *end || !(par->stepsize_jitter >= 0.0 && par->stepsize_jitter < 1.0)) {
                cli_msg(cmd, "--stepsize-jitter: '%s' is not a number in [0, 1)", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        }
        case OPT_SUMMARY: summary_path = optarg; break;
        case OPT_QUIET: quiet = 1; break;
        case OPT_SAMPLE_HYPER: sample_hyper = 1; break;
        case OPT_SUBSET: subset = optarg; break;
        case OPT_STATES: rp.states = 1; break;
        case OPT_LOG_LIK: rp.log_lik = 1; break;
        case OPT_INIT: init = optarg; break;
        case OPT_FORMAT:
            rc = cli_parse_choice(cmd, "format", optarg, "csv", "cmdstan", &cmdstan);
            break;
        case OPT_PRIOR: prior_args[nprior_args++] = optarg; break;
        case OPT_MH_DRAWS:
            mh_given = 1;
            rc = cli_parse_size(cmd, "mh-draws", optarg, 1, 1000000, &rp.mh_draws);
            break;
        case OPT_MARGINAL:
            if (!strcmp(optarg, "none")) {
                rp.marginal = GMM_MARGINAL_NONE;
            } else if (!strcmp(optarg, "laplace")) {
                rp.marginal = GMM_MARGINAL_LAPLACE;
            } else if (!strcmp(optarg, "laplace-mh")) {
                rp.marginal = GMM_MARGINAL_LAPLACE_MH;
            } else {
                cli_msg(cmd, "--marginal: '%s' is not none, laplace or laplace-mh", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        case OPT_METRIC: metric = optarg; break;
        case 'o': out_path = optarg; break;
        default: rc = CLI_EXIT_USAGE; break;
        }
        if (rc)
            goto done;
    }
    gmm_status s = gmm_hmc_params_check(par);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        if (rc == CLI_EXIT_ERROR)
            rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (target_given && par->warmup == 0) {
        cli_msg(cmd, "--target-accept adapts the step size during warm-up: it does nothing "
                     "with --warmup 0");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    /* every check of the options alone before anything is read or printed */
    if (mh_given && rp.marginal != GMM_MARGINAL_LAPLACE_MH) {
        cli_msg(cmd, "--mh-draws applies with --marginal laplace-mh");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((nprior_args || rp.marginal) && !sample_hyper) {
        cli_msg(cmd, "--%s applies with --sample-hyper", nprior_args ? "prior" : "marginal");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = cli_hmc_metric_check(cmd, metric, sample_hyper)) != 0 ||
        (rc = cli_model_positional(cmd, argc, argv, &o)) != 0)
        goto done;
    cli_hmc_out W = {&rp, NULL, cmdstan, out_path, summary_path, model_path,
                     o.spec.desc.data.file, quiet};
    if ((rc = cli_hmc_check_outputs(cmd, &W, &io)) != 0)
        goto done;
    cli_model_vi_inputs(&io, "--init", init);
    if (nthread > rp.nchain)
        nthread = rp.nchain;
    models = gmm_calloc(nthread, sizeof *models);
    probs = gmm_calloc(nthread, sizeof *probs);
    if (!models || !probs) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    /* one model per thread: the first reports as every command does, the
     * others are built quietly from the same options */
    if ((rc = cli_model_open(cmd, &o, model_path, &mf, &io, &models[0])) != 0)
        goto done;
    o.quiet = 1;
    for (size_t t = 1; t < nthread; t++) {
        gmm_model mf2;
        gmm_model_init(&mf2);
        rc = cli_model_open(cmd, &o, model_path, &mf2, NULL, &models[t]);
        gmm_model_free(&mf2);
        if (rc)
            goto done;
    }
    for (size_t t = 0; t < nthread; t++)
        probs[t] = gmm_mdl_problem(models[t]);
    if (subset && (rc = cli_hmc_parse_subset(cmd, models[0], subset, &keep)) != 0)
        goto done;
    if (init && (rc = cli_hmc_init_point(cmd, models[0], init, &x0)) != 0)
        goto done;
    if (sample_hyper && (rc = cli_hmc_priors(cmd, models[0], prior_args, nprior_args, &sampled,
                                             &priors, quiet)) != 0)
        goto done;
    if ((rc = cli_hmc_metric(cmd, models[0], metric, sample_hyper, quiet, &rp.metric)) != 0)
        goto done;
    if (!target_given && rp.metric == GMM_METRIC_LAPLACE)
        par->target_accept = GMM_HMC_TARGET_ACCEPT_LAPLACE;
    if (!quiet)
        cli_msg(cmd, "%zu chain(s) of %zu warm-up + %zu draws, %s, on %zu thread(s); %s",
                rp.nchain, par->warmup, par->draws,
                par->sampler == GMM_HMC_NUTS ? "NUTS" : "fixed-length HMC", nthread,
                !sample_hyper ? "hyperparameters fixed at the model's values"
                : rp.marginal == GMM_MARGINAL_LAPLACE_MH
                    ? "free hyperparameters sampled on their marginal, the latents given them, "
                      "Metropolis-Hastings-corrected"
                : rp.marginal ? "free hyperparameters sampled on their marginal, the latents "
                                "given them"
                              : "free hyperparameters sampled");

    int show = !quiet && isatty(STDERR_FILENO);
    rp.theta = gmm_mdl_objective(models[0])->value;
    rp.sampled = sample_hyper ? sampled : NULL;
    rp.prior = priors;
    rp.x0 = x0;
    rp.offset = gmm_mdl_center(models[0], NULL);
    rp.keep = keep;
    rp.progress = progress;
    rp.user = &show;
    cli_install_signals();
    s = gmm_hmc_run_chains(probs, nthread, &rp, &ch);
    if (s != GMM_OK && s != GMM_ECANCEL) {
        /* a failed run leaves nothing behind, not even a header */
        cli_msg(cmd, "%s", gmm_error_message());
        cli_msg(cmd, "no draws written");
        rc = cli_exit_code(s);
        goto done;
    }
    W.model = models[0];
    rc = cli_hmc_write(cmd, &W, ch);
done:
    gmm_hmc_chains_free(ch);
    if (models)
        for (size_t t = 0; t < nthread; t++)
            gmm_mdl_free(models[t]);
    gmm_free(models);
    gmm_free(probs);
    gmm_model_free(&mf);
    cli_model_opts_free(&o);
    gmm_free((void *)prior_args);
    gmm_free(sampled);
    gmm_free(priors);
    gmm_free(keep);
    gmm_free(x0);
    cli_io_free(&io);
    return rc;
}
