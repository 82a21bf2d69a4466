/* kernel.c -- the kernel type table and composite kernels: a tree of sums and
 * (binary) products over kernel factors (kernel_impl.h), built from a parsed
 * spec, its parameter vector, names, defaults and format.  The numerics of
 * the whole tree -- its covariance function, its state space and the reverse
 * mode -- are kernel_eval.c; each factor's own are its type's
 * (kernel_matern.c, kernel_periodic.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "kernel_impl.h"

static const gmm_kernel_type *const type_table[] = {
    &gmm_kernel_matern12, &gmm_kernel_matern32, &gmm_kernel_matern52,
    &gmm_kernel_cosine,   &gmm_kernel_constant, &gmm_kernel_periodic,
    &gmm_kernel_quasiperiodic,
};
#define NTYPES (sizeof type_table / sizeof type_table[0])

const gmm_kernel_type *gmm_kernel_type_find(const char *name)
{
    for (size_t i = 0; name && i < NTYPES; i++)
        if (strcmp(type_table[i]->name, name) == 0)
            return type_table[i];
    return NULL;
}

const gmm_kernel_type *gmm_kernel_type_at(size_t i) { return i < NTYPES ? type_table[i] : NULL; }

/* ---- the tree ---------------------------------------------------------------- */

static void node_free(knode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nchild; i++)
        node_free(n->child[i]);
    gmm_free(n->child);
    gmm_free(n);
}

static knode *node_new(kn_op op, size_t nchild)
{
    knode *n = gmm_calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->op = op;
    if (nchild) {
        n->child = gmm_calloc(nchild, sizeof *n->child);
        if (!n->child) {
            gmm_free(n);
            return NULL;
        }
    }
    n->nchild = nchild;
    return n;
}

static const char *type_names(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NTYPES && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "",
                                type_table[i]->name);
    return buf;
}

static const char *param_names(const gmm_kernel_type *t, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < t->nparam && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", t->param[i].name);
    return buf;
}

static gmm_status build_leaf(const gmm_spec_node *s, knode *n, double *vals)
{
    char buf[256];
    const gmm_kernel_type *t = gmm_kernel_type_find(s->name);
    if (!t)
        return gmm_error_at(GMM_EPARSE, s->pos, "unknown kernel '%s' (kernels: %s)",
                            s->name ? s->name : "", type_names(buf, sizeof buf));
    n->type = t;
    int seen[GMM_KERNEL_MAXPARAM] = {0};
    for (size_t i = 0; i < t->nparam; i++) {
        vals[i] = NAN;
        n->sval[i] = t->param[i].structural ? 2.0 : NAN; /* GMM_KDEF_HARMONICS */
    }
    for (size_t a = 0; a < s->narg; a++) {
        const gmm_spec_arg *g = &s->arg[a];
        size_t i = 0;
        while (i < t->nparam && strcmp(t->param[i].name, g->key) != 0)
            i++;
        if (i == t->nparam)
            return gmm_error_at(GMM_EPARSE, g->pos,
                                "unknown parameter '%s' of %s (parameters: %s)", g->key,
                                t->name, param_names(t, buf, sizeof buf));
        if (seen[i]++)
            return gmm_error_at(GMM_EPARSE, g->pos, "parameter '%s' given twice", g->key);
        if (t->param[i].structural) {
            if (!(g->value >= 1.0 && g->value <= GMM_KERNEL_MAXHARMONICS)
                || g->value != floor(g->value))
                return gmm_error_at(GMM_EPARSE, g->pos,
                                    "%s must be an integer in 1..%d (got %g)", g->key,
                                    GMM_KERNEL_MAXHARMONICS, g->value);
            n->sval[i] = g->value;
        } else {
            if (!(g->value > 0.0) || !isfinite(g->value))
                return gmm_error_at(GMM_EPARSE, g->pos,
                                    "%s must be positive and finite (got %g)", g->key,
                                    g->value);
            vals[i] = g->value;
        }
    }
    double p[GMM_KERNEL_MAXPARAM];
    for (size_t i = 0; i < t->nparam; i++)
        p[i] = n->sval[i];
    n->d = t->dim(p);
    return GMM_OK;
}

