/* stack_sparse.c -- the stacked prior's precision in sparse storage
 * (latent.h, prior in sparse storage): the pattern of the components'
 * slots, Q(theta) by one pass over the slots into it, the reverse mode
 * thetabar += sum over slots of Qbar dQ/dtheta, and with constraints the
 * normaliser on the subspace from a sparse factorisation.  No band of the
 * joint bandwidth is formed (a GRAPH component writes its entries through
 * gmm_gmrf_assemble_at; a KERNEL's own band is its state-space model's,
 * narrow).
 *
 * SYMBOLIC WORK, ONCE.  The pattern: the diagonal and every slot's
 * (joint_row, joint_col); each slot's position in it (pos); with
 * constraints the entries of the pinned rows and columns and a sparse
 * factor analysed on the pattern.  The caller's Q may have a larger pattern
 * (P's): latent_sparse.h maps the own pattern into it, once per pattern.
 *
 * NORMALISER (stack_normaliser.c, CONSTRAINED LIKELIHOOD).  log det Q^ +
 * the components' constants, Q^ = Q with the pinned rows and columns the
 * identity's, on Q's own pattern; its reverse d log det Q^/dQ = Q^^-1
 * (twice off the diagonal: an entry stands for (i, j) and (j, i)) on the
 * pattern, from the sparse selected inverse, the pinned rows and columns
 * dropped (constants).
 *
 * SCALE-ONLY NORMALISER.  Where every component's precision is one
 * constant matrix times one coefficient, Q_k = c_k(theta) M_k (iid, rw1,
 * rw2, besag, with or without replicates), Q^ is block diagonal with
 * blocks c_k M_k on the free latents and the identity on the pinned ones,
 * so log det Q^(theta) = log det Q^(theta0) + sum_k f_k log(c_k(theta) /
 * c_k(theta0)), f_k the component's free latents, and its gradient is
 * f_k dc_k/c_k.  The first evaluation factors Q^ as above; later ones use
 * the formula, and the factor with its selected inverse (on a 300 x 300
 * lattice 77 MB, one factorisation and one selected inverse an
 * evaluation) is freed.
 *
 * A stack with a damped kernel keeps its precision in the square-root form
 * (stack_sqrt.c): no sparse prior. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/factor.h"
#include "../latent_impl.h"
#include "../latent_sparse.h"
#include "stack_impl.h"

struct stack_sp {
    latent_sparse ls;
    size_t *slot0;      /* ncomp + 1: component k's slots from slot0[k] */
    size_t *pos;        /* each slot's position in the own pattern */
    /* constraints: the own entries in a pinned row or column (pin_at) and
     * their value in Q^ (1 on a pinned diagonal, else 0), Q^, its
     * inverse on the pattern and its factor */
    size_t npin, *pin_at;
    double *pin_val;
    gmm_sparse *Qh, *S;
    gmm_factor *f;
    gmm_factor *wf;     /* the whitening's factor of Q^ (stack_sp_whiten_factor) */
    double *theta;      /* nparam: of the last prior_sparse */
    int ok;             /* it succeeded */
    /* SCALE-ONLY NORMALISER: scale_only 1 where it applies (-1 not, 0 not
     * yet decided); ld0 at the components' log c_k logc0 (ncomp) */
    int scale_only, have_ld0;
    double ld0, *logc0;
};

void stack_sp_free(struct stack_sp *s)
{
    if (!s)
        return;
    latent_sparse_free(&s->ls);
    gmm_free(s->slot0);
    gmm_free(s->pos);
    gmm_free(s->pin_at);
    gmm_free(s->pin_val);
    gmm_sparse_free(s->Qh);
    gmm_sparse_free(s->S);
    gmm_factor_free(s->f);
    gmm_factor_free(s->wf);
    gmm_free(s->theta);
    gmm_free(s->logc0);
    gmm_free(s);
}

static gmm_status no_sparse_form(const stack_impl *c)
{
    for (size_t k = 0; k < c->ncomp; k++)
        if (c->comp[k].damped)
            return gmm_error(GMM_EINVAL, "'%s': a kernel with a damped zero-noise factor keeps "
                                         "the stacked prior in the square-root form, which has "
                                         "no sparse precision",
                             c->comp[k].name);
    return GMM_EINVAL;
}

