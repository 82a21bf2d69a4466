/* test_design.c -- the fixed part of a formula against R: for each case of
 * tests/fixtures/design/formulas.tsv (scripts/make-design-fixtures.R), the
 * columns of the design -- names (R's model.matrix names, in R's order),
 * values to 1e-12 of each column's largest -- the offset and the
 * transformed response, read back at the data's rows as new rows (the
 * levels and poly()'s basis are the model's); and the parser's terms and
 * labels for R's expansion rules. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/formula.h"
#include "gmm/io.h"
#include "gmm/model.h"
#include "gmm/problem.h"

#define FIXTURES "tests/fixtures/design/"

static gmm_mdl *build(const char *formula)
{
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc.formula = formula;
    s.desc.data.file = FIXTURES "data.csv";
    s.desc.likelihood = "gaussian";
    gmm_mdl *m = NULL;
    gmm_mdl_failure fail;
    gmm_status st = gmm_mdl_build(&s, &m, &fail);
    ck_assert_msg(st == GMM_OK, "%s: %s", formula, gmm_error_message());
    gmm_mdl_failure_free(&fail);
    return m;
}

static void check_case(const char *name, const char *formula)
{
    char path[256], text[512];
    snprintf(path, sizeof path, FIXTURES "%s.csv", name);
    /* a latent term: the model layer needs one; it adds no column */
    snprintf(text, sizeof text, "%s + f(grp, iid)", formula);
    gmm_table *r = NULL;
    ck_assert_int_eq(gmm_table_read(path, &r), GMM_OK);
    gmm_mdl *m = build(text);
    size_t nc = gmm_mdl_ncoef(m), no = gmm_mdl_noffset(m), ncol = r->ncol - 2;
    ck_assert_msg(nc - no == ncol, "%s: %zu columns, R has %zu", name, nc - no, ncol);
    ck_assert_uint_eq(no, strcmp(name, "log_offset") ? 0 : 1);
    for (size_t k = 0; k < ncol; k++)
        ck_assert_msg(!strcmp(gmm_mdl_coef_label(m, k), r->header[k]), "%s: column %zu '%s', R '%s'",
                      name, k, gmm_mdl_coef_label(m, k), r->header[k]);
    gmm_mdl_test *t = NULL;
    ck_assert_int_eq(gmm_mdl_rows_read(m, FIXTURES "data.csv", 0, &t), GMM_OK);
    ck_assert_uint_eq(t->n, r->nrow);
    const double *y = gmm_problem_y(gmm_mdl_problem(m));
    for (size_t k = 0; k < r->ncol; k++) {
        double scale = 0.0;
        for (size_t i = 0; i < r->nrow; i++)
            scale = fmax(scale, fabs(strtod(r->cell[i][k], NULL)));
        int is_off = k == r->ncol - 1;
        if (is_off && !no)
            continue;
        for (size_t i = 0; i < r->nrow; i++) {
            double want = strtod(r->cell[i][k], NULL);
            double got = k < ncol ? t->X[i * nc + k] : is_off ? t->X[i * nc + nc - 1] : y[i];
            ck_assert_msg(fabs(got - want) <= 1e-12 * scale, "%s: %s row %zu: %.17g, R %.17g",
                          name, r->header[k], i, got, want);
        }
    }
    gmm_mdl_test_free(t);
    gmm_mdl_free(m);
    gmm_table_free(r);
}

START_TEST(test_design_against_r)
{
    FILE *fp = fopen(FIXTURES "formulas.tsv", "r");
    ck_assert_ptr_nonnull(fp);
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, fp)) {
        char *name = strtok(line, "\t"), *ours = strtok(NULL, "\t");
        ck_assert_ptr_nonnull(ours);
        check_case(name, ours);
        n++;
    }
    fclose(fp);
    ck_assert_uint_ge(n, 15);
}
END_TEST

/* R's expansion: a*b*c's seven terms by degree; a repeated term made by
 * '*' is dropped silently, one written twice is an error; '- term'. */
