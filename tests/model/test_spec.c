/* test_spec.c -- the spec grammar: trees of good specs (positions, leaf
 * numbers, flattening) and every syntax error with its exact offset. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/spec.h"

static gmm_spec_node *parse_ok(const char *text)
{
    gmm_spec_node *n = NULL;
    gmm_status st = gmm_spec_parse(text, &n);
    ck_assert_msg(st == GMM_OK, "'%s': %s", text, gmm_error_message());
    ck_assert_ptr_nonnull(n);
    return n;
}

/* Render a tree as a canonical string: S[...] / P[...] / name#index@pos(k@pos=v). */
static void render(const gmm_spec_node *n, char *buf, size_t cap)
{
    size_t len = strlen(buf);
    if (n->type == GMM_SPEC_FACTOR) {
        snprintf(buf + len, cap - len, "%s#%zu@%zu", n->name, n->index, n->pos);
        if (n->narg) {
            strncat(buf, "(", cap - strlen(buf) - 1);
            for (size_t k = 0; k < n->narg; k++) {
                len = strlen(buf);
                snprintf(buf + len, cap - len, "%s%s@%zu=%g", k ? "," : "", n->arg[k].key,
                         n->arg[k].pos, n->arg[k].value);
            }
            strncat(buf, ")", cap - strlen(buf) - 1);
        }
        return;
    }
    snprintf(buf + len, cap - len, "%c@%zu[", n->type == GMM_SPEC_SUM ? 'S' : 'P', n->pos);
    for (size_t k = 0; k < n->nchild; k++) {
        if (k)
            strncat(buf, " ", cap - strlen(buf) - 1);
        render(n->child[k], buf, cap);
    }
    strncat(buf, "]", cap - strlen(buf) - 1);
}

static void check_tree(const char *text, const char *want, size_t nleaves)
{
    gmm_spec_node *n = parse_ok(text);
    char buf[1024] = "";
    render(n, buf, sizeof buf);
    ck_assert_msg(!strcmp(buf, want), "'%s' parsed as %s, expected %s", text, buf, want);
    ck_assert_uint_eq(gmm_spec_nleaves(n), nleaves);
    gmm_spec_free(n);
}

START_TEST(test_good_specs)
{
    check_tree("matern32", "matern32#0@0", 1);
    check_tree("matern32(variance=1.5, lengthscale=0.25)",
               "matern32#0@0(variance@9=1.5,lengthscale@23=0.25)", 1);
    check_tree("  rbf ( variance = 2 ) ", "rbf#0@2(variance@8=2)", 1);
    check_tree("\tmatern_52-b()\n", "matern_52-b#0@1", 1);
    check_tree("a(x=1e-3,y=-2,z=+.5,w=1e-310)", "a#0@0(x@2=0.001,y@9=-2,z@14=0.5,w@20=1e-310)",
               1);
    check_tree("a + b * c", "S@0[a#0@0 P@4[b#1@4 c#2@8]]", 3);
    check_tree("a*b + c", "S@0[P@0[a#0@0 b#1@2] c#2@6]", 3);
    check_tree("(a + b) * c", "P@0[S@1[a#0@1 b#1@5] c#2@10]", 3);
    check_tree("a * (b + c) * d", "P@0[a#0@0 S@5[b#1@5 c#2@9] d#3@14]", 4);
    check_tree("((a))", "a#0@2", 1);
    check_tree("( a + b )", "S@2[a#0@2 b#1@6]", 2);
}
END_TEST

/* Redundant parentheses around a same-type group are spliced away; leaf
 * order (and so parameter names) is the text order either way. */
START_TEST(test_flattening)
{
    check_tree("a + (b + c) + d", "S@0[a#0@0 b#1@5 c#2@9 d#3@14]", 4);
    check_tree("(a + b) + c", "S@0[a#0@1 b#1@5 c#2@10]", 3);
    check_tree("a * (b * (c * d))", "P@0[a#0@0 b#1@5 c#2@10 d#3@14]", 4);
    check_tree("a * (b + c)", "P@0[a#0@0 S@5[b#1@5 c#2@9]]", 3);
    check_tree("(a * b) + (c * d)", "S@0[P@1[a#0@1 b#1@5] P@11[c#2@11 d#3@15]]", 4);
}
END_TEST

