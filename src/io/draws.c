/* draws.c -- draws files (posterior's draws_df layout, or CmdStan's CSV)
 * into chains x iterations per variable, merged over files by chain id
 * (draws.h).
 *
 * Each file is read whole as a table (comment lines skipped, for CmdStan's
 * files), its rows grouped by chain (a sort of (chain id, row) pairs, so a
 * file may interleave chains; a CmdStan file is one chain), and each group
 * becomes a chunk holding its variables' draws; the table is freed before
 * the next file.  When every file is in, the chunks are sorted by chain id
 * (then file, so a clash names the earlier file first), checked for clashes
 * and equal lengths, and copied into one array.
 *
 * DRAWS FILES.  A draws file is what `posterior::as_draws_df()` accepts and
 * what a sampler writes (CmdStanR's draws_df, draws_write.c): a header row
 *
 *   .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,...,mu,f[1],...
 *
 * then one row per draw.  Columns:
 *   .chain       required; a positive integer chain id;
 *   .iteration, .draw   optional and ignored: as posterior does, a chain's
 *                draws are taken in the order of its rows;
 *   NAME__       sampler diagnostics (accept_stat__, treedepth__, ...):
 *                skipped, except lp__, which is a variable as in posterior;
 *   anything else   a variable, in the first file's column order.
 * Cells are numbers or missing (empty, NA, NaN: kept as NAN, so a summary
 * of that variable is NA as in posterior).
 *
 * CmdStan's output CSV (draws_write.c's CmdStan layout, CmdStan's own
 * sampler) is read as it is: a file without .chain but with lp__ is one
 * chain, its id the file's `# id = N` comment line or else (also for
 * CmdStan's "id = 1 (Default)" of separate runs) its position among the
 * files (1, 2, ...); comment lines ('#' in column 1) are skipped wherever
 * they are (configuration, adaptation, timing); with `save_warmup` on, the
 * first ceil(num_warmup / thin) rows, the warm-up's, are dropped (as
 * CmdStanPy does); Stan's names NAME.I.J read as NAME[I,J] (f.3 -> f[3],
 * log_lik.3 -> log_lik[3]), and a name that the CmdStan writer made of a
 * parameter's (0_matern32_variance) as that parameter's
 * (0.matern32.variance) when the files' sidecar (gmm_draws_sidecar)
 * records it.  On a graph, CmdStan's f.K is the K-th node, not node "K":
 * `stan` tells the two apart.  All files must be of one of the two kinds.
 *
 * Several files merge by chain: the chains of every file, each chain whole
 * in one file (a chain id in two files, or a file given twice, is an error
 * naming both), ordered by chain id -- so the same chains split over
 * several files give the same draws, bit for bit.  Every file must hold
 * the same variables (in any column order).  All chains must have the same
 * number of draws: posterior cannot form a draws array otherwise, and
 * neither truncates nor pads, so this is an error too, naming the shortest
 * and longest chains.
 *
 * MESSAGES (GMM_EPARSE unless said; the table reader's own, GMM_EIO for an
 * unreadable file): "file: no column '.chain' (...) (nor lp__: not
 * CmdStan's CSV either)"; "b.csv: CmdStan's CSV (no column .chain), a.csv
 * is a draws_df CSV: give files of one format"; "file: save_warmup with
 * num_warmup = W, thin = T: K warm-up rows, but the file has N"; "file: no
 * variables (only .chain/.iteration/.draw and sampler columns ending in
 * __)"; "file: no draws"; "file:L: column '.chain': 'x' is not a positive
 * integer"; "file:L: column 'mu': 'abc' is not a number"; "b.csv: no
 * column 'mu' (a.csv has it)" and "b.csv: column 'nu' is not in a.csv";
 * "b.csv:L: chain 2 is also in a.csv"; "chains of different lengths: chain
 * 3 has 150 draws (b.csv), chain 1 has 200 (a.csv)".
 */
#include "gmm/draws.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/json.h"

typedef struct {
    long id;
    size_t file;  /* index into the paths */
    size_t line;  /* line of the chain's first row */
    size_t nrow;
    double *x;    /* nvar x nrow, variable-major */
} chunk;

typedef struct {
    long id;
    size_t row;
} idrow;

typedef struct {
    const char *name;
    size_t v;
} named;

typedef struct {
    const char *const *paths;
    int stan;        /* -1 before the first file, then 1 for CmdStan CSV files, 0 for draws_df */
    size_t nvar;
    char **name;
    named *by_name;  /* the names sorted, to match later files' columns */
    chunk *chunks;
    size_t nchunk, cap;
} reader;

