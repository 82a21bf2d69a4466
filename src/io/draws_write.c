/* draws_write.c -- MCMC draws written in the two layouts draws.c reads
 * (draws.h): R posterior's draws data frame and CmdStan's output CSV (the
 * Stan CSV of `method=sample`), a row at a time as a sampler makes them.
 *
 * COLUMNS.  The draws data frame is one file with every chain; CmdStan's
 * layout is one file per chain (gmm_draws_chain_path).  After the
 * sampler's lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,
 * divergent__,energy__ come the sampled parameters, f at the kept sites,
 * the states x, the log-likelihoods of data rows.  A draws data frame
 * leads with .chain,.iteration,.draw and names f[LABEL], x[i],
 * log_lik[row]; CmdStan's names are f.K (K the site's 1-based position),
 * x.i, log_lik.row, and a parameter's name with every character other than
 * a letter, digit or '_' as '_' (0.matern32.variance ->
 * 0_matern32_variance; a '.' there would separate indices).  Numbers are
 * %.17g (gmm_fmt_g17).
 *
 * CMDSTAN COMMENTS.  Before the header, '#' comment lines with CmdStan's
 * keys (method = sample, adapt, hmc/nuts or static, metric = diag_e, id,
 * data, random, output), then what f.i and the inverse metric are: "f.i:
 * the linear predictor at SITE_NOUN i; the inverse metric is the
 * sampler's, on METRIC_SPACE, not on f". */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/version.h"

static void put_cmdstan_name(FILE *f, const char *name)
{
    for (const char *p = name; *p; p++)
        fputc(isalnum((unsigned char)*p) || *p == '_' ? *p : '_', f);
}

void gmm_draws_write_header(FILE *f, const gmm_draws_columns *c)
{
    int cmdstan = c->cmdstan;
    if (!cmdstan)
        fputs(".chain,.iteration,.draw,", f);
    fputs("lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__", f);
    for (size_t k = 0; k < c->nparam; k++) {
        fputc(',', f);
        if (cmdstan)
            put_cmdstan_name(f, c->param[k]);
        else
            gmm_csv_put_field(f, c->param[k]);
    }
    for (size_t k = 0; k < c->nsite; k++) {
        if (cmdstan) {
            fprintf(f, ",f.%zu", c->site[k] + 1);
            continue;
        }
        fputc(',', f);
        gmm_csv_put_field(f, c->site_name[k]);
    }
    for (size_t i = 0; i < c->nstate; i++)
        fprintf(f, cmdstan ? ",x.%zu" : ",x[%zu]", i + 1);
    for (size_t k = 0; k < c->nloglik; k++)
        fprintf(f, cmdstan ? ",log_lik.%zu" : ",log_lik[%zu]", c->loglik_row[k] + 1);
    fputc('\n', f);
}

/* The row is gathered into a buffer written a piece at a time: printf's
 * %.17g per number cost as much as the sampling (io.h, gmm_fmt_g17). */
void gmm_draws_write_row(FILE *f, int cmdstan, uint64_t chain, size_t iteration, size_t draw,
                         const double *row, size_t ncol)
{
    char buf[4096];
    size_t len = 0;
    if (!cmdstan)
        len = (size_t)snprintf(buf, sizeof buf, "%llu,%zu,%zu,", (unsigned long long)chain,
                               iteration, draw);
    for (size_t j = 0; j < ncol; j++) {
        if (len > sizeof buf - GMM_FMT_G17_SIZE - 2) {
            fwrite(buf, 1, len, f);
            len = 0;
        }
        if (j)
            buf[len++] = ',';
        len += gmm_fmt_g17(row[j], buf + len);
    }
    buf[len++] = '\n';
    fwrite(buf, 1, len, f);
}

void gmm_draws_write_cmdstan_config(FILE *f, const gmm_draws_cmdstan_config *c)
{
    fprintf(f, "# gmm_infer_version = %s\n", GMM_VERSION);
    fputs("# model = gmm_infer_hmc\n", f);
    if (c->model_file)
        fprintf(f, "# model_file = %s\n", c->model_file);
    fputs("# method = sample\n#   sample\n", f);
    fprintf(f, "#     num_samples = %zu\n#     num_warmup = %zu\n", c->num_samples,
            c->num_warmup);
    fputs("#     save_warmup = 0\n#     thin = 1\n#     adapt\n", f);
    fprintf(f, "#       engaged = %d\n", c->num_warmup > 0);
    fprintf(f, "#       gamma = %.17g\n#       delta = %.17g\n#       kappa = %.17g\n",
            c->gamma, c->delta, c->kappa);
    fprintf(f, "#       t0 = %.17g\n#       init_buffer = %zu\n#       term_buffer = %zu\n",
            c->t0, c->init_buffer, c->term_buffer);
    fprintf(f, "#       window = %zu\n#     algorithm = hmc\n#       hmc\n", c->window);
    if (c->nuts)
        fprintf(f, "#         engine = nuts\n#           nuts\n#             max_depth = %u\n",
                c->max_depth);
    else
        fprintf(f, "#         engine = static\n#           static\n#             steps = %zu\n",
                c->steps);
    fprintf(f, "#         metric = diag_e\n#         stepsize = %.17g\n", c->stepsize);
    fprintf(f, "#         stepsize_jitter = %.17g\n#     num_chains = 1\n", c->stepsize_jitter);
    fprintf(f, "# id = %llu\n", (unsigned long long)c->id);
    fprintf(f, "# data\n#   file = %s\n", c->data_file ? c->data_file : "");
    fprintf(f, "# random\n#   seed = %llu\n", (unsigned long long)c->seed);
    fputs("# output\n#   sig_figs = 17\n", f);
    fprintf(f, "# f.i: the linear predictor at %s i; the inverse metric is the sampler's, on\n# ",
            c->site_noun);
    for (const char *p = c->metric_space; *p; p++)
        if (*p == '\n')
            fputs("\n# ", f);
        else
            fputc(*p, f);
    fputs(", not on f\n", f);
}

void gmm_draws_write_cmdstan_adaptation(FILE *f, double stepsize, const double *inv_metric,
                                        size_t n)
{
    fprintf(f, "# Adaptation terminated\n# Step size = %.17g\n", stepsize);
    fputs("# Diagonal elements of inverse mass matrix:\n# ", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, i ? ", %.17g" : "%.17g", inv_metric[i]);
    fputc('\n', f);
}

void gmm_draws_write_cmdstan_times(FILE *f, double warmup_seconds, double sampling_seconds)
{
    fprintf(f, "# \n#  Elapsed Time: %.3f seconds (Warm-up)\n#                %.3f seconds "
               "(Sampling)\n#                %.3f seconds (Total)\n# \n",
            warmup_seconds, sampling_seconds, warmup_seconds + sampling_seconds);
}

char *gmm_draws_chain_path(const char *path, uint64_t id)
{
    size_t len = strlen(path);
    if (len > 4 && !strcmp(path + len - 4, ".csv"))
        len -= 4;
    char *p = gmm_malloc(len + 32, 1);
    if (p)
        snprintf(p, len + 32, "%.*s_%llu.csv", (int)len, path, (unsigned long long)id);
    return p;
}
