# shellcheck shell=bash
# 50_hmc.sh -- whitened HMC: CmdStan-style draws, byte-identical for any
# number of threads, chains as separate jobs merged by summary, the
# .partial file of an interrupted run, errors.

coal="$ROOT/data/coal.csv"
kern='matern32(variance=0.5, lengthscale=20)'

begin "hmc writes CmdStan-style draws and a summary"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --exposure exposure --kernel "$kern" \
    --chains 2 --warmup 150 --draws 60 --quiet -o "$CASE_TMP/d.csv" --summary "$CASE_TMP/s.csv"
expect_exit 0
expect_file "$CASE_TMP/d.csv" '^\.chain,\.iteration,\.draw,lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,f\[1\],'
expect_file "$CASE_TMP/s.csv" '^variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail$'
expect_file "$CASE_TMP/s.csv" '^f\[112\],'
expect_no_file "$CASE_TMP/d.csv.partial"
if [[ $(wc -l < "$CASE_TMP/d.csv") -ne 121 ]]; then fail "expected 1 + 2 x 60 lines"; fi
if [[ $(awk -F, 'NR > 1 { print $1 }' "$CASE_TMP/d.csv" | uniq | tr '\n' ' ') != "1 2 " ]]; then
    fail "rows are not grouped by chain 1, 2"
fi

begin "the draws do not depend on the number of threads"
for t in 1 2; do
    run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 3 --threads $t \
        --warmup 100 --draws 40 --seed 9 --quiet -o "$CASE_TMP/t$t.csv"
    expect_exit 0
done
# Byte for byte, by construction (hmc_chains.c): a chain's draws depend on the seed and its
# id only (its own stream, a problem object per thread started cold, its rows through its own
# temporary, read back in chain order), not on which thread runs it; OpenBLAS splits its work
# by its own thread count, fixed per process, not by the calling thread.
if ! cmp -s "$CASE_TMP/t1.csv" "$CASE_TMP/t2.csv"; then fail "1 and 2 threads differ"; fi

begin "chains run as separate processes merge to the same summary as one run"
GMM_INFER="$GMM_INFER" run "$ROOT/scripts/run-chains" -k 2 -j 2 -o "$CASE_TMP/rc" -- "$coal" \
    --likelihood poisson --kernel "$kern" --warmup 100 --draws 50
expect_exit 0
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --warmup 100 --draws 50 \
    --chains 2 --quiet --summary "$CASE_TMP/one.csv" -o "$CASE_TMP/one-draws.csv"
expect_exit 0
# the same chains (seed 1, ids 1 and 2: the same computation as above) merged by chain id
# into the same array (draws.h): the same summary, byte for byte
if ! cmp -s "$CASE_TMP/one.csv" "$CASE_TMP/rc-summary.csv"; then
    fail "merged summary differs from the single multi-chain run"
fi
run "$GMM_INFER" summary "$CASE_TMP/rc-chain-1.csv" "$CASE_TMP/one-draws.csv"
expect_exit 1
expect_stderr 'chain'

begin "an interrupted run keeps whole chains of equal length in FILE.partial, with FILE.partial.json"
# Two chains on two threads, interrupted once both have written draws (their
# unlinked temporaries, seen through /proc, are not empty): they stop at
# different points, and the output keeps the shortest one's count of each.
"$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 2 --threads 2 \
    --warmup 50 --draws 100000000 --quiet -o "$CASE_TMP/int.csv" 2> "$CASE_TMP/int.err" &
