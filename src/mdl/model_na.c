/* model_na.c -- rows with a missing value in a column the model uses, dropped
 * before the columns are read, as R's default na.action (na.omit) does.
 *
 * The columns: every column the formula reads
 * (gmm_mdl_impl_formula_columns: terms' indices, an a:b grouping's factors,
 * fixed terms, offsets, random-effect slopes, group= and replicate=), a state-space model's input and a graph model's node
 * column, and -- only where the outcome is observed -- the prior weights.
 * A missing outcome is not a reason to drop a row: it marks a row to
 * predict (held out), whose weight is not read either.  A missing exposure
 * (trials) of an observed outcome stays the error it was before rows were
 * dropped (load_data): the outcome is a count over it, a broken row rather
 * than an unmeasured covariate.  The kept rows keep their source lines (gmm_table_keep_rows),
 * so later messages still name the file's lines. */
#include "model_build.h"

#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"

/* Flag column `name` of t in use[] (ignored when t has none: reading the
 * column later says so with the table's own message). */
static void use(const gmm_table *t, const char *name, unsigned char *use_col, unsigned char flag)
{
    size_t c;
    for (c = 0; name && c < t->ncol; c++)
        if (!strcmp(t->header[c], name)) {
            use_col[c] |= flag;
            return;
        }
}

typedef struct {
    const gmm_table *t;
    unsigned char *col, flag;
} use_ctx;

static void use_formula(const char *name, void *ctx)
{
    use_ctx *u = ctx;
    use(u->t, name, u->col, u->flag);
}

gmm_status gmm_mdl_impl_omit_missing(gmm_mdl *m, const gmm_model_desc *d, gmm_table *t,
                                     size_t *dropped)
{
    enum { ALWAYS = 1, OBSERVED = 2 };
    *dropped = 0;
    size_t nc = t->ncol ? t->ncol : 1, nr = t->nrow ? t->nrow : 1;
    unsigned char *col = gmm_calloc(nc, 1), *keep = gmm_malloc(nr, 1);
    if (!col || !keep) {
        gmm_free(col);
        gmm_free(keep);
        return gmm_error(GMM_ENOMEM, "out of memory for the data");
    }
    use_ctx u = {t, col, ALWAYS};
    gmm_mdl_impl_formula_columns(m->fm, 1, use_formula, &u);
    if (!m->stack) {
        /* the defaults of load_data: x the first column, y the second */
        if (d->data.node)
            use(t, d->data.node, col, ALWAYS);
        else if (!d->graph && !m->graph)
            use(t, d->data.x ? d->data.x : t->ncol ? t->header[0] : NULL, col, ALWAYS);
    }
    use(t, d->data.weights, col, OBSERVED);
    const char *yname = d->data.y ? d->data.y : t->ncol > 1 ? t->header[1] : NULL;
    size_t cy = t->ncol;
    for (size_t c = 0; yname && c < t->ncol; c++)
        if (!strcmp(t->header[c], yname))
            cy = c;
    if (cy < t->ncol)
        col[cy] = 0; /* a missing outcome marks a row to predict */
    for (size_t r = 0; r < t->nrow; r++) {
        int observed = cy < t->ncol && !gmm_table_cell_missing(t, r, cy);
        keep[r] = 1;
        for (size_t c = 0; c < t->ncol && keep[r]; c++)
            if ((col[c] & ALWAYS || (col[c] & OBSERVED && observed)) &&
                gmm_table_cell_missing(t, r, c))
                keep[r] = 0;
        *dropped += !keep[r];
    }
    if (*dropped)
        gmm_table_keep_rows(t, keep);
    gmm_free(col);
    gmm_free(keep);
    return GMM_OK;
}
