# shellcheck shell=bash
# 38_counts.sh -- count and binary outcomes through the Laplace approximation:
# the shipped examples, the model file, and every bad outcome named by file,
# line and column.

begin "coal disasters: Poisson fit with exposure converges; predict gives rates"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure \
    --kernel matern32 -o "$CASE_TMP/coal.json"
expect_exit 0
expect_file "$CASE_TMP/coal.json" '"likelihood": "poisson"'
expect_file "$CASE_TMP/coal.json" '"converged": true'
expect_file "$CASE_TMP/coal.json" '"exposure": "exposure"'
expect_file "$CASE_TMP/coal.json" '"intercept": '
run "$GMM_INFER" predict --model "$CASE_TMP/coal.json" --grid 1900:1901:1
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
expect_stdout '^1900,'
run "$GMM_INFER" gradcheck --model "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" loglik --model "$CASE_TMP/coal.json"
expect_exit 0
expect_stdout '"approximation": "laplace"'
expect_stdout '"newton_iterations": '

begin "gradcheck of a count model away from the optimum, every likelihood parameter"
run "$GMM_INFER" gradcheck "$ROOT/data/coal.csv" --likelihood 'negbinomial(dispersion=3)' \
    --exposure exposure --kernel 'matern32 + matern12(variance=0.2, lengthscale=3)'
expect_exit 0
expect_stdout '^likelihood\.dispersion,3,.*,true$'
expect_stdout '^intercept,.*,true$'

begin "influenza districts: Poisson on the graph with population as exposure"
run "$GMM_INFER" fit "$ROOT/data/flu_bybw_nodes.csv" --graph "$ROOT/data/flu_bybw_edges.csv" \
    --node node --y count_total --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$CASE_TMP/flu.json"
expect_exit 0
expect_file "$CASE_TMP/flu.json" '"converged": true'
run "$GMM_INFER" predict --model "$CASE_TMP/flu.json"
expect_exit 0
expect_stdout '^node,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'

begin "bernoulli outcomes; --no-intercept; --fix intercept"
printf 'x,y\n1,0\n2,1\n3,1\n4,0\n5,1\n6,1\n7,1\n8,0\n' > "$CASE_TMP/b.csv"
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --likelihood bernoulli --kernel matern12
expect_exit 0
expect_stdout '"intercept": '
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --likelihood bernoulli --kernel matern12 --no-intercept
expect_exit 0
expect_no_stdout '"intercept"'
run "$GMM_INFER" fit "$CASE_TMP/b.csv" --likelihood bernoulli --kernel matern12 --fix intercept \
    --intercept 0.25
expect_exit 0
expect_stdout '"intercept": 0\.25$'

begin "bad outcomes and exposures name file, line and column"
printf 'x,y,e\n1,2,1\n2,-1,1\n3,0,1\n' > "$CASE_TMP/neg.csv"
run "$GMM_INFER" loglik "$CASE_TMP/neg.csv" --likelihood poisson --kernel matern12
expect_exit 1
expect_stderr "neg\.csv:3: column 'y': .*non-negative integer"
printf 'x,y,e\n1,2,1\n2,1.5,1\n' > "$CASE_TMP/frac.csv"
run "$GMM_INFER" fit "$CASE_TMP/frac.csv" --likelihood 'negbinomial' --kernel matern12
expect_exit 1
expect_stderr "frac\.csv:3: column 'y'"
printf 'x,y\n1,0\n2,2\n' > "$CASE_TMP/two.csv"
run "$GMM_INFER" loglik "$CASE_TMP/two.csv" --likelihood bernoulli --kernel matern12
expect_exit 1
expect_stderr "two\.csv:3: column 'y'"
printf 'x,y,e\n1,2,1\n2,1,0\n' > "$CASE_TMP/e0.csv"
run "$GMM_INFER" loglik "$CASE_TMP/e0.csv" --likelihood poisson --exposure e --kernel matern12
expect_exit 1
expect_stderr "e0\.csv:3: column 'e': exposure"
printf 'x,y,e\n1,2,1\n2,1,\n3,,\n' > "$CASE_TMP/emiss.csv"
run "$GMM_INFER" loglik "$CASE_TMP/emiss.csv" --likelihood poisson --exposure e --kernel matern12
expect_exit 1
expect_stderr "emiss\.csv:3: column 'e': missing exposure"
run "$GMM_INFER" loglik "$CASE_TMP/emiss.csv" --likelihood poisson --exposure nope --kernel matern12
expect_exit 1
expect_stderr "nope"