/* The constraints' part of the symbolic work: Q^'s pinned entries, Q^ and
 * S (the factor is analysed on first use: pinned_logdet). */
static gmm_status sp_pins(stack_impl *c, struct stack_sp *s)
{
    const gmm_sparse *Q = s->ls.Q;
    char *pinned = gmm_calloc(c->n ? c->n : 1, 1);
    if (!pinned)
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's constraints");
    for (size_t i = 0; i < c->ncon; i++)
        pinned[c->con.pinned[i]] = 1;
    size_t np = 0;
    for (size_t j = 0; j < Q->n; j++)
        for (size_t k = Q->colptr[j]; k < Q->colptr[j + 1]; k++)
            np += pinned[j] || pinned[Q->rowind[k]];
    s->pin_at = gmm_malloc(np ? np : 1, sizeof *s->pin_at);
    s->pin_val = gmm_malloc(np ? np : 1, sizeof *s->pin_val);
    s->Qh = gmm_sparse_alloc_like(Q);
    s->S = gmm_sparse_alloc_like(Q);
    gmm_status st = GMM_OK;
    if (!s->pin_at || !s->pin_val || !s->Qh || !s->S) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's constraints");
        goto done;
    }
    for (size_t j = 0; j < Q->n; j++)
        for (size_t k = Q->colptr[j]; k < Q->colptr[j + 1]; k++)
            if (pinned[j] || pinned[Q->rowind[k]]) {
                s->pin_at[s->npin] = k;
                s->pin_val[s->npin++] = Q->rowind[k] == j ? 1.0 : 0.0;
            }
done:
    gmm_free(pinned);
    return st;
}

/* The symbolic work on first use (the top). */
static gmm_status sp_setup(stack_impl *c)
{
    if (c->sp)
        return GMM_OK;
    if (c->sqrt_form)
        return no_sparse_form(c);
    gmm_status st;
    struct stack_sp *s = gmm_calloc(1, sizeof *s);
    size_t m = 0, *ei = NULL;
    if (!s)
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's sparse prior");
    s->slot0 = gmm_malloc(c->ncomp + 1, sizeof *s->slot0);
    s->theta = gmm_malloc(c->nparam ? c->nparam : 1, sizeof *s->theta);
    if (!s->slot0 || !s->theta) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's sparse prior");
        goto fail;
    }
    for (size_t k = 0; k < c->ncomp; k++) {
        s->slot0[k] = m;
        m += c->comp[k].nslot;
    }
    s->slot0[c->ncomp] = m;
    ei = gmm_malloc(2 * (m ? m : 1), sizeof *ei);
    s->pos = gmm_malloc(m ? m : 1, sizeof *s->pos);
    if (!ei || !s->pos) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's sparse prior "
                                   "(%zu slots)",
                       m);
        goto fail;
    }
    size_t *ej = ei + (m ? m : 1);
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *q = &c->comp[k];
        memcpy(ei + s->slot0[k], q->joint_row, q->nslot * sizeof *ei);
        memcpy(ej + s->slot0[k], q->joint_col, q->nslot * sizeof *ej);
    }
    if ((st = latent_sparse_init(&s->ls, c->n, m, ei, ej)) ||
        (st = latent_sparse_find(s->ls.Q, m, ei, ej, s->pos)) ||
        (c->ncon && (st = sp_pins(c, s))))
        goto fail;
    gmm_free(ei);
    c->sp = s;
    return GMM_OK;
fail:
    gmm_free(ei);
    stack_sp_free(s);
    return st;
}

gmm_status stack_prior_pattern(const void *p, gmm_sparse **Q)
{
    stack_impl *c = (stack_impl *)p; /* the symbolic work is cached */
    gmm_status st = sp_setup(c);
    return st ? st : latent_sparse_pattern(&c->sp->ls, Q);
}

/* The component's coefficients (stack_impl.h). */
static gmm_status coef(const stack_comp *m, const double *th, double *cg, double *dc)
{
    return m->model == GMM_STACK_CORR ? stack_corr_coef(m, th, cg, dc)
                                      : stack_comp_coef(m, th, cg, dc);
}