/* Count leaves and continuous parameters of a spec (validating node types). */
static gmm_status spec_count(const gmm_spec_node *s, size_t *nleaves, size_t *nparam)
{
    if (!s)
        return gmm_error(GMM_EINVAL, "empty kernel spec");
    if (s->type == GMM_SPEC_FACTOR) {
        const gmm_kernel_type *t = gmm_kernel_type_find(s->name);
        (*nleaves)++;
        if (t)
            for (size_t i = 0; i < t->nparam; i++)
                *nparam += !t->param[i].structural;
        return GMM_OK;
    }
    if (s->nchild == 0)
        return gmm_error_at(GMM_EPARSE, s->pos, "empty sum or product");
    for (size_t i = 0; i < s->nchild; i++) {
        gmm_status st = spec_count(s->child[i], nleaves, nparam);
        if (st)
            return st;
    }
    return GMM_OK;
}

typedef struct {
    gmm_kernel *k;
    size_t leaf, par;
} build_ctx;

static gmm_status build(const gmm_spec_node *s, build_ctx *c, int first, knode **out)
{
    gmm_status st = GMM_OK;
    knode *n = NULL;
    *out = NULL;
    if (s->type == GMM_SPEC_FACTOR) {
        n = node_new(KN_LEAF, 0);
        if (!n)
            return gmm_error(GMM_ENOMEM, "out of memory building the kernel");
        double vals[GMM_KERNEL_MAXPARAM];
        st = build_leaf(s, n, vals);
        if (st)
            goto fail;
        n->leaf = c->leaf;
        n->var_first = first;
        c->k->leaves[c->leaf++] = n;
        for (size_t i = 0; i < n->type->nparam; i++) {
            n->tix[i] = SIZE_MAX;
            if (n->type->param[i].structural)
                continue;
            char name[128];
            snprintf(name, sizeof name, "%zu.%s.%s", n->leaf, n->type->name,
                     n->type->param[i].name);
            size_t len = strlen(name) + 1;
            c->k->name[c->par] = gmm_malloc(len, 1);
            if (!c->k->name[c->par]) {
                st = gmm_error(GMM_ENOMEM, "out of memory building the kernel");
                goto fail;
            }
            memcpy(c->k->name[c->par], name, len);
            c->k->value[c->par] = vals[i];
            n->tix[i] = c->par++;
        }
        *out = n;
        return GMM_OK;
    }
    if (s->nchild == 1)
        return build(s->child[0], c, first, out);
    if (s->type == GMM_SPEC_SUM) {
        n = node_new(KN_SUM, s->nchild);
        if (!n)
            return gmm_error(GMM_ENOMEM, "out of memory building the kernel");
        for (size_t i = 0; i < s->nchild; i++) {
            st = build(s->child[i], c, first, &n->child[i]);
            if (st)
                goto fail;
            n->d += n->child[i]->d;
            if (n->d > GMM_KERNEL_MAXDIM) {
                st = gmm_error_at(GMM_EPARSE, s->child[i]->pos,
                                  "the kernel's state dimension reaches %zu here, over the limit "
                                  "%d (each term adds its own state)",
                                  n->d, GMM_KERNEL_MAXDIM);
                goto fail;
            }
        }
        *out = n;
        return GMM_OK;
    }
    /* product: fold left into binary nodes */
    knode *acc = NULL;
    st = build(s->child[0], c, first, &acc);
    if (st)
        return st;
    for (size_t i = 1; i < s->nchild; i++) {
        n = node_new(KN_PROD, 2);
        if (!n) {
            node_free(acc);
            return gmm_error(GMM_ENOMEM, "out of memory building the kernel");
        }
        n->child[0] = acc;
        acc = n;
        st = build(s->child[i], c, 0, &n->child[1]);
        if (st)
            goto fail;
        /* checked before multiplying: a product of 64 factors overflows */
        size_t d0 = n->child[0]->d, d1 = n->child[1]->d;
        if (d1 && d0 > GMM_KERNEL_MAXDIM / d1) {
            st = gmm_error_at(GMM_EPARSE, s->child[i]->pos,
                              "the product's state dimension would be %.4g here, over the limit "
                              "%d (a product multiplies its factors' state dimensions)",
                              (double)d0 * (double)d1, GMM_KERNEL_MAXDIM);
            goto fail;
        }
        n->d = d0 * d1;
    }
    *out = acc;
    return GMM_OK;
fail:
    node_free(n);
    return st;
}

