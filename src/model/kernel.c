/* kernel.c -- the kernel type table and composite kernels: a tree of sums and
 * (binary) products over kernel factors, its parameter vector, defaults, and
 * the state space of the whole tree with its reverse mode.
 *
 * Sum:      x = (x_1, x_2, ...):  F, Pinf, A, Q block-diagonal, H concatenated.
 * Product:  x = x_L (x) x_R:      F = F_L (x) I + I (x) F_R, so
 *           A = A_L (x) A_R,  Pinf = P_L (x) P_R,  H = H_L (x) H_R,  and
 *           Q = Pinf - A Pinf A^T = Q_L (x) P_R + M_L (x) Q_R,  M_L = A_L P_L A_L^T,
 *           a sum of two positive semidefinite terms (no cancellation when the
 *           factors' Q are small).  An n-ary product is folded left.
 *
 * REVERSE MODE (full-matrix gradients, see kernel.h).  The tree is walked
 * root to leaves; each node hands its children the contractions of its own
 * adjoints: for C = X (x) Y, Xbar_ab += sum_ce Cbar_(ac)(be) Y_ce and Ybar
 * likewise; for M = A P A^T, Abar += (Mbar + Mbar^T) A P, Pbar += A^T Mbar A.
 * A leaf contracts its adjoints with its type's derivative matrices.  The
 * forward pass (gmm_kernel_stat, then gmm_kernel_disc at the same dt) saves
 * every node's A, Q, Pinf, every product's M_L, and every leaf's dA, dQ,
 * dPinf in the work arena.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "model_dense.h"

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

typedef enum { KN_LEAF, KN_SUM, KN_PROD } kn_op;

typedef struct knode {
    kn_op op;
    size_t d;
    size_t nchild;
    struct knode **child;
    /* leaf */
    const gmm_kernel_type *type;
    size_t leaf;
    double sval[GMM_KERNEL_MAXPARAM]; /* structural values (others unused) */
    size_t tix[GMM_KERNEL_MAXPARAM];  /* index in theta, SIZE_MAX if structural */
    int var_first;                    /* first factor of its product term */
    int damped;                       /* zero-noise factor regularised by damping */
    int demod;                        /* damped oscillator in rotating coordinates */
    int osc_partner;                  /* inside a product with a cosine/periodic factor */
    /* arena offsets (doubles) */
    size_t oA, oQ, oP, oH, oAb, oQb, oPb, oM, oMb, odA, odQ, odP;
    size_t oHt, oHb, odH; /* H(tau), its adjoint; leaf dH/dp (nparam x d) */
} knode;

struct gmm_kernel {
    knode *root;
    size_t d, nparam, nleaves, arena;
    knode **leaves;
    char **name;
    double *value;
    int damped_any;
    int modulated; /* some leaf is demodulated: H depends on time */
    double zweight; /* 1/Z: share of the damping rate each zero-noise factor gets */
};

struct gmm_kernel_work {
    double *a;
    double *lp; /* nleaves * GMM_KERNEL_MAXPARAM leaf parameter values */
    double damp;
    double dt;
    int have_stat, have_disc;
};

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

/* ---- covariance function ------------------------------------------------------ */

static void leaf_params(const knode *n, const double *theta, double *p)
{
    for (size_t i = 0; i < n->type->nparam; i++)
        p[i] = n->tix[i] == SIZE_MAX ? n->sval[i] : theta[n->tix[i]];
}

static double cov_node(const knode *n, const double *theta, double damp, double tau)
{
    if (n->op == KN_LEAF) {
        double p[GMM_KERNEL_MAXPARAM];
        leaf_params(n, theta, p);
        double k = n->type->cov(p, tau, NULL);
        return n->damped ? k * exp(-fabs(tau) * damp) : k; /* damp already shared */
    }
    double r = n->op == KN_SUM ? 0.0 : 1.0;
    for (size_t i = 0; i < n->nchild; i++) {
        double c = cov_node(n->child[i], theta, damp, tau);
        r = n->op == KN_SUM ? r + c : r * c;
    }
    return r;
}

