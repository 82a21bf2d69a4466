/* cli_hmc.c -- the files of `gmm-infer hmc` (cli_hmc.h): the draws in the
 * draws-data-frame layout that R's posterior reads (csv), or CmdStan's own
 * output CSV, one file per chain (cmdstan), from the library's chains in
 * chain order; FILE.json, how they were made; the summary.  Files are
 * written through gmm_outfile (atomically, or in place for a device or
 * FIFO); after an interrupt, regular files are named FILE.partial.  The
 * layouts are io's (gmm_draws_write_*), what they hold the model's
 * (gmm_mdl_draws_columns, gmm_mdl_cmdstan_config, gmm_mdl_hmc_sidecar). */
#define _XOPEN_SOURCE 700

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
#include "gmm/summary.h"

/* Where the rows go: one stream, named for its errors. */
typedef struct {
    FILE *f;
    const char *name;
    const cli_hmc_out *w;
    const gmm_draws_columns *cols;
    size_t kept;   /* draws per chain */
} sink_ctx;

static gmm_status stream_status(const sink_ctx *s)
{
    if (!ferror(s->f))
        return GMM_OK;
    return gmm_error(GMM_EIO, "%s: write error: %s", s->name ? s->name : "<stdout>",
                     strerror(errno ? errno : EIO));
}

static gmm_status put_row(void *user, const gmm_hmc_chain_info *c, size_t it, const double *row,
                          size_t ncol)
{
    sink_ctx *s = user;
    gmm_draws_write_row(s->f, s->cols->cmdstan, c->id, it,
                        (size_t)(c->id - 1) * s->w->rp->hmc.draws + it, row, ncol);
    return GMM_OK;
}

/* The draws in the draws-data-frame layout: the header, then the kept rows
 * of every chain that has draws, in chain order. */
static gmm_status write_csv(FILE *f, const char *name, const cli_hmc_out *w,
                            const gmm_hmc_chains *ch)
{
    gmm_draws_columns *cols = NULL;
    gmm_status st = gmm_mdl_draws_columns(w->model, w->rp, 0, &cols);
    if (st != GMM_OK)
        return st;
    sink_ctx s = {f, name, w, cols, gmm_hmc_chains_kept(ch)};
    gmm_hmc_sink sk = {NULL, put_row, NULL, &s};
    gmm_draws_write_header(f, cols);
    st = gmm_hmc_chains_write(ch, &sk);
    gmm_mdl_draws_columns_free(cols);
    return st != GMM_OK ? st : stream_status(&s);
}

/* Chain c in CmdStan's output CSV: its configuration, the header, the
 * adaptation, the draws, the elapsed times. */
static gmm_status cmdstan_begin(void *user, const gmm_hmc_chain_info *ci)
{
    sink_ctx *s = user;
    gmm_draws_cmdstan_config conf;
    gmm_mdl_cmdstan_config(s->w->model, s->w->rp, ci, s->kept, s->w->model_path, s->w->data,
                           &conf);
    gmm_draws_write_cmdstan_config(s->f, &conf);
    gmm_draws_write_header(s->f, s->cols);
    gmm_draws_write_cmdstan_adaptation(s->f, ci->stepsize, ci->inv_metric, ci->metric_dim);
    return GMM_OK;
}

static gmm_status cmdstan_end(void *user, const gmm_hmc_chain_info *ci)
{
    sink_ctx *s = user;
    gmm_draws_write_cmdstan_times(s->f, ci->seconds[0], ci->seconds[1]);
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
    const gmm_objective *o = gmm_mdl_objective(m);
    size_t np = o->nparam;
    *sampled = gmm_calloc(np ? np : 1, sizeof **sampled);
    *priors = gmm_calloc(np ? np : 1, sizeof **priors);
    if (!*sampled || !*priors)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_hmc_default_priors(gmm_mdl_problem(m), *sampled, *priors);
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

/* FILE.json beside the draws: how they were made (sampler settings, the
 * hyperparameters and priors, per-chain step sizes, divergences and leapfrog
 * steps of warm-up and draws; the format and, after an interrupt, that the
 * chains were cut and to how many draws), so a draws file never loses what
 * it is a sample of. */
static gmm_status write_config(gmm_outset *set, const char *path, const cli_hmc_out *w,
                               const gmm_hmc_chains *ch)
{
    json_t *root = NULL;
    gmm_outfile *of = NULL;
    gmm_status s = gmm_mdl_hmc_sidecar(w->model, w->rp, ch, w->model_path, w->data, w->cmdstan,
                                       &root);
    if (s == GMM_OK && (s = gmm_outset_open(set, path, &of)) == GMM_OK)
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
        gmm_draws_columns *cols = NULL;
        if ((s = gmm_mdl_draws_columns(w->model, w->rp, 1, &cols)) != GMM_OK)
            return s;
        sink_ctx sc = {f, name, w, cols, gmm_hmc_chains_kept(ch)};
        gmm_hmc_sink sk = {cmdstan_begin, put_row, cmdstan_end, &sc};
        s = gmm_hmc_chains_replay(ch, k, &sk);
        gmm_mdl_draws_columns_free(cols);
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
        (s = gmm_summary_write(gmm_outfile_stream(of), d, cli_stop_requested)) != GMM_OK)
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
        if (base && !(files[j] = w->cmdstan ? gmm_draws_chain_path(base, w->rp->chain0 + k)
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
    gmm_status s2 = gmm_mdl_take_vi_mean(m, x0);
    return s2 == GMM_OK ? 0 : cli_fail(cmd, s2);
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
    gmm_status s = gmm_mdl_hmc_metric_auto(m, metric, &lmax);
    if (s == GMM_ENOMEM)
        return cli_fail(cmd, s);
    if (s != GMM_OK) { /* no Laplace fit, no Laplace map */
        if (!quiet)
            cli_msg(cmd, "metric: prior (auto: %s)", gmm_error_message());
        return 0;
    }
    if (!quiet)
        cli_msg(cmd, "metric: %s (auto: the data's information is %.3g times the prior's in "
                     "the stiffest direction, %s %g)",
                *metric == GMM_METRIC_LAPLACE ? "laplace" : "prior", lmax,
                *metric == GMM_METRIC_LAPLACE ? "above" : "at most", GMM_METRIC_AUTO_INFO);
    return 0;
}