START_TEST(test_design_terms)
{
    gmm_formula *f = NULL;
    ck_assert_int_eq(gmm_formula_parse("y ~ a*b*c + a + f(g, iid)", &f), GMM_OK);
    static const unsigned long long want[] = {1, 2, 4, 3, 5, 6, 7};
    ck_assert_uint_eq(f->nfixed, 7);
    for (size_t k = 0; k < 7; k++)
        ck_assert_uint_eq(f->fixed[k].vars, want[k]);
    ck_assert_str_eq(f->fixed[6].name, "a:b:c");
    gmm_formula_free(f);
    ck_assert_int_eq(gmm_formula_parse("y ~ a*b - a:b - 1 + f(g, iid)", &f), GMM_OK);
    ck_assert_uint_eq(f->nfixed, 2);
    ck_assert_int_eq(f->intercept, 0);
    gmm_formula_free(f);
    /* labels as R deparses them */
    ck_assert_int_eq(gmm_formula_parse("log(y + 1) ~ I(x ^ 2*1e5) + I(0.0001 - -x) + "
                                       "poly(log(x),2) + factor(h , ref=B) + f(g, iid)",
                                       &f),
                     GMM_OK);
    ck_assert_str_eq(f->response_label, "log(y + 1)");
    char buf[64];
    gmm_formula_expr_text(f->response_expr, buf, sizeof buf);
    ck_assert_str_eq(buf, "log(y + 1)");
    gmm_formula_expr_text(f->response_expr, buf, 6); /* truncated, terminated */
    ck_assert_str_eq(buf, "log(y");
    ck_assert_str_eq(f->response, "y");
    ck_assert_str_eq(f->var[0].label, "I(x^2 * 1e+05)");
    ck_assert_str_eq(f->var[1].label, "I(1e-04 - -x)");
    ck_assert_str_eq(f->var[2].label, "poly(log(x), 2)");
    ck_assert_str_eq(f->var[3].label, "factor(h, ref = \"B\")");
    ck_assert_str_eq(f->var[3].ref, "B");
    gmm_formula_free(f);
    /* errors at the offending character */
    static const struct {
        const char *text;
        size_t pos;
        const char *msg;
    } bad[] = {
        {"y ~ x + x", 8, "formula: a term appears twice"},
        {"y ~ x - z", 8, "formula: '-' removes a term the model does not have"},
        {"y ~ I(x) + lg(x)", 11,
         "formula: unknown function 'lg' (functions: factor(), poly(), I(), log(), exp(), "
         "sqrt(), offset(), f())"},
        {"y ~ I(x + lg(x))", 10,
         "formula: unknown function 'lg' (functions: factor(), poly(), I(), log(), exp(), "
         "sqrt(), offset(), f())"},
        {"y ~ poly(x, 0)", 12, "formula: poly(x, DEGREE) needs a whole DEGREE from 1 to 20"},
        {"y ~ factor(x, lvl = 2)", 14,
         "formula: factor() takes one key: ref = LEVEL (the reference level)"},
        {"y ~ f(g, iid) * x", 14,
         "formula: interactions (':' and '*') join variables (NAME, factor(), I(), ...), not "
         "f() terms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(gmm_formula_parse(bad[i].text, &f) == GMM_EPARSE, "%s", bad[i].text);
        ck_assert_msg(gmm_error_index() == bad[i].pos, "%s: at %zu", bad[i].text,
                      gmm_error_index());
        ck_assert_msg(!strcmp(gmm_error_message(), bad[i].msg), "%s: '%s'", bad[i].text,
                      gmm_error_message());
    }
}
END_TEST

/* Two ways of writing one factor: an error naming both (one coefficient
 * name for two columns).  Values a function does not take: the row and
 * the term, the caret under the function; a column of text inside I(),
 * under the column; a poly() of too few distinct values; a reference level
 * the data lack, under the level. */
START_TEST(test_design_value_errors)
{
    static const struct {
        const char *formula;
        size_t pos;
        const char *msg;
    } bad[] = {
        {"y ~ log(z) + f(grp, iid)", 4,
         "tests/fixtures/design/data.csv:2: log() of a value that is not positive (-1.64) "
         "in the term 'log(z)'"},
        {"y ~ I(x / (z - z)) + f(grp, iid)", 8,
         "tests/fixtures/design/data.csv:2: a value that is not finite (inf) in the term "
         "'I(x/(z - z))'"},
        {"log(z) ~ x + f(grp, iid)", 0,
         "tests/fixtures/design/data.csv:2: log() of a value that is not positive (-1.64) in the "
         "term 'log(z)'"},
        {"y ~ I(f^2) + f(grp, iid)", 6,
         "tests/fixtures/design/data.csv:2: column 'f': 'A' is not a number (in the term "
         "'I(f^2)')"},
        {"y ~ poly(h, 4) + f(grp, iid)", 4, "poly(): degree 4 needs at least 5 distinct values"},
        {"y ~ factor(f, ref = 'D') + f(grp, iid)", 21,
         "formula: 'D' is not a level of column 'f' (3 levels, from 'A' to 'C')"},
    };
    gmm_mdl_spec sp;
    gmm_mdl_spec_init(&sp);
    sp.desc.formula = "y ~ factor(f) + f + f(grp, iid)";
    sp.desc.data.file = FIXTURES "data.csv";
    gmm_mdl *m2 = NULL;
    ck_assert_int_eq(gmm_mdl_build(&sp, &m2, NULL), GMM_EINVAL);
    ck_assert_str_eq(gmm_error_message(), "formula: the columns 'factor(f)B' and 'fB' would both "
                                          "be named 'coef.f[B]': write the variable one way");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gmm_mdl_spec s;
        gmm_mdl_spec_init(&s);
        s.desc.formula = bad[i].formula;
        s.desc.data.file = FIXTURES "data.csv";
        gmm_mdl *m = NULL;
        gmm_mdl_failure fail;
        ck_assert_int_eq(gmm_mdl_build(&s, &m, &fail), GMM_EPARSE);
        ck_assert_msg(fail.spec_key && !strcmp(fail.spec_key, "formula") &&
                          fail.spec_pos == bad[i].pos,
                      "%s: at %zu", bad[i].formula, fail.spec_pos);
        ck_assert_msg(!strcmp(gmm_error_message(), bad[i].msg), "%s: '%s'", bad[i].formula,
                      gmm_error_message());
        gmm_mdl_failure_free(&fail);
    }
}
END_TEST

Suite *mdl_design_suite(void)
{
    Suite *s = suite_create("mdl_design");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_design_against_r);
    tcase_add_test(tc, test_design_terms);
    tcase_add_test(tc, test_design_value_errors);
    suite_add_tcase(s, tc);
    return s;
}
