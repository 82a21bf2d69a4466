/* model_factor.c -- the choice of factorisation: the band after RCM
 * (band.h) or the sparse Cholesky after a fill-reducing ordering (sparse.h,
 * factor.h), as the description asks (modelfile.h's gmm_model_factor), or
 * for auto from the predicted cost of each.
 *
 * THE PREDICTION.  The band's factorisation of P (bandwidth kl as the
 * latent orders it, n latents) costs n (kl + 1)^2 flops and a band n (kl +
 * 1) doubles; the band path keeps BAND_COPIES such bands (the problem's Q
 * and its adjoint; the Laplace approximation's factor, the factor's own
 * copy, the covariance band and the prior's selected inverse).  The sparse
 * factor's are the analysis' (gmm_factor_cost) of P's pattern: the prior's
 * (gmm_latent_prior_pattern) joined with H'H over the observed rows.
 *
 * THE RULE.  Sparse when the band's factorisation is large (at least
 * SPARSE_MIN_FLOPS: below that both are cheap, and the band keeps the
 * Gaussian's exact marginal likelihood and every existing output) and the sparse
 * one's flops are below half the band's (the half pays for the sparse
 * path's indexing and the symbolic work the band does not need), or when
 * one band is over the latent's memory limit (gmm_latent_band_check) -- the
 * band could not run at all; band otherwise,
 * and always for latents without a sparse prior (state-space models: their
 * band is narrow) and where a band factorisation (cholesky, square-root) is
 * asked for. */
#include "model_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/factor.h"
#include "gmm/gmrf.h"
#include "gmm/sparse.h"
#include "gmm/ssm.h"

#define BAND_COPIES 6
#define SPARSE_MIN_FLOPS 1e8
#define GMM_STR_(x) #x
#define GMM_STR(x) GMM_STR_(x)

/* P's pattern: Q's joined with h_r h_r' over the observed rows r. */
static gmm_status posterior_pattern(const gmm_mdl *m, const gmm_sparse *Q, gmm_sparse **P)
{
    gmm_obsmap map = gmm_latent_obs_map(m->lat);
    const size_t *off = gmm_latent_obs_offset(m->lat);
    size_t ne = 0;
    for (size_t r = 0; r < m->nrow; r++) {
        size_t w = gmm_obsmap_row_hi(&map, r) - gmm_obsmap_row_lo(&map, r);
        ne += isnan(m->y[r]) ? 0 : w * (w - 1) / 2;
    }
    size_t *ei = gmm_malloc(2 * (ne ? ne : 1), sizeof *ei);
    if (!ei)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior's pattern");
    size_t *ej = ei + (ne ? ne : 1), k = 0;
    for (size_t r = 0; r < m->nrow; r++) {
        if (isnan(m->y[r]))
            continue;
        size_t lo = gmm_obsmap_row_lo(&map, r), hi = gmm_obsmap_row_hi(&map, r);
        for (size_t a = lo; a < hi; a++)
            for (size_t c = lo; c < a; c++) {
                ei[k] = off[r] + gmm_obsmap_row_pos(&map, a, lo);
                ej[k++] = off[r] + gmm_obsmap_row_pos(&map, c, lo);
            }
    }
    gmm_sparse *H = NULL;
    gmm_status s = gmm_sparse_from_entries(Q->n, ne, ei, ej, &H);
    gmm_free(ei);
    if (s == GMM_OK)
        s = gmm_sparse_union(Q, H, P);
    gmm_sparse_free(H);
    return s;
}

/* The sparse factor's predicted flops and bytes for m's posterior, and
 * for the report the library and the ordering its analysis chose. */
