/* cli_hmc.c -- the files of `gmm-infer hmc` (cli_hmc.h): the draws in the
 * draws-data-frame layout that R's posterior reads (csv), or CmdStan's own
 * output CSV, one file per chain (cmdstan), from the library's chains in
 * chain order; FILE.json, how they were made; the summary.  Files are
 * written through gmm_outfile (atomically, or in place for a device or
 * FIFO); after an interrupt, regular files are named FILE.partial. */
#define _XOPEN_SOURCE 700

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_hmc.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/modelfile.h"
#include "gmm/vi.h"
#include "gmm/version.h"

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
 * data row or node, then the states, then the log-likelihoods of the
 * observed data rows.  The draws-data-frame layout (csv) starts with
 * .chain,.iteration,.draw and names f[row], f[node label], x[i],
 * log_lik[row]; CmdStan's names f.row, f.node (the node's 1-based
 * position), x.i, log_lik.row. */
static void write_header(FILE *f, gmm_mdl *m, const gmm_hmc_run_params *rp, int cmdstan)
{
    const int *sampled = rp->sampled;
    const unsigned char *keep = rp->keep;
    int states = rp->states;
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
    const gmm_problem *p = gmm_mdl_problem(m);
    const double *y = gmm_problem_y(p);
    size_t nr = gmm_latent_nrows(gmm_problem_latent(p));
    for (size_t r = 0; rp->log_lik && r < nr; r++)
        if (!isnan(y[r]))
            fprintf(f, cmdstan ? ",log_lik.%zu" : ",log_lik[%zu]", r + 1);
    fputc('\n', f);
}

/* Where the rows go: one stream, named for its errors. */
typedef struct {
    FILE *f;
    const char *name;
    const cli_hmc_out *w;
    int cmdstan;
    size_t kept;   /* draws per chain */
} sink_ctx;

static gmm_status stream_status(const sink_ctx *s)
{
    if (!ferror(s->f))
        return GMM_OK;
    return gmm_error(GMM_EIO, "%s: write error: %s", s->name ? s->name : "<stdout>",
                     strerror(errno ? errno : EIO));
}

/* A row as text, %.17g by gmm_fmt_g17 (both formats hold the same
 * numbers), gathered into a buffer written a piece at a time; the csv layout
 * leads with .chain,.iteration,.draw. */
static gmm_status put_row(void *user, const gmm_hmc_chain_info *c, size_t it, const double *row,
                          size_t ncol)
{
    sink_ctx *s = user;
    char buf[4096];
    size_t len = 0;
    if (!s->cmdstan)
        len = (size_t)snprintf(buf, sizeof buf, "%llu,%zu,%zu,", (unsigned long long)c->id, it,
                               (size_t)(c->id - 1) * s->w->rp->hmc.draws + it);
    for (size_t j = 0; j < ncol; j++) {
        if (len > sizeof buf - GMM_FMT_G17_SIZE - 2) {
            fwrite(buf, 1, len, s->f);
            len = 0;
        }
        if (j)
            buf[len++] = ',';
        len += gmm_fmt_g17(row[j], buf + len);
    }
    buf[len++] = '\n';
    fwrite(buf, 1, len, s->f);
    return GMM_OK;
}

/* The draws in the draws-data-frame layout: the header, then the kept rows
 * of every chain that has draws, in chain order. */
static gmm_status write_csv(FILE *f, const char *name, const cli_hmc_out *w,
                            const gmm_hmc_chains *ch)
{
    sink_ctx s = {f, name, w, 0, gmm_hmc_chains_kept(ch)};
    gmm_hmc_sink sk = {NULL, put_row, NULL, &s};
    write_header(f, w->model, w->rp, 0);
    gmm_status st = gmm_hmc_chains_write(ch, &sk);
    return st != GMM_OK ? st : stream_status(&s);
}

/* Chain c in CmdStan's output CSV (the Stan CSV of `method=sample`): its
 * configuration as '#' comments with CmdStan's keys, the header, the
 * adaptation (step size and the diagonal inverse metric), the draws, the
 * elapsed times. */
