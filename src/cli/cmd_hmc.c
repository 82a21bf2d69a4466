/* cmd_hmc.c -- `gmm-infer hmc`: posterior draws of the latent field by
 * whitened HMC (NUTS by default) at fixed hyperparameters, in the
 * draws-data-frame layout that R's posterior reads (--format csv), or as
 * CmdStan's own output CSV, one file per chain (--format cmdstan).
 *
 * Chains run on --threads threads, each thread with its own model (the
 * library's objects are one per thread); each chain writes its rows to its
 * own temporary file, and the output is made from those in chain order, so
 * the bytes do not depend on the number of threads.  Files are written
 * through gmm_outfile (atomically, or in place for a device or FIFO).  On
 * SIGINT/SIGTERM the chains with draws are cut to the shortest one's count
 * and written, a regular file under the name FILE.partial, exit 130/143. */
#define _XOPEN_SOURCE 700

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/hmc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/vi.h"
#include "gmm/json.h"
#include "gmm/rng.h"
#include "gmm/version.h"

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
    "  --target-accept A   step-size adaptation target in warm-up (default 0.8;\n"
    "                      refused with --warmup 0)\n"
    "  -o, --output FILE   write the draws to FILE (atomically), and how they were\n"
    "                      made (settings, priors, step sizes) to FILE.json when FILE\n"
    "                      is a regular file; interrupted: whole chains, cut to the\n"
    "                      same length, in FILE.partial (and FILE.partial.json)\n"
    "  --format F          csv (default): one file, the layout of posterior's\n"
    "                      as_draws_df; cmdstan: CmdStan's output CSV, one file per\n"
    "                      chain, FILE_1.csv, FILE_2.csv, ... (needs -o FILE)\n"
    "  --summary FILE      also write the posterior summary (as `gmm-infer summary`)\n"
    "  --sample-hyper      also sample the free hyperparameters (kernel or precision,\n"
    "                      likelihood, intercept; not those held by --fix), on the\n"
    "                      log scale for positive ones\n"
    "  --prior NAME=D      prior of a sampled parameter: lognormal(MU,SIGMA) (on its\n"
    "                      log: N(MU, SIGMA^2)), or normal(MU,SIGMA) for intercept;\n"
    "                      default lognormal(log value, 1), normal(value, 2)\n"
    "  --latent-subset S   write f only at these data rows (1-based numbers and\n"
    "                      ranges A-B) or nodes (labels), comma-separated\n"
    "  --states            also write the latent states x[1..n] of each draw (what\n"
    "                      `predict --draws --at/--grid` needs for new inputs)\n"
    "  --init FILE         start the chains at q's mean of a vi result (default:\n"
    "                      the posterior mode, exact or Laplace), jittered\n"
    "  --quiet             no progress on stderr\n"
    "  -h, --help          this help\n";

typedef struct {
    /* shared, read-only */
    const gmm_hmc_params *par;
    const double *theta;
    gmm_mdl *model;      /* the first thread's: the sidecar's "origin" */
    const int *sampled;    /* NULL: hyperparameters fixed */
    const unsigned char *keep; /* f columns written (NULL: all) */
    int states;            /* also write the latent x[1..n] */
    const double *x0;      /* --init: the latent to start at (NULL: the mode) */
    const gmm_prior *prior;
    size_t nchain;
    uint64_t chain0;
    int quiet;
    /* chain outputs */
    FILE **tmp;
    size_t *ndone;
    size_t *ndiv;
    size_t (*nleap)[2]; /* leapfrog steps of warm-up [0] and draws [1] */
    double *stepsize;
    double **metric;       /* the inverse metric after warm-up, mdim values */
    size_t *mdim;
    double (*seconds)[2];  /* wall time of warm-up [0] and draws [1] */
    gmm_status *status;
    char (*msg)[GMM_ERROR_MAX];
    /* what the output holds (the sidecar says it) */
    int cmdstan;           /* --format cmdstan: one file per chain */
    int interrupted;
    size_t kept;           /* draws per chain written */
    /* work distribution */
    pthread_mutex_t lock;
    size_t next;
} run_ctx;

typedef struct {
    run_ctx *rc;
    gmm_mdl *m;
} worker;

typedef struct {
    run_ctx *rc;
    uint64_t chain;
} prog_ctx;

static gmm_status whitened_logp(void *ctx, const double *v, double *lp, double *grad)
{
    return gmm_problem_whitened_logp(ctx, v, lp, grad);
}

static gmm_status joint_logp(void *ctx, const double *q, double *lp, double *grad)
{
    return gmm_problem_joint_logp(ctx, q, lp, grad);
}

