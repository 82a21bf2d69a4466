/* model_design_expr.c -- the values of a formula's expressions (I(), log(),
 * exp(), sqrt(), offset(), a transformed response; formula.h) over the rows
 * of a table, and R's orthogonal polynomials poly(x, k): the basis from the
 * model's data, and the same basis at new rows. */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

typedef struct {
    const gmm_table *t;
    const char *term; /* R's label of the expression's term (messages) */
    int missing_ok;
    size_t *pos;      /* the offending token's offset in the formula */
} eval_ctx;

static gmm_status row_error(const eval_ctx *c, const gmm_formula_expr *e, size_t r,
                            const char *what, double v)
{
    *c->pos = e->pos;
    return gmm_error_at(GMM_EDOM, r, "%s:%zu: %s (%.15g) in the term '%s'", c->t->file,
                        c->t->line[r], what, v, c->term);
}

static gmm_status eval(const eval_ctx *c, const gmm_formula_expr *e, double *out)
{
    size_t n = c->t->nrow;
    gmm_status s = GMM_OK;
    if (e->op == GMM_FX_NUM) {
        for (size_t r = 0; r < n; r++)
            out[r] = e->num;
        return GMM_OK;
    }
    if (e->op == GMM_FX_COL) {
        size_t col;
        if ((s = gmm_table_column(c->t, e->name, &col)) != GMM_OK ||
            (s = gmm_table_column_double(c->t, col, c->missing_ok, out)) != GMM_OK) {
            *c->pos = e->pos;
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            return gmm_error_at(s, gmm_error_index(), "%s (in the term '%s')", why, c->term);
        }
        return GMM_OK;
    }
    double *b = NULL;
    if ((s = eval(c, e->a, out)) != GMM_OK)
        return s;
    if (e->b) {
        if (!(b = gmm_malloc(n ? n : 1, sizeof *b)))
            return gmm_error(GMM_ENOMEM, "out of memory for the term '%s'", c->term);
        if ((s = eval(c, e->b, b)) != GMM_OK) {
            gmm_free(b);
            return s;
        }
    }
    for (size_t r = 0; r < n && s == GMM_OK; r++) {
        double x = out[r];
        switch (e->op) {
        case GMM_FX_NEG: out[r] = -x; break;
        case GMM_FX_ADD: out[r] = x + b[r]; break;
        case GMM_FX_SUB: out[r] = x - b[r]; break;
        case GMM_FX_MUL: out[r] = x * b[r]; break;
        case GMM_FX_DIV: out[r] = x / b[r]; break;
        case GMM_FX_POW: out[r] = pow(x, b[r]); break;
        case GMM_FX_LOG:
            if (x <= 0.0)
                s = row_error(c, e, r, "log() of a value that is not positive", x);
            out[r] = log(x);
            break;
        case GMM_FX_SQRT:
            if (x < 0.0)
                s = row_error(c, e, r, "sqrt() of a negative value", x);
            out[r] = sqrt(x);
            break;
        case GMM_FX_EXP: out[r] = exp(x); break;
        default: break; /* I() and parentheses: the value */
        }
        if (s == GMM_OK && !isfinite(out[r]) && !isnan(x) && !(b && isnan(b[r])))
            s = row_error(c, e, r, "a value that is not finite", out[r]);
    }
    gmm_free(b);
    return s;
}

gmm_status gmm_mdl_impl_expr_eval(const gmm_formula_expr *e, const gmm_table *t,
                                  const char *term, int missing_ok, double *out, size_t *pos)
{
    size_t dummy;
    eval_ctx c = {t, term, missing_ok, pos ? pos : &dummy};
    return eval(&c, e, out);
}

gmm_status gmm_mdl_impl_response(const gmm_mdl *m, const gmm_table *t, double *y)
{
    if (!m->fm || !m->fm->response_expr)
        return GMM_OK;
    return gmm_mdl_impl_expr_eval(m->fm->response_expr, t, m->fm->response_label, 1, y, NULL);
}

/* THE BASIS.  poly(x, k) is R's: the monic polynomials p_0 = 1, p_1, ...,
 * p_k orthogonal over the data's x, p_{j+1} = (x - alpha_j) p_j -
 * (N_{j+1} / N_j) p_{j-1} with N_0 = 1 and N_{j+1} = sum p_j^2, and column
 * j = p_j / sqrt(N_{j+1}).  alpha and N are what R's poly() keeps as
 * "coefs" and predict() reuses at new x; they come here from the
 * three-term (Stieltjes) recurrence on the centred x (exact orthogonality
 * to rounding for the low degrees formulas use; R's QR gives the same
 * numbers to ~1e-15). */
gmm_status gmm_mdl_impl_poly_fit(const double *x, size_t n, int degree, double *alpha,
                                 double *norm2)
{
    double mean = 0.0;
    for (size_t r = 0; r < n; r++)
        mean += x[r];
    mean /= (double)(n ? n : 1);
    double *p0 = gmm_malloc(n ? n : 1, sizeof *p0), *p1 = gmm_malloc(n ? n : 1, sizeof *p1);
    if (!p0 || !p1) {
        gmm_free(p0);
        gmm_free(p1);
        return gmm_error(GMM_ENOMEM, "out of memory for poly()");
    }
    norm2[0] = 1.0;
    for (size_t r = 0; r < n; r++) {
        p0[r] = 0.0; /* p_{-1} */
        p1[r] = 1.0; /* p_0 */
    }
    gmm_status s = GMM_OK;
    for (int j = 0; j <= degree; j++) {
        double nn = 0.0, xn = 0.0;
        for (size_t r = 0; r < n; r++) {
            nn += p1[r] * p1[r];
            xn += (x[r] - mean) * p1[r] * p1[r];
        }
        norm2[j + 1] = nn;
        if (!(nn > 0.0) || (j > 0 && nn <= 1e-20 * norm2[j])) {
            s = gmm_error(GMM_EINVAL, "poly(): degree %d needs at least %d distinct values", degree,
                          degree + 1);
            break;
        }
        if (j == degree)
            break;
        alpha[j] = xn / nn + mean;
        for (size_t r = 0; r < n; r++) {
            double next = (x[r] - alpha[j]) * p1[r] - (norm2[j + 1] / norm2[j]) * p0[r];
            p0[r] = p1[r];
            p1[r] = next;
        }
    }
    gmm_free(p0);
    gmm_free(p1);
    return s;
}

void gmm_mdl_impl_poly_at(double x, int degree, const double *alpha, const double *norm2,
                          double *z)
{
    double pm = 0.0, p = 1.0;
    for (int j = 0; j < degree; j++) {
        double next = (x - alpha[j]) * p - (norm2[j + 1] / norm2[j]) * pm;
        pm = p;
        p = next;
        z[j] = p / sqrt(norm2[j + 2]);
    }
}