/* Q(dt) positive definite for dt > 0: a factor with process noise; a sum of
 * such; a product with at least one such factor (Q = Q_L (x) P_R + M_L (x)
 * Q_R >= either term, M_L = A_L P_L A_L^T being positive definite). */
static int is_noisy(const knode *n)
{
    if (n->op == KN_LEAF)
        return !n->type->zero_noise;
    int any = 0, all = 1;
    for (size_t i = 0; i < n->nchild; i++) {
        int c = is_noisy(n->child[i]);
        any |= c;
        all &= c;
    }
    return n->op == KN_SUM ? all : any;
}

/* Damp exactly the zero-noise factors not covered by a noisy product above
 * them: only those terms of the kernel have Q = 0. */
static void mark_damped(knode *n, int covered)
{
    if (n->op == KN_LEAF) {
        n->damped = !covered && n->type->zero_noise;
        n->demod = n->damped && n->type->hmod != NULL;
        return;
    }
    int c = covered || (n->op == KN_PROD && is_noisy(n));
    for (size_t i = 0; i < n->nchild; i++)
        mark_damped(n->child[i], c);
}

static int has_oscillator(const knode *n)
{
    if (n->op == KN_LEAF)
        return n->type->zero_noise && n->type->hmod != NULL;
    for (size_t i = 0; i < n->nchild; i++)
        if (has_oscillator(n->child[i]))
            return 1;
    return 0;
}

/* Conservatively: every leaf of a product subtree that holds an oscillator. */
static void mark_osc(knode *n, int under)
{
    if (n->op == KN_LEAF) {
        n->osc_partner = under;
        return;
    }
    int u = under || (n->op == KN_PROD && has_oscillator(n));
    for (size_t i = 0; i < n->nchild; i++)
        mark_osc(n->child[i], u);
}

/* Z: the largest number of damped zero-noise factors multiplied together in any
 * term of the expanded kernel (sums: max over children, products: sum). */
static size_t zero_noise_depth(const knode *n)
{
    if (n->op == KN_LEAF)
        return n->damped ? 1 : 0;
    size_t z = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        size_t c = zero_noise_depth(n->child[i]);
        z = n->op == KN_SUM ? (c > z ? c : z) : z + c;
    }
    return z;
}

/* Lay out the work arena: offsets for every node. */
static void layout(knode *n, size_t *off)
{
    size_t dd = n->d * n->d;
    n->oA = *off;
    *off += dd;
    n->oQ = *off;
    *off += dd;
    n->oP = *off;
    *off += dd;
    n->oH = *off;
    *off += n->d;
    n->oAb = *off;
    *off += dd;
    n->oQb = *off;
    *off += dd;
    n->oPb = *off;
    *off += dd;
    n->oHt = *off;
    *off += n->d;
    n->oHb = *off;
    *off += n->d;
    if (n->op == KN_LEAF) {
        size_t np = n->type->nparam;
        n->odH = *off;
        *off += np * n->d;
        n->odA = *off;
        *off += np * dd;
        n->odQ = *off;
        *off += np * dd;
        n->odP = *off;
        *off += np * dd;
    } else if (n->op == KN_PROD) {
        size_t dl = n->child[0]->d;
        n->oM = *off;
        *off += dl * dl;
        n->oMb = *off;
        *off += dl * dl;
    }
    for (size_t i = 0; i < n->nchild; i++)
        layout(n->child[i], off);
}