static gmm_status cmdstan_begin(void *user, const gmm_hmc_chain_info *ci)
{
    sink_ctx *s = user;
    const cli_hmc_out *w = s->w;
    const gmm_hmc_params *par = &w->rp->hmc;
    FILE *f = s->f;
    int nuts = par->sampler == GMM_HMC_NUTS;
    fprintf(f, "# gmm_infer_version = %s\n", GMM_VERSION);
    fputs("# model = gmm_infer_hmc\n", f);
    if (w->model_path)
        fprintf(f, "# model_file = %s\n", w->model_path);
    fputs("# method = sample\n#   sample\n", f);
    fprintf(f, "#     num_samples = %zu\n#     num_warmup = %zu\n", s->kept, par->warmup);
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
    fprintf(f, "#         stepsize_jitter = %.17g\n#     num_chains = 1\n", par->stepsize_jitter);
    fprintf(f, "# id = %llu\n", (unsigned long long)ci->id);
    fprintf(f, "# data\n#   file = %s\n", w->data ? w->data : "");
    fprintf(f, "# random\n#   seed = %llu\n", (unsigned long long)par->seed);
    fputs("# output\n#   sig_figs = 17\n", f);
    int marg = w->rp->sampled && w->rp->marginal != GMM_MARGINAL_NONE;
    fprintf(f, "# f.i: the linear predictor at %s i; the inverse metric is the sampler's, on\n"
               "# %s, not on f\n",
            gmm_mdl_site_noun(w->model),
            marg ? "the hyperparameters (positive ones on the log scale, mixing weights on\n"
                   "# the logit scale; the latents are drawn given them)"
            : w->rp->sampled
                ? "the latent field whitened by the prior and the hyperparameters (positive\n"
                  "# ones on the log scale, mixing weights on the logit scale)"
            : w->rp->metric == GMM_METRIC_LAPLACE ? "the latent field whitened by the Laplace posterior"
                                                  : "the latent field whitened by the prior");
    write_header(f, w->model, w->rp, 1);
    fprintf(f, "# Adaptation terminated\n# Step size = %.17g\n", ci->stepsize);
    fputs("# Diagonal elements of inverse mass matrix:\n# ", f);
    for (size_t i = 0; i < ci->metric_dim; i++)
        fprintf(f, i ? ", %.17g" : "%.17g", ci->inv_metric[i]);
    fputc('\n', f);
    return GMM_OK;
}

static gmm_status cmdstan_end(void *user, const gmm_hmc_chain_info *ci)
{
    sink_ctx *s = user;
    fprintf(s->f, "# \n#  Elapsed Time: %.3f seconds (Warm-up)\n#                %.3f seconds "
                  "(Sampling)\n#                %.3f seconds (Total)\n# \n",
            ci->seconds[0], ci->seconds[1], ci->seconds[0] + ci->seconds[1]);
    return stream_status(s);
}

/* --latent-subset: data rows (1-based numbers and ranges A-B, state-space)
 * or node labels (graphs), comma-separated, into a mask of nsites. */
int cli_hmc_parse_subset(const char *cmd, gmm_mdl *m, const char *spec, unsigned char **keep)
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

