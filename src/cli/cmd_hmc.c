/* cmd_hmc.c -- `gmm-infer hmc`: posterior draws of the latent field by
 * whitened HMC (NUTS by default) at fixed hyperparameters, or with them.
 * The chains are the library's (gmm_hmc_run_chains: one model per thread,
 * output independent of the number of threads, whole chains cut to equal
 * length on SIGINT/SIGTERM, exit 130/143); the options are cli_hmc_opts.c's,
 * the files cli_hmc.c's. */
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

/* One model per thread: the first reports as every command does, the
 * others are built quietly from the same options.  0 or an exit code. */
static int open_models(const char *cmd, cli_hmc_args *a, gmm_model *mf, cli_io *io,
                       gmm_mdl **models, gmm_problem **probs)
{
    int rc = cli_model_open(cmd, &a->model, a->model_path, mf, io, &models[0]);
    a->model.quiet = 1;
    for (size_t t = 1; !rc && t < a->nthread; t++) {
        gmm_model mf2;
        gmm_model_init(&mf2);
        rc = cli_model_open(cmd, &a->model, a->model_path, &mf2, NULL, &models[t]);
        gmm_model_free(&mf2);
    }
    for (size_t t = 0; !rc && t < a->nthread; t++)
        probs[t] = gmm_mdl_problem(models[t]);
    return rc;
}

/* What the options need of the model: the sites written, the start, the
 * priors, the metric (and the step-size target it implies).  0 or an exit
 * code. */
static int prepare(const char *cmd, cli_hmc_args *a, gmm_mdl *m, unsigned char **keep,
                   double **x0, int **sampled, gmm_prior **priors)
{
    int rc = 0;
    if ((a->subset && (rc = cli_hmc_parse_subset(cmd, m, a->subset, keep)) != 0) ||
        (a->init && (rc = cli_hmc_init_point(cmd, m, a->init, x0)) != 0) ||
        (a->sample_hyper && (rc = cli_hmc_priors(cmd, m, a->prior, a->nprior, sampled, priors,
                                                  a->quiet)) != 0) ||
        (rc = cli_hmc_metric(cmd, m, a->metric, a->sample_hyper, a->quiet, &a->rp.metric)) != 0)
        return rc;
    if (!a->target_given && a->rp.metric == GMM_METRIC_LAPLACE)
        a->rp.hmc.target_accept = GMM_HMC_TARGET_ACCEPT_LAPLACE;
    return 0;
}

static void announce(const char *cmd, const cli_hmc_args *a)
{
    const gmm_hmc_run_params *rp = &a->rp;
    if (!a->quiet)
        cli_msg(cmd, "%zu chain(s) of %zu warm-up + %zu draws, %s, on %zu thread(s); %s",
                rp->nchain, rp->hmc.warmup, rp->hmc.draws,
                rp->hmc.sampler == GMM_HMC_NUTS ? "NUTS" : "fixed-length HMC", a->nthread,
                !a->sample_hyper ? "hyperparameters fixed at the model's values"
                : rp->marginal == GMM_MARGINAL_LAPLACE_MH
                    ? "free hyperparameters sampled on their marginal, the latents given them, "
                      "Metropolis-Hastings-corrected"
                : rp->marginal ? "free hyperparameters sampled on their marginal, the latents "
                                 "given them"
                               : "free hyperparameters sampled");
}

int cmd_hmc(int argc, char **argv)
{
    const char *cmd = "hmc";
    cli_hmc_args a;
    int *sampled = NULL;
    gmm_prior *priors = NULL;
    double *x0 = NULL;
    unsigned char *keep = NULL;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl **models = NULL;
    gmm_problem **probs = NULL;
    gmm_hmc_chains *ch = NULL;
    cli_io io;
    cli_io_init(&io);

    int rc = cli_hmc_args_parse(cmd, argc, argv, &a);
    if (rc || a.stop)
        goto done;
    cli_hmc_out W = {&a.rp, NULL, a.cmdstan, a.out, a.summary, a.model_path, a.model.spec.desc.data.file,
                     a.quiet};
    if ((rc = cli_hmc_check_outputs(cmd, &W, &io)) != 0)
        goto done;
    cli_model_vi_inputs(&io, "--init", a.init);
    if (a.nthread > a.rp.nchain)
        a.nthread = a.rp.nchain;
    models = gmm_calloc(a.nthread, sizeof *models);
    probs = gmm_calloc(a.nthread, sizeof *probs);
    if (!models || !probs) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((rc = open_models(cmd, &a, &mf, &io, models, probs)) != 0 ||
        (rc = prepare(cmd, &a, models[0], &keep, &x0, &sampled, &priors)) != 0)
        goto done;
    announce(cmd, &a);
    int show = !a.quiet && isatty(STDERR_FILENO);
    gmm_hmc_run_params *rp = &a.rp;
    rp->theta = gmm_mdl_objective(models[0])->value;
    rp->sampled = a.sample_hyper ? sampled : NULL;
    rp->prior = priors;
    rp->x0 = x0;
    rp->offset = gmm_mdl_center(models[0], NULL);
    rp->keep = keep;
    rp->progress = progress;
    rp->user = &show;
    cli_install_signals();
    gmm_status s = gmm_hmc_run_chains(probs, a.nthread, rp, &ch);
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
    for (size_t t = 0; models && t < a.nthread; t++)
        gmm_mdl_free(models[t]);
    gmm_free(models);
    gmm_free(probs);
    gmm_model_free(&mf);
    cli_hmc_args_free(&a);
    gmm_free(sampled);
    gmm_free(priors);
    gmm_free(keep);
    gmm_free(x0);
    cli_io_free(&io);
    return rc;
}
