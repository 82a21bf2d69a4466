/* hmc_trajectory.c -- the Hamiltonian, leapfrog, NUTS and fixed-length HMC
 * transitions of a gmm_hmc; see hmc.h.
 *
 * Written from Stan's base_nuts.hpp and base_hmc.hpp; differences are in
 * storage only, and listed where they occur.
 *
 * HAMILTONIAN.  H(q, p) = -logp(q) + p' M^-1 p / 2 with M^-1 = diag(inv_metric)
 * (unit unless adapted or set), integrated by leapfrog with step size eps.
 *
 * NUTS (Hoffman & Gelman 2014; Betancourt 2017, "A conceptual introduction to
 * HMC", appendix A), as in Stan's base_nuts since 2.26:
 *   - the trajectory doubles in a random direction (forward or backward in
 *     time) until the generalised no-U-turn criterion fails, a new subtree is
 *     invalid, or max_depth doublings were made;
 *   - the criterion p#_-.rho > 0 and p#_+.rho > 0 (p# = M^-1 p, rho the sum of
 *     the momenta between the two ends) is checked at every merge of two
 *     subtrees, over the merged tree and over each subtree extended by the
 *     neighbouring state of the other (the checks Stan added in 2.26, which
 *     catch U-turns that fall between subtrees);
 *   - states are drawn by multinomial sampling, weights exp(-H): within a new
 *     subtree uniformly-progressively (here as a reservoir over its leaves, one
 *     proposal buffer instead of one per level; the same distribution as
 *     Stan's merge-by-merge choice), and between the old trajectory and the
 *     new subtree by biased progressive sampling (the new subtree's proposal
 *     is taken with probability min(1, W_new / W_old));
 *   - a leaf with H - H0 > max_energy_error is a divergence: its subtree is
 *     invalid and the trajectory stops.
 * accept_stat__ is the mean over all leaves built of min(1, exp(H0 - H)).
 *
 * FIXED-LENGTH HMC: `steps` leapfrog steps, then a Metropolis accept/reject.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/rng.h"
#include "hmc_impl.h"

/* ---- small pieces -------------------------------------------------------- */