double gmm_kernel_cov(const gmm_kernel *k, const double *theta, double damp, double tau)
{
    return cov_node(k->root, theta ? theta : k->value, damp * k->zweight, tau);
}

/* dk += w dk(tau)/dtheta of node n (w: the product of its siblings' values
 * up the tree); returns its value. */
static double cov_grad_node(const knode *n, const double *theta, double damp, double tau,
                            double w, double *dk)
{
    if (n->op == KN_LEAF) {
        double p[GMM_KERNEL_MAXPARAM], g[GMM_KERNEL_MAXPARAM] = {0.0};
        leaf_params(n, theta, p);
        double k = n->type->cov(p, tau, g), f = n->damped ? exp(-fabs(tau) * damp) : 1.0;
        for (size_t i = 0; i < n->type->nparam; i++)
            if (n->tix[i] != SIZE_MAX)
                dk[n->tix[i]] += w * f * g[i];
        return k * f;
    }
    double r = n->op == KN_SUM ? 0.0 : 1.0;
    for (size_t i = 0; i < n->nchild; i++) {
        double wi = w;
        for (size_t j = 0; n->op == KN_PROD && j < n->nchild; j++)
            if (j != i)
                wi *= cov_node(n->child[j], theta, damp, tau);
        double c = cov_grad_node(n->child[i], theta, damp, tau, wi, dk);
        r = n->op == KN_SUM ? r + c : r * c;
    }
    return r;
}

double gmm_kernel_cov_grad(const gmm_kernel *k, const double *theta, double damp, double tau,
                           double *dk)
{
    for (size_t i = 0; i < k->nparam; i++)
        dk[i] = 0.0;
    return cov_grad_node(k->root, theta ? theta : k->value, damp * k->zweight, tau, 1.0, dk);
}

double gmm_kernel_spacing_limit(const gmm_kernel *k, const double *theta, int rows,
                                size_t *param)
{
    double lim = 0.0;
    size_t which = SIZE_MAX;
    for (size_t l = 0; l < k->nleaves; l++) {
        const knode *n = k->leaves[l];
        const gmm_kernel_type *t = n->type;
        double r1 = rows ? t->min_dt_rel_rows : t->min_dt_rel;
        double r2 = rows ? t->min_dt_rel_osc_rows : t->min_dt_rel_osc;
        double rel = n->osc_partner ? fmax(r1, r2) : r1;
        if (t->scale_param >= t->nparam || rel <= 0.0)
            continue;
        size_t j = n->tix[t->scale_param];
        double v = rel * theta[j];
        if (v > lim) {
            lim = v;
            which = j;
        }
    }
    if (param)
        *param = which;
    return lim;
}

/* ---- work and validation ------------------------------------------------------- */

gmm_kernel_work *gmm_kernel_work_alloc(const gmm_kernel *k)
{
    gmm_kernel_work *w = gmm_calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->a = gmm_calloc(k->arena ? k->arena : 1, sizeof *w->a);
    w->lp = gmm_calloc(k->nleaves * GMM_KERNEL_MAXPARAM, sizeof *w->lp);
    if (!w->a || !w->lp)
        goto fail;
    return w;
fail:
    gmm_kernel_work_free(w);
    gmm_error(GMM_ENOMEM, "out of memory for the kernel workspace");
    return NULL;
}

void gmm_kernel_work_free(gmm_kernel_work *w)
{
    if (!w)
        return;
    gmm_free(w->a);
    gmm_free(w->lp);
    gmm_free(w);
}

gmm_status gmm_kernel_check(const gmm_kernel *k, const double *theta)
{
    for (size_t i = 0; i < k->nparam; i++)
        if (!(theta[i] > 0.0) || !isfinite(theta[i]))
            return gmm_error(GMM_EDOM, "parameter %s = %g must be positive and finite",
                             k->name[i], theta[i]);
    return GMM_OK;
}

/* ---- forward passes --------------------------------------------------------- */