static int progress(void *user, const gmm_hmc_progress *p)
{
    prog_ctx *pc = user;
    if (cli_stop_requested())
        return 1;
    if (!pc->rc->quiet && (p->iteration % 200 == 0 || p->iteration == p->total)) {
        pthread_mutex_lock(&pc->rc->lock);
        fprintf(stderr, "gmm-infer hmc: chain %llu: iteration %zu/%zu (%s), step size %.3g, "
                        "%zu divergences\n",
                (unsigned long long)pc->chain, p->iteration, p->total,
                p->draw->warmup ? "warm-up" : "sampling", p->draw->stepsize, p->divergences);
        pthread_mutex_unlock(&pc->rc->lock);
    }
    return 0;
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/* One chain, its rows to rc->tmp[c]. */
static gmm_status run_chain(run_ctx *rc, gmm_mdl *m, size_t c)
{
    gmm_status st;
    gmm_problem *p = gmm_mdl_problem(m);
    size_t n = gmm_latent_dim(gmm_problem_latent(p));
    size_t nf = gmm_mdl_nsites(m);
    uint64_t id = rc->chain0 + c;
    double *v = gmm_malloc(n, sizeof *v), *f = gmm_malloc(nf ? nf : 1, sizeof *f);
    double *xs = gmm_malloc(n, sizeof *xs);
    gmm_hmc *h = NULL;
    if (!v || !f || !xs) {
        st = gmm_error(GMM_ENOMEM, "out of memory for chain %llu", (unsigned long long)id);
        goto done;
    }
    gmm_hmc_params par = *rc->par;
    prog_ctx pc = {rc, id};
    par.chain = id;
    par.progress = progress;
    par.user = &pc;
    size_t np = gmm_mdl_objective(m)->nparam, dim = n;
    double *th = gmm_malloc(np ? np : 1, sizeof *th);
    if (!th || !(v = gmm_realloc(v, n + np, sizeof *v))) {
        gmm_free(th);
        st = gmm_error(GMM_ENOMEM, "out of memory for chain %llu", (unsigned long long)id);
        goto done;
    }
    memcpy(th, rc->theta, np * sizeof *th);
    if (rc->sampled) {
        if ((st = gmm_problem_joint_setup(p, rc->theta, rc->sampled, rc->prior)) ||
            (st = gmm_problem_joint_start(p, v))) {
            gmm_free(th);
            goto done;
        }
        dim = gmm_problem_joint_dim(p);
    } else if ((st = gmm_problem_whiten_setup(p, rc->theta)) ||
               (st = rc->x0 ? gmm_latent_unwhiten((gmm_latent *)gmm_problem_latent(p), rc->x0, v)
                            : gmm_problem_whitened_start(p, rc->theta, v))) {
        gmm_free(th);
        goto done;
    }
    /* chains start at the posterior mode jittered by N(0, 0.5^2) in the
     * whitened coordinates (whose posterior sd is at most 1), drawn from
     * the chain's own stream so the starts differ between chains; sampled
     * hyperparameters start at the model's values */
    gmm_rng r;
    gmm_rng_seed(&r, par.seed ^ 0x5DEECE66DULL, id);
    for (size_t i = 0; i < n; i++)
        v[i] += 0.5 * gmm_rng_normal(&r);
    if (!(h = gmm_hmc_alloc(dim, &par))) {
        gmm_free(th);
        st = gmm_error_status();
        goto done;
    }
    gmm_hmc_target t = {rc->sampled ? joint_logp : whitened_logp, p};
    if ((st = gmm_hmc_init(h, v, &t))) {
        gmm_free(th);
        goto done;
    }
    FILE *out = rc->tmp[c];
    size_t it = 0;
    struct timespec t0, t1;
    int phase = 0; /* timing warm-up (0) or draws (1) */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < par.warmup + par.draws; k++) {
        gmm_hmc_draw d;
        if (k == par.warmup) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            rc->seconds[c][0] = seconds_between(&t0, &t1);
            t0 = t1;
            phase = 1;
        }
        st = gmm_hmc_iterate(h, &d);
        if (st != GMM_OK && st != GMM_ECANCEL)
            break;
        rc->nleap[c][!d.warmup] += d.n_leapfrog;
        if (!d.warmup) {
            gmm_status s2 = GMM_OK;
            if (rc->sampled && ((s2 = gmm_problem_joint_theta(p, d.q, th)) ||
                                (s2 = gmm_problem_whiten_setup(p, th)))) {
                st = s2;
                break;
            }
            s2 = gmm_mdl_whitened_sites(m, d.q, f);
            if (s2) {
                st = s2;
                break;
            }
            it++;
            rc->ndiv[c] += (size_t)d.divergent;
            fprintf(out, "%llu,%zu,%zu,", (unsigned long long)id, it,
                    (size_t)(id - 1) * par.draws + it);
            const double col[] = {d.lp, d.accept_stat, d.stepsize, (double)d.treedepth,
                                  (double)d.n_leapfrog, (double)d.divergent, d.energy};
            for (size_t j = 0; j < sizeof col / sizeof col[0]; j++)
                fprintf(out, j ? ",%.17g" : "%.17g", col[j]);
            for (size_t j = 0; rc->sampled && j < np; j++)
                if (rc->sampled[j])
                    fprintf(out, ",%.17g", th[j]);
            for (size_t j = 0; j < nf; j++)
                if (!rc->keep || rc->keep[j])
                    fprintf(out, ",%.17g", f[j] + gmm_mdl_center(m, NULL));
            if (rc->states) {
                if ((s2 = gmm_problem_whitened_latent(p, d.q, xs)) != GMM_OK) {
                    st = s2;
                    break;
                }
                for (size_t j = 0; j < n; j++)
                    fprintf(out, ",%.17g", xs[j]);
            }
            fputc('\n', out);
            rc->ndone[c] = it;
        }
        if (st == GMM_ECANCEL)
            break;
    }
    gmm_free(th);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rc->seconds[c][phase] = seconds_between(&t0, &t1);
    rc->stepsize[c] = gmm_hmc_stepsize(h);
    if ((rc->metric[c] = gmm_malloc(dim, sizeof *rc->metric[c])) != NULL) {
        memcpy(rc->metric[c], gmm_hmc_inv_metric(h), dim * sizeof *rc->metric[c]);
        rc->mdim[c] = dim;
    } else if (st == GMM_OK) {
        st = gmm_error(GMM_ENOMEM, "out of memory for chain %llu", (unsigned long long)id);
    }
    if (ferror(out))
        st = gmm_error(GMM_EIO, "temporary file of chain %llu: write error: %s",
                       (unsigned long long)id, strerror(errno));
done:
    gmm_hmc_free(h);
    gmm_free(v);
    gmm_free(f);
    gmm_free(xs);
    return st;
}

static void *work(void *arg)
{
    worker *w = arg;
    run_ctx *rc = w->rc;
    for (;;) {
        pthread_mutex_lock(&rc->lock);
        size_t c = rc->next++;
        pthread_mutex_unlock(&rc->lock);
        if (c >= rc->nchain)
            break;
        rc->status[c] = run_chain(rc, w->m, c);
        if (rc->status[c] != GMM_OK)
            snprintf(rc->msg[c], sizeof rc->msg[c], "%s", gmm_error_message());
    }
    return NULL;
}

/* A parameter's name as a CmdStan column: Stan's names are identifiers,
 * and a '.' there separates indices, so "0.matern32.variance" becomes
 * "0_matern32_variance" (any other character than a letter, digit or '_'
 * becomes '_' too). */
static void put_cmdstan_name(FILE *f, const char *name)
{
    for (const char *p = name; *p; p++)
        fputc(isalnum((unsigned char)*p) || *p == '_' ? *p : '_', f);
}

/* The header row: sampler columns, the sampled parameters, then f at each
 * data row or node, then the states.  The draws-data-frame layout (csv)
 * starts with .chain,.iteration,.draw and names f[row], f[node label],
 * x[i]; CmdStan's names f.row, f.node (the node's 1-based position), x.i. */
