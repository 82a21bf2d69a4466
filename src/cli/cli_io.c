/* cli_io.c -- a command's inputs and outputs listed before the work, so
 * that no output replaces an input or another output (cli.h: cli_io). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"

void cli_io_init(cli_io *io) { memset(io, 0, sizeof *io); }

void cli_io_free(cli_io *io)
{
    for (size_t i = 0; i < io->nin; i++) {
        gmm_free(io->in[i].what);
        gmm_free(io->in[i].path);
    }
    for (size_t i = 0; i < io->nout; i++) {
        gmm_free(io->out[i].opt);
        gmm_free(io->out[i].arg);
        gmm_free(io->out[i].path);
    }
    gmm_free(io->in);
    gmm_free(io->out);
    cli_io_init(io);
}

void cli_io_input(cli_io *io, const char *what, const char *path)
{
    if (!path || !strcmp(path, "-"))
        return;
    struct cli_io_in *in = gmm_realloc(io->in, io->nin + 1, sizeof *in);
    if (!in) {
        io->nomem = 1;
        return;
    }
    io->in = in;
    in += io->nin;
    in->what = gmm_strdup(what);
    in->path = gmm_strdup(path);
    if (!in->what || !in->path) {
        gmm_free(in->what);
        gmm_free(in->path);
        io->nomem = 1;
        return;
    }
    io->nin++;
}

void cli_io_output(cli_io *io, const char *opt, const char *arg, const char *path)
{
    if (!arg || !strcmp(arg, "-"))
        return;
    struct cli_io_out *out = gmm_realloc(io->out, io->nout + 1, sizeof *out);
    if (!out) {
        io->nomem = 1;
        return;
    }
    io->out = out;
    out += io->nout;
    out->opt = gmm_strdup(opt);
    out->arg = gmm_strdup(arg);
    out->path = path ? gmm_strdup(path) : NULL;
    if (!out->opt || !out->arg || (path && !out->path)) {
        gmm_free(out->opt);
        gmm_free(out->arg);
        gmm_free(out->path);
        io->nomem = 1;
        return;
    }
    io->nout++;
}

void cli_io_draws(cli_io *io, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *side = NULL;
        cli_io_input(io, "the draws file", paths[i]);
        /* a sidecar that cannot be opened is the reader's error to report */
        if (gmm_draws_sidecar(paths[i], &side) == GMM_OK && side)
            cli_io_input(io, "the draws' sidecar", side);
        gmm_free(side);
    }
}

/* "-o m.json", or "m.q.csv (written with -o m.json)", into buf. */
static const char *out_name(const struct cli_io_out *o, char *buf, size_t size)
{
    if (o->path)
        snprintf(buf, size, "%s (written with %s %s)", o->path, o->opt, o->arg);
    else
        snprintf(buf, size, "%s %s", o->opt, o->arg);
    return buf;
}

int cli_io_check(const char *cmd, const cli_io *io)
{
    if (io->nomem)
        return cli_fail(cmd, gmm_error(GMM_ENOMEM, "out of memory"));
    char a[2 * PATH_MAX], b[2 * PATH_MAX];
    for (size_t i = 0; i < io->nout; i++) {
        const struct cli_io_out *o = &io->out[i];
        const char *op = o->path ? o->path : o->arg;
        for (size_t k = 0; k < io->nin; k++)
            if (gmm_path_same_file(op, io->in[k].path)) {
                cli_msg(cmd, "%s is %s %s (an output never replaces an input)",
                        out_name(o, a, sizeof a), io->in[k].what, io->in[k].path);
                return CLI_EXIT_USAGE;
            }
        /* two outputs written in place (-o /dev/null --summary /dev/null)
         * replace nothing */
        int in_place = 0;
        if (gmm_outfile_check_kind(op, &in_place) == GMM_OK && in_place)
            continue;
        for (size_t k = 0; k < i; k++) {
            const struct cli_io_out *p = &io->out[k];
            if (gmm_path_same_file(op, p->path ? p->path : p->arg)) {
                cli_msg(cmd, "%s and %s are the same file (each output needs a file of its own)",
                        out_name(o, a, sizeof a), out_name(p, b, sizeof b));
                return CLI_EXIT_USAGE;
            }
        }
    }
    return 0;
}

char *cli_path_suffix(const char *path, const char *suffix)
{
    size_t a = strlen(path), b = strlen(suffix);
    char *p = gmm_malloc(a + b + 1, 1);
    if (p) {
        memcpy(p, path, a);
        memcpy(p + a, suffix, b + 1);
    }
    return p;
}