static void stat_node(const gmm_kernel *k, gmm_kernel_work *w, knode *n)
{
    double *a = w->a;
    size_t d = n->d;
    if (n->op == KN_LEAF) {
        double *p = w->lp + n->leaf * GMM_KERNEL_MAXPARAM;
        n->type->stat(p, a + n->oP, a + n->odP, a + n->oH);
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        stat_node(k, w, n->child[i]);
    if (n->op == KN_SUM) {
        md_zero(d * d, a + n->oP);
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            const knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++) {
                memcpy(a + n->oP + (o + r) * d + o, a + c->oP + r * c->d, c->d * sizeof *a);
                a[n->oH + o + r] = a[c->oH + r];
            }
            o += c->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        md_kron(L->d, a + L->oP, R->d, a + R->oP, a + n->oP);
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++)
                a[n->oH + i * R->d + j] = a[L->oH + i] * a[R->oH + j];
    }
}

gmm_status gmm_kernel_stat(const gmm_kernel *k, const double *theta, double damp,
                           gmm_kernel_work *w, double *Pinf, double *H)
{
    gmm_status st = gmm_kernel_check(k, theta);
    if (st)
        return st;
    if (!(damp >= 0.0) || !isfinite(damp))
        return gmm_error(GMM_EINVAL, "damping rate %g must be finite and >= 0", damp);
    for (size_t l = 0; l < k->nleaves; l++)
        leaf_params(k->leaves[l], theta, w->lp + l * GMM_KERNEL_MAXPARAM);
    w->damp = damp * k->zweight;
    stat_node(k, w, k->root);
    size_t dd = k->d * k->d;
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(w->a[k->root->oP + i]))
            return gmm_error(GMM_EDOM, "stationary covariance not finite at these parameters");
    if (Pinf)
        memcpy(Pinf, w->a + k->root->oP, dd * sizeof *Pinf);
    if (H)
        memcpy(H, w->a + k->root->oH, k->d * sizeof *H);
    w->have_stat = 1;
    w->have_disc = 0;
    return GMM_OK;
}

static void disc_node(gmm_kernel_work *w, knode *n, double dt)
{
    double *a = w->a;
    size_t d = n->d, dd = d * d;
    if (n->op == KN_LEAF) {
        const gmm_kernel_type *t = n->type;
        double *p = w->lp + n->leaf * GMM_KERNEL_MAXPARAM;
        t->disc(p, dt, a + n->oA, a + n->oQ, a + n->odA, a + n->odQ);
        if (n->demod) {
            /* rotating coordinates: the rotation moves into h(tau) (DEMODULATION);
             * Q = 0 and dQ = 0 for a zero-noise type */
            md_zero(dd, a + n->oA);
            for (size_t i = 0; i < d; i++)
                a[n->oA + i * d + i] = 1.0;
            for (size_t j = 0; j < t->nparam; j++)
                if (!t->param[j].structural)
                    md_zero(dd, a + n->odA + j * dd);
        }
        if (n->damped && w->damp > 0.0) {
            /* A_reg = rho A, Q_reg = (1 - rho^2) Pinf + rho^2 Q (kernel.h); w->damp is
             * this factor's share damp/Z */
            double rho = exp(-w->damp * dt), g = -expm1(-2.0 * w->damp * dt), r2 = rho * rho;
            for (size_t i = 0; i < dd; i++) {
                a[n->oA + i] *= rho;
                a[n->oQ + i] = g * a[n->oP + i] + r2 * a[n->oQ + i];
            }
            for (size_t j = 0; j < t->nparam; j++) {
                if (t->param[j].structural)
                    continue;
                for (size_t i = 0; i < dd; i++) {
                    a[n->odA + j * dd + i] *= rho;
                    a[n->odQ + j * dd + i] = g * a[n->odP + j * dd + i]
                                             + r2 * a[n->odQ + j * dd + i];
                }
            }
        }
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        disc_node(w, n->child[i], dt);
    if (n->op == KN_SUM) {
        md_zero(dd, a + n->oA);
        md_zero(dd, a + n->oQ);
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            const knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++) {
                memcpy(a + n->oA + (o + r) * d + o, a + c->oA + r * c->d, c->d * sizeof *a);
                memcpy(a + n->oQ + (o + r) * d + o, a + c->oQ + r * c->d, c->d * sizeof *a);
            }
            o += c->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        size_t dl = L->d;
        double *M = a + n->oM;
        md_kron(dl, a + L->oA, R->d, a + R->oA, a + n->oA);
        /* M = A_L P_L A_L^T; the Q_L block of Q_L (x) P_R holds A_L P_L as scratch */
        double *T = a + n->oMb; /* Mbar slot is free during the forward pass */
        md_gemm(dl, 0, 0, 1.0, a + L->oA, a + L->oP, 0.0, T);
        md_gemm(dl, 0, 1, 1.0, T, a + L->oA, 0.0, M);
        md_symmetrise(dl, M);
        md_kron(dl, a + L->oQ, R->d, a + R->oP, a + n->oQ);
        md_kron_acc(1.0, dl, M, R->d, a + R->oQ, a + n->oQ);
    }
}

