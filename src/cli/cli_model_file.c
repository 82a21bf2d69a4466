/* cli_model_file.c -- a model read from its file (fit's output): the files
 * it records found (beside the model file for older, relative names) and
 * listed as the command's inputs, the model rebuilt from its description
 * and values, and a vi result's q. */
#include "cli_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/formula.h"

/* Where a file rec (not "-") named by the model file model_path is: rec
 * itself when absolute (or model_path is NULL or "-"), else beside the
 * model file when readable there, else rec when readable from here (files
 * of earlier versions recorded relative names).  *out allocated, NULL when
 * neither is readable; -1 when out of memory, else 0. */
static int find_recorded(const char *model_path, const char *rec, char **out)
{
    *out = NULL;
    if (rec[0] == '/' || !model_path || !strcmp(model_path, "-"))
        return (*out = gmm_strdup(rec)) ? 0 : -1;
    const char *slash = strrchr(model_path, '/');
    size_t dl = slash ? (size_t)(slash - model_path) + 1 : 0;
    char *cand = gmm_malloc(dl + strlen(rec) + 1, 1);
    if (!cand)
        return -1;
    memcpy(cand, model_path, dl);
    strcpy(cand + dl, rec);
    if (access(cand, R_OK) == 0) {
        *out = cand;
        return 0;
    }
    gmm_free(cand);
    if (access(rec, R_OK) == 0 && !(*out = gmm_strdup(rec)))
        return -1;
    return 0;
}

/* An input named by a model file, where find_recorded finds it.  0, or an
 * exit code after a message naming what was looked for. */
static int resolve_path(const char *cmd, const char *model_path, const char *what,
                        const char *rec, char **out)
{
    *out = NULL;
    if (!strcmp(rec, "-")) {
        cli_msg(cmd, "%s: the model's %s came from standard input; give the file again, e.g. "
                     "'gmm-infer %s --model %s DATA.csv'",
                model_path ? model_path : "model", what, cmd, model_path ? model_path : "M.json");
        return CLI_EXIT_USAGE;
    }
    if (find_recorded(model_path, rec, out) != 0)
        return cli_fail(cmd, GMM_ENOMEM);
    if (!*out) {
        const char *slash = strrchr(model_path, '/');
        int dl = slash ? (int)(slash - model_path) + 1 : 0;
        cli_msg(cmd, "%s: the model's %s '%s' is not found (looked for %.*s%s and ./%s)",
                model_path, what, rec, dl, model_path, rec, rec);
        return CLI_EXIT_ERROR;
    }
    if (access(*out, R_OK) != 0) {
        cli_msg(cmd, "%s: the model's %s '%s' cannot be read: %s",
                model_path ? model_path : "model", what, *out, strerror(errno));
        gmm_free(*out);
        *out = NULL;
        return CLI_EXIT_ERROR;
    }
    return 0;
}

int cli_model_from_file(const char *cmd, const gmm_model *mf, const char *model_path,
                        const char *data, int verbose, int factor, int storage,
                        gmm_mdl **out)
{
    int rc = 0;
    char *data_file = NULL, *graph_file = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    int graph = mf->desc.precision != NULL;
    *out = NULL;
    if (!data &&
        (rc = resolve_path(cmd, model_path, "data file", mf->desc.data.file, &data_file)) != 0)
        goto done;
    if (graph && mf->desc.graph &&
        (rc = resolve_path(cmd, model_path, "edge list", mf->desc.graph, &graph_file)) != 0)
        goto done;
    cli_model_report r = {cmd, 0, verbose, 1, 0};
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc = mf->desc;
    s.desc.graph = graph_file;
    s.desc.data.file = data ? data : data_file;
    if (graph) {
        s.desc.merge_tol = 0.0;
        s.desc.data.x = NULL;
    } else {
        s.desc.data.node = NULL;
    }
    s.factor = factor;
    if (storage != CLI_MODEL_FILE_FACTOR)
        s.desc.factor = (gmm_model_factor)storage;
    s.values = mf;
    s.values_name = mp;
    s.model_path = model_path && strcmp(model_path, "-") ? model_path : NULL;
    s.verbose = verbose;
    rc = cli_model_build(cmd, &s, &r, mp, out);
    if (rc == 0 && mf->has_vi && (rc = cli_model_load_vi(cmd, *out, mf, model_path)) != 0) {
        gmm_mdl_free(*out);
        *out = NULL;
    }
done:
    gmm_free(data_file);
    gmm_free(graph_file);
    return rc;
}

/* The graph=PATH files of a formula's f() terms, as inputs ("the edge
 * list of f(NAME, MODEL)" + suffix).  A formula that does not parse has
 * none here: the build reports it. */
