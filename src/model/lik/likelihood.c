/* likelihood.c -- the table of observation models, their spec, data checks,
 * and Gaussian expectations E_{f ~ N(mu, s2)} log p(y | f).
 *
 * Families without a closed-form expectation are integrated by
 * Gauss-Hermite quadrature for the standard normal, f = mu + sqrt(s2) t:
 *
 *   E g(f) ~ sum_i w_i g(mu + sqrt(s2) t_i),   exact for polynomials of
 *   degree < 2 n,
 *
 * with d/dmu E log p = E[d1] and d/ds2 E log p = E[d2] / 2 (Stein's lemma
 * and its second-order form, Price's theorem).  The n-point rule: the nodes
 * are the eigenvalues of the Jacobi matrix of the probabilists' Hermite
 * polynomials (zero diagonal, off-diagonal sqrt(k)) -- Golub & Welsch 1969 --
 * by implicit QL, each polished by Newton steps on the orthonormal
 * recurrence; the weights are the Christoffel numbers 1 / sum_k p_k(t_i)^2,
 * which keep their relative accuracy in the tails where the eigenvectors'
 * first components (Golub-Welsch's weights) have only absolute accuracy.
 * Each rule is computed once, under a mutex, into static storage and
 * published by an atomic flag.  It is the one Gauss-Hermite rule of the
 * likelihoods: lik_response.c's predictive summaries use it too.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/kernel.h"
#include "gmm/likelihood.h"
#include "gmm/spec.h"
#include "lik_impl.h"

/* The table, the one list of the families: each NAME is the type
 * gmm_lik_impl_NAME defined in lik_NAME.c (bernoulli in lik_binomial.c);
 * the order is gmm_lik_type_at's. */
#define LIK_TYPES(X) X(gaussian) X(poisson) X(binomial) X(bernoulli) X(negbinomial) X(studentt)

#define LIK_DECLARE(name) extern const gmm_lik_type gmm_lik_impl_##name;
LIK_TYPES(LIK_DECLARE)
#define LIK_ROW(name) &gmm_lik_impl_##name,
static const gmm_lik_type *const type_table[] = {LIK_TYPES(LIK_ROW)};
#define NTYPES (sizeof type_table / sizeof type_table[0])

size_t gmm_lik_ntypes(void) { return NTYPES; }

const gmm_lik_type *gmm_lik_type_at(size_t i) { return i < NTYPES ? type_table[i] : NULL; }

const gmm_lik_type *gmm_lik_type_find(const char *name)
{
    for (size_t i = 0; name && i < NTYPES; i++)
        if (strcmp(type_table[i]->name, name) == 0)
            return type_table[i];
    return NULL;
}

/* ---- spec ---------------------------------------------------------------------- */

static const char *type_names(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NTYPES && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "",
                                type_table[i]->name);
    return buf;
}