START_TEST(test_deep_nesting)
{
    char text[300];
    memset(text, '(', 64);
    text[64] = 'a';
    memset(text + 65, ')', 64);
    text[129] = '\0';
    check_tree(text, "a#0@64", 1);
    memset(text, '(', 65);
    text[65] = '\0';
    gmm_spec_node *n = (gmm_spec_node *)&n;
    ck_assert_int_eq(gmm_spec_parse(text, &n), GMM_EPARSE);
    ck_assert_ptr_null(n);
    ck_assert_uint_eq(gmm_error_index(), 64);
    ck_assert_str_eq(gmm_error_message(), "parentheses nested more than 64 deep");
}
END_TEST

static const struct {
    const char *text;
    size_t pos;
    const char *msg;
} bad[] = {
    {"", 0, "unexpected end of spec: expected a kernel name"},
    {"   ", 3, "unexpected end of spec: expected a kernel name"},
    {"matern32(variance=)", 18, "expected a number after 'variance='"},
    {"matern32(variance= ,x=1)", 19, "expected a number after 'variance='"},
    {"matern32(variance=", 18, "unexpected end of spec: expected a number after 'variance='"},
    {"matern32(variance 1)", 18, "expected '=' after 'variance'"},
    {"matern32(variance", 17, "unexpected end of spec: expected '=' after 'variance'"},
    {"matern32(variance=abc)", 18, "number 'abc' is not valid"},
    {"matern32(variance=1.5x)", 18, "number '1.5x' is not valid"},
    {"matern32(variance=1+2)", 18, "number '1+2' is not valid"},
    {"matern32(variance=inf)", 18, "number 'inf' is not finite"},
    {"matern32(variance=nan)", 18, "number 'nan' is not finite"},
    {"matern32(variance=1e999)", 18, "number '1e999' is not finite"},
    {"a)", 1, "unexpected ')'"},
    {"a + b )", 6, "unexpected ')'"},
    {"a b", 2, "unexpected 'b': expected '+', '*' or the end of the spec"},
    {"a rbf2", 2, "unexpected 'rbf2': expected '+', '*' or the end of the spec"},
    {"a(x=1)(y=2)", 6, "unexpected '(': expected '+', '*' or the end of the spec"},
    {"a +", 3, "unexpected end of spec: expected a kernel name"},
    {"a + * b", 4, "unexpected '*': expected a kernel name"},
    {"a ++ b", 3, "unexpected '+': expected a kernel name"},
    {"3a", 0, "unexpected '3': expected a kernel name"},
    {"a + \xc3\xa9", 4, "unexpected byte 0xC3: expected a kernel name"},
    {"(a + b", 6, "unexpected end of spec: expected ')'"},
    {"(a + b]", 6, "unexpected ']': expected ')'"},
    {"(a + b c)", 7, "unexpected 'c': expected ')'"},
    {"()", 1, "unexpected ')': expected a kernel name"},
    {"a(x=1,)", 6, "unexpected ')': expected a parameter name after ','"},
    {"a(x=1 y=2)", 6, "unexpected 'y': expected ',' or ')'"},
    {"a(x=1", 5, "unexpected end of spec: expected ',' or ')'"},
    {"a(x=1, x=2)", 7, "parameter 'x' given twice in 'a'"},
    {"a(xy=1, x=2, xy=3)", 13, "parameter 'xy' given twice in 'a'"},
    {"a(1=2)", 2, "unexpected '1': expected a parameter name or ')'"},
    {"a(", 2, "unexpected end of spec: expected a parameter name or ')'"},
    {"a(x=1) * (b(y=2) + c(z=))", 23, "expected a number after 'z='"},
};

START_TEST(test_errors)
{
    size_t k = (size_t)_i;
    gmm_spec_node *n = (gmm_spec_node *)&n;
    gmm_status st = gmm_spec_parse(bad[k].text, &n);
    ck_assert_msg(st == GMM_EPARSE, "'%s' parsed (status %d)", bad[k].text, (int)st);
    ck_assert_ptr_null(n);
    ck_assert_msg(gmm_error_index() == bad[k].pos, "'%s': offset %zu, expected %zu",
                  bad[k].text, gmm_error_index(), bad[k].pos);
    ck_assert_str_eq(gmm_error_message(), bad[k].msg);
}
END_TEST