static void write_header(FILE *f, gmm_mdl *m, const int *sampled, const unsigned char *keep,
                         int states, int cmdstan)
{
    if (!cmdstan)
        fputs(".chain,.iteration,.draw,", f);
    fputs("lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__", f);
    gmm_objective *o = gmm_mdl_objective(m);
    for (size_t k = 0; sampled && k < o->nparam; k++)
        if (sampled[k]) {
            fputc(',', f);
            if (cmdstan)
                put_cmdstan_name(f, o->name[k]);
            else
                cli_put_csv_field(f, o->name[k]);
        }
    char name[96];
    for (size_t v = 0; v < gmm_mdl_nsites(m); v++) {
        if (keep && !keep[v])
            continue;
        if (cmdstan) {
            fprintf(f, ",f.%zu", v + 1);
            continue;
        }
        fputc(',', f);
        cli_put_csv_field(f, gmm_mdl_draws_column(m, v, name));
    }
    size_t n = gmm_latent_dim(gmm_problem_latent(gmm_mdl_problem(m)));
    for (size_t i = 0; states && i < n; i++)
        fprintf(f, cmdstan ? ",x.%zu" : ",x[%zu]", i + 1);
    fputc('\n', f);
}

/* Copy the first `rows` rows of a chain's temporary to dst, without their
 * first `skip` fields (3 drops .chain,.iteration,.draw); 0 or errno. */
static int copy_rows(FILE *dst, FILE *t, size_t rows, int skip)
{
    if (fflush(t) || fseek(t, 0, SEEK_SET))
        return errno ? errno : EIO;
    char *line = NULL;
    size_t cap = 0, r;
    int err = 0;
    for (r = 0; r < rows; r++) {
        ssize_t len = getline(&line, &cap, t);
        if (len <= 0)
            break;
        char *p = line;
        for (int k = 0; k < skip && p; k++)
            if ((p = strchr(p, ',')) != NULL)
                p++;
        size_t w = p ? (size_t)len - (size_t)(p - line) : 0;
        if (!p || fwrite(p, 1, w, dst) != w) {
            err = p ? (errno ? errno : EIO) : EIO;
            break;
        }
    }
    if (!err && (ferror(t) || r < rows))
        err = errno ? errno : EIO;
    free(line); /* getline's, from malloc */
    return err;
}

/* After an interrupt: the divergences and leapfrog steps of the draws
 * kept (the first rc->kept of each chain), which FILE.json records, from
 * their divergent__ and n_leapfrog__ columns; 0 or errno. */
static int recount_kept(run_ctx *rc)
{
    char *line = NULL;
    size_t cap = 0;
    int err = 0;
    for (size_t c = 0; c < rc->nchain && !err; c++) {
        FILE *t = rc->tmp[c];
        rc->ndiv[c] = rc->nleap[c][1] = 0;
        if (!rc->ndone[c])
            continue;
        if (fflush(t) || fseek(t, 0, SEEK_SET)) {
            err = errno ? errno : EIO;
            break;
        }
        for (size_t r = 0; r < rc->kept; r++) {
            /* .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,
             * treedepth__,n_leapfrog__,divergent__: fields 8 and 9 */
            char *p = getline(&line, &cap, t) > 0 ? line : NULL;
            for (int k = 0; k < 7 && p; k++)
                if ((p = strchr(p, ',')) != NULL)
                    p++;
            char *end;
            double leap = p ? strtod(p, &end) : 0.0;
            if (!p || *end != ',') {
                err = EIO;
                break;
            }
            rc->nleap[c][1] += (size_t)leap;
            rc->ndiv[c] += strtod(end + 1, NULL) != 0.0;
        }
    }
    free(line); /* getline's, from malloc */
    return err;
}

/* The draws in the draws-data-frame layout: the header, then the first
 * rc->kept rows of every chain that has draws, in chain order; 0 or
 * errno. */
static int write_csv(FILE *f, run_ctx *rc, gmm_mdl *m, const int *sampled,
                     const unsigned char *keep, int states)
{
    write_header(f, m, sampled, keep, states, 0);
    for (size_t c = 0; c < rc->nchain; c++) {
        int err = rc->ndone[c] ? copy_rows(f, rc->tmp[c], rc->kept, 0) : 0;
        if (err)
            return err;
    }
    return ferror(f) ? EIO : 0;
}

/* Chain c in CmdStan's output CSV (the Stan CSV of `method=sample`): its
 * configuration as '#' comments with CmdStan's keys, the header, the
 * adaptation (step size and the diagonal inverse metric), the draws, the
 * elapsed times.  Values are written as in the csv layout (%.17g), so the
 * two formats hold the same numbers.  0 or errno. */
static int write_cmdstan(FILE *f, run_ctx *rc, size_t c, gmm_mdl *m, const int *sampled,
                         const unsigned char *keep, int states, const char *data,
                         const char *model_path)
{
    const gmm_hmc_params *par = rc->par;
    int nuts = par->sampler == GMM_HMC_NUTS;
    fprintf(f, "# gmm_infer_version = %s\n", GMM_VERSION);
    fputs("# model = gmm_infer_hmc\n", f);
    if (model_path)
        fprintf(f, "# model_file = %s\n", model_path);
    fputs("# method = sample\n#   sample\n", f);
    fprintf(f, "#     num_samples = %zu\n#     num_warmup = %zu\n", rc->kept, par->warmup);
    fputs("#     save_warmup = 0\n#     thin = 1\n#     adapt\n", f);
    fprintf(f, "#       engaged = %d\n", par->warmup > 0);
    fprintf(f, "#       gamma = %.17g\n#       delta = %.17g\n#       kappa = %.17g\n",
            par->gamma, par->target_accept, par->kappa);
    fprintf(f, "#       t0 = %.17g\n#       init_buffer = %zu\n#       term_buffer = %zu\n",
            par->t0, par->init_buffer, par->term_buffer);
    fprintf(f, "#       window = %zu\n#     algorithm = hmc\n#       hmc\n", par->base_window);
    if (nuts)
        fprintf(f, "#         engine = nuts\n#           nuts\n#             max_depth = %u\n",
                par->max_depth);
    else
        fprintf(f, "#         engine = static\n#           static\n#             steps = %zu\n",
                par->steps);
    fprintf(f, "#         metric = diag_e\n#         stepsize = %.17g\n", par->stepsize);
    fputs("#         stepsize_jitter = 0\n#     num_chains = 1\n", f);
    fprintf(f, "# id = %llu\n", (unsigned long long)(rc->chain0 + c));
    fprintf(f, "# data\n#   file = %s\n", data ? data : "");
    fprintf(f, "# random\n#   seed = %llu\n", (unsigned long long)par->seed);
    fputs("# output\n#   sig_figs = 17\n", f);
    fprintf(f, "# f.i: the linear predictor at %s i; the inverse metric is the sampler's, on\n"
               "# the whitened latent field%s, not on f\n",
            gmm_mdl_site_noun(m),
            sampled ? " and the hyperparameters (positive ones on the log scale)" : "");
    write_header(f, m, sampled, keep, states, 1);
    fprintf(f, "# Adaptation terminated\n# Step size = %.17g\n", rc->stepsize[c]);
    fputs("# Diagonal elements of inverse mass matrix:\n# ", f);
    for (size_t i = 0; i < rc->mdim[c]; i++)
        fprintf(f, i ? ", %.17g" : "%.17g", rc->metric[c][i]);
    fputc('\n', f);
    int err = copy_rows(f, rc->tmp[c], rc->kept, 3);
    if (err)
        return err;
    fprintf(f, "# \n#  Elapsed Time: %.3f seconds (Warm-up)\n#                %.3f seconds "
               "(Sampling)\n#                %.3f seconds (Total)\n# \n",
            rc->seconds[c][0], rc->seconds[c][1], rc->seconds[c][0] + rc->seconds[c][1]);
    return ferror(f) ? EIO : 0;
}