static void formula_inputs(cli_io *io, const char *formula, const char *suffix)
{
    gmm_formula *fm = NULL;
    if (!formula || gmm_formula_parse(formula, &fm) != GMM_OK)
        return;
    for (size_t t = 0; t < fm->nlatent; t++) {
        const gmm_formula_latent *l = &fm->latent[t];
        const char *g = gmm_formula_arg_find(l, "graph", NULL);
        char what[160];
        snprintf(what, sizeof what, "the edge list of f(%s, %s)%s", l->name,
                 l->quoted ? "..." : l->model, suffix);
        if (g && *g)
            cli_io_input(io, what, g);
    }
    gmm_formula_free(fm);
}

void cli_model_opts_inputs(cli_io *io, const cli_model_opts *o)
{
    cli_io_input(io, "the data file", o->spec.desc.data.file);
    cli_io_input(io, "the edge list", o->spec.desc.graph);
    formula_inputs(io, o->spec.desc.formula, "");
}

/* A file named by model file mf (read from model_path), as an input: where
 * resolve_path will find it. */
static void recorded_input(cli_io *io, const char *what, const char *model_path, const char *rec)
{
    if (!rec || !strcmp(rec, "-"))
        return;
    char *path = NULL;
    if (find_recorded(model_path, rec, &path) != 0)
        io->nomem = 1;
    cli_io_input(io, what, path);
    gmm_free(path);
}

void cli_model_file_inputs(cli_io *io, const gmm_model *mf, const char *model_path,
                           const char *data, const char *what)
{
    cli_io_input(io, what, model_path);
    if (data)
        cli_io_input(io, "the data file", data);
    else
        recorded_input(io, "the model's data file", model_path, mf->desc.data.file);
    if (mf->desc.precision)
        recorded_input(io, "the model's edge list", model_path, mf->desc.graph);
    formula_inputs(io, mf->desc.formula, " in the model");
    if (mf->has_vi)
        recorded_input(io, "the model's q file", model_path, mf->vi_file);
}

void cli_model_vi_inputs(cli_io *io, const char *opt, const char *path)
{
    gmm_model mi;
    gmm_model_init(&mi);
    char what[64], qwhat[64];
    snprintf(what, sizeof what, "the %s file", opt);
    snprintf(qwhat, sizeof qwhat, "the q file of %s", opt);
    cli_io_input(io, what, path);
    if (path && gmm_model_read(path, &mi) == GMM_OK && mi.has_vi)
        recorded_input(io, qwhat, path, mi.vi_file);
    gmm_model_free(&mi);
}

int cli_model_open(const char *cmd, const cli_model_opts *o, const char *model_path,
                   gmm_model *mf, cli_io *io, gmm_mdl **out)
{
    int rc;
    *out = NULL;
    if (!model_path) {
        if (io) {
            cli_model_opts_inputs(io, o);
            if ((rc = cli_io_check(cmd, io)) != 0)
                return rc;
        }
        return cli_model_load(cmd, o, out);
    }
    if (o->given) {
        cli_msg(cmd, "--model takes the model from the file: give no model options with it");
        return CLI_EXIT_USAGE;
    }
    gmm_status s = gmm_model_read(model_path, mf);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (io) {
        cli_model_file_inputs(io, mf, model_path, o->spec.desc.data.file, "the model file");
        if ((rc = cli_io_check(cmd, io)) != 0)
            return rc;
    }
    return cli_model_from_file(cmd, mf, model_path, o->spec.desc.data.file, o->verbose,
                               o->spec.factor,
                               o->factor_given ? (int)o->spec.desc.factor : CLI_MODEL_FILE_FACTOR,
                               out);
}

int cli_model_vi_start(const char *cmd, gmm_mdl *m, gmm_vi *v, const gmm_model *src,
                       const char *src_path, const char **start)
{
    char *path = NULL;
    const char *sp = src_path && strcmp(src_path, "-") ? src_path : "<stdin>";
    int rc = src ? resolve_path(cmd, src_path, "variational parameters", src->vi_file, &path) : 0;
    if (rc != 0)
        return rc;
    gmm_status s = gmm_mdl_vi_start(m, v, src, path, sp, start);
    gmm_free(path);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

int cli_model_load_vi(const char *cmd, gmm_mdl *m, const gmm_model *mf, const char *model_path)
{
    char *path = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    int rc = resolve_path(cmd, model_path, "variational parameters", mf->vi_file, &path);
    if (rc != 0)
        return rc;
    gmm_status s = gmm_mdl_load_vi(m, path, mf->vi_bandwidth, mp);
    if (s == GMM_EINVAL) {
        cli_msg(cmd, "%s", gmm_error_message());
        rc = CLI_EXIT_ERROR;
    } else if (s != GMM_OK) {
        cli_fail(cmd, s);
        rc = CLI_EXIT_ERROR;
    }
    gmm_free(path);
    return rc;
}