START_TEST(test_caret)
{
    char buf[256];
    gmm_spec_caret("matern32(variance=)", 18, buf, sizeof buf);
    ck_assert_str_eq(buf, "  matern32(variance=)\n                    ^");
    gmm_spec_caret("ab", 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "  ab\n  ^");
    gmm_spec_caret("ab", 99, buf, sizeof buf); /* past the end: just after the text */
    ck_assert_str_eq(buf, "  ab\n    ^");
    gmm_spec_caret("a\tb\nc", 4, buf, sizeof buf); /* tabs/newlines shown as blanks */
    ck_assert_str_eq(buf, "  a b c\n      ^");
    gmm_spec_caret("\xc3\xa9+x", 3, buf, sizeof buf); /* UTF-8: one column per character */
    ck_assert_str_eq(buf, "  \xc3\xa9+x\n    ^");
    gmm_spec_caret("abcdef", 5, buf, 8); /* truncated, still terminated */
    ck_assert_str_eq(buf, "  abcde");
    gmm_spec_caret("abc", 1, buf, 1);
    ck_assert_str_eq(buf, "");
    gmm_spec_caret(NULL, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "  \n  ^");
}
END_TEST

START_TEST(test_null_and_free)
{
    gmm_spec_node *n;
    ck_assert_int_eq(gmm_spec_parse(NULL, &n), GMM_EINVAL);
    ck_assert_int_eq(gmm_spec_parse("a", NULL), GMM_EINVAL);
    gmm_spec_free(NULL);
    ck_assert_uint_eq(gmm_spec_nleaves(NULL), 0);
}
END_TEST

/* Every allocation failed in turn: ENOMEM (no tree, no leak) or success. */
START_TEST(test_out_of_memory)
{
    const char *text = "a(x=1,y=2) + (b * c(z=3)) * d + (e + f)";
    int ok = 0;
    for (long k = 0; k < 200 && !ok; k++) {
        gmm_spec_node *n = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_spec_parse(text, &n);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            ck_assert_uint_eq(gmm_spec_nleaves(n), 6);
            gmm_spec_free(n);
            ok = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert_ptr_null(n);
        }
    }
    ck_assert(ok);
}
END_TEST

START_TEST(test_format_round_trip)
{
    gmm_spec_node *t = NULL, *u = NULL;
    ck_assert_int_eq(gmm_spec_parse("a(x=1) * (b + c(y=2, h=3))", &t), GMM_OK);
    char *names[] = {"0.a.x", "2.c.y", "1.b.z"};
    double values[] = {0.1, 1.0 / 3.0, 5e-324};
    char buf[256];
    size_t need = gmm_spec_format(t, 3, names, values, NULL, 0);
    ck_assert_uint_eq(gmm_spec_format(t, 3, names, values, buf, sizeof buf), need);
    ck_assert_str_eq(buf, "a(x=0.10000000000000001) * (b(z=4.9406564584124654e-324) + "
                          "c(y=0.33333333333333331, h=3))");
    ck_assert_int_eq(gmm_spec_parse(buf, &u), GMM_OK);
    ck_assert(u->child[1]->child[1]->arg[0].value == 1.0 / 3.0);
    ck_assert(u->child[1]->child[0]->arg[0].value == 5e-324);
    /* Truncation still reports the full length and terminates. */
    char small[8];
    ck_assert_uint_eq(gmm_spec_format(t, 3, names, values, small, sizeof small), need);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    gmm_spec_free(t);
    gmm_spec_free(u);
}
END_TEST

extern Suite *model_spec_suite(void);
Suite *model_spec_suite(void)
{
    Suite *s = suite_create("model_spec");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, test_good_specs);
    tcase_add_test(tc, test_flattening);
    tcase_add_test(tc, test_deep_nesting);
    tcase_add_loop_test(tc, test_errors, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, test_caret);
    tcase_add_test(tc, test_null_and_free);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_format_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
