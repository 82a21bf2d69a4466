/* stack_slots.c -- the building blocks every component of the stacked
 * latent shares (stack_impl.h): its structure's arrays, a slot, and the
 * search of sorted values.  Below the components' files (stack_comp.c,
 * stack_ts.c, stack_kron.c), which call it and nothing of each other but
 * the dispatch in stack_comp.c. */
#include <stdint.h>

#include "gmm/alloc.h"
#include "stack_impl.h"

gmm_status stack_comp_arrays(stack_comp *c, size_t cap, size_t ncon, size_t nent)
{
    c->null_start = gmm_calloc(ncon + 1, sizeof *c->null_start);
    c->null_latent = gmm_malloc(2 * nent + 1, sizeof *c->null_latent);
    c->null_value = gmm_malloc(2 * nent + 1, sizeof *c->null_value);
    c->null_is_b = gmm_calloc(2 * nent + 1, sizeof *c->null_is_b);
    if (!c->null_start || !c->null_latent || !c->null_value || !c->null_is_b)
        return gmm_error(GMM_ENOMEM, "out of memory for the structure of '%s'", c->name);
    size_t s = cap ? cap : 1;
    c->slot_row = gmm_malloc(s, sizeof *c->slot_row);
    c->slot_col = gmm_malloc(s, sizeof *c->slot_col);
    c->slot_group = gmm_malloc(s, sizeof *c->slot_group);
    c->slot_value = gmm_malloc(s, sizeof *c->slot_value);
    c->joint_row = gmm_malloc(s, sizeof *c->joint_row);
    c->joint_col = gmm_malloc(s, sizeof *c->joint_col);
    c->con_start = gmm_calloc(ncon + 1, sizeof *c->con_start);
    c->con_pin = gmm_malloc(ncon ? ncon : 1, sizeof *c->con_pin);
    c->con_latent = gmm_malloc(nent ? nent : 1, sizeof *c->con_latent);
    c->con_value = gmm_malloc(nent ? nent : 1, sizeof *c->con_value);
    if (!c->slot_row || !c->slot_col || !c->slot_group || !c->slot_value || !c->joint_row ||
        !c->joint_col || !c->con_start || !c->con_pin || !c->con_latent || !c->con_value)
        return gmm_error(GMM_ENOMEM, "out of memory for the structure of '%s'", c->name);
    return GMM_OK;
}

void stack_comp_slot(stack_comp *c, size_t i, size_t j, double v, size_t g)
{
    size_t k = c->nslot++;
    c->slot_row[k] = i > j ? i : j;
    c->slot_col[k] = i > j ? j : i;
    c->slot_value[k] = v;
    c->slot_group[k] = g;
}

size_t stack_lower_bound(const double *val, size_t m, double t)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (val[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