pid=$!
for ((i = 0; i < 300; i++)); do
    n=0
    for fd in /proc/$pid/fd/*; do
        [[ $(readlink "$fd" 2>/dev/null) == *'(deleted)' && $(stat -L -c %s "$fd" 2>/dev/null) -gt 0 ]] &&
            n=$((n + 1))
    done
    [[ $n -ge 2 ]] && break
    sleep 0.05
done
[[ $n -ge 2 ]] || fail "the chains wrote no draws in 15 s"
kill -INT "$pid"
st=0
wait "$pid" || st=$?
if [[ $st -ne 130 ]]; then fail "exit status $st after SIGINT, expected 130"; fi
expect_no_file "$CASE_TMP/int.csv"
expect_no_file "$CASE_TMP/int.csv.json"
expect_file "$CASE_TMP/int.csv.partial" '^\.chain,'
expect_file "$CASE_TMP/int.err" 'interrupted: 2 chain\(s\) of [0-9]+ draws each'
if [[ -f "$CASE_TMP/int.csv.partial" ]]; then
    awk -F, 'NR == 1 { n = NF } NF != n { bad = 1 } END { exit bad }' "$CASE_TMP/int.csv.partial" ||
        fail "a row of the .partial file is incomplete"
    counts=$(awk -F, 'NR > 1 { n[$1]++ } END { print n[1] + 0, n[2] + 0 }' "$CASE_TMP/int.csv.partial")
    read -r n1 n2 <<<"$counts"
    [[ $n1 -gt 0 && $n1 -eq $n2 ]] || fail "chains of $n1 and $n2 draws, expected equal and > 0"
    expect_file "$CASE_TMP/int.csv.partial.json" '"draws_per_chain": '"$n1"','
    expect_file "$CASE_TMP/int.csv.partial.json" '"interrupted": \{'
    # the divergences and leapfrog steps recorded are those of the rows kept
    want=$(awk -F, 'NR > 1 { s[$1] += $8 } END { print s[1] "," s[2] }' "$CASE_TMP/int.csv.partial")
    got=$(tr -d ' \n' < "$CASE_TMP/int.csv.partial.json" |
        sed -n 's/.*"leapfrog_steps":{[^}]*"draws":\[\([0-9,]*\)\].*/\1/p')
    [[ "$got" == "$want" ]] || fail "leapfrog_steps.draws $got, sums of n_leapfrog__ $want"
    want=$(awk -F, 'NR > 1 { s[$1] += $9 } END { print s[1] + 0 "," s[2] + 0 }' "$CASE_TMP/int.csv.partial")
    got=$(tr -d ' \n' < "$CASE_TMP/int.csv.partial.json" | sed -n 's/.*"divergences":\[\([0-9,]*\)\].*/\1/p')
    [[ "$got" == "$want" ]] || fail "divergences $got, sums of divergent__ $want"
    # each chain is a prefix of itself: rows 1..n1 numbered in order
    awk -F, 'NR > 1 && $2 != ++k[$1] { bad = 1 } END { exit bad }' "$CASE_TMP/int.csv.partial" ||
        fail "a chain's rows are not its first draws in order"
    run "$GMM_INFER" summary "$CASE_TMP/int.csv.partial"
    expect_exit 0
    expect_stdout '^f\[112\],'
fi

begin "a failed run leaves no file behind"
# The chains' temporaries exceed a 8 KiB file size limit (SIGXFSZ ignored:
# the writes fail): an error, and no FILE, FILE.partial or FILE.json.
run bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' x "$GMM_INFER" hmc "$coal" \
    --likelihood poisson --kernel "$kern" --chains 2 --warmup 30 --draws 20 --quiet \
    -o "$CASE_TMP/f.csv"
expect_exit 1
expect_stderr 'chain 1: temporary file of chain 1: write error: File too large'
expect_stderr 'no draws written'
expect_no_file "$CASE_TMP/f.csv"
expect_no_file "$CASE_TMP/f.csv.partial"
expect_no_file "$CASE_TMP/f.csv.json"

begin "hmc usage errors"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --sampler gibbs
expect_exit 2
run "$GMM_INFER" hmc "$coal" --likelihood poisson --chains 0
expect_exit 2
run "$GMM_INFER" hmc "$coal" --likelihood poisson --target-accept 1
expect_exit 2

begin "hmc --sample-hyper: sampled parameters as columns, priors recorded in FILE.json"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --prior '0.matern32.lengthscale=lognormal(3,0.5)' --chains 1 --warmup 100 --draws 30 \
    -o "$CASE_TMP/h.csv"
expect_exit 0
expect_stderr 'prior: 0\.matern32\.lengthscale ~ lognormal\(3, 0\.5\)'
expect_stderr 'prior: intercept ~ normal\('
expect_file "$CASE_TMP/h.csv" '^\.chain,.*,energy__,0\.matern32\.variance,0\.matern32\.lengthscale,intercept,f\[1\],'
expect_file "$CASE_TMP/h.csv.json" '"0\.matern32\.lengthscale": "lognormal\(3, 0\.5\)"'
expect_file "$CASE_TMP/h.csv.json" '"leapfrog_steps": \{'
# the draws' leapfrog steps recorded in FILE.json are the sum of n_leapfrog__
want=$(awk -F, 'NR > 1 { s += $8 } END { print s }' "$CASE_TMP/h.csv")
got=$(tr -d ' \n' < "$CASE_TMP/h.csv.json" | sed -n 's/.*"leapfrog_steps":{[^}]*"draws":\[\([0-9]*\)\].*/\1/p')
if [[ "$got" != "$want" ]]; then fail "leapfrog_steps.draws $got, sum of n_leapfrog__ $want"; fi
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --prior 'intercept=lognormal(0,1)'
expect_exit 2
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --fix intercept --prior 'intercept=normal(0,1)'
expect_exit 2
expect_stderr 'held by --fix'
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --prior 'intercept=normal(0,1)'
expect_exit 2