static double log_sum_exp(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* A refusal at z: lp = -inf, counted, its reason kept. */
static void refuse(gmm_hmc *h, point *z, const char *why)
{
    h->failures++;
    snprintf(h->fail_msg, sizeof h->fail_msg, "%s", why);
    gmm_error_clear();
    z->lp = -INFINITY;
}

/* Evaluate the target at z->q into z->lp, z->g.  A domain failure (GMM_EDOM,
 * GMM_ENOTPD, non-finite value) gives lp = -inf and GMM_OK; any other status
 * is returned.  The gradient is checked by the caller (leapfrog: through the
 * kinetic energy it feeds). */
static gmm_status eval_point(gmm_hmc *h, point *z)
{
    double lp = 0.0;
    gmm_status st = h->target.logp(h->target.ctx, z->q, &lp, z->g);
    if (st == GMM_OK && isfinite(lp))
        z->lp = lp;
    else if (st == GMM_OK)
        refuse(h, z, "hmc: the log density is not finite");
    else if (st == GMM_EDOM || st == GMM_ENOTPD)
        refuse(h, z, gmm_error_message());
    else
        return st;
    return GMM_OK;
}

/* p ~ N(0, M): p_i = z_i sqrt(M_ii), z_i standard normal pairs by
 * Marsaglia's polar method (no trigonometry: the momentum draw is most of
 * the sampler's own cost on a cheap target); sets z->kin = |z|^2 / 2. */
void hmc_sample_momentum(gmm_hmc *h, point *z)
{
    double kin = 0.0;
    size_t n = h->dim;
    for (size_t i = 0; i < n; i += 2) {
        double u, v, r;
        do {
            u = 2.0 * gmm_rng_uniform(&h->rng) - 1.0;
            v = 2.0 * gmm_rng_uniform(&h->rng) - 1.0;
            r = u * u + v * v;
        } while (r >= 1.0 || r == 0.0);
        double f = sqrt(-2.0 * log(r) / r);
        z->p[i] = f * u * h->sqrt_metric[i];
        kin += f * f * u * u;
        if (i + 1 < n) {
            z->p[i + 1] = f * v * h->sqrt_metric[i + 1];
            kin += f * f * v * v;
        }
    }
    z->kin = 0.5 * kin;
}

/* One leapfrog step of size eps (negative: backward in time) from z, in
 * place.  A refused point gets lp = -inf (its momentum is then stale and
 * never used: H = inf ends the trajectory).  A non-finite gradient makes a
 * non-finite momentum and so a non-finite kinetic energy: that test covers
 * both at no cost. */
gmm_status hmc_leapfrog(gmm_hmc *h, point *z, double eps)
{
    const double *m = h->inv_metric;
    double *p = z->p, *q = z->q;
    const double *g = z->g;
    double half = 0.5 * eps, k[4] = {0.0, 0.0, 0.0, 0.0};
    size_t n = h->dim, i;
    for (i = 0; i < n; i++) {
        p[i] += half * g[i];
        q[i] += eps * m[i] * p[i];
    }
    gmm_status st = eval_point(h, z);
    if (st != GMM_OK || z->lp == -INFINITY)
        return st;
    /* four partial sums: the additions need not wait for each other */
    for (i = 0; i + 4 <= n; i += 4)
        for (size_t j = 0; j < 4; j++) {
            p[i + j] += half * g[i + j];
            k[j] += m[i + j] * p[i + j] * p[i + j];
        }
    for (; i < n; i++) {
        p[i] += half * g[i];
        k[0] += m[i] * p[i] * p[i];
    }
    z->kin = 0.5 * ((k[0] + k[1]) + (k[2] + k[3]));
    if (!isfinite(z->kin))
        refuse(h, z, "hmc: the gradient (or the momentum it drives) is not finite");
    return GMM_OK;
}

/* ---- NUTS ------------------------------------------------------------------ */

/* A leaf: one leapfrog step from the trajectory end z in direction dir.
 * Weighs it, offers it to the subtree's reservoir (h->prop), and copies its
 * momentum to p_beg and rho when they are not NULL (the subtree's first
 * momentum and momentum sum). */
static gmm_status leaf(gmm_hmc *h, point *z, double dir, double *p_beg, double *rho, int *valid)
{
    gmm_status st = hmc_leapfrog(h, z, dir * h->step);
    if (st != GMM_OK)
        return st;
    h->n_leapfrog++;
    double H = hamiltonian(z);
    if (H - h->H0 > h->par.max_energy_error)
        h->divergent = 1;
    double lw = h->H0 - H;
    h->sum_metro += lw > 0.0 ? 1.0 : exp(lw);
    if (lw > -INFINITY) {
        /* Reservoir sampling over the subtree's leaves: leaf i is kept with
         * probability w_i / W_i (W_i the weight of leaves 1..i), so the
         * survivor is leaf i with probability w_i / W -- Stan's multinomial
         * choice within the subtree, with one buffer instead of one per
         * level. */
        double lsw = log_sum_exp(h->lsw_sub, lw);
        double a = exp(lw - lsw);
        h->lsw_sub = lsw;
        if (a >= 1.0 || gmm_rng_uniform(&h->rng) < a) {
            copy_vec(h->prop->q, z->q, h->dim);
            copy_vec(h->prop->g, z->g, h->dim);
            h->prop->lp = z->lp;
            h->prop->kin = z->kin;
        }
    }
    if (!h->divergent && p_beg)
        copy_vec(p_beg, z->p, h->dim);
    if (!h->divergent && rho)
        copy_vec(rho, z->p, h->dim);
    *valid = !h->divergent;
    return GMM_OK;
}

/* build_tree for depth 1, two leaves A and B: the three checks of a merge
 * coincide (merged: ends pA, pB, sum pA + pB; each half extended by the
 * other: the same), so p#A.(pA + pB) > 0 and p#B.(pA + pB) > 0 decide, and
 * neither leaf needs its momentum copied but to p_beg.  Half of all merges
 * are of this kind; this one reads 3 vectors where the general one reads 7. */
static gmm_status build_pair(gmm_hmc *h, point *z, double dir, double *p_beg, double *rho,
                             int *valid)
{
    gmm_status st = leaf(h, z, dir, p_beg, NULL, valid);
    if (st != GMM_OK || !*valid)
        return st;
    st = leaf(h, z, dir, NULL, NULL, valid);
    if (st != GMM_OK || !*valid)
        return st;
    const double *m = h->inv_metric, *pa = p_beg, *pb = z->p;
    double a0 = 0, a1 = 0, b0 = 0, b1 = 0; /* even and odd i: two chains each */
    size_t n = h->dim, i;
    for (i = 0; i + 2 <= n; i += 2) {
        double r0 = pa[i] + pb[i], r1 = pa[i + 1] + pb[i + 1];
        a0 += m[i] * pa[i] * r0;
        a1 += m[i + 1] * pa[i + 1] * r1;
        b0 += m[i] * pb[i] * r0;
        b1 += m[i + 1] * pb[i + 1] * r1;
        rho[i] = r0;
        rho[i + 1] = r1;
    }
    if (i < n) {
        double r = pa[i] + pb[i];
        a0 += m[i] * pa[i] * r;
        b0 += m[i] * pb[i] * r;
        rho[i] = r;
    }
    *valid = a0 + a1 > 0 && b0 + b1 > 0;
    return GMM_OK;
}

/* Build a subtree of 2^depth leaves from z in direction dir (base_nuts::
 * build_tree).  On return p_beg is the momentum at its first leaf, z->p at
 * its last, rho the sum of its momenta; *valid is 0 when it diverged or
 * a sub-subtree made a U-turn. */
static gmm_status build_tree(gmm_hmc *h, unsigned depth, point *z, double dir, double *p_beg,
                             double *rho, int *valid)
{
    if (depth == 0)
        return leaf(h, z, dir, p_beg, rho, valid);
    if (depth == 1)
        return build_pair(h, z, dir, p_beg, rho, valid);
    gmm_status st = build_tree(h, depth - 1, z, dir, p_beg, rho, valid);
    if (st != GMM_OK || !*valid)
        return st;
    double *pie = h->p_init_end[depth], *pfb = h->p_final_beg[depth];
    double *rf = h->rho_final[depth];
    copy_vec(pie, z->p, h->dim);
    st = build_tree(h, depth - 1, z, dir, pfb, rf, valid);
    if (st != GMM_OK || !*valid)
        return st;

    /* The generalised criterion p#.r > 0 at both ends (p# = M^-1 p), over
     * the merged subtree (r = rho_init + rho_final), and over each half
     * extended by the adjacent leaf of the other: the first half with the
     * second's first leaf (r = rho_init + pfb, ends p_beg and pfb), the second
     * with the first's last leaf (r = rho_final + pie, ends pie and p_end).
     * One pass; rho becomes the merged sum. */
    const double *m = h->inv_metric, *pe = z->p;
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0, c1 = 0, c2 = 0;
    for (size_t i = 0; i < h->dim; i++) {
        double ri = rho[i], rfi = rf[i], mi = m[i];
        double bs = mi * p_beg[i], es = mi * pe[i], fs = mi * pfb[i], is = mi * pie[i];
        double rs = ri + rfi, ra = ri + pfb[i], rb = rfi + pie[i];
        a1 += bs * rs;
        a2 += es * rs;
        b1 += bs * ra;
        b2 += fs * ra;
        c1 += is * rb;
        c2 += es * rb;
        rho[i] = rs;
    }
    *valid = a1 > 0 && a2 > 0 && b1 > 0 && b2 > 0 && c1 > 0 && c2 > 0;
    return GMM_OK;
}

gmm_status hmc_nuts_transition(gmm_hmc *h, gmm_hmc_draw *d)
{
    size_t n = h->dim;
    const double *m = h->inv_metric;
    point *z0 = h->cur;
    gmm_status st = GMM_OK;

    /* start: fresh momentum at the current state; both ends there */
    copy_vec(h->zf.q, z0->q, n);
    copy_vec(h->zf.g, z0->g, n);
    h->zf.lp = z0->lp;
    hmc_sample_momentum(h, &h->zf);
    h->H0 = hamiltonian(&h->zf);
    copy_state(&h->zb, &h->zf, n);
    z0->kin = h->zf.kin;
    copy_vec(h->rho, h->zf.p, n);

    point *sample = z0; /* the transition's draw so far */
    double lsw = 0.0;   /* log sum of weights over the trajectory: log exp(H0 - H0) */
    unsigned depth = 0;
    h->n_leapfrog = 0;
    h->sum_metro = 0.0;
    h->divergent = 0;

    while (depth < h->par.max_depth) {
        int forward = gmm_rng_uniform(&h->rng) > 0.5;
        point *z = forward ? &h->zf : &h->zb, *zfar = forward ? &h->zb : &h->zf;
        int valid = 0;
        copy_vec(h->p_near, z->p, n);
        h->lsw_sub = -INFINITY;
        st = build_tree(h, depth, z, forward ? 1.0 : -1.0, h->p_new_beg, h->rho_new, &valid);
        if (st != GMM_OK)
            goto fail;
        if (!valid)
            break;
        depth++;

        /* biased progressive sampling between old trajectory and subtree */
        if (h->lsw_sub > lsw || gmm_rng_uniform(&h->rng) < exp(h->lsw_sub - lsw)) {
            point *t = sample;
            sample = h->prop;
            h->prop = t;
        }
        lsw = log_sum_exp(lsw, h->lsw_sub);

        /* The criterion over the whole trajectory (far end to new end) and
         * across the junction: the old trajectory extended by the subtree's
         * first leaf (ends: far end, p_new_beg), the subtree extended by the
         * old end next to it (ends: p_near, new end).  One pass, as in
         * build_tree; rho becomes the whole trajectory's sum. */
        const double *pf = zfar->p, *pe = z->p, *pb = h->p_new_beg, *pn = h->p_near;
        double *rho = h->rho;
        const double *rn = h->rho_new;
        double a1 = 0, a2 = 0, b1 = 0, b2 = 0, c1 = 0, c2 = 0;
        for (size_t i = 0; i < n; i++) {
            double fs = m[i] * pf[i], es = m[i] * pe[i], bs = m[i] * pb[i], ns = m[i] * pn[i];
            double rs = rho[i] + rn[i], ra = rho[i] + pb[i], rb = rn[i] + pn[i];
            a1 += fs * rs;
            a2 += es * rs;
            b1 += fs * ra;
            b2 += bs * ra;
            c1 += ns * rb;
            c2 += es * rb;
            rho[i] = rs;
        }
        if (!(a1 > 0 && a2 > 0 && b1 > 0 && b2 > 0 && c1 > 0 && c2 > 0))
            break;
    }

    h->cur = sample;
    h->prop = sample == &h->cur_a ? &h->cur_b : &h->cur_a;
    d->treedepth = depth;
    d->n_leapfrog = h->n_leapfrog;
    d->divergent = h->divergent;
    d->accept_stat = h->sum_metro / (double)h->n_leapfrog;
    return GMM_OK;
fail:
    h->cur = sample;
    h->prop = sample == &h->cur_a ? &h->cur_b : &h->cur_a;
    return st;
}
/* ---- fixed-length HMC ---------------------------------------------------- */

gmm_status hmc_static_transition(gmm_hmc *h, gmm_hmc_draw *d)
{
    size_t n = h->dim;
    point *z0 = h->cur, *z = &h->zf;
    copy_vec(z->q, z0->q, n);
    copy_vec(z->g, z0->g, n);
    z->lp = z0->lp;
    hmc_sample_momentum(h, z);
    z0->kin = z->kin;
    double H0 = hamiltonian(z);
    size_t k;
    for (k = 0; k < h->par.steps; k++) {
        gmm_status st = hmc_leapfrog(h, z, h->step);
        if (st != GMM_OK)
            return st;
        if (z->lp == -INFINITY) { /* a refused point: the trajectory stops */
            k++;
            break;
        }
    }
    double H = hamiltonian(z);
    double a = exp(H0 - H);
    d->divergent = H - H0 > h->par.max_energy_error;
    if (a >= 1.0 || gmm_rng_uniform(&h->rng) < a) {
        point *t = h->prop;
        copy_vec(t->q, z->q, n);
        copy_vec(t->g, z->g, n);
        t->lp = z->lp;
        t->kin = z->kin;
        h->prop = h->cur;
        h->cur = t;
    }
    d->treedepth = 0;
    d->n_leapfrog = k;
    d->accept_stat = a < 1.0 ? a : 1.0;
    return GMM_OK;
}
