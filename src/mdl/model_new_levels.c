/* model_new_levels.c -- the rows of new data (gmm_mdl_rows_read) whose
 * level of an iid term the model's data do not have (model.h): a new group,
 * whose effect a prediction takes from the term's prior, N(0, variance), as
 * lme4's allow.new.levels = TRUE does.  The caller says so. */
#include "model_impl.h"

#include <math.h>
#include <string.h>

/* The value of the parameter named f.NAME.variance (its index in *k). */
static int variance_of(const gmm_mdl *m, const char *name, size_t *k)
{
    const gmm_objective *o = m->obj;
    size_t len = strlen(name);
    for (size_t i = 0; i < o->nparam; i++) {
        const char *p = o->name[i];
        if (!strncmp(p, "f.", 2) && !strncmp(p + 2, name, len) && !strcmp(p + 2 + len, ".variance")) {
            *k = i;
            return 1;
        }
    }
    return 0;
}

void gmm_mdl_test_new_levels(const gmm_mdl *m, const gmm_mdl_test *t, gmm_mdl_new_levels *out)
{
    memset(out, 0, sizeof *out);
    size_t K = m->nterm;
    for (size_t r = 0; r < t->n; r++) {
        size_t col = t->table->ncol, k0 = 0;
        if (!m->stack && !t->sat && t->site[r] == GMM_MDL_NEW_LEVEL) {
            col = t->col_site; /* a single iid term: its variance is the first parameter */
        } else if (t->sat) {
            for (size_t k = 0; k < K && col == t->table->ncol; k++)
                if (gmm_latent_stack_kind(m->lat, k) == GMM_STACK_IID &&
                    t->sat[r * K + k].level == GMM_NO_INDEX &&
                    gmm_table_column(t->table, m->fm->latent[k].name, &col) == GMM_OK)
                    k0 = k;
        }
        if (col >= t->table->ncol || out->nrow++)
            continue;
        size_t p = 0;
        out->first = r;
        out->column = t->table->header[col];
        out->level = t->table->cell[r][col];
        /* a term's parameters are named by its label (lme4's g.1 for a
         * repeated grouping), else by its column */
        const gmm_formula_latent *l = t->sat ? &m->fm->latent[k0] : NULL;
        if (l && !variance_of(m, l->label ? l->label : l->name, &p)) {
            out->param = NULL; /* none found: say nothing wrong */
            out->variance = NAN;
            continue;
        }
        out->param = m->obj->name[p];
        out->variance = m->obj->value[p];
    }
}