gmm_status gmm_kernel_disc(const gmm_kernel *k, gmm_kernel_work *w, double dt, double *A,
                           double *Q)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_disc called before gmm_kernel_stat");
    if (!(dt > 0.0) || !isfinite(dt))
        return gmm_error(GMM_EINVAL, "time step %g must be positive and finite", dt);
    disc_node(w, k->root, dt);
    size_t dd = k->d * k->d;
    double *Ar = w->a + k->root->oA, *Qr = w->a + k->root->oQ;
    md_symmetrise(k->d, Qr);
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(Ar[i]) || !isfinite(Qr[i]))
            return gmm_error(GMM_EDOM, "transition not finite at dt = %g", dt);
    if (A)
        memcpy(A, Ar, dd * sizeof *A);
    if (Q)
        memcpy(Q, Qr, dd * sizeof *Q);
    w->dt = dt;
    w->have_disc = 1;
    return GMM_OK;
}

/* ---- reverse pass ----------------------------------------------------------- */

static void zero_bars(knode *n, double *a, int aq)
{
    size_t dd = n->d * n->d;
    md_zero(dd, a + n->oPb);
    if (aq) {
        md_zero(dd, a + n->oAb);
        md_zero(dd, a + n->oQb);
    }
    if (n->op == KN_PROD && aq)
        md_zero(n->child[0]->d * n->child[0]->d, a + n->oMb);
    for (size_t i = 0; i < n->nchild; i++)
        zero_bars(n->child[i], a, aq);
}

static void rev_node(gmm_kernel_work *w, knode *n, int aq, double *thetabar)
{
    double *a = w->a;
    size_t d = n->d, dd = d * d;
    if (n->op == KN_LEAF) {
        const gmm_kernel_type *t = n->type;
        for (size_t j = 0; j < t->nparam; j++) {
            if (n->tix[j] == SIZE_MAX)
                continue;
            double g = md_dot(dd, a + n->oPb, a + n->odP + j * dd);
            if (aq)
                g += md_dot(dd, a + n->oAb, a + n->odA + j * dd)
                     + md_dot(dd, a + n->oQb, a + n->odQ + j * dd);
            thetabar[n->tix[j]] += g;
        }
        return;
    }
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            knode *c = n->child[i];
            for (size_t r = 0; r < c->d; r++)
                for (size_t s = 0; s < c->d; s++) {
                    size_t src = (o + r) * d + o + s, dst = r * c->d + s;
                    a[c->oPb + dst] += a[n->oPb + src];
                    if (aq) {
                        a[c->oAb + dst] += a[n->oAb + src];
                        a[c->oQb + dst] += a[n->oQb + src];
                    }
                }
            o += c->d;
        }
    } else {
        knode *L = n->child[0], *R = n->child[1];
        size_t dl = L->d, dr = R->d;
        md_kron_rev(dl, a + L->oP, dr, a + R->oP, a + n->oPb, a + L->oPb, a + R->oPb);
        if (aq) {
            double *M = a + n->oM, *Mb = a + n->oMb;
            md_kron_rev(dl, a + L->oA, dr, a + R->oA, a + n->oAb, a + L->oAb, a + R->oAb);
            md_kron_rev(dl, a + L->oQ, dr, a + R->oP, a + n->oQb, a + L->oQb, a + R->oPb);
            md_kron_rev(dl, M, dr, a + R->oQ, a + n->oQb, Mb, a + R->oQb);
            /* M = A P A^T: Abar += (Mb + Mb^T) A P, Pbar += A^T Mb A.  M's own
             * slot (no longer needed) holds first A P, then Mb A. */
            md_gemm(dl, 0, 0, 1.0, a + L->oA, a + L->oP, 0.0, M);
            md_gemm(dl, 0, 0, 1.0, Mb, M, 1.0, a + L->oAb);
            md_gemm(dl, 1, 0, 1.0, Mb, M, 1.0, a + L->oAb);
            md_gemm(dl, 0, 0, 1.0, Mb, a + L->oA, 0.0, M);
            md_gemm(dl, 1, 0, 1.0, a + L->oA, M, 1.0, a + L->oPb);
        }
    }
    for (size_t i = 0; i < n->nchild; i++)
        rev_node(w, n->child[i], aq, thetabar);
}

