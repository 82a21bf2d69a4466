/* cli_hmc_check.c -- what hmc checks (cli_hmc.h): before the run, every
 * file it may write; after it, the chains' diagnostics. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_hmc.h"
#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/draws.h"

/* The file path + suffix, written because of -o out, as an output of io. */
static void add_output(cli_io *io, const char *out, const char *path, const char *suffix)
{
    char *p = path ? cli_path_suffix(path, suffix) : NULL;
    if (!p)
        io->nomem = 1;
    cli_io_output(io, "-o", out, p);
    gmm_free(p);
}

/* Every file the run may write, as outputs of io: the draws (-o FILE, or
 * the chains' FILE_ID.csv), FILE.json beside them (unless FILE is written
 * in place), the names an interrupted run gives them (.partial), and
 * --summary. */
static void list_outputs(cli_io *io, const cli_hmc_out *w, int in_place)
{
    const char *out = w->out && strcmp(w->out, "-") ? w->out : NULL;
    for (int k = 0; out && k < 2; k++) {
        const char *sfx = k ? ".partial" : "";
        if (w->cmdstan) {
            for (size_t c = 0; c < w->rp->nchain; c++) {
                char *f = gmm_draws_chain_path(out, w->rp->chain0 + c);
                add_output(io, out, f, sfx);
                gmm_free(f);
            }
        } else if (k == 0) {
            cli_io_output(io, "-o", out, NULL);
        } else if (!in_place) {
            add_output(io, out, out, sfx);
        }
        if (!in_place)
            add_output(io, out, out, k ? ".partial.json" : ".json");
    }
    cli_io_output(io, "--summary", w->summary, NULL);
}

int cli_hmc_check_outputs(const char *cmd, const cli_hmc_out *w, cli_io *io)
{
    gmm_status s = GMM_OK;
    int in_place = 1, cmdstan = w->cmdstan;
    const char *out = w->out && strcmp(w->out, "-") ? w->out : NULL;
    if (cmdstan && !out) {
        cli_msg(cmd, "--format cmdstan writes one file per chain: give -o FILE (the chains "
                     "go to FILE_1.csv, FILE_2.csv, ...)");
        return CLI_EXIT_USAGE;
    }
    if (out && (s = gmm_outfile_check_kind(out, &in_place)) != GMM_OK)
        return cli_fail(cmd, s);
    if (cmdstan && in_place) {
        cli_msg(cmd, "--format cmdstan: -o %s names the chains' files %s_1.csv, ...: give a "
                     "file name, not a device or FIFO",
                out, out);
        return CLI_EXIT_USAGE;
    }
    for (size_t k = 0; cmdstan && k < w->rp->nchain && s == GMM_OK; k++) {
        char *p = gmm_draws_chain_path(out, w->rp->chain0 + k);
        s = p ? gmm_outfile_check(p) : gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(p);
    }
    if (s == GMM_OK && out && !in_place) {
        char *p = cli_path_suffix(out, ".json");
        s = p ? gmm_outfile_check(p) : gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(p);
    }
    if (s == GMM_OK && w->summary && strcmp(w->summary, "-"))
        s = gmm_outfile_check(w->summary);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    list_outputs(io, w, in_place);
    return 0;
}

/* CmdStan diagnose's warnings, each with what to try, whatever --quiet
 * says: tree-depth saturation and E-BFMI per chain, divergences in all. */
int cli_hmc_diagnose(const char *cmd, const cli_hmc_out *w, const gmm_hmc_chains *ch)
{
    const gmm_hmc_params *par = &w->rp->hmc;
    int nuts = par->sampler == GMM_HMC_NUTS, laplace = w->rp->metric == GMM_METRIC_LAPLACE;
    size_t ndiv = 0, ntot = 0;
    for (size_t k = 0; k < gmm_hmc_chains_count(ch); k++) {
        gmm_hmc_chain_diag d;
        gmm_status s = gmm_hmc_chains_diagnose(ch, k, par->max_depth, &d);
        if (s != GMM_OK)
            return cli_fail(cmd, s);
        unsigned long long id = (unsigned long long)gmm_hmc_chains_info(ch, k)->id;
        ndiv += d.divergences;
        ntot += d.draws;
        if (nuts && d.depth_hits)
            cli_msg(cmd, "warning: chain %llu: %zu of %zu transitions (%.3g%%) hit the maximum "
                         "tree depth %u (%zu leapfrog steps): trajectories cut short explore "
                         "slowly (try %s--max-depth %u)",
                    id, d.depth_hits, d.draws, 100.0 * (double)d.depth_hits / (double)d.draws,
                    par->max_depth, ((size_t)1 << par->max_depth) - 1,
                    laplace || w->rp->sampled ? "" : "--metric laplace, or ",
                    par->max_depth + 2);
        if (d.ebfmi < 0.3)
            cli_msg(cmd, "warning: chain %llu: E-BFMI %.3g is below 0.3: the momenta explore "
                         "the energy distribution slowly (try a longer --warmup%s, or "
                         "reparametrise the model)",
                    id, d.ebfmi,
                    w->rp->sampled ? ", tighter --prior"
                                   : laplace ? ", --metric prior" : ", --metric laplace");
    }
    if (ndiv && par->warmup)
        cli_msg(cmd, "warning: %zu of %zu transitions (%.3g%%) after warm-up were divergent "
                     "transitions: the draws may be biased (try --target-accept 0.95; if that "
                     "does not remove them, reparametrise the model)",
                ndiv, ntot, 100.0 * (double)ndiv / (double)ntot);
    else if (ndiv)
        cli_msg(cmd, "warning: %zu of %zu transitions (%.3g%%) were divergent transitions: the "
                     "draws may be biased (without warm-up the step size is the initial "
                     "search's, never adapted: give --warmup, e.g. 1000)",
                ndiv, ntot, 100.0 * (double)ndiv / (double)ntot);
    return 0;
}
