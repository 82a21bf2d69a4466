/* spec.h -- the parser of the grammar shared by kernel specs and graph
 * precision specs, into a tree the model layer checks against its tables
 * (the parser knows no kernel names).
 */
#ifndef GMM_SPEC_H
#define GMM_SPEC_H

#include <stddef.h>

#include "gmm/status.h"

/* The grammar:
 *
 *   spec   := term ('+' term)*
 *   term   := factor ('*' factor)*
 *   factor := NAME [ '(' [ KEY '=' NUMBER (',' KEY '=' NUMBER)* ] ')' ] | '(' spec ')'
 *
 * Whitespace is ignored.  NAME and KEY are [A-Za-z_][A-Za-z0-9_-]*; NUMBER is
 * what strtod reads (finite).  Position fields point at the offending
 * character in the model layer's messages.
 *
 * The tree: a node is a SUM or PRODUCT of children, or a FACTOR (a leaf).
 * Leaves are numbered 0, 1, ... left to right (`index`), which gives the
 * parameter names `<index>.<name>.<key>`. */

typedef enum { GMM_SPEC_SUM, GMM_SPEC_PRODUCT, GMM_SPEC_FACTOR } gmm_spec_type;

typedef struct {
    char *key;
    double value;
    size_t pos;      /* 0-based offset of the key in the spec text */
} gmm_spec_arg;

typedef struct gmm_spec_node {
    gmm_spec_type type;
    size_t pos;                      /* offset of the node's first character */
    /* SUM / PRODUCT */
    size_t nchild;
    struct gmm_spec_node **child;
    /* FACTOR */
    char *name;
    size_t index;                    /* leaf number, left to right */
    size_t narg;
    gmm_spec_arg *arg;
} gmm_spec_node;

/* Parse `text` into a tree (*out, freed with gmm_spec_free; *out is NULL on
 * failure).  On a syntax error returns GMM_EPARSE with gmm_error_index() the
 * 0-based offset of the offending character (strlen(text) when the text
 * ends too early) and a message that does not repeat the offset, such as
 * "expected '=' after 'variance'" or "unexpected end of spec: expected ')'";
 * the CLI prints the text with a caret under that character
 * (gmm_spec_caret).  Other errors: GMM_EINVAL (NULL), GMM_ENOMEM.
 *
 * Shape of the tree: a SUM or PRODUCT has >= 2 children (a single operand
 * is returned unwrapped, so "(a)" is a FACTOR); a parenthesised group of the
 * same type as its parent is spliced in ("a + (b + c)" is one SUM of three
 * leaves), which never changes the leaf order.  A node's pos is the offset
 * of its first non-blank character (for a group, the first character inside
 * its parentheses); a FACTOR's pos is its name.  Parentheses nest at most
 * 64 deep.  NUMBER underflow to a subnormal or zero is accepted; overflow,
 * inf and nan are errors.  O(strlen(text)). */
gmm_status gmm_spec_parse(const char *text, gmm_spec_node **out);
void gmm_spec_free(gmm_spec_node *node);
/* Number of leaves (factors) in the tree. */
size_t gmm_spec_nleaves(const gmm_spec_node *node);
/* Write into buf (size bufsize, always NUL-terminated, truncated if short)
 * two lines for error messages, each indented by two blanks: the text
 * (control characters shown as blanks) and a caret under offset pos
 * (clamped to strlen(text); UTF-8 sequences count as one column).  No
 * trailing newline:  "  matern32(variance=)\n                    ^". */
void gmm_spec_caret(const char *text, size_t pos, char *buf, size_t bufsize);

/* Write the spec back as text with current values: each factor's arguments
 * are its keys as written, except that a key named in `names` as
 * "<index>.<name>.<key>" takes its value from `values` (nparam entries), and
 * such parameters the spec omitted are appended.  Values use %.17g, so the
 * text parses back to the same doubles.  Returns the length needed
 * (snprintf-style; buf may be NULL when size is 0). */
size_t gmm_spec_format(const gmm_spec_node *node, size_t nparam, char *const *names,
                       const double *values, char *buf, size_t size);

#endif