static const char *shown(const char *path) { return strcmp(path, "-") ? path : "<stdin>"; }

/* A variable column: not reserved, not a sampler diagnostic other than lp__. */
static int is_variable(const char *name)
{
    static const char *const reserved[] = {".chain", ".iteration", ".draw"};
    for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
        if (!strcmp(name, reserved[k]))
            return 0;
    size_t len = strlen(name);
    return !(len > 2 && !strcmp(name + len - 2, "__") && strcmp(name, "lp__"));
}

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* The index of variable `name`, or nvar. */
static size_t find_variable(const reader *r, const char *name)
{
    named key = {name, 0};
    const named *hit = bsearch(&key, r->by_name, r->nvar, sizeof key, cmp_named);
    return hit ? hit->v : r->nvar;
}

static int cmp_idrow(const void *a, const void *b)
{
    const idrow *x = a, *y = b;
    if (x->id != y->id)
        return (x->id > y->id) - (x->id < y->id);
    return (x->row > y->row) - (x->row < y->row);
}

static int cmp_chunk(const void *a, const void *b)
{
    const chunk *x = a, *y = b;
    if (x->id != y->id)
        return (x->id > y->id) - (x->id < y->id);
    return (x->file > y->file) - (x->file < y->file);
}

/* A positive decimal integer, the whole cell. */
static int parse_chain_id(const char *s, long *id)
{
    const char *p = s + (*s == '+');
    if (*p < '0' || *p > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*end || errno == ERANGE || v <= 0)
        return -1;
    *id = v;
    return 0;
}

/* The column of each variable in table t, whose column names are hdr (col,
 * nvar entries): the first file defines the variables, later files must
 * have the same set. */
static gmm_status match_columns(reader *r, const gmm_table *t, char *const *hdr, size_t file,
                                size_t *col)
{
    if (file == 0) {
        for (size_t c = 0; c < t->ncol; c++)
            if (is_variable(hdr[c]))
                r->nvar++;
        if (r->nvar == 0)
            return gmm_error(GMM_EPARSE,
                             "%s: no variables (only .chain/.iteration/.draw and sampler columns "
                             "ending in __)",
                             t->file);
        r->name = gmm_calloc(r->nvar, sizeof *r->name);
        if (!r->name)
            return gmm_error(GMM_ENOMEM, "out of memory");
        for (size_t c = 0, v = 0; c < t->ncol; c++)
            if (is_variable(hdr[c])) {
                if (!(r->name[v] = gmm_strdup(hdr[c])))
                    return gmm_error(GMM_ENOMEM, "out of memory");
                col[v++] = c;
            }
        r->by_name = gmm_malloc(r->nvar, sizeof *r->by_name);
        if (!r->by_name)
            return gmm_error(GMM_ENOMEM, "out of memory");
        for (size_t v = 0; v < r->nvar; v++)
            r->by_name[v] = (named){r->name[v], v};
        qsort(r->by_name, r->nvar, sizeof *r->by_name, cmp_named);
        return GMM_OK;
    }
    /* Header names are distinct (the table reader checks), so nvar
     * matches mean the same set. */
    const char *first = shown(r->paths[0]);
    size_t found = 0;
    for (size_t c = 0; c < t->ncol; c++) {
        if (!is_variable(hdr[c]))
            continue;
        size_t v = find_variable(r, hdr[c]);
        if (v == r->nvar)
            return gmm_error(GMM_EPARSE, "%s: column '%s' is not in %s", t->file, hdr[c],
                             first);
        col[v] = c;
        found++;
    }
    if (found < r->nvar) {
        /* Name the first variable missing here. */
        unsigned char *hit = gmm_calloc(r->nvar, 1);
        if (!hit)
            return gmm_error(GMM_ENOMEM, "out of memory");
        for (size_t c = 0; c < t->ncol; c++)
            if (is_variable(hdr[c]))
                hit[find_variable(r, hdr[c])] = 1;
        size_t v = 0;
        while (hit[v])
            v++;
        gmm_free(hit);
        return gmm_error(GMM_EPARSE, "%s: no column '%s' (%s has it)", t->file, r->name[v],
                         first);
    }
    return GMM_OK;
}

/* What a CmdStan file's comments say about its rows: its chain id (an
 * "id = N" CmdStan marks "(Default)" is no id: separate runs all have it),
 * and whether the warm-up is in it (save_warmup, num_warmup, thin). */
