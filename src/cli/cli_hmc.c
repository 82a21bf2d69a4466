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

/* The draws' files, as members of set: one (csv) or one per chain with
 * draws (cmdstan), files[j] their names (NULL: stdout); an interrupted
 * run's regular files are named FILE.partial, a device or FIFO is written
 * as it is.  *first: the first file's. */
static gmm_status write_all_draws(gmm_outset *set, const cli_hmc_out *w,
                                  const gmm_hmc_chains *ch, char **files, size_t nfile,
                                  gmm_outfile **first)
{
    const char *base = w->out && strcmp(w->out, "-") ? w->out : NULL;
    int interrupted = gmm_hmc_chains_cut(ch);
    gmm_status s = GMM_OK;
    for (size_t k = 0, j = 0; s == GMM_OK && j < nfile; k++) {
        if (w->cmdstan && !gmm_hmc_chains_has_draws(ch, k))
            continue;
        int in_place = 1;
        if (base && !(files[j] = w->cmdstan ? gmm_draws_chain_path(base, w->rp->chain0 + k)
                                            : cli_path_suffix(base, "")))
            return gmm_error(GMM_ENOMEM, "out of memory");
        if (files[j] && interrupted &&
            gmm_outfile_check_kind(files[j], &in_place) == GMM_OK && !in_place) {
            char *pp = cli_path_suffix(files[j], ".partial");
            gmm_free(files[j]);
            if (!(files[j] = pp))
                return gmm_error(GMM_ENOMEM, "out of memory");
        }
        gmm_outfile *of = NULL;
        s = write_draws(set, w, ch, k, files[j], &of);
        if (j++ == 0)
            *first = of;
    }
    return s;
}

/* FILE.json, a member of set: beside a regular file only (not
 * /dev/full.json).  0 or an exit code. */
static int write_sidecar(const char *cmd, gmm_outset *set, const cli_hmc_out *w,
                         const gmm_hmc_chains *ch, char *const *files, gmm_outfile *first)
{
    const char *base = w->out && strcmp(w->out, "-") ? w->out : NULL;
    int interrupted = gmm_hmc_chains_cut(ch);
    char *side = NULL;
    if (!base)
        return 0;
    if (!w->cmdstan && gmm_outfile_in_place(first)) {
        cli_msg(cmd, "%s is not a regular file: the settings are not written to %s.json", base,
                base);
        return 0;
    }
    if (!(side = cli_path_suffix(w->cmdstan ? base : files[0],
                                 w->cmdstan && interrupted ? ".partial.json" : ".json")))
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = write_config(set, side, w, ch);
    gmm_free(side);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
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
    /* the draws, FILE.json and the summary are one set, committed at the
     * end: a run that fails writes none of them */
    size_t nfile = w->cmdstan ? nkept : 1;
    char **files = gmm_calloc(nfile, sizeof *files); /* NULL: stdout */
    gmm_outset *set = NULL;
    gmm_outfile *first = NULL;
    gmm_status s = files ? gmm_outset_alloc(&set) : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = write_all_draws(set, w, ch, files, nfile, &first);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if ((rc = write_sidecar(cmd, set, w, ch, files, first)) != 0)
        goto done;
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
    if ((rc = cli_hmc_diagnose(cmd, w, ch)) != 0)
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