static const char *param_names(const gmm_lik_type *t, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    if (t->nparam == 0)
        snprintf(buf, size, "%s has none", t->name);
    for (size_t i = 0; i < t->nparam && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", t->param[i]);
    return buf;
}

/* Offset of the first '+' or '*' of a SUM or PRODUCT: inside its first
 * operand when that is composite, else the character before its second
 * operand, skipping blanks and opening parentheses (a group's pos is inside
 * them). */
static size_t first_operator(const char *text, const gmm_spec_node *s)
{
    if (s->child[0]->type != GMM_SPEC_FACTOR)
        return first_operator(text, s->child[0]);
    size_t i = s->child[1]->pos;
    while (i > 0) {
        char c = text[--i];
        if (c == '+' || c == '*')
            return i;
        if (c != '(' && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f'
            && c != '\v')
            break;
    }
    return s->child[1]->pos;
}

static gmm_status from_spec(const char *text, const gmm_spec_node *s, gmm_lik *out)
{
    char buf[256];
    if (s->type != GMM_SPEC_FACTOR)
        return gmm_error_at(GMM_EPARSE, first_operator(text, s),
                            "a likelihood is one family, not a %s",
                            s->type == GMM_SPEC_SUM ? "sum" : "product");
    const gmm_lik_type *t = gmm_lik_type_find(s->name);
    if (!t)
        return gmm_error_at(GMM_EPARSE, s->pos, "unknown likelihood '%s' (likelihoods: %s)",
                            s->name ? s->name : "", type_names(buf, sizeof buf));
    out->type = t;
    for (size_t k = 0; k < GMM_LIK_MAXPARAM; k++)
        out->par[k] = NAN;
    int seen[GMM_LIK_MAXPARAM] = {0};
    for (size_t a = 0; a < s->narg; a++) {
        const gmm_spec_arg *g = &s->arg[a];
        size_t k = 0;
        while (k < t->nparam && strcmp(t->param[k], g->key) != 0)
            k++;
        if (k == t->nparam)
            return gmm_error_at(GMM_EPARSE, g->pos, "unknown parameter '%s' of %s (%s%s)",
                                g->key, t->name, t->nparam ? "parameters: " : "",
                                param_names(t, buf, sizeof buf));
        if (seen[k]++)
            return gmm_error_at(GMM_EPARSE, g->pos, "parameter '%s' given twice", g->key);
        if (!(g->value > 0.0) || !isfinite(g->value))
            return gmm_error_at(GMM_EPARSE, g->pos, "%s must be positive and finite (got %g)",
                                g->key, g->value);
        out->par[k] = g->value;
    }
    return GMM_OK;
}

gmm_status gmm_lik_parse(const char *text, gmm_lik *out)
{
    if (!text || !out)
        return gmm_error(GMM_EINVAL, "gmm_lik_parse: NULL argument");
    gmm_spec_node *s = NULL;
    gmm_status st = gmm_spec_parse(text, &s);
    if (st)
        return st;
    gmm_lik lik;
    st = from_spec(text, s, &lik);
    gmm_spec_free(s);
    if (st == GMM_OK)
        *out = lik;
    return st;
}

gmm_status gmm_lik_fill_defaults(gmm_lik *lik, const double *y, size_t n)
{
    if (!lik || !lik->type || !lik->type->defaults)
        return GMM_OK;
    size_t np = lik->type->nparam;
    int any = 0;
    for (size_t k = 0; k < np; k++)
        any |= isnan(lik->par[k]);
    if (!any)
        return GMM_OK;
    double dflt[GMM_LIK_MAXPARAM];
    gmm_status st = lik->type->defaults(y, n, dflt);
    if (st)
        return st;
    for (size_t k = 0; k < np; k++)
        if (isnan(lik->par[k]))
            lik->par[k] = dflt[k];
    return GMM_OK;
}

const char *gmm_lik_param_name(const gmm_lik *lik, size_t k, char *buf)
{
    if (!lik || !lik->type || k >= lik->type->nparam || !buf)
        return NULL;
    snprintf(buf, 64, "likelihood.%s", lik->type->param[k]);
    return buf;
}

/* ---- data ------------------------------------------------------------------------ */

/* The shortest of %.15g, %.17g that reads back as v (so 2.5 is "2.5", and a
 * count off by 1e-12 does not print as an integer). */
static const char *fmt_num(double v, char buf[32])
{
    snprintf(buf, 32, "%.15g", v);
    if (isfinite(v) && strtod(buf, NULL) != v)
        snprintf(buf, 32, "%.17g", v);
    return buf;
}

/* The fault of one observed row into msg: 0 none, 1 in y, 2 in e. */
static int row_fault(const gmm_lik_type *t, double y, const double *e, char *msg, size_t size)
{
    char num[32], buf[96];
    if (!isfinite(y)) {
        snprintf(msg, size, "y = %s is not finite", fmt_num(y, num));
        return 1;
    }
    const char *why = t->check_y ? t->check_y(y, e ? *e : 1.0, buf, sizeof buf) : NULL;
    if (why) {
        snprintf(msg, size, "y = %s %s (%s)", fmt_num(y, num), why, t->name);
        return 1;
    }
    if (!e)
        return 0;
    const char *q = t->rowq ? t->rowq : "exposure";
    if (isnan(*e)) {
        snprintf(msg, size, "missing %s for an observed outcome", q);
        return 2;
    }
    why = t->check_e ? t->check_e(*e) : NULL;
    if (why) {
        snprintf(msg, size, "%s = %s %s", q, fmt_num(*e, num), why);
        return 2;
    }
    return 0;
}

gmm_status gmm_lik_check_row(const gmm_lik *lik, double y, const double *e, int *col)
{
    char msg[256];
    if (!lik || !lik->type)
        return gmm_error(GMM_EINVAL, "gmm_lik_check_row: NULL argument");
    if (e && !lik->type->rowq)
        return gmm_error(GMM_EINVAL, "the %s likelihood takes no exposure", lik->type->name);
    int fault = isnan(y) ? 0 : row_fault(lik->type, y, e, msg, sizeof msg);
    if (!fault)
        return GMM_OK;
    if (col)
        *col = fault - 1;
    return gmm_error(GMM_EINVAL, "%s", msg);
}

gmm_status gmm_lik_check_data(const gmm_lik *lik, const double *y, const double *e, size_t n)
{
    char msg[256];
    if (!lik || !lik->type || (n > 0 && !y))
        return gmm_error(GMM_EINVAL, "gmm_lik_check_data: NULL argument");
    const gmm_lik_type *t = lik->type;
    if (e && !t->rowq)
        return gmm_error(GMM_EINVAL, "the %s likelihood takes no exposure", t->name);
    for (size_t i = 0; i < n; i++)
        if (!isnan(y[i]) && row_fault(t, y[i], e ? e + i : NULL, msg, sizeof msg))
            return gmm_error_at(GMM_EINVAL, i, "%s", msg);
    return GMM_OK;
}

/* ---- behaviour ------------------------------------------------------------------- */

gmm_status gmm_lik_check_fit_data(const gmm_lik *lik, const double *y, const double *e,
                                  size_t n, const char *yname)
{
    char buf[256];
    if (!lik || !lik->type || (n > 0 && !y))
        return gmm_error(GMM_EINVAL, "gmm_lik_check_fit_data: NULL argument");
    size_t nobs = 0;
    for (size_t r = 0; r < n; r++)
        nobs += !isnan(y[r]);
    const char *why = nobs && lik->type->degenerate
                          ? lik->type->degenerate(y, lik->type->rowq ? e : NULL, n,
                                                  yname ? yname : "y", buf, sizeof buf)
                          : NULL;
    return why ? gmm_error(GMM_EINVAL, "%s", why) : GMM_OK;
}

double gmm_lik_link(const gmm_lik *lik, double m) { return lik->type->link(lik->par, m); }

double gmm_lik_inv_link(const gmm_lik *lik, double f) { return lik->type->mean(lik->par, 1.0, f); }

double gmm_lik_working(const gmm_lik *lik, double y, double e)
{
    return isnan(y) ? NAN : lik->type->working(y, e);
}

gmm_status gmm_lik_default_intercept(const gmm_lik *lik, const double *y, const double *e,
                                     size_t n, double *b)
{
    if (!lik || !lik->type || (n > 0 && !y) || !b)
        return gmm_error(GMM_EINVAL, "gmm_lik_default_intercept: NULL argument");
    return lik->type->intercept(y, lik->type->rowq ? e : NULL, n, b);
}

/* ---- evaluation -------------------------------------------------------------------- */

void gmm_lik_eval(const gmm_lik *lik, double y, double e, double f, double out[4], double *dpar)
{
    lik->type->eval(lik->par, y, e, f, out, dpar);
}

size_t gmm_lik_nconst(const gmm_lik *lik) { return lik->type->nconst; }

void gmm_lik_row_const(const gmm_lik *lik, double y, double e, double *c)
{
    if (lik->type->nconst)
        lik->type->row_const(y, e, c);
}

void gmm_lik_eval_const(const gmm_lik *lik, double y, double e, const double *c, double f,
                        double out[4], double *dpar)
{
    if (lik->type->nconst)
        lik->type->eval_const(lik->par, y, e, c, f, out, dpar);
    else
        lik->type->eval(lik->par, y, e, f, out, dpar);
}

/* The one place prior weights enter a row (R's lm and glm): a family whose
 * weight divides a scale parameter (gaussian: y ~ N(f, variance / w)) is
 * evaluated at that parameter over w and its derivative in the parameter
 * carried back by the chain rule (d/dv of log p at v / w is 1/w times the
 * derivative at v / w); every other family's row is w log p(y | f) with its
 * derivatives w times the row's. */
void gmm_lik_eval_weighted(const gmm_lik *lik, double y, double e, double w, const double *c,
                           double f, double out[4], double *dpar)
{
    const gmm_lik_type *t = lik->type;
    size_t np = t->nparam;
    if (w == 0.0) {
        memset(out, 0, 4 * sizeof *out);
        if (dpar)
            memset(dpar, 0, 3 * np * sizeof *dpar);
        return;
    }
    if (t->weight_param) {
        size_t k = t->weight_param - 1;
        gmm_lik lw = *lik;
        lw.par[k] /= w;
        if (c)
            gmm_lik_eval_const(&lw, y, e, c, f, out, dpar);
        else
            gmm_lik_eval(&lw, y, e, f, out, dpar);
        for (size_t j = 0; dpar && j < 3; j++)
            dpar[3 * k + j] /= w;
        return;
    }
    if (c)
        gmm_lik_eval_const(lik, y, e, c, f, out, dpar);
    else
        gmm_lik_eval(lik, y, e, f, out, dpar);
    for (size_t j = 0; j < 4; j++)
        out[j] *= w;
    for (size_t j = 0; dpar && j < 3 * np; j++)
        dpar[j] *= w;
}

double gmm_lik_sum_const(const gmm_lik *lik, size_t m, const double *y, const double *e,
                         const double *c, const double *f, double *g)
{
    const gmm_lik_type *t = lik->type;
    if (t->sum_const)
        return t->sum_const(lik->par, m, y, e, c, f, g);
    double sum = 0.0, out[4];
    size_t nc = t->nconst;
    for (size_t i = 0; i < m; i++) {
        if (nc)
            t->eval_const(lik->par, y[i], e[i], c + i * nc, f[i], out, NULL);
        else
            t->eval(lik->par, y[i], e[i], f[i], out, NULL);
        sum += out[0];
        if (g)
            g[i] = out[1];
    }
    return sum;
}

/* Gauss-Hermite rules of sizes 1 .. GMM_LIK_QUAD_MAX, packed: size n starts
 * at n (n - 1) / 2. */
#define RULE_OFF(n) ((n) * ((n) - 1) / 2)
#define RULE_TOTAL RULE_OFF(GMM_LIK_QUAD_MAX + 1)
static double rule_t[RULE_TOTAL], rule_w[RULE_TOTAL];
static atomic_int rule_ready[GMM_LIK_QUAD_MAX + 1];
static pthread_mutex_t rule_lock = PTHREAD_MUTEX_INITIALIZER;

/* Eigenvalues of the symmetric tridiagonal matrix with diagonal d and
 * off-diagonal e (e[i] couples i and i + 1; e[n - 1] = 0) into d, by
 * implicit QL with Wilkinson shifts (tql1; Numerical Recipes' tqli without
 * the vectors).  e is destroyed.  -1 if an eigenvalue takes over 60 sweeps. */
static int tridiag_eigenvalues(size_t n, double *d, double *e)
{
    for (size_t l = 0; l < n; l++) {
        int iter = 0;
        size_t m;
        do {
            for (m = l; m + 1 < n; m++) {
                double dd = fabs(d[m]) + fabs(d[m + 1]);
                if (fabs(e[m]) + dd == dd)
                    break;
            }
            if (m == l)
                break;
            if (iter++ == 60)
                return -1;
            double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            double r = hypot(g, 1.0);
            g = d[m] - d[l] + e[l] / (g + copysign(r, g));
            double s = 1.0, c = 1.0, p = 0.0;
            int underflow = 0;
            for (size_t i = m; i-- > l;) {
                double f = s * e[i], b = c * e[i];
                e[i + 1] = r = hypot(f, g);
                if (r == 0.0) { /* split: restart with the smaller block */
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    underflow = 1;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
            }
            if (underflow)
                continue;
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        } while (m != l);
    }
    return 0;
}

/* Orthonormal probabilists' Hermite polynomials at t: *pn = p_n(t),
 * *pn1 = p_{n-1}(t), and the return value sum_{k<n} p_k(t)^2. */
static double hermite(size_t n, double t, double *pn, double *pn1)
{
    double a = 0.0, b = 1.0, s = 0.0; /* p_{k-1}, p_k */
    for (size_t k = 0; k < n; k++) {
        s += b * b;
        double c = (t * b - sqrt((double)k) * a) / sqrt((double)k + 1.0);
        a = b;
        b = c;
    }
    *pn = b;
    *pn1 = a;
    return s;
}

static int gh_rule(size_t n, double *t, double *w)
{
    double e[GMM_LIK_QUAD_MAX];
    for (size_t i = 0; i < n; i++) {
        t[i] = 0.0;
        e[i] = i + 1 < n ? sqrt((double)i + 1.0) : 0.0;
    }
    if (tridiag_eigenvalues(n, t, e))
        return -1;
    for (size_t i = 1; i < n; i++) /* insertion sort: ascending nodes */
        for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    for (size_t i = 0; i < n; i++) {
        double pn, pn1;
        for (int it = 0; it < 2; it++) { /* Newton: p_n' = sqrt(n) p_{n-1} */
            hermite(n, t[i], &pn, &pn1);
            t[i] -= pn / (sqrt((double)n) * pn1);
        }
        w[i] = 1.0 / hermite(n, t[i], &pn, &pn1);
    }
    for (size_t i = 0; i < n / 2; i++) { /* exact symmetry about 0 */
        double x = 0.5 * (t[n - 1 - i] - t[i]), v = 0.5 * (w[i] + w[n - 1 - i]);
        t[i] = -x;
        t[n - 1 - i] = x;
        w[i] = w[n - 1 - i] = v;
    }
    if (n % 2)
        t[n / 2] = 0.0;
    return 0;
}

gmm_status gmm_lik_impl_gh_rule(size_t n, const double **t, const double **w)
{
    int ok = 1;
    if (!atomic_load_explicit(&rule_ready[n], memory_order_acquire)) {
        pthread_mutex_lock(&rule_lock);
        if (!atomic_load_explicit(&rule_ready[n], memory_order_relaxed)) {
            ok = gh_rule(n, rule_t + RULE_OFF(n), rule_w + RULE_OFF(n)) == 0;
            if (ok)
                atomic_store_explicit(&rule_ready[n], 1, memory_order_release);
        }
        pthread_mutex_unlock(&rule_lock);
    }
    if (!ok)
        return gmm_error(GMM_ENOCONV, "Gauss-Hermite rule of %zu points: QL did not converge",
                         n);
    *t = rule_t + RULE_OFF(n);
    *w = rule_w + RULE_OFF(n);
    return GMM_OK;
}

gmm_status gmm_lik_expect(const gmm_lik *lik, double y, double e, double mu, double s2,
                          size_t nquad, double out[3], double *dpar)
{
    if (!lik || !lik->type || !out)
        return gmm_error(GMM_EINVAL, "gmm_lik_expect: NULL argument");
    if (nquad > GMM_LIK_QUAD_MAX)
        return gmm_error(GMM_EINVAL, "%zu quadrature points: at most %d", nquad,
                         GMM_LIK_QUAD_MAX);
    if (!(s2 >= 0.0))
        return gmm_error(GMM_EINVAL, "variance s2 = %g must be >= 0", s2);
    const gmm_lik_type *type = lik->type;
    if (type->expect) {
        type->expect(lik->par, y, e, mu, s2, out, dpar);
        return GMM_OK;
    }
    size_t np = type->nparam;
    double o[4], dp[3 * GMM_LIK_MAXPARAM];
    if (s2 == 0.0) { /* a point mass */
        type->eval(lik->par, y, e, mu, o, dpar ? dp : NULL);
        out[0] = o[0];
        out[1] = o[1];
        out[2] = 0.5 * o[2];
        for (size_t k = 0; dpar && k < np; k++)
            dpar[k] = dp[3 * k];
        return GMM_OK;
    }
    const double *t = NULL, *w = NULL;
    size_t n = nquad ? nquad : GMM_LIK_QUAD_DEFAULT;
    gmm_status st = gmm_lik_impl_gh_rule(n, &t, &w);
    if (st)
        return st;
    double sd = sqrt(s2), acc[3] = {0.0, 0.0, 0.0}, dacc[GMM_LIK_MAXPARAM] = {0.0};
    for (size_t i = 0; i < n; i++) {
        type->eval(lik->par, y, e, mu + sd * t[i], o, dpar ? dp : NULL);
        acc[0] += w[i] * o[0];
        acc[1] += w[i] * o[1];
        acc[2] += w[i] * o[2];
        for (size_t k = 0; dpar && k < np; k++)
            dacc[k] += w[i] * dp[3 * k];
    }
    out[0] = acc[0];
    out[1] = acc[1];
    out[2] = 0.5 * acc[2];
    for (size_t k = 0; dpar && k < np; k++)
        dpar[k] = dacc[k];
    return GMM_OK;
}

/* E of the weighted row (gmm_lik_eval_weighted's rule, in expectation). */
gmm_status gmm_lik_expect_weighted(const gmm_lik *lik, double y, double e, double w, double mu,
                                   double s2, size_t nquad, double out[3], double *dpar)
{
    if (!lik || !lik->type || !out)
        return gmm_error(GMM_EINVAL, "gmm_lik_expect_weighted: NULL argument");
    const gmm_lik_type *t = lik->type;
    size_t np = t->nparam;
    if (w == 0.0) {
        memset(out, 0, 3 * sizeof *out);
        if (dpar)
            memset(dpar, 0, np * sizeof *dpar);
        return GMM_OK;
    }
    gmm_status st;
    if (t->weight_param) {
        size_t k = t->weight_param - 1;
        gmm_lik lw = *lik;
        lw.par[k] /= w;
        if ((st = gmm_lik_expect(&lw, y, e, mu, s2, nquad, out, dpar)) == GMM_OK && dpar)
            dpar[k] /= w;
        return st;
    }
    if ((st = gmm_lik_expect(lik, y, e, mu, s2, nquad, out, dpar)))
        return st;
    for (size_t j = 0; j < 3; j++)
        out[j] *= w;
    for (size_t j = 0; dpar && j < np; j++)
        dpar[j] *= w;
    return GMM_OK;
}