typedef struct {
    long id;               /* 0: none */
    int save_warmup;
    size_t num_warmup, thin, skip;
} stan_conf;

/* "KEY = VALUE" of a comment line ("#   num_warmup = 1000 (Default)"):
 * the value of KEY, or NULL; *dflt whether CmdStan marked it a default. */
static const char *conf_value(const char *text, const char *key, int *dflt)
{
    const char *p = text + 1;
    while (*p == ' ')
        p++;
    size_t n = strlen(key);
    if (strncmp(p, key, n) || strncmp(p + n, " = ", 3))
        return NULL;
    p += n + 3;
    const char *d = strstr(p, " (Default)");
    *dflt = d && !d[10];
    return p;
}

/* A positive integer value (the whole value but " (Default)"), or 0. */
static unsigned long conf_count(const char *v, int dflt)
{
    if (*v < '0' || *v > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno == ERANGE || (dflt ? strcmp(end, " (Default)") : *end != '\0'))
        return 0;
    return x;
}

static void on_comment(void *user, const char *text, size_t line)
{
    (void)line;
    stan_conf *sc = user;
    const char *v;
    int dflt;
    if ((v = conf_value(text, "id", &dflt)) && !dflt) {
        unsigned long id = conf_count(v, 0);
        sc->id = id <= LONG_MAX ? (long)id : 0;
    }
    else if ((v = conf_value(text, "save_warmup", &dflt)))
        sc->save_warmup = !strncmp(v, "1", 1) || !strncmp(v, "true", 4);
    else if ((v = conf_value(text, "num_warmup", &dflt)))
        sc->num_warmup = conf_count(v, dflt);
    else if ((v = conf_value(text, "thin", &dflt)))
        sc->thin = conf_count(v, dflt);
}

/* A CmdStan name as the draws_df layout spells it: NAME.I.J -> NAME[I,J]
 * (posterior's reading of Stan's names), a sampled parameter's NAME_WITH_
 * UNDERSCORES -> the sidecar's "origin" parameter it stands for (hmc
 * writes a parameter's '.' and other characters as '_'), anything else as
 * it is.  NULL when out of memory. */
static char *stan_name(const char *name, const json_t *params)
{
    const char *dot = strchr(name, '.');
    int indexed = dot && dot > name;
    for (const char *p = dot; indexed && *p; p++)
        indexed = *p == '.' ? p[1] >= '0' && p[1] <= '9' : *p >= '0' && *p <= '9';
    if (indexed) {
        char *out = gmm_strdup(name);
        if (!out)
            return NULL;
        char *q = out + (dot - name);
        *q = '[';
        while (*++q)
            if (*q == '.')
                *q = ',';
        size_t len = strlen(out);
        char *grown = gmm_realloc(out, len + 2, 1);
        if (!grown) {
            gmm_free(out);
            return NULL;
        }
        memcpy(grown + len, "]", 2);
        return grown;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        if (!json_is_string(v))
            continue;  /* fixed: not a column */
        const char *a = key, *b = name;
        for (; *a && *b; a++, b++)
            if (*b != ((*a >= '0' && *a <= '9') || (*a >= 'a' && *a <= 'z') ||
                               (*a >= 'A' && *a <= 'Z') || *a == '_'
                           ? *a
                           : '_'))
                break;
        if (!*a && !*b)
            return gmm_strdup(key);
    }
    return gmm_strdup(name);
}

/* The "parameters" of the sidecar of CmdStan file `path` (a new reference,
 * or NULL when there is none). */
static gmm_status sidecar_params(const char *path, json_t **out)
{
    json_t *o = NULL;
    *out = NULL;
    gmm_status s = gmm_draws_origin_read(path, &o);
    if (s == GMM_OK && o) {
        json_t *p = json_object_get(o, "parameters");
        if (json_is_object(p))
            *out = json_incref(p);
    }
    json_decref(o);
    return s;
}

/* One file's chains into new chunks.  A file with a column .chain is in
 * the draws_df layout; one without, with lp__, is CmdStan's output CSV:
 * one chain, whose id is its `# id = N` line or else the file's position
 * among the paths (CmdStanPy's and ArviZ's reading), and whose names are
 * translated (stan_name). */
