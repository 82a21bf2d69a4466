#!/bin/bash
# compare-outputs.sh OLD_BINARY NEW_BINARY -- run fit, predict, score, hmc,
# vi, loglik and gradcheck (outputs, messages, exit codes, files written) on
# the shipped data with both binaries, in the same directory, and report
# every difference.  For refactorings that must not change a byte; CmdStan
# files' elapsed times are the only lines allowed to differ.  Exit 0 when
# nothing else differs.
set -u
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
D=$(cd "$(dirname "$0")/../data" && pwd)
OLD=$(readlink -f "$1"); NEW=$(readlink -f "$2")
TOP=$(mktemp -d); trap 'rm -rf "$TOP"' EXIT
runall() {
B=$1; O=$2
mkdir -p "$O" "$TOP/w"; cd "$TOP/w"
n=0
run() { n=$((n+1)); "$B" "$@" >"$O/$n.out" 2>"$O/$n.err"; echo "$? $*" >"$O/$n.rc"; }
run fit $D/co2_train.csv -o co2.json --verbose
run predict --model co2.json --grid 1998:2001:1
run predict --model co2.json --observed --level 0.8
run predict --model co2.json --at $D/co2_test.csv
run loglik --model co2.json --verbose
run score --model co2.json $D/co2_test.csv
run fit $D/coal.csv --likelihood poisson --exposure exposure --kernel matern32 -o coal.json --verbose
run predict --model coal.json --grid 1860:1960:50
run hmc --model coal.json --chains 2 --threads 1 --quiet -o draws.csv --seed 3 --warmup 100 --draws 100 --states
run predict --model coal.json --draws draws.csv
run score --model coal.json $D/coal.csv --draws draws.csv
run fit $D/chicago_road_nodes.csv --graph $D/chicago_road_edges.csv --node node --y count --exposure weight --likelihood poisson --precision 'edge-ou(variance=1, lengthscale=100)' -o chicago.json --verbose
run predict --model chicago.json
run vi $D/chicago_train.csv --graph $D/chicago_road_edges.csv --node node --y count --exposure weight --likelihood poisson --precision 'edge-ou(variance=1, lengthscale=100)' --learn-hyper --quiet -o chicago-vi.json
run score --model chicago-vi.json $D/chicago_test.csv
run predict --model chicago-vi.json
run hmc --model chicago.json --chains 1 --quiet -o gd.csv --seed 1 --warmup 50 --draws 50
run predict --model chicago.json --draws gd.csv
run loglik $D/coal.csv --likelihood 'negbinomial(dispersion=2)' --kernel matern32 --verbose
run loglik $D/coal.csv --likelihood bernoulli --kernel matern32 --verbose
run gradcheck $D/coal.csv --likelihood poisson --kernel 'matern52 + matern12' --fix intercept
run loglik $D/flu_bybw_nodes.csv --graph $D/flu_bybw_edges.csv --node node --y count_total --precision 'edge-ou(variance=1, lengthscale=100)' --verbose
run fit $D/co2_train.csv --kernel 'matern32(variance=1, lengthscale=2' 
run fit $D/co2_train.csv --fix nosuch
run fit $D/co2_train.csv --exposure e
run fit $D/coal.csv --likelihood poisson --noise 2
run fit $D/co2_train.csv --graph $D/chicago_road_edges.csv
run loglik $D/coal.csv --likelihood poisson --exposure nosuch
run loglik $D/coal.csv --likelihood 'poisson(x=1)'
run fit $D/coal.csv --x count --y year --kernel matern32 --free-period
run loglik $D/co2_train.csv --kernel 'matern32(variance=-1)'
run loglik $D/chicago_road_nodes.csv --graph $D/chicago_road_edges.csv --node node --y count --precision 'edge-ou(varance=1)'
run loglik $D/chicago_road_nodes.csv --graph $D/chicago_road_edges.csv --node node --y count --precision 'edge-ou' --edge-cols 'a,,b'
run vi --model chicago.json --quiet -o c2.json
run predict --model c2.json
run fit $D/coal.csv --kernel matern32 --likelihood poisson --exposure exposure --merge-tol 2 --verbose -o m2.json
run predict --model m2.json --grid 1850:1860:5
run predict --model coal.json --draws draws.csv --grid 1860:1960:25
run hmc $D/coal.csv --likelihood poisson --kernel matern32 --verbose --chains 2 --threads 2 --draws 50 --warmup 50 --sample-hyper -o h2.csv
run hmc $D/co2_train.csv --verbose --chains 2 --threads 2 --draws 20 --warmup 20 -o h3.csv
run predict --model co2.json --draws nosuch.csv
run vi $D/coal.csv --likelihood poisson --kernel matern32 --verbose --learn-hyper --posterior post.csv -o v3.json
run predict --model v3.json --grid 1850:1900:10
run hmc --model v3.json --init v3.json --chains 1 --draws 20 --warmup 20 --quiet -o h4.csv
run score --model coal.json $D/coal.csv --draws h2.csv
run hmc --model coal.json --chains 1 --draws 10 --warmup 10 --quiet --latent-subset 1-3,7 -o ls.csv
run hmc --model chicago.json --chains 1 --draws 10 --warmup 10 --quiet --latent-subset 0,5,17 -o lg.csv
run hmc --model chicago.json --chains 1 --draws 10 --warmup 10 --quiet --latent-subset 0,nosuch -o lg2.csv
run hmc --model coal.json --chains 1 --draws 10 --warmup 10 --quiet --latent-subset 0-3 -o ls2.csv
run hmc --model chicago.json --chains 2 --draws 10 --warmup 10 --quiet --format cmdstan -o cs
run hmc --model coal.json --chains 1 --draws 10 --warmup 10 --quiet --format cmdstan -o cs2
run predict --model coal.json --draws ls.csv
run vi --model coal.json --quiet --posterior vp.csv -o v5.json
run vi --model chicago.json --quiet --posterior vp2.csv -o v6.json
run predict --model chicago.json --draws lg.csv
run score --model chicago.json $D/chicago_test.csv --draws gd.csv
printf 'node,count,weight\n0,1,2\nzz,3,1\n' > bad1.csv
run score --model chicago.json bad1.csv
printf 'node,count,weight\n0,1,\n' > bad2.csv
run score --model chicago.json bad2.csv
printf 'node,count,weight\n0,,1\n' > bad3.csv
run score --model chicago.json bad3.csv
printf 'node,count,weight\n0,-1,1\n' > bad4.csv
run score --model chicago.json bad4.csv
run score --model chicago.json $D/chicago_test.csv --rows rows1.csv
run score --model coal.json $D/coal.csv --draws ls.csv
printf 'year,count,exposure\n1851.5,1,1\n' > new1.csv
run score --model coal.json new1.csv --draws gd.csv
run score --model coal.json new1.csv --draws draws.csv --rows rows2.csv
run score --model coal.json new1.csv
run score --model co2.json $D/co2_test.csv --draws h3.csv
run predict --model coal.json --draws ls.csv --grid 1860:1870:5
run predict --model coal.json --draws draws.csv --at new1.csv
run predict --model coal.json --draws h2.csv --grid 1860:1870:5
run predict --model co2.json --draws h3.csv
printf 'a,b\n1,2\n' > nof.csv
run predict --model co2.json --draws nof.csv
mv "$TOP/w" "$O/w"
}
runall "$OLD" "$TOP/old"; runall "$NEW" "$TOP/new"
rc=0
cd "$TOP/old"
for f in *.* w/*; do
    if ! cmp -s "$f" "$TOP/new/$f"; then
        if diff "$f" "$TOP/new/$f" | grep '^[<>]' | grep -qv 'seconds'; then
            echo "differs: $f ($(cat "${f%%.*}.rc" 2>/dev/null || echo file))"
            diff "$f" "$TOP/new/$f" | head -6
            rc=1
        fi
    fi
done
echo "$(ls "$TOP/old"/*.rc | wc -l) commands, $(ls "$TOP/old/w" | wc -l) files compared"
exit $rc
