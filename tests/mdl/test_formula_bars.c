/* test_formula_bars.c -- lme4's random-effect terms in a formula
 * (formula_bars.c): what each syntax stands for, lme4's names, and errors
 * at the offending character. */
#include <check.h>
#include <string.h>

#include "gmm/formula.h"
#include "gmm/status.h"

/* Term i of f: name, model, label and its effects joined by ','. */
static void expect_term(const gmm_formula *f, size_t i, const char *name, const char *model,
                        const char *label, const char *effects)
{
    ck_assert_uint_gt(f->nlatent, i);
    const gmm_formula_latent *t = &f->latent[i];
    char buf[256] = "";
    for (size_t e = 0; e < t->neffect; e++) {
        strcat(buf, e ? "," : "");
        strcat(buf, t->effect_factor[e] ? "factor:" : "");
        strcat(buf, t->effect[e]);
    }
    ck_assert_int_eq(t->bar, 1);
    ck_assert_str_eq(t->name, name);
    ck_assert_str_eq(t->model, model);
    ck_assert_str_eq(t->label, label);
    ck_assert_str_eq(buf, effects);
}

static gmm_formula *parse(const char *text)
{
    gmm_formula *f = NULL;
    ck_assert_msg(gmm_formula_parse(text, &f) == GMM_OK, "%s: %s", text, gmm_error_message());
    return f;
}

START_TEST(test_bars_meaning)
{
    gmm_formula *f = parse("Reaction ~ Days + (Days | Subject)");
    ck_assert_uint_eq(f->nlatent, 1);
    ck_assert_uint_eq(f->nfixed, 1);
    expect_term(f, 0, "Subject", "corr", "Subject", "(Intercept),Days");
    ck_assert_uint_eq(f->latent[0].pos, 26);
    gmm_formula_free(f);

    f = parse("y ~ (1 | g)");
    expect_term(f, 0, "g", "iid", "g", "(Intercept)");
    gmm_formula_free(f);

    f = parse("y ~ (1 + x + z | g)");
    expect_term(f, 0, "g", "corr", "g", "(Intercept),x,z");
    gmm_formula_free(f);

    const char *slope[] = {"y ~ (0 + x | g)", "y ~ (x - 1 | g)", "y ~ (-1 + x | g)"};
    for (size_t i = 0; i < 3; i++) {
        f = parse(slope[i]);
        ck_assert_uint_eq(f->nlatent, 1);
        expect_term(f, 0, "g", "corr", "g", "x");
        gmm_formula_free(f);
    }

    f = parse("y ~ (x || g)");
    ck_assert_uint_eq(f->nlatent, 2);
    expect_term(f, 0, "g", "iid", "g", "(Intercept)");
    expect_term(f, 1, "g", "corr", "g.1", "x");
    gmm_formula_free(f);

    f = parse("y ~ (1 | a:b)");
    expect_term(f, 0, "a:b", "iid", "a:b", "(Intercept)");
    ck_assert_uint_eq(f->latent[0].ngroup, 2);
    ck_assert_str_eq(f->latent[0].group[1], "b");
    gmm_formula_free(f);

    f = parse("Strength ~ (1 | batch/cask)");
    ck_assert_uint_eq(f->nlatent, 2);
    expect_term(f, 0, "batch", "iid", "batch", "(Intercept)");
    expect_term(f, 1, "cask:batch", "iid", "cask:batch", "(Intercept)");
    ck_assert_str_eq(f->latent[1].group[0], "cask");
    gmm_formula_free(f);

    f = parse("y ~ (0 + factor(h) | g) + f(t, rw1)");
    ck_assert_uint_eq(f->nlatent, 2);
    expect_term(f, 0, "g", "corr", "g", "factor:h");
    ck_assert_int_eq(f->latent[1].bar, 0);
    gmm_formula_free(f);
}
END_TEST

START_TEST(test_bars_errors)
{
    static const struct {
        const char *text;
        size_t pos;
        const char *msg;
    } bad[] = {
        {"y ~ (1 | )", 9, "formula: expected the grouping column after '|'"},
        {"y ~ (0 | g)", 4, "formula: a random-effect term needs an effect (1, or a column)"},
        {"y ~ (x + x | g)", 9, "formula: an effect appears twice"},
        {"y ~ (x | g h)", 11, "formula: expected ')' after the grouping"},
        {"y ~ (x * z | g)", 7, "formula: expected '+', '-' or '|' in a random-effect term"},
        {"y ~ (log(x) | g)", 5,
         "formula: unknown function (random effects are 1, 0, NAME or factor(NAME))"},
        {"y ~ (x | g", 4, "formula: unbalanced '('"},
        {"y ~ x + 1 | g", 10,
         "formula: random-effect bars ('|') go in parentheses (a random intercept per level "
         "of g is (1 | g))"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gmm_formula *f = NULL;
        ck_assert_msg(gmm_formula_parse(bad[i].text, &f) == GMM_EPARSE, "%s", bad[i].text);
        ck_assert_ptr_null(f);
        ck_assert_msg(gmm_error_index() == bad[i].pos, "%s: error at %zu, expected %zu",
                      bad[i].text, gmm_error_index(), bad[i].pos);
        ck_assert_msg(!strcmp(gmm_error_message(), bad[i].msg), "%s: '%s'", bad[i].text,
                      gmm_error_message());
    }
}
END_TEST

Suite *mdl_formula_bars_suite(void)
{
    Suite *s = suite_create("mdl_formula_bars");
    TCase *tc = tcase_create("bars");
    tcase_add_test(tc, test_bars_meaning);
    tcase_add_test(tc, test_bars_errors);
    suite_add_tcase(s, tc);
    return s;
}