void gmm_kernel_free(gmm_kernel *k)
{
    if (!k)
        return;
    node_free(k->root);
    if (k->name)
        for (size_t i = 0; i < k->nparam; i++)
            gmm_free(k->name[i]);
    gmm_free(k->name);
    gmm_free(k->value);
    gmm_free(k->leaves);
    gmm_free(k);
}

gmm_status gmm_kernel_from_spec(const gmm_spec_node *spec, gmm_kernel **out)
{
    gmm_status st;
    size_t nleaves = 0, nparam = 0;
    gmm_kernel *k = NULL;
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_kernel_from_spec: NULL output");
    *out = NULL;
    st = spec_count(spec, &nleaves, &nparam);
    if (st)
        return st;
    k = gmm_calloc(1, sizeof *k);
    if (!k)
        return gmm_error(GMM_ENOMEM, "out of memory building the kernel");
    k->nleaves = nleaves;
    k->nparam = nparam;
    k->leaves = gmm_calloc(nleaves, sizeof *k->leaves);
    k->name = gmm_calloc(nparam ? nparam : 1, sizeof *k->name);
    k->value = gmm_calloc(nparam ? nparam : 1, sizeof *k->value);
    if (!k->leaves || !k->name || !k->value) {
        st = gmm_error(GMM_ENOMEM, "out of memory building the kernel");
        goto fail;
    }
    build_ctx c = {k, 0, 0};
    st = build(spec, &c, 1, &k->root);
    if (st)
        goto fail;
    k->d = k->root->d;
    mark_damped(k->root, 0);
    mark_osc(k->root, 0);
    for (size_t i = 0; i < nleaves; i++) {
        k->damped_any |= k->leaves[i]->damped;
        k->modulated |= k->leaves[i]->demod;
    }
    size_t Z = zero_noise_depth(k->root);
    k->zweight = Z > 0 ? 1.0 / (double)Z : 1.0;
    size_t off = 0;
    layout(k->root, &off);
    k->arena = off;
    *out = k;
    return GMM_OK;
fail:
    gmm_kernel_free(k);
    return st;
}

size_t gmm_kernel_dim(const gmm_kernel *k) { return k->d; }
size_t gmm_kernel_nparam(const gmm_kernel *k) { return k->nparam; }
size_t gmm_kernel_nleaves(const gmm_kernel *k) { return k->nleaves; }
const char *gmm_kernel_param_name(const gmm_kernel *k, size_t i)
{
    return i < k->nparam ? k->name[i] : NULL;
}
double *gmm_kernel_values(gmm_kernel *k) { return k->value; }
const double *gmm_kernel_values_const(const gmm_kernel *k) { return k->value; }
int gmm_kernel_damped(const gmm_kernel *k) { return k->damped_any; }
int gmm_kernel_modulated(const gmm_kernel *k) { return k->modulated; }

/* Block labels of n's state into blk (n->d), returns their number (0 on out
 * of memory).  Products index their state as (left, right) pairs, i.e.
 * variable a * d_R + c, so the pair of block labels (bl, br) becomes
 * bl * nb_R + br. */
