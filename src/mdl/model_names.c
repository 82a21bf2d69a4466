/* model_names.c -- the models a formula's f(NAME, MODEL) term may name: the
 * keyword models (the table below), the kernels (kernel.h's table) and,
 * with graph=, the precision families (gmrf.h's table); and the message
 * for a name that is none of them, which lists all three tables and
 * suggests the nearest names (restricted Damerau-Levenshtein distance,
 * case ignored), so that the list cannot drift from what is accepted. */
#include "model_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gmm/gmrf.h"
#include "gmm/kernel.h"

/* The keyword models: iid and the intrinsic ones, with their parameters
 * (f.NAME.variance, f.NAME.phi, f.NAME.rho: stack.h), each a key of f()
 * for its start value; unit: 1 in (0, 1), 2 in (-1, 1), 0 in (0, inf). */
typedef struct {
    const char *key;
    int unit;
} term_param;
static const struct {
    const char *name;
    gmm_stack_model kind;
    const char *about;
    term_param param[2];
} term_models[] = {
    {"iid", GMM_STACK_IID, "one N(0, variance) effect per level", {{"variance", 0}}},
    {"rw1", GMM_STACK_RW1, "random walk over the sorted values", {{"variance", 0}}},
    {"rw2", GMM_STACK_RW2, "integrated random walk (a smoothing spline)", {{"variance", 0}}},
    {"besag", GMM_STACK_BESAG, "intrinsic CAR on the nodes of graph=EDGES.csv",
     {{"variance", 0}}},
    {"bym2", GMM_STACK_BYM2, "besag + iid mixed by phi, on graph=EDGES.csv",
     {{"variance", 0}, {"phi", 1}}},
    {"ar1", GMM_STACK_AR1, "stationary AR(1) over integer positions",
     {{"variance", 0}, {"rho", 2}}},
    {"seasonal", GMM_STACK_SEASONAL, "every period=M consecutive values sum to N(0, variance)",
     {{"variance", 0}}},
    {"corr", GMM_STACK_CORR, "correlated effects per level: (1 + x | g)",
     {{NULL, 0}}},
};
#define NTERM (sizeof term_models / sizeof term_models[0])
/* The last row, corr, is written with lme4's bars (formula_bars.c): not
 * an f() model, so not listed nor suggested, and matched for bar terms
 * only. */
#define NLISTED (NTERM - 1)

/* Names of other tools' models, and the one here that is the same process. */
static const struct {
    const char *name, *instead;
} aliases[] = {
    {"ou", "'matern12' (the Ornstein-Uhlenbeck process)"},
};

const char *gmm_mdl_term_model(size_t i, const char **about)
{
    if (i >= NLISTED)
        return NULL;
    if (about)
        *about = term_models[i].about;
    return term_models[i].name;
}

int gmm_mdl_impl_term_model(const gmm_formula_latent *t)
{
    for (size_t k = 0; !t->quoted && k < NTERM; k++)
        if (!strcmp(t->model, term_models[k].name) && (k < NLISTED || t->bar))
            return (int)k;
    return -1;
}

gmm_stack_model gmm_mdl_impl_term_kind(int k) { return term_models[k].kind; }

const char *gmm_mdl_impl_term_param(int k, size_t i, int *unit)
{
    const term_param *p = i < 2 && term_models[k].param[i].key ? &term_models[k].param[i] : NULL;
    if (unit)
        *unit = p ? p->unit : 0;
    return p ? p->key : NULL;
}

/* The distance between a and b, case ignored: an insertion, a deletion, a
 * substitution or a swap of neighbours counts 1.  Names of 64 bytes or more
 * are far from everything. */