/* val (the own pattern's) = Q(theta): the slots in stack_assemble's order,
 * so each entry's sum is the band's. */
static gmm_status assemble(stack_impl *c, const double *theta, double *val)
{
    gmm_status st;
    const struct stack_sp *s = c->sp;
    memset(val, 0, s->ls.Q->nnz * sizeof *val);
    for (size_t k = 0; k < c->ncomp; k++) {
        stack_comp *m = &c->comp[k];
        const double *th = theta + m->par0;
        const size_t *pos = s->pos + s->slot0[k];
        if (m->model == GMM_STACK_GRAPH) {
            if ((st = gmm_gmrf_assemble_at(m->g, th, pos, val)))
                return st;
            continue;
        }
        if (m->model == GMM_STACK_KERNEL) {
            if ((st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            for (size_t t = 0; t < m->nslot; t++)
                val[pos[t]] += *gmm_band_ptr(m->gQ, m->own_row[t], m->own_col[t]);
            continue;
        }
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
        if ((st = coef(m, th, cg, dc)))
            return st;
        for (size_t t = 0; t < m->nslot; t++)
            val[pos[t]] += cg[m->slot_group[t]] * m->slot_value[t];
    }
    return GMM_OK;
}

/* thetabar += sum over slots of qbar dQ/dtheta (qbar on the own pattern). */
static gmm_status assemble_rev(stack_impl *c, const double *theta, const double *qbar,
                               double *thetabar)
{
    gmm_status st;
    const struct stack_sp *s = c->sp;
    for (size_t k = 0; k < c->ncomp; k++) {
        stack_comp *m = &c->comp[k];
        const double *th = theta + m->par0;
        const size_t *pos = s->pos + s->slot0[k];
        if (m->model == GMM_STACK_GRAPH) {
            if ((st = gmm_gmrf_assemble_at_rev(m->g, th, pos, qbar, thetabar + m->par0)))
                return st;
            continue;
        }
        if (m->model == GMM_STACK_KERNEL) {
            /* the SSM's reverse follows its own forward call at th */
            if ((st = gmm_ssm_prior(m->ssm, th, m->gQ, NULL)))
                return st;
            gmm_band_set_zero(m->gQbar);
            for (size_t t = 0; t < m->nslot; t++)
                *gmm_band_ptr(m->gQbar, m->own_row[t], m->own_col[t]) = qbar[pos[t]];
            if ((st = gmm_ssm_prior_rev(m->ssm, m->gQbar, 0.0, thetabar + m->par0)))
                return st;
            continue;
        }
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP], gb[STACK_NGROUP] = {0};
        if ((st = coef(m, th, cg, dc)))
            return st;
        for (size_t t = 0; t < m->nslot; t++)
            gb[m->slot_group[t]] += qbar[pos[t]] * m->slot_value[t];
        for (size_t p = 0; p < m->npar; p++)
            for (size_t g = 0; g < STACK_NGROUP; g++)
                thetabar[m->par0 + p] += gb[g] * dc[g * STACK_NPAR + p];
    }
    return GMM_OK;
}

/* Whether the SCALE-ONLY NORMALISER applies: every component one group
 * of slots with a single-coefficient model, and the components' latents
 * and constraints adding up to the stack's. */
int stack_scale_only(const stack_impl *c)
{
    size_t n = 0, ncon = 0;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        if (!(m->model == GMM_STACK_IID || m->model == GMM_STACK_RW1 ||
              m->model == GMM_STACK_RW2 || m->model == GMM_STACK_BESAG) ||
            m->control != GMM_STACK_NO_MODEL || m->ncon > m->n)
            return 0;
        for (size_t t = 0; t < m->nslot; t++)
            if (m->slot_group[t] != 0)
                return 0;
        n += m->n;
        ncon += m->ncon;
    }
    return n == c->n && ncon == c->ncon;
}