int cli_hmc_priors(const char *cmd, gmm_mdl *m, const char **args, size_t nargs, int **sampled,
                   gmm_prior **priors, int quiet)
{
    gmm_problem *p = gmm_mdl_problem(m);
    const gmm_objective *o = gmm_problem_objective(p);
    size_t np = o->nparam;
    *sampled = gmm_calloc(np ? np : 1, sizeof **sampled);
    *priors = gmm_calloc(np ? np : 1, sizeof **priors);
    if (!*sampled || !*priors)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_hmc_default_priors(p, *sampled, *priors);
    for (size_t a = 0; a < nargs; a++) {
        const char *eq = strchr(args[a], '=');
        char name[256], kind[16];
        double mu, sigma;
        int used = 0;
        if (!eq || (size_t)(eq - args[a]) >= sizeof name ||
            sscanf(eq + 1, "%15[a-z](%lf ,%lf )%n", kind, &mu, &sigma, &used) != 3 ||
            eq[1 + used] != '\0' || !isfinite(mu) || !(sigma > 0.0) || !isfinite(sigma)) {
            cli_msg(cmd, "--prior: '%s' is not NAME=lognormal(MU,SIGMA), "
                         "NAME=logitnormal(MU,SIGMA) or NAME=normal(MU,SIGMA) with SIGMA > 0",
                    args[a]);
            return CLI_EXIT_USAGE;
        }
        memcpy(name, args[a], (size_t)(eq - args[a]));
        name[eq - args[a]] = '\0';
        for (size_t e = 0; e < a; e++)
            if (!strncmp(args[e], name, (size_t)(eq - args[a])) && args[e][eq - args[a]] == '=') {
                cli_msg(cmd, "--prior: %s given twice", name);
                return CLI_EXIT_USAGE;
            }
        size_t k;
        for (k = 0; k < np && strcmp(o->name[k], name); k++)
            ;
        if (k == np || !(*sampled)[k]) {
            cli_msg(cmd, "--prior: '%s' is not a sampled parameter%s", name,
                    k < np ? " (it is held by --fix or the formula's 'fixed')" : "");
            return CLI_EXIT_USAGE;
        }
        /* the kind follows the parameter's scale: a coefficient is sampled
         * as it is, a variance on its log, a mixing weight on its logit */
        gmm_prior_kind want = gmm_prior_kind_of(o->scale[k]);
        if (strcmp(kind, gmm_prior_kind_name(want))) {
            cli_msg(cmd, "--prior: %s takes a %s prior (on %s)", name,
                    gmm_prior_kind_name(want),
                    want == GMM_PRIOR_LOGNORMAL     ? "its log: it is > 0"
                    : want == GMM_PRIOR_LOGITNORMAL ? "its logit: it is in (0, 1)"
                                                    : "its value");
            return CLI_EXIT_USAGE;
        }
        (*priors)[k] = (gmm_prior){want, mu, sigma};
    }
    /* every prior checked before any is printed */
    for (size_t k = 0; k < np; k++)
        if ((*sampled)[k] && (*priors)[k].kind != GMM_PRIOR_NORMAL &&
            !gmm_scale_inside(o->scale[k], o->value[k])) {
            cli_msg(cmd, "%s = %g cannot be sampled on the %s scale: hold it with --fix %s",
                    o->name[k], o->value[k], gmm_scale_name(o->scale[k]), o->name[k]);
            return CLI_EXIT_USAGE;
        }
    for (size_t k = 0; k < np && !quiet; k++)
        if ((*sampled)[k])
            cli_msg(cmd, "prior: %s ~ %s(%.6g, %.6g)", o->name[k],
                    gmm_prior_kind_name((*priors)[k].kind), (*priors)[k].mu,
                    (*priors)[k].sigma);
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

/* FILE.json beside the draws: how they were made (sampler settings, the
 * hyperparameters and priors, per-chain step sizes, divergences and leapfrog
 * steps of warm-up and draws; the format and, after an interrupt, that the
 * chains were cut and to how many draws), so a draws file never loses what
 * it is a sample of. */
static gmm_status write_config(gmm_outset *set, const char *path, const cli_hmc_out *w,
                               const gmm_hmc_chains *ch)
{
    const gmm_hmc_params *par = &w->rp->hmc;
    const gmm_objective *o = gmm_mdl_objective(w->model);
    gmm_status s = GMM_OK;
    json_t *root = json_object(), *hyp = json_object(), *pri = json_object();
    json_t *ids = json_array(), *eps = json_array(), *div = json_array();
    json_t *leap = json_object(), *lw = json_array(), *ld = json_array(), *rej = json_array();
    if (!root || !hyp || !pri || !ids || !eps || !div || !leap || !lw || !ld || !rej) {
        json_decref(rej);
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
    json_object_set_new(root, "model", w->model_path ? json_string(w->model_path) : json_null());
    json_object_set_new(root, "data", w->data ? json_string(w->data) : json_null());
    json_object_set_new(root, "sampler",
                        json_string(par->sampler == GMM_HMC_NUTS ? "nuts" : "hmc"));
    json_object_set_new(root, "seed", json_integer((json_int_t)par->seed));
    json_object_set_new(root, "warmup", json_integer((json_int_t)par->warmup));
    json_object_set_new(root, "draws", json_integer((json_int_t)par->draws));
    json_object_set_new(root, "max_depth", json_integer((json_int_t)par->max_depth));
    json_object_set_new(root, "steps", json_integer((json_int_t)par->steps));
    gmm_json_set_number(root, "target_accept", par->target_accept);
    gmm_json_set_number(root, "stepsize_jitter", par->stepsize_jitter);
    json_object_set_new(root, "metric", json_string(w->rp->metric == GMM_METRIC_LAPLACE
                                                        ? "laplace"
                                                        : "prior"));
    for (size_t k = 0; k < o->nparam; k++) {
        int smp = w->rp->sampled && w->rp->sampled[k];
        if (!smp) {
            gmm_json_set_number(hyp, o->name[k], o->value[k]);
            continue;
        }
        snprintf(buf, sizeof buf, "%s(%.17g, %.17g)", gmm_prior_kind_name(w->rp->prior[k].kind),
                 w->rp->prior[k].mu, w->rp->prior[k].sigma);
        json_object_set_new(pri, o->name[k], json_string(buf));
    }
    static const char *const marginal[] = {"none", "laplace", "laplace-mh"};
    if (w->rp->sampled)
        json_object_set_new(root, "marginal", json_string(marginal[w->rp->marginal]));
    json_object_set_new(root, "fixed_parameters", hyp);
    json_object_set_new(root, "priors", pri);
    json_t *org = NULL;
    if ((s = gmm_mdl_draws_origin(w->model, w->rp->sampled, &org)) != GMM_OK) {
        json_decref(root);
        return s;
    }
    json_object_set_new(root, "origin", org);
    for (size_t c = 0; c < gmm_hmc_chains_count(ch); c++) {
        const gmm_hmc_chain_info *ci = gmm_hmc_chains_info(ch, c);
        json_array_append_new(ids, json_integer((json_int_t)ci->id));
        json_array_append_new(eps, json_real(ci->stepsize));
        json_array_append_new(div, json_integer((json_int_t)ci->divergences));
        json_array_append_new(rej, json_integer((json_int_t)ci->rejected));
        json_array_append_new(lw, json_integer((json_int_t)ci->leapfrog[0]));
        json_array_append_new(ld, json_integer((json_int_t)ci->leapfrog[1]));
    }
    json_object_set_new(root, "chains", ids);
    json_object_set_new(root, "step_size", eps);
    json_object_set_new(root, "divergences", div);
    if (w->rp->sampled && w->rp->marginal == GMM_MARGINAL_LAPLACE_MH)
        json_object_set_new(root, "mh_rejections", rej);
    else
        json_decref(rej);
    json_object_set_new(leap, "warmup", lw);
    json_object_set_new(leap, "draws", ld);
    json_object_set_new(root, "leapfrog_steps", leap);
    json_object_set_new(root, "format", json_string(w->cmdstan ? "cmdstan" : "csv"));
    if (gmm_hmc_chains_cut(ch)) {
        json_t *in = json_object(), *kept = json_array();
        for (size_t c = 0; in && kept && c < gmm_hmc_chains_count(ch); c++)
            if (gmm_hmc_chains_has_draws(ch, c))
                json_array_append_new(kept,
                                      json_integer((json_int_t)gmm_hmc_chains_info(ch, c)->id));
        if (in && kept) {
            json_object_set_new(in, "draws_per_chain",
                                json_integer((json_int_t)gmm_hmc_chains_kept(ch)));
            json_object_set_new(in, "chains_kept", kept);
            json_object_set_new(root, "interrupted", in);
        } else {
            json_decref(in);
            json_decref(kept);
        }
    }
    gmm_outfile *of = NULL;
    if ((s = gmm_outset_open(set, path, &of)) == GMM_OK)
        s = gmm_json_write(gmm_outfile_stream(of), root, path);
    json_decref(root);
    return s;
}

/* The file path + suffix, written because of -o out, as an output of io. */
static void add_output(cli_io *io, const char *out, const char *path, const char *suffix)
{
    char *p = path ? dup_path(path, suffix) : NULL;
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
                char *f = chain_file(out, w->rp->chain0 + c);
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
        char *p = chain_file(out, w->rp->chain0 + k);
        s = p ? gmm_outfile_check(p) : gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(p);
    }
    if (s == GMM_OK && out && !in_place) {
        char *p = dup_path(out, ".json");
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

/* The draws' file of chain k (cmdstan) or of all chains (csv), written as
 * a member of set, not committed. */
static gmm_status write_draws(gmm_outset *set, const cli_hmc_out *w, const gmm_hmc_chains *ch,
                              size_t k, const char *name, gmm_outfile **of)
{
    gmm_status s = gmm_outset_open(set, name, of);
    if (s != GMM_OK)
        return s;
    FILE *f = gmm_outfile_stream(*of);
    if (w->cmdstan) {
        sink_ctx sc = {f, name, w, 1, gmm_hmc_chains_kept(ch)};
        gmm_hmc_sink sk = {cmdstan_begin, put_row, cmdstan_end, &sc};
        s = gmm_hmc_chains_replay(ch, k, &sk);
    } else {
        s = write_csv(f, name, w, ch);
    }
    return s;
}

/* The summary, a member of set: it reads the draws back, in the csv
 * layout, from a temporary of our own (the output may be a FIFO or per
 * chain). */
static int write_summary(const char *cmd, gmm_outset *set, const cli_hmc_out *w,
                         const gmm_hmc_chains *ch)
{
    const char *tdir = getenv("TMPDIR");
    size_t tl = strlen(tdir && *tdir ? tdir : "/tmp");
    char *tmp = gmm_malloc(tl + 32, 1);
    if (!tmp)
        return cli_fail(cmd, GMM_ENOMEM);
    snprintf(tmp, tl + 32, "%s/gmm-hmc.XXXXXX", tdir && *tdir ? tdir : "/tmp");
    int fd = mkstemp(tmp), rc = 0;
    FILE *dst = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!dst) {
        cli_msg(cmd, "cannot create a temporary file: %s", strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        gmm_free(tmp);
        return CLI_EXIT_ERROR;
    }
    gmm_status s = write_csv(dst, tmp, w, ch);
    if (fclose(dst) && s == GMM_OK)
        s = gmm_error(GMM_EIO, "%s: write error: %s", tmp, strerror(errno ? errno : EIO));
    const char *src = tmp;
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    if (s != GMM_OK || (s = gmm_draws_read(&src, 1, &d)) != GMM_OK ||
        (s = gmm_outset_open(set, w->summary, &of)) != GMM_OK ||
        (s = cli_write_summary(gmm_outfile_stream(of), d)) != GMM_OK)
        rc = cli_fail(cmd, s);
    gmm_draws_free(d);
    unlink(tmp);
    gmm_free(tmp);
    return rc;
}

/* CmdStan diagnose's warnings, each with what to try, whatever --quiet
 * says: tree-depth saturation and E-BFMI per chain, divergences in all. */
static int diagnose(const char *cmd, const cli_hmc_out *w, const gmm_hmc_chains *ch)
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

int cli_hmc_write(const char *cmd, const cli_hmc_out *w, const gmm_hmc_chains *ch)
{
    size_t nchain = gmm_hmc_chains_count(ch), nkept = 0;
    int interrupted = gmm_hmc_chains_cut(ch), rc = 0;
    for (size_t k = 0; k < nchain; k++)
        nkept += gmm_hmc_chains_has_draws(ch, k);
    if (!nkept) {
        cli_msg(cmd, "interrupted before the first draw: nothing written");
        return cli_interrupt_exit_code();
    }
    /* the files: one (csv) or one per chain with draws (cmdstan); an
     * interrupted run's regular files are named FILE.partial, a device or
     * FIFO is written as it is.  They, FILE.json and the summary are one
     * set, committed at the end: a run that fails writes none of them */
    size_t nfile = w->cmdstan ? nkept : 1;
    char **files = gmm_calloc(nfile, sizeof *files); /* NULL: stdout */
    const char *base = w->out && strcmp(w->out, "-") ? w->out : NULL;
    gmm_outset *set = NULL;
    gmm_outfile *first = NULL;
    gmm_status s = files ? gmm_outset_alloc(&set) : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t k = 0, j = 0; s == GMM_OK && j < nfile; k++) {
        if (w->cmdstan && !gmm_hmc_chains_has_draws(ch, k))
            continue;
        int in_place = 1;
        if (base && !(files[j] = w->cmdstan ? chain_file(base, w->rp->chain0 + k)
                                            : dup_path(base, ""))) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            break;
        }
        if (files[j] && interrupted &&
            gmm_outfile_check_kind(files[j], &in_place) == GMM_OK && !in_place) {
            char *pp = dup_path(files[j], ".partial");
            gmm_free(files[j]);
            if (!(files[j] = pp)) {
                s = gmm_error(GMM_ENOMEM, "out of memory");
                break;
            }
        }
        gmm_outfile *of = NULL;
        s = write_draws(set, w, ch, k, files[j], &of);
        if (j++ == 0)
            first = of;
    }
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    /* FILE.json: beside a regular file only (not /dev/full.json) */
    if (base) {
        char *side = NULL;
        if (!w->cmdstan && gmm_outfile_in_place(first)) {
            cli_msg(cmd, "%s is not a regular file: the settings are not written to %s.json",
                    base, base);
        } else if (!(side = dup_path(w->cmdstan ? base : files[0],
                                     w->cmdstan && interrupted ? ".partial.json" : ".json"))) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        } else {
            s = write_config(set, side, w, ch);
            gmm_free(side);
            if (s != GMM_OK) {
                rc = cli_fail(cmd, s);
                goto done;
            }
        }
    }
    if (interrupted) {
        s = gmm_outset_commit(set);
        set = NULL;
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        cli_msg(cmd, "interrupted: %zu chain(s) of %zu draws each (the shortest chain's count) "
                     "kept in %s%s%s",
                nkept, gmm_hmc_chains_kept(ch), files[0] ? files[0] : "<stdout>",
                nfile > 1 ? " and the other chains' files" : "",
                w->summary ? "; no summary written" : "");
        rc = cli_interrupt_exit_code();
        goto done;
    }
    if (!w->quiet)
        for (size_t k = 0; k < nchain; k++) {
            const gmm_hmc_chain_info *ci = gmm_hmc_chains_info(ch, k);
            cli_msg(cmd, "chain %llu: step size %.3g, %zu divergent transitions",
                    (unsigned long long)ci->id, ci->stepsize, ci->divergences);
        }
    if ((rc = diagnose(cmd, w, ch)) != 0)
        goto done;
    if (w->summary && (rc = write_summary(cmd, set, w, ch)) != 0)
        goto done;
    s = gmm_outset_commit(set);
    set = NULL;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (!w->quiet && w->cmdstan)
        cli_msg(cmd, "wrote %s%s%s", files[0], nfile > 1 ? " ... " : "",
                nfile > 1 ? files[nfile - 1] : "");
done:
    gmm_outset_abort(set);
    for (size_t j = 0; files && j < nfile; j++)
        gmm_free(files[j]);
    gmm_free(files);
    return rc;
}