static size_t distance(const char *a, const char *b)
{
    enum { MAX = 64 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= MAX || lb >= MAX)
        return (size_t)-1;
    size_t d[MAX][MAX];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t v = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* The i-th name of the three tables (keywords, kernels, precisions; NULL
 * past the end); *table says which (0, 1, 2). */
static const char *name_at(size_t i, int *table)
{
    if (i < NLISTED) {
        *table = 0;
        return term_models[i].name;
    }
    i -= NLISTED;
    size_t nk = 0;
    while (gmm_kernel_type_at(nk))
        nk++;
    *table = i < nk ? 1 : 2;
    return i < nk ? gmm_kernel_type_at(i)->name : gmm_gmrf_family_at(i - nk);
}

/* "; did you mean 'a' or 'b'?" for the names nearest to `name` (at most 1
 * edit away for a name of up to 4 characters, 2 for a longer one), or "". */
static void suggest(const char *name, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t a = 0; a < sizeof aliases / sizeof aliases[0]; a++)
        if (!distance(name, aliases[a].name)) {
            snprintf(buf, size, "; did you mean %s?", aliases[a].instead);
            return;
        }
    size_t best = strlen(name) <= 4 ? 1 : 2;
    int table;
    const char *nm;
    for (size_t i = 0; (nm = name_at(i, &table)); i++)
        if (distance(name, nm) < best)
            best = distance(name, nm);
    const char *near[3];
    size_t nnear = 0;
    for (size_t i = 0; (nm = name_at(i, &table)) && nnear < 3; i++) {
        int seen = 0;
        for (size_t k = 0; k < nnear; k++)
            seen |= !strcmp(near[k], nm);
        if (!seen && distance(name, nm) == best && strlen(nm) > best)
            near[nnear++] = nm;
    }
    if (!nnear)
        return;
    size_t at = (size_t)snprintf(buf, size, "; did you mean '%s'", near[0]);
    for (size_t k = 1; k < nnear && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s'%s'", k + 1 < nnear ? ", " : " or ",
                               near[k]);
    if (at < size)
        snprintf(buf + at, size - at, "?");
}

/* The names of table `which`, comma-separated, appended at buf + *at. */
static void list(int which, char *buf, size_t size, size_t *at)
{
    int table, first = 1;
    const char *nm;
    for (size_t i = 0; (nm = name_at(i, &table)) && *at < size; i++)
        if (table == which) {
            *at += (size_t)snprintf(buf + *at, size - *at, "%s%s", first ? "" : ", ", nm);
            first = 0;
        }
}

int gmm_mdl_impl_model_unknown(const gmm_formula_latent *t, char *msg, size_t size)
{
    const char *m = t->model;
    if (t->bar) /* lme4's bars name their own models (formula_bars.c) */
        return 0;
    /* a spec with more than a name in it: the spec's own errors */
    if (!*m || strspn(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                   strlen(m))
        return 0;
    int graph = gmm_formula_arg_find(t, "graph", NULL) != NULL, table = -1;
    const char *nm;
    for (size_t i = 0; (nm = name_at(i, &table)); i++)
        if (!strcmp(m, nm) && ((table == 0 && !t->quoted) || (table == 1 && !graph) ||
                               (table == 2 && graph)))
            return 0;
    /* the name of another context */
    for (size_t i = 0; (nm = name_at(i, &table)); i++) {
        if (strcmp(m, nm))
            continue;
        if (table == 0)
            snprintf(msg, size, "formula: '%s' in quotes is a %s spec; the model %s is written "
                                "without quotes (f(%s, %s))",
                     m, graph ? "precision" : "kernel", m, t->name, m);
        else if (table == 1)
            snprintf(msg, size, "formula: '%s' is a kernel: with graph= the model is a "
                                "precision (f(%s, 'PRECISION', graph=EDGES.csv))",
                     m, t->name);
        else
            snprintf(msg, size, "formula: '%s' is a graph precision: it needs graph=EDGES.csv",
                     m);
        return 1;
    }
    char hint[160];
    suggest(m, hint, sizeof hint);
    size_t at = (size_t)snprintf(msg, size, "formula: unknown model '%s'%s (models: ", m, hint);
    list(0, msg, size, &at);
    if (at < size)
        at += (size_t)snprintf(msg + at, size - at, "; a kernel spec: ");
    list(1, msg, size, &at);
    if (at < size)
        at += (size_t)snprintf(msg + at, size - at, "; with graph=, a precision spec: ");
    list(2, msg, size, &at);
    if (at < size)
        snprintf(msg + at, size - at, ")");
    return 1;
}
