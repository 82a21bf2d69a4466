#!/bin/sh
# install-deps.sh -- install the Debian packages gmm-infer needs, and nothing
# when they are all present.  Called by the Makefile before building, so on a
# fresh Debian machine `make check` alone installs, builds and tests.
#
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --bench   also what `make bench` and
#                                     scripts/bench_stan.sh compare against
#   scripts/install-deps.sh --demo    also what `make demo` and
#                                     scripts/plot-graph plot with
#   scripts/install-deps.sh --fuzz    also clang and its libFuzzer runtime
#                                     (`make fuzz`; `make check` needs neither)
#   scripts/install-deps.sh --check   only report what is missing (exit 1 if any)
set -eu

BUILD_PKGS="pkg-config libgsl-dev libopenblas-dev libcsv-dev libjansson-dev liblbfgs-dev libsuitesparse-dev check libsubunit-dev"
# r-cran-rstan: scripts/bench_stan.sh (r-base-dev: the compiler and headers
# its models are built with; jsonlite reads the model files; posterior's
# mcse_mean gives the z-scores of the means)
BENCH_PKGS="python3 python3-numpy python3-scipy python3-sklearn python3-statsmodels
    r-cran-rstan r-base-dev r-cran-jsonlite r-cran-posterior r-cran-lme4 r-cran-glmmtmb"
# r-cran-spatstat.data: scripts/make-bei-grid-data.R remakes data/bei_grid_*.csv
DEMO_PKGS="gnuplot-nox python3 python3-matplotlib r-cran-spatstat.data"
# clang alone (without its recommends) lacks libFuzzer: Debian 12 ships it in
# libclang-rt-14-dev, for the default clang 14.
FUZZ_PKGS="clang libclang-rt-14-dev"

pkgs="$BUILD_PKGS"
check_only=0
for arg in "$@"; do
    case "$arg" in
    --bench) pkgs="$pkgs $BENCH_PKGS" ;;
    --demo) pkgs="$pkgs $DEMO_PKGS" ;;
    --fuzz) pkgs="$pkgs $FUZZ_PKGS" ;;
    --check) check_only=1 ;;
    *) echo "install-deps.sh: unknown option '$arg'" >&2; exit 2 ;;
    esac
done

missing=""
for p in $pkgs; do
    # dpkg's own record is the probe: headers or .pc files can exist without
    # the package (and then apt would not know to keep them).
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

if [ "$check_only" = 1 ]; then
    echo "install-deps.sh: missing Debian packages:$missing" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: missing Debian packages:$missing" >&2
    echo "install-deps.sh: run as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "install-deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# An install on a fresh machine fails without package lists: update first.
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