gmm_status gmm_kernel_rev(const gmm_kernel *k, gmm_kernel_work *w, const double *Abar,
                          const double *Qbar, const double *Pbar, double *thetabar)
{
    int aq = Abar || Qbar;
    if (!w->have_stat || (aq && !w->have_disc))
        return gmm_error(GMM_EINVAL, "gmm_kernel_rev needs the forward pass first");
    size_t dd = k->d * k->d;
    zero_bars(k->root, w->a, aq);
    double *a = w->a;
    if (Pbar)
        memcpy(a + k->root->oPb, Pbar, dd * sizeof *a);
    if (Abar)
        memcpy(a + k->root->oAb, Abar, dd * sizeof *a);
    if (Qbar)
        memcpy(a + k->root->oQb, Qbar, dd * sizeof *a);
    rev_node(w, k->root, aq, thetabar);
    /* the products' M slots were overwritten: a further rev needs a new disc */
    w->have_disc = 0;
    return GMM_OK;
}

/* ---- time-varying observation row ------------------------------------------------ */

static void obs_node(gmm_kernel_work *w, knode *n, double tau)
{
    double *a = w->a;
    if (n->op == KN_LEAF) {
        if (n->demod)
            n->type->hmod(w->lp + n->leaf * GMM_KERNEL_MAXPARAM, tau, a + n->oHt, a + n->odH);
        else
            memcpy(a + n->oHt, a + n->oH, n->d * sizeof *a);
        return;
    }
    for (size_t i = 0; i < n->nchild; i++)
        obs_node(w, n->child[i], tau);
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            memcpy(a + n->oHt + o, a + n->child[i]->oHt, n->child[i]->d * sizeof *a);
            o += n->child[i]->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++)
                a[n->oHt + i * R->d + j] = a[L->oHt + i] * a[R->oHt + j];
    }
}

gmm_status gmm_kernel_obs(const gmm_kernel *k, gmm_kernel_work *w, double tau, double *H)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_obs called before gmm_kernel_stat");
    obs_node(w, k->root, tau);
    memcpy(H, w->a + k->root->oHt, k->d * sizeof *H);
    return GMM_OK;
}

static void obs_rev_node(gmm_kernel_work *w, knode *n, double *thetabar)
{
    double *a = w->a;
    if (n->op == KN_LEAF) {
        if (!n->demod)
            return;
        for (size_t j = 0; j < n->type->nparam; j++)
            if (n->tix[j] != SIZE_MAX)
                thetabar[n->tix[j]] += md_dot(n->d, a + n->oHb, a + n->odH + j * n->d);
        return;
    }
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild; i++) {
            memcpy(a + n->child[i]->oHb, a + n->oHb + o, n->child[i]->d * sizeof *a);
            o += n->child[i]->d;
        }
    } else {
        const knode *L = n->child[0], *R = n->child[1];
        md_zero(L->d, a + L->oHb);
        md_zero(R->d, a + R->oHb);
        for (size_t i = 0; i < L->d; i++)
            for (size_t j = 0; j < R->d; j++) {
                double g = a[n->oHb + i * R->d + j];
                a[L->oHb + i] += g * a[R->oHt + j];
                a[R->oHb + j] += g * a[L->oHt + i];
            }
    }
    for (size_t i = 0; i < n->nchild; i++)
        obs_rev_node(w, n->child[i], thetabar);
}

