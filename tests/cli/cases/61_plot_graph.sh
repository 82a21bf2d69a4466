# shellcheck shell=bash
# 61_plot_graph.sh -- scripts/plot-graph on predictions of a graph model:
# a PNG, --help, bad columns (exit 1) and usage errors (exit 2); --tile on the bei lattice.  Skipped
# (with a note) where matplotlib is not installed: `make check` does not
# need it (scripts/install-deps.sh --demo installs it).
# Sourced by tests/cli/run.sh (see there for the helpers).

if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    plot="$ROOT/scripts/plot-graph"
    nodes=data/chicago_road_nodes.csv
    edges=data/chicago_road_edges.csv

    begin "plot-graph --help documents the options, exit 0"
    run "$plot" --help
    expect_exit 0
    expect_stdout '^usage: plot-graph '
    expect_stdout -- '--value NAME'
    expect_stdout -- '--nodes FILE'
    expect_stderr_empty

    begin "plot-graph draws the predictions of a Chicago fit as a PNG"
    run "$GMM_INFER" fit "$nodes" --graph "$edges" --precision 'edge-ou(lengthscale=20)' \
        --node node --y count -o "$CASE_TMP/m.json"
    expect_exit 0
    run "$GMM_INFER" predict --model "$CASE_TMP/m.json" -o "$CASE_TMP/p.csv"
    expect_exit 0
    run "$plot" --nodes "$nodes" --edges "$edges" --predict "$CASE_TMP/p.csv" --value var \
        -o "$CASE_TMP/var.png"
    expect_exit 0
    expect_stderr_empty
    [[ $(head -c 8 "$CASE_TMP/var.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
        fail "var.png is not a PNG"
    run bash -c '"$1" --nodes "$2" --value mean -o "$3" < "$4"' _ "$plot" "$nodes" \
        "$CASE_TMP/mean.png" "$CASE_TMP/p.csv"
    expect_exit 0
    expect_file "$CASE_TMP/mean.png"

    begin "plot-graph: a missing column is exit 1 naming it; no -o is exit 2"
    printf 'node,mean\n0,1\n' >"$CASE_TMP/p.csv"
    run "$plot" --nodes "$nodes" --predict "$CASE_TMP/p.csv" --value rate -o "$CASE_TMP/x.png"
    expect_exit 1
    expect_stderr "^plot-graph: $CASE_TMP/p.csv: no column 'rate' \\(columns: node, mean\\)\$"
    expect_no_file "$CASE_TMP/x.png"
    run "$plot" --nodes "$nodes" --predict "$CASE_TMP/p.csv"
    expect_exit 2
    expect_stderr 'required: -o/--output'

    begin "plot-graph --tile draws a lattice's cells as squares; a bad side is exit 2"
    printf 'row,mean\n1,0.5\n2,-1\n3,NaN\n' >"$CASE_TMP/g.csv"
    run "$plot" --nodes data/bei_grid_cells.csv --node cell --predict-node row \
        --predict "$CASE_TMP/g.csv" --tile 10 -o "$CASE_TMP/tile.png"
    expect_exit 0
    expect_stderr_empty
    [[ $(head -c 8 "$CASE_TMP/tile.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
        fail "tile.png is not a PNG"
    run "$plot" --nodes data/bei_grid_cells.csv --node cell --tile -1 -o "$CASE_TMP/t.png"
    expect_exit 2
    expect_stderr "--tile wants a positive side length, got '-1'"
    expect_no_file "$CASE_TMP/t.png"
else
    echo "61_plot_graph.sh: python3-matplotlib not installed; plot-graph not tested" >&2
fi