begin "likelihood options: spec errors point at the character; misplaced options are usage errors"
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --likelihood 'poisson(rate=2)'
expect_exit 1
expect_stderr '\^'
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --likelihood poison
expect_exit 1
expect_stderr 'poisson'
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --exposure exposure
expect_exit 2
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --likelihood poisson --noise 1
expect_exit 2
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --likelihood bernoulli --exposure exposure
expect_exit 2
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --likelihood poisson --likelihood bernoulli
expect_exit 2
expect_stderr 'given twice'

begin "a format-1 model file naming noise.variance still loads"
printf 'x,y\n1,4\n2,4.5\n3,4.1\n' > "$CASE_TMP/g.csv"
cat > "$CASE_TMP/old.json" <<JSON
{"format_version": 1, "tool_version": "0.1.0",
 "kernel": "matern12(variance=0.1, lengthscale=1)",
 "parameters": {"0.matern12.variance": 0.1, "0.matern12.lengthscale": 1,
                "noise.variance": 0.01},
 "likelihood": "gaussian", "center": 4.2, "loglik": -1, "iterations": 0, "converged": true,
 "data": {"file": "$CASE_TMP/g.csv", "x": "x", "y": "y", "node": null, "exposure": null}}
JSON
run "$GMM_INFER" loglik --model "$CASE_TMP/old.json"
expect_exit 0
expect_stdout '"likelihood\.variance": 0\.01'

begin "a kernel whose workspace is too large is refused at once with the size it needs"
printf 'x,y\n1,1\n2,2\n3,1\n' > "$CASE_TMP/s.csv"
k=matern32; for _ in $(seq 29); do k="$k * matern32"; done
run "$GMM_INFER" loglik "$CASE_TMP/s.csv" --kernel "$k"
expect_exit 1
expect_stderr "the product's state dimension would be 8192 here, over the limit 4096"

begin "a model moved away from where it was fitted still finds its data; stdin data is asked for"
mkdir -p "$CASE_TMP/a" "$CASE_TMP/b"
printf 'x,y\n1,2\n2,3\n3,1\n4,0\n' > "$CASE_TMP/a/c.csv"
(cd "$CASE_TMP/a" && "$GMM_INFER" fit c.csv --likelihood poisson --kernel matern12 -o ../b/m.json) 2>/dev/null
run "$GMM_INFER" predict --model "$CASE_TMP/b/m.json" --grid 2:2:1
expect_exit 0
expect_stdout '^2,'
run "$GMM_INFER" fit - --likelihood poisson --kernel matern12 -o "$CASE_TMP/in.json" < "$CASE_TMP/a/c.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/in.json" < /dev/null
expect_exit 2
expect_stderr 'came from standard input'

begin "score: held-out log predictive density under the Laplace posterior and under draws"
run "$GMM_INFER" fit "$ROOT/data/flu_even.csv" --graph "$ROOT/data/flu_bybw_edges.csv" \
    --node node --y count --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$CASE_TMP/fe.json"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/fe.json" "$ROOT/data/flu_odd.csv" --rows "$CASE_TMP/r.csv"
expect_exit 0
expect_stdout '"posterior": "laplace"'
expect_stdout '"n": 140'
expect_file "$CASE_TMP/r.csv" '^line,node,count,lpd$'
run "$GMM_INFER" hmc --model "$CASE_TMP/fe.json" --chains 1 --warmup 100 --draws 50 --quiet \
    -o "$CASE_TMP/fd.csv"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/fe.json" "$ROOT/data/flu_odd.csv" --draws "$CASE_TMP/fd.csv"
expect_exit 0
expect_stdout '"posterior": "draws"'
printf 'node,count,population_2001\n9999,3,1000\n' > "$CASE_TMP/bad.csv"
run "$GMM_INFER" score --model "$CASE_TMP/fe.json" "$CASE_TMP/bad.csv"
expect_exit 1
expect_stderr "bad\.csv:2: column 'node': node '9999'"