static gmm_status read_file(reader *r, size_t file)
{
    gmm_table *t = NULL;
    size_t *col = NULL, chain_col = 0, lp_col;
    idrow *ir = NULL;
    double *buf = NULL;
    char **hdr = NULL;
    json_t *params = NULL;
    stan_conf sc = {0, 0, 0, 1, 0};
    gmm_table_opts opts = {1, on_comment, &sc};
    gmm_status st = gmm_table_read_opts(r->paths[file], &opts, &t);
    if (st != GMM_OK)
        return st;
    int stan = 0;
    if (gmm_table_column(t, ".chain", &chain_col) != GMM_OK) {
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        stan = gmm_table_column(t, "lp__", &lp_col) == GMM_OK;
        if (!stan) {
            st = gmm_error(GMM_EPARSE, "%s (nor lp__: not CmdStan's CSV either)", why);
            goto done;
        }
    }
    if (r->stan >= 0 && stan != r->stan) {
        st = gmm_error(GMM_EPARSE, "%s: %s, %s is %s: give files of one format", t->file,
                       stan ? "CmdStan's CSV (no column .chain)" : "a draws_df CSV (.chain)",
                       shown(r->paths[0]), stan ? "a draws_df CSV" : "CmdStan's CSV");
        goto done;
    }
    r->stan = stan;
    col = gmm_malloc(t->ncol, sizeof *col);
    hdr = gmm_calloc(t->ncol, sizeof *hdr);
    if (!col || !hdr) {
        st = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    if (stan && (st = sidecar_params(r->paths[file], &params)) != GMM_OK)
        goto done;
    for (size_t c = 0; c < t->ncol; c++)
        if (!(hdr[c] = stan ? stan_name(t->header[c], params) : gmm_strdup(t->header[c]))) {
            st = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
    if ((st = match_columns(r, t, hdr, file, col)) != GMM_OK)
        goto done;
    /* CmdStan's save_warmup: the warm-up's rows come first (as many as
     * CmdStanPy drops: ceil(num_warmup / thin)) */
    if (stan && sc.save_warmup)
        sc.skip = sc.thin ? (sc.num_warmup + sc.thin - 1) / sc.thin : 0;
    if (sc.skip > t->nrow) {
        st = gmm_error(GMM_EPARSE, "%s: save_warmup with num_warmup = %zu, thin = %zu: %zu "
                       "warm-up rows, but the file has %zu", t->file, sc.num_warmup, sc.thin,
                       sc.skip, t->nrow);
        goto done;
    }
    size_t nrow = t->nrow - sc.skip;
    if (nrow == 0) {
        st = gmm_error(GMM_EPARSE, "%s: no draws%s", t->file,
                       sc.skip ? " (only the warm-up's: save_warmup)" : "");
        goto done;
    }

    ir = gmm_malloc(nrow, sizeof *ir);
    buf = gmm_malloc(t->nrow, sizeof *buf); /* a whole column, warm-up rows too */
    if (!ir || !buf) {
        st = gmm_error(GMM_ENOMEM, "out of memory reading %s", t->file);
        goto done;
    }
    for (size_t i = 0; stan && i < nrow; i++)
        ir[i] = (idrow){sc.id ? sc.id : (long)file + 1, sc.skip + i};
    for (size_t i = 0; !stan && i < nrow; i++) {
        ir[i].row = i;
        if (parse_chain_id(t->cell[i][chain_col], &ir[i].id) != 0) {
            st = gmm_error_at(GMM_EPARSE, i, "%s:%zu: column '.chain': '%s' is not a positive integer",
                              t->file, t->line[i], t->cell[i][chain_col]);
            goto done;
        }
    }
    qsort(ir, nrow, sizeof *ir, cmp_idrow);

    /* One chunk per run of equal ids. */
    size_t first_chunk = r->nchunk;
    for (size_t a = 0, b; a < nrow; a = b) {
        for (b = a + 1; b < nrow && ir[b].id == ir[a].id; b++)
            ;
        if (r->nchunk == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 8;
            chunk *c = gmm_realloc(r->chunks, cap, sizeof *c);
            if (!c) {
                st = gmm_error(GMM_ENOMEM, "out of memory");
                goto done;
            }
            r->chunks = c;
            r->cap = cap;
        }
        chunk *c = &r->chunks[r->nchunk];
        c->id = ir[a].id;
        c->file = file;
        c->line = t->line[ir[a].row];
        c->nrow = b - a;
        c->x = gmm_malloc(r->nvar * c->nrow, sizeof *c->x);
        if (!c->x) {
            st = gmm_error(GMM_ENOMEM, "out of memory reading %s", t->file);
            goto done;
        }
        r->nchunk++;
    }
    for (size_t v = 0; v < r->nvar; v++) {
        if ((st = gmm_table_column_double(t, col[v], 1, buf)) != GMM_OK)
            goto done;
        size_t k = first_chunk, j = 0;
        for (size_t i = 0; i < nrow; i++, j++) {
            if (j == r->chunks[k].nrow) {
                k++;
                j = 0;
            }
            r->chunks[k].x[v * r->chunks[k].nrow + j] = buf[ir[i].row];
        }
    }

done:
    for (size_t c = 0; hdr && c < t->ncol; c++)
        gmm_free(hdr[c]);
    gmm_free(hdr);
    json_decref(params);
    gmm_free(buf);
    gmm_free(ir);
    gmm_free(col);
    gmm_table_free(t);
    return st;
}

/* Sorted chunks into d: clashes, equal lengths, one array. */
static gmm_status assemble(reader *r, gmm_draws *d)
{
    chunk *c = r->chunks;
    qsort(c, r->nchunk, sizeof *c, cmp_chunk);
    for (size_t k = 1; k < r->nchunk; k++)
        if (c[k].id == c[k - 1].id)
            return gmm_error(GMM_EPARSE, "%s:%zu: chain %ld is also in %s",
                             shown(r->paths[c[k].file]), c[k].line, c[k].id,
                             shown(r->paths[c[k - 1].file]));
    size_t lo = 0, hi = 0;
    for (size_t k = 1; k < r->nchunk; k++) {
        if (c[k].nrow < c[lo].nrow)
            lo = k;
        if (c[k].nrow > c[hi].nrow)
            hi = k;
    }
    if (c[lo].nrow != c[hi].nrow)
        return gmm_error(GMM_EPARSE,
                         "chains of different lengths: chain %ld has %zu draws (%s), chain %ld "
                         "has %zu (%s)",
                         c[lo].id, c[lo].nrow, shown(r->paths[c[lo].file]), c[hi].id, c[hi].nrow,
                         shown(r->paths[c[hi].file]));
    d->nvar = r->nvar;
    d->nchain = r->nchunk;
    d->niter = c[0].nrow;
    d->chain = gmm_malloc(d->nchain, sizeof *d->chain);
    d->x = gmm_malloc(d->nvar * d->nchain, d->niter * sizeof *d->x);
    if (!d->chain || !d->x)
        return gmm_error(GMM_ENOMEM, "out of memory for %zu variables x %zu chains x %zu draws",
                         d->nvar, d->nchain, d->niter);
    for (size_t k = 0; k < d->nchain; k++) {
        d->chain[k] = c[k].id;
        for (size_t v = 0; v < d->nvar; v++)
            memcpy(d->x + (v * d->nchain + k) * d->niter, c[k].x + v * d->niter,
                   d->niter * sizeof *d->x);
    }
    return GMM_OK;
}

gmm_status gmm_draws_read(const char *const *paths, size_t npath, gmm_draws **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_draws_read: NULL argument");
    *out = NULL;
    if (!paths || npath == 0)
        return gmm_error(GMM_EINVAL, "gmm_draws_read: no files");
    for (size_t f = 0; f < npath; f++)
        if (!paths[f])
            return gmm_error(GMM_EINVAL, "gmm_draws_read: NULL path");

    reader r = {.paths = paths, .stan = -1};
    gmm_draws *d = gmm_calloc(1, sizeof *d);
    gmm_status st = d ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t f = 0; st == GMM_OK && f < npath; f++)
        st = read_file(&r, f);
    if (st == GMM_OK)
        st = assemble(&r, d);
    if (st == GMM_OK) {
        d->name = r.name;
        d->stan = r.stan;
        r.name = NULL;
        *out = d;
        d = NULL;
    }
    for (size_t k = 0; k < r.nchunk; k++)
        gmm_free(r.chunks[k].x);
    gmm_free(r.chunks);
    gmm_free(r.by_name);
    if (r.name)
        for (size_t v = 0; v < r.nvar; v++)
            gmm_free(r.name[v]);
    gmm_free(r.name);
    gmm_draws_free(d);
    return st;
}

void gmm_draws_free(gmm_draws *d)
{
    if (!d)
        return;
    if (d->name)
        for (size_t v = 0; v < d->nvar; v++)
            gmm_free(d->name[v]);
    gmm_free(d->name);
    gmm_free(d->chain);
    gmm_free(d->x);
    gmm_free(d);
}

const double *gmm_draws_variable(const gmm_draws *d, size_t v)
{
    return d && v < d->nvar ? d->x + v * d->nchain * d->niter : NULL;
}