gmm_status gmm_kernel_obs_rev(const gmm_kernel *k, gmm_kernel_work *w, double tau,
                              const double *Hbar, double *thetabar)
{
    if (!w->have_stat)
        return gmm_error(GMM_EINVAL, "gmm_kernel_obs_rev called before gmm_kernel_stat");
    if (!k->modulated)
        return GMM_OK;
    obs_node(w, k->root, tau);
    memcpy(w->a + k->root->oHb, Hbar, k->d * sizeof *Hbar);
    obs_rev_node(w, k->root, thetabar);
    return GMM_OK;
}

/* ---- SDE ---------------------------------------------------------------------- */

static gmm_status sde_node(const knode *n, gmm_kernel_work *w, double *F, double *LQL)
{
    size_t d = n->d, dd = d * d;
    double damp = w->damp;
    if (n->op == KN_LEAF) {
        n->type->sde(w->lp + n->leaf * GMM_KERNEL_MAXPARAM, F, LQL);
        if (n->damped && damp > 0.0) {
            /* F - damp I with Pinf kept stationary: L Qc L^T += 2 damp Pinf */
            for (size_t i = 0; i < d; i++)
                F[i * d + i] -= damp;
            md_axpy(dd, 2.0 * damp, w->a + n->oP, LQL);
        }
        return GMM_OK;
    }
    gmm_status st = GMM_OK;
    md_zero(dd, F);
    md_zero(dd, LQL);
    if (n->op == KN_SUM) {
        size_t o = 0;
        for (size_t i = 0; i < n->nchild && !st; i++) {
            const knode *c = n->child[i];
            size_t cd = c->d * c->d;
            double *Fc = gmm_malloc(2 * cd, sizeof *Fc);
            if (!Fc)
                return gmm_error(GMM_ENOMEM, "out of memory");
            st = sde_node(c, w, Fc, Fc + cd);
            for (size_t r = 0; r < c->d; r++)
                for (size_t s = 0; s < c->d; s++) {
                    F[(o + r) * d + o + s] = Fc[r * c->d + s];
                    LQL[(o + r) * d + o + s] = Fc[cd + r * c->d + s];
                }
            o += c->d;
            gmm_free(Fc);
        }
        return st;
    }
    const knode *L = n->child[0], *R = n->child[1];
    size_t dl = L->d, dr = R->d;
    double *buf = gmm_malloc(2 * (dl * dl + dr * dr) + dl * dl + dr * dr, sizeof *buf);
    if (!buf)
        return gmm_error(GMM_ENOMEM, "out of memory");
    double *FL = buf, *QL = FL + dl * dl, *FR = QL + dl * dl, *QR = FR + dr * dr;
    double *IL = QR + dr * dr, *IR = IL + dl * dl;
    st = sde_node(L, w, FL, QL);
    if (!st)
        st = sde_node(R, w, FR, QR);
    if (!st) {
        md_zero(dl * dl, IL);
        md_zero(dr * dr, IR);
        for (size_t i = 0; i < dl; i++)
            IL[i * dl + i] = 1.0;
        for (size_t i = 0; i < dr; i++)
            IR[i * dr + i] = 1.0;
        md_kron_acc(1.0, dl, FL, dr, IR, F);
        md_kron_acc(1.0, dl, IL, dr, FR, F);
        /* -(F P + P F^T) = LQL_L (x) P_R + P_L (x) LQL_R */
        md_kron_acc(1.0, dl, QL, dr, w->a + R->oP, LQL);
        md_kron_acc(1.0, dl, w->a + L->oP, dr, QR, LQL);
    }
    gmm_free(buf);
    return st;
}

gmm_status gmm_kernel_sde(const gmm_kernel *k, const double *theta, double damp,
                          gmm_kernel_work *w, double *F, double *LQL)
{
    gmm_status st = gmm_kernel_stat(k, theta, damp, w, NULL, NULL);
    if (st)
        return st;
    return sde_node(k->root, w, F, LQL);
}
