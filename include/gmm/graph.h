/* graph.h -- undirected graphs for GMRFs: the symbolic structure (CSR), node
 * labels, connected components, and the reverse Cuthill-McKee ordering that
 * turns a sparse graph precision into a banded one.  Symbolic only (no
 * numbers but the edge lengths) and no files: callers turn a table's
 * columns into the arrays taken here.
 */
#ifndef GMM_GRAPH_H
#define GMM_GRAPH_H

#include <stddef.h>

#include "gmm/status.h"

/* A graph is built once from an edge list ("i,j[,length]" rows) and never
 * changes its edges afterwards; only isolated nodes can be appended (nodes of
 * the data file that are absent from the edge list).
 *
 * NODES AND LABELS.  Node ids in an edge list are labels -- integers or
 * strings -- mapped to indices 0, 1, ... in order of first appearance (row by
 * row, i before j).  Labels are compared as text after trimming surrounding
 * blanks: "7" and "07" are different nodes.  A graph built from index arrays
 * (gmm_graph_from_edges) has no labels; its messages and gmm_graph_node_label
 * use the decimal index.
 *
 * CSR.  The neighbours of node v are adj[ptr[v]] .. adj[ptr[v+1]-1], in
 * increasing order, each undirected edge appearing in both endpoints' lists;
 * len[k] is the length of the edge adj[k] (1.0 for every edge when the edge
 * list had no length column).  Duplicate identical edges are merged (counted
 * in nmerged, so the caller can warn); there are no self-loops.
 *
 * PERMUTATIONS.  An ordering is a pair perm[new] = old, iperm[old] = new, both
 * length n.  The band of a symmetric matrix whose pattern is the graph's
 * adjacency (plus the diagonal), with rows and columns in the new order, has
 * lower bandwidth gmm_graph_bandwidth(g, iperm). */

typedef struct gmm_graph_labels gmm_graph_labels; /* private: label arena + hash */

typedef struct {
    size_t n;             /* nodes */
    size_t nedge;         /* distinct undirected edges */
    size_t *ptr;          /* n + 1 */
    size_t *adj;          /* 2 nedge neighbour indices, increasing within a node */
    double *len;          /* 2 nedge edge lengths, parallel to adj */
    int has_length;       /* nonzero when lengths were given */
    size_t nmerged;       /* duplicate identical edges merged away */
    size_t dup_line;      /* source line of the first merged duplicate (0: none/unknown) */
    size_t nisolated_added; /* nodes appended by gmm_graph_node_add */
    gmm_graph_labels *labels; /* NULL for an index-built graph */
} gmm_graph;

/* ---- building ------------------------------------------------------------- */

/* Build a graph on nodes 0..n-1 from m edges (ei[k], ej[k]), lengths len[k]
 * (len NULL: every length 1, has_length 0).  Nodes without an edge are
 * isolated.  For messages, the edge list is called `file` (NULL: "edge
 * list") and edge k came from line line[k] (line NULL: messages say "edge k",
 * 0-based).  Errors, each GMM_EPARSE with "FILE:LINE: ..." naming the first
 * offending line: a self-loop; a length that is not finite or not > 0; an
 * edge listed again with a different length (naming both lines).  m == 0 is
 * "the edge list has no edges" (GMM_EPARSE).  An index >= n is GMM_EINVAL.
 * Duplicate identical edges are merged (nmerged, dup_line).  *out is freed
 * with gmm_graph_free.  O(n + m) time and memory. */
gmm_status gmm_graph_from_edges(size_t n, size_t m, const size_t *ei, const size_t *ej,
                                const double *len, const char *file, const size_t *line,
                                gmm_graph **out);

/* A column of node labels read from the rows of a file, and where each
 * came from, for messages: label[r] (n of them, each trimmed of
 * surrounding blanks) from line line[r] of `file`, in the column named
 * `col`.  file NULL: "edge list" (or "node list"); line NULL: messages say
 * "edge R" (or "row R"), R 0-based.  The arrays are the caller's. */
typedef struct {
    size_t n;
    const char *const *label;
    const char *file;
    const size_t *line;
    const char *col;
} gmm_graph_column;

/* Build a labelled graph from ci->n edges given by the labels of their
 * ends: edge k joins ci->label[k] and cj->label[k] (nodes numbered in order
 * of first appearance, edge by edge, i before j) and has length len[k] (len
 * NULL: every length 1, has_length 0); messages name ci's file and lines.
 * Errors: gmm_graph_check_labels's, every error of gmm_graph_from_edges,
 * GMM_ENOMEM "FILE: out of memory reading M edges".  O(m) expected (labels
 * are hashed). */
gmm_status gmm_graph_from_labels(const gmm_graph_column *ci, const gmm_graph_column *cj,
                                 const double *len, gmm_graph **out);