static size_t node_blocks(const knode *n, size_t *blk)
{
    size_t d = n->d;
    if (n->op == KN_LEAF) {
        size_t bs = n->type->block ? n->type->block : d;
        for (size_t i = 0; i < d; i++)
            blk[i] = i / bs;
        return (d + bs - 1) / bs;
    }
    if (n->op == KN_SUM) {
        size_t nb = 0, o = 0;
        for (size_t c = 0; c < n->nchild; c++) {
            size_t nc = node_blocks(n->child[c], blk + o);
            if (nc == 0)
                return 0;
            for (size_t i = 0; i < n->child[c]->d; i++)
                blk[o + i] += nb;
            o += n->child[c]->d;
            nb += nc;
        }
        return nb;
    }
    size_t dl = n->child[0]->d, dr = n->child[1]->d;
    size_t *bl = gmm_malloc(dl + dr, sizeof *bl), nb = 0;
    if (!bl)
        return 0;
    size_t nl = node_blocks(n->child[0], bl), nr = nl ? node_blocks(n->child[1], bl + dl) : 0;
    if (nl && nr) {
        for (size_t a = 0; a < dl; a++)
            for (size_t c = 0; c < dr; c++)
                blk[a * dr + c] = bl[a] * nr + bl[dl + c];
        nb = nl * nr;
    }
    gmm_free(bl);
    return nb;
}

gmm_status gmm_kernel_blocks(const gmm_kernel *k, size_t *block, size_t *nblocks)
{
    if (!k || !block || !nblocks)
        return gmm_error(GMM_EINVAL, "gmm_kernel_blocks: NULL argument");
    size_t nb = node_blocks(k->root, block), d = k->d;
    if (nb == 0)
        return gmm_error(GMM_ENOMEM, "out of memory for the kernel's block structure");
    /* relabel in order of first appearance */
    size_t *map = gmm_malloc(nb, sizeof *map), next = 0;
    if (!map)
        return gmm_error(GMM_ENOMEM, "out of memory for the kernel's block structure");
    for (size_t b = 0; b < nb; b++)
        map[b] = SIZE_MAX;
    for (size_t i = 0; i < d; i++) {
        if (map[block[i]] == SIZE_MAX)
            map[block[i]] = next++;
        block[i] = map[block[i]];
    }
    gmm_free(map);
    *nblocks = next;
    return GMM_OK;
}

/* Per state variable of n, whether it belongs to a term made of damped
 * zero-noise factors only (a product's pair when both are); GMM_ENOMEM. */
static gmm_status node_damped(const knode *n, int *flag)
{
    gmm_status st = GMM_OK;
    if (n->op == KN_LEAF) {
        for (size_t i = 0; i < n->d; i++)
            flag[i] = n->damped;
        return GMM_OK;
    }
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t c = 0; c < n->nchild && !st; c++) {
            st = node_damped(n->child[c], flag + o);
            o += n->child[c]->d;
        }
        return st;
    }
    size_t dl = n->child[0]->d, dr = n->child[1]->d;
    int *tmp = gmm_malloc(dl + dr, sizeof *tmp);
    if (!tmp)
        return gmm_error(GMM_ENOMEM, "out of memory for the kernel's block structure");
    if (!(st = node_damped(n->child[0], tmp)) && !(st = node_damped(n->child[1], tmp + dl)))
        for (size_t a = 0; a < dl; a++)
            for (size_t c = 0; c < dr; c++)
                flag[a * dr + c] = tmp[a] && tmp[dl + c];
    gmm_free(tmp);
    return st;
}

gmm_status gmm_kernel_var_damped(const gmm_kernel *k, int *damped)
{
    if (!k || !damped)
        return gmm_error(GMM_EINVAL, "gmm_kernel_var_damped: NULL argument");
    return node_damped(k->root, damped);
}

gmm_status gmm_kernel_param_find(const gmm_kernel *k, const char *name, size_t *i)
{
    for (size_t j = 0; j < k->nparam; j++)
        if (strcmp(k->name[j], name) == 0) {
            *i = j;
            return GMM_OK;
        }
    return gmm_error(GMM_EINVAL, "no kernel parameter '%s'", name ? name : "");
}