/* --latent-subset: data rows (1-based numbers and ranges A-B, state-space)
 * or node labels (graphs), comma-separated, into a mask of nsites. */
static int parse_subset(const char *cmd, gmm_mdl *m, const char *spec, unsigned char **keep)
{
    size_t ns = gmm_mdl_nsites(m);
    *keep = gmm_calloc(ns ? ns : 1, 1);
    if (!*keep)
        return cli_fail(cmd, GMM_ENOMEM);
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ","), a, b;
        char tok[256];
        if (len == 0 || len >= sizeof tok) {
            cli_msg(cmd, "--latent-subset: empty or overlong item in '%s'", spec);
            return CLI_EXIT_USAGE;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (gmm_mdl_sites_parse(m, tok, &a, &b) != GMM_OK) {
            cli_msg(cmd, "--latent-subset: %s", gmm_error_message());
            return CLI_EXIT_USAGE;
        }
        for (size_t r = a; r <= b; r++)
            (*keep)[r] = 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Which parameters are sampled (the free ones) and their priors: defaults,
 * then --prior NAME=lognormal(MU,SIGMA) / normal(MU,SIGMA); printed. */
static int setup_priors(const char *cmd, const gmm_objective *o, gmm_mdl *m,
                        const char **args, size_t nargs, int **sampled, gmm_prior **priors,
                        int quiet)
{
    size_t np = o->nparam;
    int has_b = gmm_problem_has_intercept(gmm_mdl_problem(m));
    *sampled = gmm_calloc(np ? np : 1, sizeof **sampled);
    *priors = gmm_calloc(np ? np : 1, sizeof **priors);
    if (!*sampled || !*priors)
        return cli_fail(cmd, GMM_ENOMEM);
    for (size_t k = 0; k < np; k++) {
        int is_b = has_b && k == np - 1;
        (*sampled)[k] = !o->fixed[k];
        if (is_b)
            (*priors)[k] = (gmm_prior){GMM_PRIOR_NORMAL, o->value[k], 2.0};
        else
            (*priors)[k] = (gmm_prior){GMM_PRIOR_LOGNORMAL,
                                       o->value[k] > 0 ? log(o->value[k]) : 0.0, 1.0};
    }
    for (size_t a = 0; a < nargs; a++) {
        const char *eq = strchr(args[a], '=');
        char name[256], kind[16];
        double mu, sigma;
        int used = 0;
        if (!eq || (size_t)(eq - args[a]) >= sizeof name ||
            sscanf(eq + 1, "%15[a-z](%lf ,%lf )%n", kind, &mu, &sigma, &used) != 3 ||
            eq[1 + used] != '\0' || !isfinite(mu) || !(sigma > 0.0) || !isfinite(sigma)) {
            cli_msg(cmd, "--prior: '%s' is not NAME=lognormal(MU,SIGMA) or NAME=normal(MU,SIGMA) "
                         "with SIGMA > 0",
                    args[a]);
            return CLI_EXIT_USAGE;
        }
        memcpy(name, args[a], (size_t)(eq - args[a]));
        name[eq - args[a]] = '\0';
        size_t k;
        for (k = 0; k < np && strcmp(o->name[k], name); k++)
            ;
        if (k == np || !(*sampled)[k]) {
            cli_msg(cmd, "--prior: '%s' is not a sampled parameter%s", name,
                    k < np ? " (it is held by --fix)" : "");
            return CLI_EXIT_USAGE;
        }
        int is_b = has_b && k == np - 1;
        if (strcmp(kind, is_b ? "normal" : "lognormal")) {
            cli_msg(cmd, "--prior: %s takes a %s prior", name, is_b ? "normal" : "lognormal");
            return CLI_EXIT_USAGE;
        }
        (*priors)[k] = (gmm_prior){is_b ? GMM_PRIOR_NORMAL : GMM_PRIOR_LOGNORMAL, mu, sigma};
    }
    for (size_t k = 0; k < np; k++) {
        if (!(*sampled)[k])
            continue;
        if ((*priors)[k].kind == GMM_PRIOR_LOGNORMAL && !(o->value[k] > 0.0)) {
            cli_msg(cmd, "%s = %g cannot be sampled on the log scale: hold it with --fix %s",
                    o->name[k], o->value[k], o->name[k]);
            return CLI_EXIT_USAGE;
        }
        if (!quiet)
            cli_msg(cmd, "prior: %s ~ %s(%.6g, %.6g)", o->name[k],
                    (*priors)[k].kind == GMM_PRIOR_NORMAL ? "normal" : "lognormal",
                    (*priors)[k].mu, (*priors)[k].sigma);
    }
    return 0;
}

/* path + suffix, allocated (NULL when out of memory). */
static char *dup_path(const char *path, const char *suffix)
{
    size_t a = strlen(path), b = strlen(suffix);
    char *p = gmm_malloc(a + b + 1, 1);
    if (p) {
        memcpy(p, path, a);
        memcpy(p + a, suffix, b + 1);
    }
    return p;
}

/* --format cmdstan's file of chain `id`: FILE_ID.csv, as CmdStan names a
 * run's chains (FILE's own .csv, if any, goes after the id). */
static char *chain_file(const char *path, uint64_t id)
{
    size_t len = strlen(path);
    if (len > 4 && !strcmp(path + len - 4, ".csv"))
        len -= 4;
    char *p = gmm_malloc(len + 32, 1);
    if (p)
        snprintf(p, len + 32, "%.*s_%llu.csv", (int)len, path, (unsigned long long)id);
    return p;
}

/* What the sidecar says of the output: its format and, after an
 * interrupt, that the chains were cut and to how many draws. */
static void output_note(json_t *root, const run_ctx *R)
{
    json_object_set_new(root, "format", json_string(R->cmdstan ? "cmdstan" : "csv"));
    if (!R->interrupted)
        return;
    json_t *in = json_object(), *kept = json_array();
    if (!in || !kept) {
        json_decref(in);
        json_decref(kept);
        return;
    }
    for (size_t c = 0; c < R->nchain; c++)
        if (R->ndone[c])
            json_array_append_new(kept, json_integer((json_int_t)(R->chain0 + c)));
    json_object_set_new(in, "draws_per_chain", json_integer((json_int_t)R->kept));
    json_object_set_new(in, "chains_kept", kept);
    json_object_set_new(root, "interrupted", in);
}

/* FILE.json beside the draws: how they were made (sampler settings, the
 * hyperparameters and priors, per-chain step sizes, divergences and leapfrog
 * steps of warm-up and draws), so a draws file never loses what it is a
 * sample of. */
static gmm_status write_config(const char *path, const gmm_hmc_params *par, const run_ctx *R,
                               const gmm_objective *o, const char *model_path,
                               const char *data)
{
    gmm_status s = GMM_OK;
    json_t *root = json_object(), *hyp = json_object(), *pri = json_object();
    json_t *ids = json_array(), *eps = json_array(), *div = json_array();
    json_t *leap = json_object(), *lw = json_array(), *ld = json_array();
    if (!root || !hyp || !pri || !ids || !eps || !div || !leap || !lw || !ld) {
        json_decref(leap);
        json_decref(lw);
        json_decref(ld);
        json_decref(root);
        json_decref(hyp);
        json_decref(pri);
        json_decref(ids);
        json_decref(eps);
        json_decref(div);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    char buf[128];
    json_object_set_new(root, "tool_version", json_string(GMM_VERSION));
    json_object_set_new(root, "command", json_string("hmc"));
    json_object_set_new(root, "model", model_path ? json_string(model_path) : json_null());
    json_object_set_new(root, "data", data ? json_string(data) : json_null());
    json_object_set_new(root, "sampler",
                        json_string(par->sampler == GMM_HMC_NUTS ? "nuts" : "hmc"));
    json_object_set_new(root, "seed", json_integer((json_int_t)par->seed));
    json_object_set_new(root, "warmup", json_integer((json_int_t)par->warmup));
    json_object_set_new(root, "draws", json_integer((json_int_t)par->draws));
    json_object_set_new(root, "max_depth", json_integer((json_int_t)par->max_depth));
    json_object_set_new(root, "steps", json_integer((json_int_t)par->steps));
    gmm_json_set_number(root, "target_accept", par->target_accept);
    for (size_t k = 0; k < o->nparam; k++) {
        int smp = R->sampled && R->sampled[k];
        if (!smp) {
            gmm_json_set_number(hyp, o->name[k], o->value[k]);
            continue;
        }
        snprintf(buf, sizeof buf, "%s(%.17g, %.17g)",
                 R->prior[k].kind == GMM_PRIOR_NORMAL ? "normal" : "lognormal", R->prior[k].mu,
                 R->prior[k].sigma);
        json_object_set_new(pri, o->name[k], json_string(buf));
    }
    json_object_set_new(root, "fixed_parameters", hyp);
    json_object_set_new(root, "priors", pri);
    json_t *org = NULL;
    if ((s = gmm_mdl_draws_origin(R->model, R->sampled, &org)) != GMM_OK) {
        json_decref(root);
        return s;
    }
    json_object_set_new(root, "origin", org);
    for (size_t c = 0; c < R->nchain; c++) {
        json_array_append_new(ids, json_integer((json_int_t)(R->chain0 + c)));
        json_array_append_new(eps, json_real(R->stepsize[c]));
        json_array_append_new(div, json_integer((json_int_t)R->ndiv[c]));
        json_array_append_new(lw, json_integer((json_int_t)R->nleap[c][0]));
        json_array_append_new(ld, json_integer((json_int_t)R->nleap[c][1]));
    }
    json_object_set_new(root, "chains", ids);
    json_object_set_new(root, "step_size", eps);
    json_object_set_new(root, "divergences", div);
    json_object_set_new(leap, "warmup", lw);
    json_object_set_new(leap, "draws", ld);
    json_object_set_new(root, "leapfrog_steps", leap);
    output_note(root, R);
    gmm_outfile *of = NULL;
    if ((s = gmm_outfile_open(path, &of)) == GMM_OK &&
        (s = gmm_json_write(gmm_outfile_stream(of), root, path)) == GMM_OK) {
        s = gmm_outfile_commit(of);
        of = NULL;
    }
    gmm_outfile_abort(of);
    json_decref(root);
    return s;
}

/* Every file the run will write, checked before the work: the draws (for
 * cmdstan, each chain's file; FILE itself names them and must not be a
 * device or FIFO), FILE.json beside a regular FILE, the summary. */
static int check_outputs(const char *cmd, const char *out, const char *summary, int cmdstan,
                         size_t chain0, size_t nchain)
{
    gmm_status s = GMM_OK;
    int in_place = 1;
    if (out && !strcmp(out, "-"))
        out = NULL;
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
    for (size_t k = 0; cmdstan && k < nchain && s == GMM_OK; k++) {
        char *p = chain_file(out, chain0 + k);
        s = p ? gmm_outfile_check(p) : gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(p);
    }
    if (s == GMM_OK && out && !in_place) {
        char *p = dup_path(out, ".json");
        s = p ? gmm_outfile_check(p) : gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(p);
    }
    if (s == GMM_OK && summary && strcmp(summary, "-"))
        s = gmm_outfile_check(summary);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

int cmd_hmc(int argc, char **argv)
{
    const char *cmd = "hmc";
    enum {
        OPT_MODEL = CLI_OPT_FIRST_COMMAND,
        OPT_CHAINS,
        OPT_THREADS,
        OPT_SEED,
        OPT_CHAIN_ID,
        OPT_WARMUP,
        OPT_DRAWS,
        OPT_SAMPLER,
        OPT_STEPS,
        OPT_MAX_DEPTH,
        OPT_TARGET_ACCEPT,
        OPT_SUMMARY,
        OPT_QUIET,
        OPT_SAMPLE_HYPER,
        OPT_PRIOR,
        OPT_SUBSET,
        OPT_STATES,
        OPT_INIT,
        OPT_FORMAT
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
        {"summary", required_argument, NULL, OPT_SUMMARY},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"sample-hyper", no_argument, NULL, OPT_SAMPLE_HYPER},
        {"prior", required_argument, NULL, OPT_PRIOR},
        {"latent-subset", required_argument, NULL, OPT_SUBSET},
        {"states", no_argument, NULL, OPT_STATES},
        {"init", required_argument, NULL, OPT_INIT},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_model_opts o;
    cli_model_opts_init(&o);
    gmm_hmc_params par;
    gmm_hmc_params_init(&par);
    const char *model_path = NULL, *out_path = NULL, *summary_path = NULL;
    size_t nchain = 4, nthread = 1, chain0 = 1, tmp = 0;
    int quiet = 0, sample_hyper = 0, states = 0, target_given = 0, c, rc = 0;
    const char **prior_args = NULL;
    size_t nprior_args = 0;
    int *sampled = NULL;
    gmm_prior *priors = NULL;
    const char *subset = NULL, *init = NULL;
    double *x0 = NULL;
    unsigned char *keep = NULL;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl **models = NULL;
    run_ctx R;
    memset(&R, 0, sizeof R);
    pthread_t *th = NULL;
    worker *wk = NULL;
    FILE *dst = NULL;
    char *sumtmp = NULL;
    char **files = NULL;     /* the draws' files (NULL: stdout) */
    gmm_outfile **ofs = NULL;
    size_t nfile = 0;
    int lock_ok = 0, cmdstan = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        int r = cli_model_common_opt(&o, cmd, c, optarg, usage_text, &rc);
        if (r < 0)
            goto done;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_MODEL: model_path = optarg; break;
        case OPT_CHAINS: rc = cli_parse_size(cmd, "chains", optarg, 1, 4096, &nchain); break;
        case OPT_THREADS: rc = cli_parse_size(cmd, "threads", optarg, 1, 1024, &nthread); break;
        case OPT_SEED:
            rc = cli_parse_size(cmd, "seed", optarg, 0, 0, &tmp);
            par.seed = tmp;
            break;
        case OPT_CHAIN_ID:
            rc = cli_parse_size(cmd, "chain-id", optarg, 1, (size_t)1 << 40, &chain0);
            break;
        case OPT_WARMUP:
            rc = cli_parse_size(cmd, "warmup", optarg, 0, 100000000, &par.warmup);
            break;
        case OPT_DRAWS: rc = cli_parse_size(cmd, "draws", optarg, 1, 100000000, &par.draws); break;
        case OPT_SAMPLER:
            if (!strcmp(optarg, "nuts"))
                par.sampler = GMM_HMC_NUTS;
            else if (!strcmp(optarg, "hmc"))
                par.sampler = GMM_HMC_STATIC;
            else {
                cli_msg(cmd, "--sampler: '%s' is not nuts or hmc", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        case OPT_STEPS: rc = cli_parse_size(cmd, "steps", optarg, 1, 10000000, &par.steps); break;
        case OPT_MAX_DEPTH:
            rc = cli_parse_size(cmd, "max-depth", optarg, 1, 30, &tmp);
            par.max_depth = (unsigned)tmp;
            break;
        case OPT_TARGET_ACCEPT: {
            char *end;
            target_given = 1;
            par.target_accept = strtod(optarg, &end);
            if (end == optarg || *end || !(par.target_accept > 0.0 && par.target_accept < 1.0)) {
                cli_msg(cmd, "--target-accept: '%s' is not a number in (0, 1)", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        }
        case OPT_SUMMARY: summary_path = optarg; break;
        case OPT_QUIET: quiet = 1; break;
        case OPT_SAMPLE_HYPER: sample_hyper = 1; break;
        case OPT_SUBSET: subset = optarg; break;
        case OPT_STATES: states = 1; break;
        case OPT_INIT: init = optarg; break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "csv") || !strcmp(optarg, "cmdstan"))
                cmdstan = optarg[1] == 'm';
            else {
                cli_msg(cmd, "--format: '%s' is not csv or cmdstan", optarg);
                rc = CLI_EXIT_USAGE;
            }
            break;
        case OPT_PRIOR: {
            const char **pa = gmm_realloc((void *)prior_args, nprior_args + 1, sizeof *pa);
            if (!pa) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                break;
            }
            pa[nprior_args++] = optarg;
            prior_args = pa;
            break;
        }
        case 'o': out_path = optarg; break;
        default: rc = CLI_EXIT_USAGE; break;
        }
        if (rc)
            goto done;
    }
    gmm_status s = gmm_hmc_params_check(&par);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        if (rc == CLI_EXIT_ERROR)
            rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (target_given && par.warmup == 0) {
        cli_msg(cmd, "--target-accept adapts the step size during warm-up: it does nothing "
                     "with --warmup 0");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &o)) != 0)
        goto done;
    if ((rc = check_outputs(cmd, out_path, summary_path, cmdstan, chain0, nchain)) != 0)
        goto done;
    if (nthread > nchain)
        nthread = nchain;
    models = gmm_calloc(nthread, sizeof *models);
    if (!models) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    /* one model per thread: the first reports as every command does, the
     * others are built quietly from the same options */
    if ((rc = cli_model_open(cmd, &o, model_path, &mf, &models[0])) != 0)
        goto done;
    o.quiet = 1;
    for (size_t t = 1; t < nthread; t++) {
        gmm_model mf2;
        gmm_model_init(&mf2);
        rc = cli_model_open(cmd, &o, model_path, &mf2, &models[t]);
        gmm_model_free(&mf2);
        if (rc)
            goto done;
    }
    gmm_objective *obj = gmm_mdl_objective(models[0]);
    if (nprior_args && !sample_hyper) {
        cli_msg(cmd, "--prior applies with --sample-hyper");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (subset && (rc = parse_subset(cmd, models[0], subset, &keep)) != 0)
        goto done;
    if (init) {
        /* q's mean of a vi result: chains start there (jittered) */
        gmm_model mi;
        gmm_model_init(&mi);
        if ((s = gmm_model_read(init, &mi)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        if (!mi.has_vi) {
            cli_msg(cmd, "--init %s: not a vi result (no \"variational\")", init);
            gmm_model_free(&mi);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        rc = cli_model_load_vi(cmd, models[0], &mi, init);
        gmm_model_free(&mi);
        if (rc)
            goto done;
        size_t n0 = gmm_latent_dim(gmm_problem_latent(gmm_mdl_problem(models[0])));
        if (!(x0 = gmm_malloc(n0, sizeof *x0))) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        memcpy(x0, gmm_vi_mean(gmm_mdl_vi(models[0])), n0 * sizeof *x0);
        gmm_mdl_set_vi(models[0], NULL);
    }
    if (sample_hyper && (rc = setup_priors(cmd, obj, models[0], prior_args, nprior_args,
                                           &sampled, &priors, quiet)) != 0)
        goto done;
    if (!quiet)
        cli_msg(cmd, "%zu chain(s) of %zu warm-up + %zu draws, %s, on %zu thread(s); "
                     "%s",
                nchain, par.warmup, par.draws,
                par.sampler == GMM_HMC_NUTS ? "NUTS" : "fixed-length HMC", nthread,
                sample_hyper ? "free hyperparameters sampled"
                             : "hyperparameters fixed at the model's values");

    R.par = &par;
    R.theta = obj->value;
    R.model = models[0];
    R.sampled = sample_hyper ? sampled : NULL;
    R.keep = keep;
    R.states = states;
    R.x0 = x0;
    R.prior = priors;
    R.nchain = nchain;
    R.chain0 = chain0;
    R.quiet = quiet || !isatty(STDERR_FILENO);
    R.tmp = gmm_calloc(nchain, sizeof *R.tmp);
    R.ndone = gmm_calloc(nchain, sizeof *R.ndone);
    R.ndiv = gmm_calloc(nchain, sizeof *R.ndiv);
    R.nleap = gmm_calloc(nchain, sizeof *R.nleap);
    R.stepsize = gmm_calloc(nchain, sizeof *R.stepsize);
    R.metric = gmm_calloc(nchain, sizeof *R.metric);
    R.mdim = gmm_calloc(nchain, sizeof *R.mdim);
    R.seconds = gmm_calloc(nchain, sizeof *R.seconds);
    R.status = gmm_calloc(nchain, sizeof *R.status);
    R.msg = gmm_calloc(nchain, sizeof *R.msg);
    th = gmm_calloc(nthread, sizeof *th);
    wk = gmm_calloc(nthread, sizeof *wk);
    if (!R.tmp || !R.ndone || !R.ndiv || !R.nleap || !R.stepsize || !R.metric || !R.mdim ||
        !R.seconds || !R.status || !R.msg || !th || !wk) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    for (size_t k = 0; k < nchain; k++)
        if (!(R.tmp[k] = tmpfile())) {
            cli_msg(cmd, "cannot create a temporary file: %s", strerror(errno));
            rc = CLI_EXIT_ERROR;
            goto done;
        }
    pthread_mutex_init(&R.lock, NULL);
    lock_ok = 1;
    cli_install_signals();
    for (size_t t = 0; t < nthread; t++) {
        wk[t] = (worker){&R, models[t]};
        if (t > 0 && pthread_create(&th[t], NULL, work, &wk[t])) {
            cli_msg(cmd, "cannot start thread %zu", t);
            rc = CLI_EXIT_ERROR;
            nthread = t;
            break;
        }
    }
    work(&wk[0]);
    for (size_t t = 1; t < nthread; t++)
        pthread_join(th[t], NULL);
    if (rc)
        goto done;

    int interrupted = cli_stop_requested();
    gmm_status first = GMM_OK;
    for (size_t k = 0; k < nchain; k++)
        if (R.status[k] != GMM_OK && R.status[k] != GMM_ECANCEL && first == GMM_OK) {
            first = R.status[k];
            cli_msg(cmd, "chain %llu: %s", (unsigned long long)(chain0 + k), R.msg[k]);
        }
    if (first != GMM_OK) {
        /* a failed run leaves nothing behind, not even a header */
        cli_msg(cmd, "no draws written");
        rc = cli_exit_code(first);
        goto done;
    }
    /* Interrupted chains stop at different points: each chain with draws is
     * cut to the shortest one's count, so that the output holds whole chains
     * of equal length, as summary and posterior need. */
    size_t nkept = nchain;
    R.kept = par.draws;
    R.interrupted = interrupted;
    R.cmdstan = cmdstan;
    if (interrupted) {
        nkept = 0;
        R.kept = SIZE_MAX;
        for (size_t k = 0; k < nchain; k++)
            if (R.ndone[k]) {
                nkept++;
                if (R.ndone[k] < R.kept)
                    R.kept = R.ndone[k];
            }
        if (!nkept) {
            cli_msg(cmd, "interrupted before the first draw: nothing written");
            rc = cli_interrupt_exit_code();
            goto done;
        }
        int err = recount_kept(&R);
        if (err) {
            cli_msg(cmd, "temporary file of the chains: read error: %s", strerror(err));
            rc = CLI_EXIT_ERROR;
            goto done;
        }
    }
    /* the files: one (csv) or one per chain with draws (cmdstan); an
     * interrupted run's regular files are named FILE.partial, a device or
     * FIFO is written as it is */
    nfile = cmdstan ? nkept : 1;
    files = gmm_calloc(nfile, sizeof *files);
    ofs = gmm_calloc(nfile, sizeof *ofs);
    if (!files || !ofs) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    for (size_t k = 0, j = 0; j < nfile; k++) {
        if (cmdstan && !R.ndone[k])
            continue;
        const char *base = out_path && strcmp(out_path, "-") ? out_path : NULL;
        int in_place = 1;
        if (base && !(files[j] = cmdstan ? chain_file(base, chain0 + k) : dup_path(base, ""))) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        if (files[j] && interrupted && gmm_outfile_check_kind(files[j], &in_place) == GMM_OK &&
            !in_place) {
            char *pp = dup_path(files[j], ".partial");
            gmm_free(files[j]);
            if (!(files[j] = pp)) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                goto done;
            }
        }
        int err = 0;
        if ((s = gmm_outfile_open(files[j], &ofs[j])) == GMM_OK) {
            FILE *f = gmm_outfile_stream(ofs[j]);
            err = cmdstan ? write_cmdstan(f, &R, k, models[0], R.sampled, keep, states, o.data,
                                          model_path)
                          : write_csv(f, &R, models[0], R.sampled, keep, states);
            if (!err)
                s = gmm_outfile_flush(ofs[j]);
        }
        if (err)
            s = gmm_error(GMM_EIO, "%s: write error: %s", files[j] ? files[j] : "<stdout>",
                          strerror(err));
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        j++;
    }
    /* every file is written out before any is committed: a full disk
     * replaces none of them */
    int draws_in_place = gmm_outfile_in_place(ofs[0]);
    for (size_t j = 0; j < nfile; j++) {
        s = gmm_outfile_commit(ofs[j]);
        ofs[j] = NULL;
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
    }
    /* FILE.json: beside a regular file only (not /dev/full.json) */
    if (out_path && strcmp(out_path, "-")) {
        char *side = NULL;
        if (!cmdstan && draws_in_place) {
            cli_msg(cmd, "%s is not a regular file: the settings are not written to %s.json",
                    out_path, out_path);
        } else if (!(side = dup_path(cmdstan ? out_path : files[0],
                                     cmdstan && interrupted ? ".partial.json" : ".json"))) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        } else {
            s = write_config(side, &par, &R, obj, model_path, o.data);
            gmm_free(side);
            if (s != GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
        }
    }
    size_t ndiv = 0;
    for (size_t k = 0; k < nchain; k++)
        ndiv += R.ndiv[k];
    if (interrupted) {
        cli_msg(cmd, "interrupted: %zu chain(s) of %zu draws each (the shortest chain's count) "
                     "kept in %s%s%s",
                nkept, R.kept, files[0] ? files[0] : "<stdout>",
                nfile > 1 ? " and the other chains' files" : "",
                summary_path ? "; no summary written" : "");
        rc = cli_interrupt_exit_code();
        goto done;
    }
    if (!quiet) {
        for (size_t k = 0; k < nchain; k++)
            cli_msg(cmd, "chain %llu: step size %.3g, %zu divergent transitions",
                    (unsigned long long)(chain0 + k), R.stepsize[k], R.ndiv[k]);
        if (ndiv && par.warmup)
            cli_msg(cmd, "warning: %zu divergent transitions after warm-up: the draws may be "
                         "biased (try --target-accept 0.95)",
                    ndiv);
        else if (ndiv)
            cli_msg(cmd, "warning: %zu divergent transitions: the draws may be biased (without "
                         "warm-up the step size is the initial search's, never adapted: give "
                         "--warmup, e.g. 1000)",
                    ndiv);
        if (cmdstan)
            cli_msg(cmd, "wrote %s%s%s", files[0], nfile > 1 ? " ... " : "",
                    nfile > 1 ? files[nfile - 1] : "");
    }
    if (summary_path) {
        /* the summary reads the draws back, in the csv layout, from a
         * temporary of our own: the output may be a FIFO or per chain */
        const char *tdir = getenv("TMPDIR");
        size_t tl = strlen(tdir && *tdir ? tdir : "/tmp");
        sumtmp = gmm_malloc(tl + 32, 1);
        if (!sumtmp) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        snprintf(sumtmp, tl + 32, "%s/gmm-hmc.XXXXXX", tdir && *tdir ? tdir : "/tmp");
        int fd = mkstemp(sumtmp);
        if (fd < 0 || !(dst = fdopen(fd, "w"))) {
            if (fd >= 0)
                close(fd);
            else
                sumtmp[0] = '\0';
            cli_msg(cmd, "cannot create a temporary file: %s", strerror(errno));
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        int err = write_csv(dst, &R, models[0], R.sampled, keep, states);
        FILE *d2 = dst;
        dst = NULL;
        if (fclose(d2) && !err)
            err = errno ? errno : EIO;
        if (err) {
            cli_msg(cmd, "%s: write error: %s", sumtmp, strerror(err));
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        const char *src = sumtmp;
        gmm_draws *d = NULL;
        gmm_outfile *of = NULL;
        if ((s = gmm_draws_read(&src, 1, &d)) != GMM_OK ||
            (s = gmm_outfile_open(summary_path, &of)) != GMM_OK ||
            (s = cli_write_summary(gmm_outfile_stream(of), d)) != GMM_OK) {
            gmm_outfile_abort(of);
            gmm_draws_free(d);
            rc = cli_fail(cmd, s);
            goto done;
        }
        s = gmm_outfile_commit(of);
        gmm_draws_free(d);
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
    }
done:
    if (dst)
        fclose(dst);
    if (sumtmp && sumtmp[0])
        unlink(sumtmp);
    gmm_free(sumtmp);
    for (size_t j = 0; j < nfile; j++) {
        if (ofs)
            gmm_outfile_abort(ofs[j]);
        if (files)
            gmm_free(files[j]);
    }
    gmm_free(ofs);
    gmm_free(files);
    if (R.tmp)
        for (size_t k = 0; k < nchain; k++)
            if (R.tmp[k])
                fclose(R.tmp[k]);
    if (lock_ok)
        pthread_mutex_destroy(&R.lock);
    gmm_free(R.tmp);
    gmm_free(R.ndone);
    gmm_free(R.ndiv);
    gmm_free(R.nleap);
    gmm_free(R.stepsize);
    for (size_t k = 0; R.metric && k < nchain; k++)
        gmm_free(R.metric[k]);
    gmm_free(R.metric);
    gmm_free(R.mdim);
    gmm_free(R.seconds);
    gmm_free(R.status);
    gmm_free(R.msg);
    gmm_free(th);
    gmm_free(wk);
    if (models)
        for (size_t t = 0; t < nthread; t++)
            gmm_mdl_free(models[t]);
    gmm_free(models);
    gmm_model_free(&mf);
    cli_model_opts_free(&o);
    gmm_free((void *)prior_args);
    gmm_free(sampled);
    gmm_free(priors);
    gmm_free(keep);
    gmm_free(x0);
    return rc;
}