/* GMM_EPARSE "FILE:LINE: column 'C': empty node id" at the first label of
 * an edge list (edge by edge, i before j) that is empty once trimmed, with
 * gmm_error_index() the edge; GMM_EINVAL for a NULL or columns of unequal
 * length.  gmm_graph_from_labels checks this first; a caller that converts
 * more of each row (the lengths) checks it before, so that a row's empty
 * node id is reported before its malformed length.  O(m). */
gmm_status gmm_graph_check_labels(const gmm_graph_column *ci, const gmm_graph_column *cj);

/* A labelled graph with no nodes and no edges, for nodes that are only
 * levels of a column (an iid effect): gmm_graph_attach_nodes adds them, in
 * order of first appearance.  GMM_ENOMEM. */
gmm_status gmm_graph_empty(gmm_graph **out);

void gmm_graph_free(gmm_graph *g); /* NULL-safe */

/* ---- nodes ------------------------------------------------------------------- */

/* The label of node v (for an index-built graph: its decimal index, written
 * to buf).  buf: at least 24 bytes; the result is valid until the next call
 * with the same buf or a change to g. */
const char *gmm_graph_node_label(const gmm_graph *g, size_t v, char *buf);

/* Find the node with the given label (surrounding blanks ignored).  Returns
 * 1 and sets *v when present, 0 otherwise.  An index-built graph matches
 * decimal indices < n. */
int gmm_graph_node_find(const gmm_graph *g, const char *label, size_t *v);

/* Append an isolated node with the given label (not already present: that
 * is GMM_EINVAL) and return its index in *v (== old n).  Only for a labelled
 * graph (gmm_graph_from_labels, gmm_graph_empty).  GMM_ENOMEM on allocation failure; g is
 * unchanged then. */
gmm_status gmm_graph_node_add(gmm_graph *g, const char *label, size_t *v);

/* Attach rows to nodes by their labels: node[r] (c->n entries, caller
 * allocated) receives the node labelled c->label[r].  A label absent from
 * the graph becomes a new isolated node (gmm_graph_node_add); the new
 * nodes' indices are returned in *added (caller frees with gmm_free; NULL
 * when none), their count in *nadded, so the caller can warn.  strict
 * nonzero: an absent label is instead GMM_EPARSE "FILE:LINE: node 'x' is
 * not in the edge list".  An empty label is GMM_EPARSE "FILE:LINE: column
 * 'C': empty node id".  On error g may have gained some isolated nodes. */
gmm_status gmm_graph_attach_nodes(gmm_graph *g, const gmm_graph_column *c, int strict,
                                  size_t *node, size_t **added, size_t *nadded);

/* ---- structure -------------------------------------------------------------- */

/* Connected components: comp[v] (n entries) in 0..*ncomp-1, numbered in the
 * order of each component's smallest node.  O(n + m); GMM_ENOMEM. */
gmm_status gmm_graph_components(const gmm_graph *g, size_t *comp, size_t *ncomp);

/* ---- ordering (src/graph/rcm.c) --------------------------------------------- */

/* Reverse Cuthill-McKee: perm[new] = old and iperm[old] = new (n entries
 * each, caller allocated), a bijection on 0..n-1.  Per connected component
 * (components placed one after another, in the order of their smallest
 * node): a pseudo-peripheral start node (George & Liu 1979: starting from a
 * node of minimum degree, repeated breadth-first level structures rooted at
 * a minimum-degree node of the last level, until the eccentricity stops
 * growing), then breadth-first search
 * visiting each node's unvisited neighbours in increasing degree (ties: lower
 * index first), then the component's order reversed.  Deterministic.
 * O(m log dmax) time beyond the O(n + m) searches; O(n + m) workspace
 * (GMM_ENOMEM): each component is first copied in breadth-first order, so
 * the searches stay in cache even when the input numbering is scrambled
 * (1e6 nodes: about 0.3 s of CPU, tests/bench/bench_rcm.c). */
gmm_status gmm_graph_rcm(const gmm_graph *g, size_t *perm, size_t *iperm);

/* Lower bandwidth of the adjacency pattern under the ordering iperm
 * (iperm[old] = new; NULL: the graph's own order): max |iperm[u] - iperm[v]|
 * over edges, 0 for a graph without edges.  O(n + m). */
size_t gmm_graph_bandwidth(const gmm_graph *g, const size_t *iperm);

/* Profile (envelope size) under iperm (NULL: own order): sum over new rows r
 * of r - f(r), f(r) the smallest new index among r and r's neighbours.
 * O(n + m). */
size_t gmm_graph_profile(const gmm_graph *g, const size_t *iperm);

/* Nonzero when perm and iperm are inverse bijections on 0..n-1. */
int gmm_graph_perm_check(size_t n, const size_t *perm, const size_t *iperm);

#endif