int stack_scale_blocks(const void *impl, size_t *par)
{
    const stack_impl *c = impl;
    if (!stack_scale_only(c))
        return 0;
    for (size_t k = 0; par && k < c->ncomp; k++)
        for (size_t j = 0; j < c->comp[k].n; j++)
            par[c->iperm[c->comp[k].off + j]] = c->comp[k].par0;
    return 1;
}

/* log det Q^ + the constants at theta by the formula (SCALE-ONLY
 * NORMALISER), or its gradient: thetabar += ldbar d/dtheta. */
static gmm_status scale_only_logdet(stack_impl *c, const double *theta, double *ld,
                                    double ldbar, double *thetabar)
{
    const struct stack_sp *s = c->sp;
    gmm_status st;
    double sum = s->ld0;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
        if ((st = coef(m, theta + m->par0, cg, dc)))
            return st;
        if (!(cg[0] > 0.0))
            return gmm_error_at(GMM_EDOM, m->par0, "'%s': precision scale %g is not positive",
                                m->name, cg[0]);
        double f = (double)(m->n - m->ncon);
        if (ld)
            sum += f * (log(cg[0]) - s->logc0[k]);
        if (thetabar)
            for (size_t p = 0; p < m->npar; p++)
                thetabar[m->par0 + p] += ldbar * f * dc[p] / cg[0];
    }
    if (ld)
        *ld = sum;
    return GMM_OK;
}

/* log det Q^ + the constants at theta from each component's own pinned
 * structure where every one has it (iid: the identity's 0; besag: its
 * scaling's factorisation, stack_scale.c) -- Q^ is block diagonal over the
 * components, each block its structure times the precision scale off the
 * pins -- so that the SCALE-ONLY NORMALISER's reference takes no
 * factorisation of its own; 0 where one has none (or theta is outside the
 * domain: the factorisation then says so). */
static int blocks_logdet(const stack_impl *c, const double *theta, double *ld)
{
    double sum = c->con.ld_const;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
        double lp = m->model == GMM_STACK_IID     ? 0.0
                    : m->model == GMM_STACK_BESAG ? m->ldpin
                                                  : NAN;
        if (!isfinite(lp) || coef(m, theta + m->par0, cg, dc) != GMM_OK || !(cg[0] > 0.0)) {
            gmm_error_clear();
            return 0;
        }
        sum += lp + (double)(m->n - m->ncon) * log(cg[0]);
    }
    *ld = sum;
    return 1;
}

/* The reference of the formula: ld at theta; the factor and its arrays
 * freed (SCALE-ONLY NORMALISER). */
static gmm_status scale_only_reference(stack_impl *c, const double *theta, double ld)
{
    struct stack_sp *s = c->sp;
    gmm_status st;
    if (!s->logc0 && !(s->logc0 = gmm_malloc(c->ncomp ? c->ncomp : 1, sizeof *s->logc0)))
        return gmm_error(GMM_ENOMEM, "out of memory for the stacked latent's normaliser");
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *m = &c->comp[k];
        double cg[STACK_NGROUP], dc[STACK_NPAR * STACK_NGROUP];
        if ((st = coef(m, theta + m->par0, cg, dc)))
            return st;
        s->logc0[k] = log(cg[0]);
    }
    s->ld0 = ld;
    s->have_ld0 = 1;
    gmm_factor_free(s->f);
    gmm_sparse_free(s->S);
    s->f = NULL;
    s->S = NULL;
    return GMM_OK;
}

/* Q^ into s->Qh: the own pattern's Q with the pinned rows and columns
 * the identity's. */
static void pin_q(struct stack_sp *s)
{
    memcpy(s->Qh->val, s->ls.Q->val, s->ls.Q->nnz * sizeof *s->Qh->val);
    for (size_t i = 0; i < s->npin; i++)
        s->Qh->val[s->pin_at[i]] = s->pin_val[i];
}

/* log det Q^ + the constants from the own pattern's Q (NORMALISER). */
static gmm_status pinned_logdet(stack_impl *c, double *ld)
{
    struct stack_sp *s = c->sp;
    gmm_status st;
    pin_q(s);
    if (!s->f && !(s->f = gmm_factor_sparse_alloc(s->Qh)))
        return gmm_error_status(); /* recorded by the factor */
    if ((st = gmm_factor_decomp_sparse(s->f, s->Qh)))
        return gmm_error_at(st, gmm_error_index(), "the intrinsic prior is not positive "
                                                   "definite on its constrained subspace");
    *ld = gmm_factor_logdet(s->f) + c->con.ld_const;
    return GMM_OK;
}