begin "hmc --sample-hyper --marginal laplace: the joint sampler's columns, read by summary, predict, score and loo"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --chains 1 --warmup 30 --draws 5 --quiet -o "$CASE_TMP/j.csv"
expect_exit 0
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --marginal laplace --chains 2 --warmup 100 --draws 40 --states --log-lik -o "$CASE_TMP/l.csv" \
    --summary "$CASE_TMP/ls.csv"
expect_exit 0
expect_stderr 'free hyperparameters sampled on their marginal'
if [[ "$(head -1 "$CASE_TMP/j.csv")" != "$(head -1 "$CASE_TMP/l.csv" | sed 's/,x\[1\],.*//')" ]]; then
    fail "--marginal laplace's columns differ from the joint sampler's"
fi
expect_file "$CASE_TMP/l.csv.json" '"marginal": "laplace"'
expect_file "$CASE_TMP/ls.csv" '^0\.matern32\.lengthscale,'
# x drawn given theta: f at row 7 is the intercept plus the first of its two states
bad=$(awk -F, 'NR == 1 { for (j = 1; j <= NF; j++) { if ($j == "intercept") cb = j;
                                                   if ($j == "f[7]") cf = j; if ($j == "x[13]") cx = j }
                         next }
               { d = $cf - $cb - $cx; if (d > 1e-9 || d < -1e-9) n++ } END { print n + 0 }' "$CASE_TMP/l.csv")
if [[ "$bad" != 0 ]]; then fail "$bad rows with f[7] != intercept + x[13]"; fi
run "$GMM_INFER" fit "$coal" --likelihood poisson --kernel "$kern" -o "$CASE_TMP/lm.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/lm.json" --sample-hyper --marginal laplace --chains 1 \
    --warmup 60 --draws 20 --states --quiet -o "$CASE_TMP/lm.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/lm.json" --draws "$CASE_TMP/lm.csv" --grid 1860:1870:5
expect_exit 0
expect_stdout '^1870,'
run "$GMM_INFER" score --model "$CASE_TMP/lm.json" "$coal" --draws "$CASE_TMP/lm.csv"
expect_exit 0
run "$GMM_INFER" loo "$CASE_TMP/l.csv"
expect_exit 0
expect_stdout '"elpd_loo"'
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --marginal laplace
expect_exit 2
expect_stderr '--marginal applies with --sample-hyper'
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper --marginal inla
expect_exit 2
expect_stderr "--marginal: 'inla' is not none, laplace or laplace-mh"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --marginal laplace --mh-draws 4
expect_exit 2
expect_stderr '--mh-draws applies with --marginal laplace-mh'
# the corrected sampler: same columns, its rejections per chain in FILE.json
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --sample-hyper \
    --marginal laplace-mh --mh-draws 4 --chains 2 --warmup 60 --draws 30 --quiet \
    -o "$CASE_TMP/mh.csv"
expect_exit 0
if [[ "$(head -1 "$CASE_TMP/j.csv")" != "$(head -1 "$CASE_TMP/mh.csv")" ]]; then
    fail "--marginal laplace-mh's columns differ from the joint sampler's"
fi
expect_file "$CASE_TMP/mh.csv.json" '"marginal": "laplace-mh"'
expect_file "$CASE_TMP/mh.csv.json" '"mh_rejections": \['

begin "predict --draws summarises f from the draws, with rates"
run "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 2 --warmup 100 --draws 50 --quiet \
    -o "$CASE_TMP/dr.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/dr.csv"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
expect_stdout '^1851,'
expect_stdout '^1962,'

begin "hmc --latent-subset writes f only where asked"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 1 --warmup 50 \
    --draws 5 --latent-subset 1-3,112 --quiet
expect_exit 0
expect_stdout ',energy__,f\[1\],f\[2\],f\[3\],f\[112\]$'
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --latent-subset 0
expect_exit 2

begin "predict --draws at new inputs needs and uses the latent states"
run "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 1 --warmup 100 --draws 40 --quiet \
    -o "$CASE_TMP/dr.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 1 --warmup 100 --draws 40 --states \
    --quiet -o "$CASE_TMP/st.csv"
expect_exit 0
expect_file "$CASE_TMP/st.csv" ',x\[1\],x\[2\],'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/st.csv" --grid 1900:1961:60
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
expect_stdout '^1960,'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/dr.csv" --grid 1900:1901:1
expect_exit 1
expect_stderr 'draws saved with their latent states'