int cli_hmc_init_point(const char *cmd, gmm_mdl *m, const char *init, double **x0)
{
    gmm_model mi;
    gmm_model_init(&mi);
    gmm_status s = gmm_model_read(init, &mi);
    int rc = 0;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
    } else if (!mi.has_vi) {
        cli_msg(cmd, "--init %s: not a vi result (no \"variational\")", init);
        rc = CLI_EXIT_ERROR;
    } else {
        rc = cli_model_load_vi(cmd, m, &mi, init);
    }
    gmm_model_free(&mi);
    if (rc)
        return rc;
    size_t n = gmm_latent_dim(gmm_problem_latent(gmm_mdl_problem(m)));
    if (!(*x0 = gmm_malloc(n, sizeof **x0)))
        return cli_fail(cmd, GMM_ENOMEM);
    memcpy(*x0, gmm_vi_mean(gmm_mdl_vi(m)), n * sizeof **x0);
    gmm_mdl_set_vi(m, NULL);
    return 0;
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

int cli_hmc_metric(const char *cmd, gmm_mdl *m, const char *arg, int sample_hyper, int quiet,
                   gmm_metric *metric)
{
    const char *name = arg ? arg : "auto";
    int rc = cli_hmc_metric_check(cmd, arg, sample_hyper);
    if (rc)
        return rc;
    *metric = !strcmp(name, "laplace") ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR;
    if (strcmp(name, "auto")) {
        if (!quiet)
            cli_msg(cmd, "metric: %s", name);
        return 0;
    }
    if (sample_hyper) {
        if (!quiet)
            cli_msg(cmd, "metric: prior (auto: the hyperparameters are sampled)");
        return 0;
    }
    double lmax;
    gmm_status s = gmm_problem_data_information(gmm_mdl_problem(m),
                                                gmm_mdl_objective(m)->value, &lmax);
    if (s == GMM_ENOMEM)
        return cli_fail(cmd, s);
    if (s != GMM_OK) { /* no Laplace fit, no Laplace map */
        if (!quiet)
            cli_msg(cmd, "metric: prior (auto: %s)", gmm_error_message());
        return 0;
    }
    if (lmax > GMM_METRIC_AUTO_INFO)
        *metric = GMM_METRIC_LAPLACE;
    if (!quiet)
        cli_msg(cmd, "metric: %s (auto: the data's information is %.3g times the prior's in "
                     "the stiffest direction, %s %g)",
                *metric == GMM_METRIC_LAPLACE ? "laplace" : "prior", lmax,
                *metric == GMM_METRIC_LAPLACE ? "above" : "at most", GMM_METRIC_AUTO_INFO);
    return 0;
}