gmm_status stack_sp_whiten_factor(stack_impl *c, const double *theta, gmm_factor **f)
{
    gmm_status st;
    *f = NULL;
    if ((st = sp_setup(c)))
        return st;
    struct stack_sp *s = c->sp;
    gmm_sparse *A = c->ncon ? s->Qh : s->ls.Q;
    if ((st = assemble(c, theta, s->ls.Q->val)))
        return st;
    if (c->ncon)
        pin_q(s);
    if (!s->wf && !(s->wf = gmm_factor_sparse_alloc(A))) {
        char msg[GMM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", gmm_error_message());
        return gmm_error(gmm_error_status(), "the prior's whitening: %s", msg);
    }
    if ((st = gmm_factor_decomp_sparse(s->wf, A)))
        return gmm_error_at(st, gmm_error_index(), "the prior is not positive definite%s",
                            c->ncon ? " on its constrained subspace" : "");
    *f = s->wf;
    return GMM_OK;
}

gmm_status stack_prior_sparse(void *p, const double *theta, gmm_sparse *Q, double *logdet)
{
    stack_impl *c = p;
    gmm_status st;
    *logdet = NAN;
    if ((st = sp_setup(c)))
        return st;
    c->sp->ok = 0;
    if ((st = assemble(c, theta, c->sp->ls.Q->val)) || (st = latent_sparse_put(&c->sp->ls, Q)))
        return st;
    if (c->ncon) {
        struct stack_sp *s = c->sp;
        if (!s->scale_only)
            s->scale_only = stack_scale_only(c) ? 1 : -1;
        if (s->scale_only > 0 && s->have_ld0)
            st = scale_only_logdet(c, theta, logdet, 0.0, NULL);
        else if (s->scale_only > 0 && blocks_logdet(c, theta, logdet))
            st = scale_only_reference(c, theta, *logdet);
        else if (!(st = pinned_logdet(c, logdet)) && s->scale_only > 0)
            st = scale_only_reference(c, theta, *logdet);
        if (st)
            return st;
    }
    memcpy(c->sp->theta, theta, c->nparam * sizeof *theta);
    c->sp->ok = 1;
    return GMM_OK;
}

/* The own pattern's adjoint of ldbar log det Q^ into qbar (NORMALISER). */
static gmm_status pinned_logdet_rev(stack_impl *c, double ldbar, double *qbar)
{
    struct stack_sp *s = c->sp;
    gmm_status st = gmm_factor_selinv_sparse(s->f, s->S);
    if (st)
        return st;
    const gmm_sparse *S = s->S;
    for (size_t j = 0; j < S->n; j++)
        for (size_t k = S->colptr[j]; k < S->colptr[j + 1]; k++)
            qbar[k] = ldbar * (S->rowind[k] == j ? S->val[k] : 2.0 * S->val[k]);
    for (size_t i = 0; i < s->npin; i++)
        qbar[s->pin_at[i]] = 0.0;
    return GMM_OK;
}

gmm_status stack_prior_rev_sparse(void *p, const gmm_sparse *Qbar, double logdetbar,
                                  double *thetabar)
{
    stack_impl *c = p;
    gmm_status st;
    struct stack_sp *s = c->sp;
    if (!s || !s->ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev_sparse: no gmm_latent_prior_sparse "
                                     "before");
    if ((st = latent_sparse_get(&s->ls, Qbar)) ||
        (st = assemble_rev(c, s->theta, s->ls.Qbar->val, thetabar)) || logdetbar == 0.0 ||
        !c->ncon)
        return st;
    if (s->scale_only > 0)
        return scale_only_logdet(c, s->theta, NULL, logdetbar, thetabar);
    if ((st = pinned_logdet_rev(c, logdetbar, s->ls.Qbar->val)))
        return st;
    return assemble_rev(c, s->theta, s->ls.Qbar->val, thetabar);
}