static gmm_status sparse_cost(const gmm_mdl *m, const gmm_sparse *Q, double *flops,
                              double *bytes, char *name, size_t size)
{
    gmm_sparse *P = NULL;
    gmm_status s = posterior_pattern(m, Q, &P);
    gmm_factor *f = s == GMM_OK ? gmm_factor_sparse_alloc(P) : NULL;
    if (s == GMM_OK && !f)
        s = gmm_error_status();
    if (f) {
        gmm_factor_cost(f, flops, bytes);
        snprintf(name, size, "CHOLMOD, %s", gmm_factor_ordering(f));
    }
    gmm_factor_free(f);
    gmm_sparse_free(P);
    return s;
}

static double mb(double bytes) { return bytes / 1e6; }

gmm_status gmm_mdl_impl_choose_factor(const mdl_build *b, gmm_mdl *m)
{
    gmm_model_factor asked = b->s->desc.factor;
    int verbose = b->s->verbose;
    m->sparse = 0;
    size_t n = gmm_latent_dim(m->lat), kl = gmm_latent_bandwidth(m->lat);
    double band_flops = (double)n * (double)(kl + 1) * (double)(kl + 1),
           band_bytes = (double)n * (double)(kl + 1) * sizeof(double);
    if (asked == GMM_MODEL_FACTOR_BAND || b->s->factor != GMM_SSM_FACTOR_AUTO) {
        if (verbose)
            gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "factor: band (asked for; bandwidth %zu)",
                                kl);
        return GMM_OK;
    }
    int over = gmm_latent_band_check(m->lat) != GMM_OK;
    gmm_error_clear();
    /* a cheap band within its memory is kept whatever the sparse factor
     * would cost: its analysis (the orderings tried) is skipped unless the
     * report shows it */
    if (asked == GMM_MODEL_FACTOR_AUTO && !over && band_flops < SPARSE_MIN_FLOPS && !verbose)
        return GMM_OK;
    gmm_sparse *Q = NULL;
    gmm_status s = gmm_latent_prior_pattern(m->lat, &Q);
    if (s == GMM_EINVAL) {
        /* no sparse prior: the band, which the family keeps narrow */
        gmm_error_clear();
        if (asked == GMM_MODEL_FACTOR_SPARSE)
            return gmm_error(GMM_EINVAL, "the sparse factorisation needs the latent's "
                                         "precision in sparse storage, which the %s latent "
                                         "model does not have (its band, bandwidth %zu, "
                                         "serves it)",
                             gmm_latent_family(m->lat), kl);
        if (verbose)
            gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO,
                                "factor: band (the %s latent has no sparse precision; "
                                "bandwidth %zu)",
                                gmm_latent_family(m->lat), kl);
        return GMM_OK;
    }
    double sp_flops = NAN, sp_bytes = NAN;
    char name[64] = "CHOLMOD";
    /* forced sparse needs the analysis only for the report: the Laplace
     * workspace analyses P again */
    if (s == GMM_OK && (asked != GMM_MODEL_FACTOR_SPARSE || verbose))
        s = sparse_cost(m, Q, &sp_flops, &sp_bytes, name, sizeof name);
    gmm_sparse_free(Q);
    if (s != GMM_OK)
        return s;
    const char *why;
    if (asked == GMM_MODEL_FACTOR_SPARSE) {
        m->sparse = 1;
        why = "asked for";
    } else if (over) {
        m->sparse = 1;
        why = "a band is over the memory limit";
    } else if (band_flops >= SPARSE_MIN_FLOPS && sp_flops < 0.5 * band_flops) {
        m->sparse = 1;
        why = "below half the band's flops";
    } else {
        why = band_flops < SPARSE_MIN_FLOPS ? "the band's flops are below " GMM_STR(SPARSE_MIN_FLOPS)
                                            : "the sparse factor's flops are not below half "
                                              "the band's";
    }
    if (verbose)
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO,
                            "factor: %s (%s): sparse (%s): %.2g flops, %.2g MB; band "
                            "(bandwidth %zu): %.2g flops, %.2g MB",
                            m->sparse ? "sparse" : "band", why, name, sp_flops, mb(sp_bytes), kl,
                            band_flops, mb(BAND_COPIES * band_bytes));
    return GMM_OK;
}
