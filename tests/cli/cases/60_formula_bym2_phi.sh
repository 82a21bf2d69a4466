# shellcheck shell=bash
# 60_formula_bym2_phi.sh -- bym2's phi on the logit scale, and the start values of f() terms:
# phi=P and variance=V as keys (checked against their domain, the caret under the value),
# held by 'KEY=VALUE fixed' or --fix f.NAME.KEY, recorded in the model file and held again by
# the commands that read it; a fit whose maximum is at phi -> 1 (the besag model) reaches it
# instead of stopping against phi = 1; hmc --sample-hyper's logitnormal prior for phi.
# The grid data are made here by integer hashing (the same counts with any awk).
# Sourced by tests/cli/run.sh (see there for the helpers).

bfx="$ROOT/tests/fixtures/bym2"
bym2_graph=data/flu_bybw_edges.csv
expect_caret() { expect_stderr "^ {$(($1 + 2))}\\^\$"; }

# An 8 x 8 grid (edges to the right and below) and Poisson counts with exposures around 50
# whose log rate is smooth over it (a slope and a parabola): the bym2 marginal likelihood
# rises towards phi -> 1, the besag model.
bym2_grid() {
    awk 'BEGIN { K = 8; print "i,j"
        for (r = 0; r < K; r++) for (c = 0; c < K; c++) { v = r * K + c
            if (c + 1 < K) print v "," v + 1; if (r + 1 < K) print v "," v + K } }' > "$1/edges.csv"
    awk 'function u(i, a, b) { return ((i * a + b) % 1009 + 0.5) / 1009 }
        function z(i) { return (u(i, 37, 11) + u(i, 101, 7) + u(i, 173, 3) + u(i, 263, 5) - 2) * sqrt(3) }
        BEGIN { K = 8; print "node,x,count,expected"
            for (r = 0; r < K; r++) for (c = 0; c < K; c++) {
                v = r * K + c; i = v + 1; x = (c - 3.5) / 3.5; w = (r - 3.5) / 3.5
                e = 40 + 20 * u(i, 7, 1); mu = e * exp(0.1 * x + 0.5 * w + 0.4 * x * x)
                y = mu + sqrt(mu) * z(i); y = y < 0 ? 0 : int(y + 0.5)
                printf "%d,%.4f,%d,%.4f\n", v, x, y, e } }' > "$1/grid.csv"
}

begin "bym2: phi=P and variance=V are start values, recorded with the formula"
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/default.json" "$bfx/districts.csv"
expect_exit 0
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, phi=0.5)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/m.json" "$bfx/districts.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"formula": "count ~ east \+ f\(node, bym2, graph=[^,]*flu_bybw_edges\.csv, phi=0\.5\)"'
# phi = 0.5 is the default start: the same fit, to the last digit
for p in loglik f.node.phi f.node.variance; do
    got=$(json_num "$CASE_TMP/m.json" "$p"); want=$(json_num "$CASE_TMP/default.json" "$p")
    [[ -n "$got" && "$got" == "$want" ]] || fail "$p: $got with phi=0.5, $want by default"
done
# another start, the same maximum
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, variance=3, phi=0.05)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/m2.json" "$bfx/districts.csv"
expect_exit 0
got=$(json_num "$CASE_TMP/m2.json" loglik); want=$(json_num "$CASE_TMP/default.json" loglik)
close_to "$got" "$want" 1e-6 abs || fail "loglik $got from variance=3, phi=0.05; $want from the default"

begin "bym2: a start value outside its domain is refused, naming the term, the key and the range"
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, phi=1.5)" \
    --likelihood poisson --exposure population "$bfx/districts.csv"
expect_exit 1
expect_stderr '^gmm-infer fit: formula: f\(node, bym2\): phi = 1\.5 is not in \(0, 1\)$'
expect_caret 64
expect_no_stderr 'read 140 rows'
expect_stdout_empty
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, variance=0)" \
    --likelihood poisson --exposure population "$bfx/districts.csv"
expect_exit 1
expect_stderr '^gmm-infer fit: formula: f\(node, bym2\): variance = 0 is not > 0$'
expect_caret 69
run "$GMM_INFER" fit --formula "count ~ east + f(node, besag, graph=$bym2_graph, phi=0.5)" \
    --likelihood poisson --exposure population "$bfx/districts.csv"
expect_exit 1
expect_stderr "^gmm-infer fit: formula: f\(node, besag\) has no parameter 'phi'"
expect_caret 61

begin "bym2: phi held at its start value by --fix f.node.phi and by 'phi=P fixed'"
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, phi=0.3)" \
    --fix f.node.phi --likelihood poisson --exposure population -o "$CASE_TMP/fix.json" \
    "$bfx/districts.csv"
expect_exit 0
expect_file "$CASE_TMP/fix.json" '"f\.node\.phi": 0\.29999999999999999,'
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, phi=0.3 fixed)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/fixed.json" "$bfx/districts.csv"
expect_exit 0
expect_file "$CASE_TMP/fixed.json" '"f\.node\.phi": 0\.29999999999999999,'
expect_file "$CASE_TMP/fixed.json" '"formula": ".*, phi=0\.3 fixed\)"'
for p in loglik f.node.variance intercept; do
    got=$(json_num "$CASE_TMP/fixed.json" "$p"); want=$(json_num "$CASE_TMP/fix.json" "$p")
    [[ -n "$got" && "$got" == "$want" ]] || fail "$p: $got with 'phi=0.3 fixed', $want with --fix"