/* ---- defaults ------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sample_variance(const double *y, size_t n, size_t *nobs)
{
    double s = 0.0, s2 = 0.0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i])) {
            s += y[i];
            m++;
        }
    *nobs = m;
    if (m < 2)
        return 1.0;
    double mean = s / (double)m;
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i]))
            s2 += (y[i] - mean) * (y[i] - mean);
    double v = s2 / (double)(m - 1);
    return v > 0.0 && isfinite(v) ? v : 1.0;
}

double gmm_kernel_default_noise(const double *y, size_t n)
{
    size_t m;
    double v = sample_variance(y, n, &m);
    return m < 2 ? 1.0 : 0.1 * v;
}

gmm_status gmm_kernel_fill_defaults(gmm_kernel *k, const double *x, const double *y, size_t n,
                                    int *defaulted)
{
    gmm_status st = GMM_OK;
    double *s = NULL;
    size_t nobs;
    double var = sample_variance(y, n, &nobs), ell = 1.0;
    if (n >= 2) {
        s = gmm_malloc(n, sizeof *s);
        if (!s)
            return gmm_error(GMM_ENOMEM, "out of memory computing defaults");
        memcpy(s, x, n * sizeof *s);
        qsort(s, n, sizeof *s, cmp_double);
        double span = s[n - 1] - s[0];
        size_t m = 0;
        for (size_t i = 1; i < n; i++)
            if (s[i] > s[i - 1])
                s[m++] = s[i] - s[i - 1];
        if (m > 0 && span > 0.0 && isfinite(span)) {
            qsort(s, m, sizeof *s, cmp_double);
            double med = s[m / 2];
            ell = sqrt(med * span);
            if (ell > 50.0 * med)
                ell = 50.0 * med;
        }
    }
    for (size_t l = 0; l < k->nleaves; l++) {
        knode *n_ = k->leaves[l];
        for (size_t i = 0; i < n_->type->nparam; i++) {
            size_t j = n_->tix[i];
            if (j == SIZE_MAX)
                continue;
            if (defaulted)
                defaulted[j] = 0;
            if (!isnan(k->value[j]))
                continue;
            double v = 1.0;
            switch (n_->type->param[i].def) {
            case GMM_KDEF_VARIANCE: v = n_->var_first ? var : 1.0; break;
            case GMM_KDEF_LENGTHSCALE: v = ell; break;
            case GMM_KDEF_ONE: v = 1.0; break;
            case GMM_KDEF_HARMONICS: v = 2.0; break;
            }
            k->value[j] = v;
            if (defaulted)
                defaulted[j] = 1;
        }
    }
    gmm_free(s);
    return st;
}

/* ---- format ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t size, len;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#include <stdarg.h>
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = b->len < b->size ? b->buf + b->len : NULL;
    size_t room = b->len < b->size ? b->size - b->len : 0;
    int r = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (r > 0)
        b->len += (size_t)r;
}

static void format_node(const knode *n, const double *theta, sbuf *b)
{
    if (n->op == KN_LEAF) {
        const gmm_kernel_type *t = n->type;
        sb_printf(b, "%s(", t->name);
        int first = 1;
        for (size_t i = 0; i < t->nparam; i++) {
            double v = n->tix[i] == SIZE_MAX ? n->sval[i] : theta[n->tix[i]];
            if (isnan(v))
                continue;
            if (t->param[i].structural)
                sb_printf(b, "%s%s=%d", first ? "" : ", ", t->param[i].name, (int)v);
            else
                sb_printf(b, "%s%s=%.17g", first ? "" : ", ", t->param[i].name, v);
            first = 0;
        }
        sb_printf(b, ")");
        return;
    }
    for (size_t i = 0; i < n->nchild; i++) {
        const knode *c = n->child[i];
        if (i)
            sb_printf(b, n->op == KN_SUM ? " + " : " * ");
        int paren = n->op == KN_PROD && c->op == KN_SUM;
        if (paren)
            sb_printf(b, "(");
        format_node(c, theta, b);
        if (paren)
            sb_printf(b, ")");
    }
}

size_t gmm_kernel_format(const gmm_kernel *k, const double *theta, char *buf, size_t size)
{
    sbuf b = {buf, size, 0};
    if (buf && size)
        buf[0] = '\0';
    format_node(k->root, theta ? theta : k->value, &b);
    return b.len;
}