done
got=$(json_num "$CASE_TMP/fixed.json" loglik)
awk -v a="$got" 'BEGIN { exit !(a < -806.9) }' || fail "loglik $got at phi = 0.3 is not below the maximum -806.88"

begin "bym2: a model with 'phi=P fixed' read back holds phi (loglik, hmc --sample-hyper, vi --learn-hyper)"
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph, phi=0.3 fixed)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/m.json" "$bfx/districts.csv"
expect_exit 0
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
got=$(json_num "$OUT" loglik); want=$(json_num "$CASE_TMP/m.json" loglik)
close_to "$got" "$want" 1e-10 || fail "loglik --model $got, the fit's $want"
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --chains 1 --warmup 20 --draws 5 \
    -o "$CASE_TMP/h.csv"
expect_exit 0
expect_stderr '^gmm-infer hmc: prior: f\.node\.variance ~ lognormal\('
expect_no_stderr 'prior: f\.node\.phi'
expect_file "$CASE_TMP/h.csv" '^\.chain,.*,energy__,f\.node\.variance,intercept,coef\.east,f\[1\],'
expect_file "$CASE_TMP/h.csv.json" '"f\.node\.phi": 0\.29999999999999999'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --prior 'f.node.phi=logitnormal(0,1)'
expect_exit 2
expect_stderr "--prior: 'f\.node\.phi' is not a sampled parameter \(it is held by --fix or the formula's 'fixed'\)"
run "$GMM_INFER" vi --model "$CASE_TMP/m.json" --learn-hyper --max-iter 50 --quiet -o "$CASE_TMP/v.json"
expect_exit 0
expect_file "$CASE_TMP/v.json" '"f\.node\.phi": 0\.29999999999999999,'

begin "a one-term iid formula: 'variance=V fixed' held, and held again from its model file"
lfx="$ROOT/tests/fixtures/lme4"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid, variance=0.5 fixed)' -o "$CASE_TMP/m.json" \
    "$lfx/gauss.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"f\.g\.variance": 0\.5,'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --chains 1 --warmup 20 --draws 5
expect_exit 0
expect_no_stderr 'prior: f\.g\.variance'
expect_stderr 'prior: likelihood\.variance ~ lognormal\('

begin "bym2 whose maximum is at phi -> 1 (the besag model): the fit reaches it, not stopping at phi = 1"
bym2_grid "$CASE_TMP"
run "$GMM_INFER" fit --formula "count ~ x + f(node, besag, graph=$CASE_TMP/edges.csv)" \
    --likelihood poisson --exposure expected -o "$CASE_TMP/besag.json" "$CASE_TMP/grid.csv"
expect_exit 0
run "$GMM_INFER" fit --formula "count ~ x + f(node, bym2, graph=$CASE_TMP/edges.csv)" \
    --likelihood poisson --exposure expected -o "$CASE_TMP/bym2.json" "$CASE_TMP/grid.csv"
expect_exit 0
expect_no_stderr 'edge of the model.s domain|must be in \(0, 1\)'
stop=$(sed -n 's/^ *"stop": "\([a-z_]*\)".*/\1/p' "$CASE_TMP/bym2.json")
[[ "$stop" != domain ]] || fail "stop: $stop"
phi=$(json_num "$CASE_TMP/bym2.json" f.node.phi)
awk -v p="$phi" 'BEGIN { exit !(p > 0.999 && p < 1) }' || fail "phi $phi, not near 1"
got=$(json_num "$CASE_TMP/bym2.json" loglik); want=$(json_num "$CASE_TMP/besag.json" loglik)
awk -v a="$got" -v b="$want" 'BEGIN { exit !(a >= b - 1e-4) }' ||
    fail "bym2 loglik $got, below the besag maximum $want"
# the gradient on the logit scale near the bound: differences keep phi in (0, 1)
sed 's/"f\.node\.phi": [^,]*/"f.node.phi": 0.99999899999999997/' "$CASE_TMP/bym2.json" > "$CASE_TMP/near.json"
run "$GMM_INFER" gradcheck --model "$CASE_TMP/near.json"
expect_exit 0
expect_stdout '^f\.node\.phi,0\.99999899999999997,.*,true$'

begin "hmc --sample-hyper: bym2's phi sampled on its logit scale under a logitnormal prior"
run "$GMM_INFER" fit --formula "count ~ east + f(node, bym2, graph=$bym2_graph)" \
    --likelihood poisson --exposure population -o "$CASE_TMP/m.json" "$bfx/districts.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --chains 1 --warmup 30 \
    --draws 5 --prior 'f.node.phi=logitnormal(0.5,1.5)' -o "$CASE_TMP/h.csv"
expect_exit 0
expect_stderr '^gmm-infer hmc: prior: f\.node\.phi ~ logitnormal\(0\.5, 1\.5\)$'
expect_file "$CASE_TMP/h.csv.json" '"f\.node\.phi": "logitnormal\(0\.5, 1\.5\)"'
awk -F, 'NR == 1 { for (k = 1; k <= NF; k++) if ($k == "f.node.phi") c = k; next }
         !c || !($c > 0 && $c < 1) { bad = 1 } END { exit bad || NR < 6 }' "$CASE_TMP/h.csv" ||
    fail "the draws' f.node.phi are not all in (0, 1)"
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --prior 'f.node.phi=lognormal(0,1)'
expect_exit 2
expect_stderr '^gmm-infer hmc: --prior: f\.node\.phi takes a logitnormal prior \(on its logit: it is in \(0, 1\)\)$'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --chains 1 --warmup 5 --draws 2
expect_exit 0
expect_stderr '^gmm-infer hmc: prior: f\.node\.phi ~ logitnormal\('
