# shellcheck shell=bash
# 94_sources.sh -- public headers are contracts and sources carry no lab
# notes: each include/gmm/*.h opens with at most a few lines before its
# include guard (what the module is for; the contracts follow, next to what
# they describe), and no file under src/ or include/ holds a measurement --
# timings, speed-ups and the machine they came from belong in
# docs/benchmarks.md and docs/accuracy.md, labelled there.

# Lines a header may have before its #ifndef guard.
max_preamble=8

# Files another change is rewriting, each with what it still fails
# ("preamble" or "measurement").  Delete a line when its file passes: the
# case fails while a listed file no longer needs its exception.
known_exceptions=''

# What a measurement looks like in a comment.  Each pattern starts with a
# one-letter bracket class, so that this file does not match itself.
re='\b[m]easured (on|at|against|as)\b|\b[m]easured:|\b[d]evelopment machine\b'
re="$re"'|\b[m]illiseconds\b|\b[0-9][0-9.]* ?[m]s\b|\b[0-9][0-9.]*x ([f]aster|[s]lower)\b'
re="$re"'|\b[0-9][0-9.-]*% ([f]aster|[s]lower)\b|\b[0-9]+ -> [0-9]+ [i]terations\b'

# "FILE KIND" for every fault, sorted.
faults="$WORK/faults"
(
    cd "$ROOT" || exit 1
    for h in include/gmm/*.h; do
        n=$(grep -n -m1 '^#ifndef' "$h" | cut -d: -f1)
        if [[ -z "$n" ]]; then
            echo "$h guard"
        elif [[ $((n - 1)) -gt $max_preamble ]]; then
            echo "$h preamble"
        fi
    done
    grep -rlIiE -e "$re" src include | sed 's/$/ measurement/'
) | sort -u >"$faults"

begin "each public header opens with at most $max_preamble lines before its include guard"
case_asserts=$((case_asserts + 1))
while read -r f kind; do
    [[ $kind == measurement ]] && continue
    grep -qxF -- "$f $kind" <<<"$known_exceptions" && continue
    if [[ $kind == guard ]]; then
        fail "$f: no #ifndef include guard"
    else
        fail "$f: more than $max_preamble lines before its include guard (a few lines on what the module is for; contracts beside their functions)"
    fi
done <"$faults"

begin "no source or header carries a measurement (docs/benchmarks.md, docs/accuracy.md)"
case_asserts=$((case_asserts + 1))
while read -r f kind; do
    [[ $kind == measurement ]] || continue
    grep -qxF -- "$f $kind" <<<"$known_exceptions" && continue
    first=$(grep -nIiE -m1 -e "$re" "$ROOT/$f")
    fail "$f:${first%%:*}: a measurement in source (docs/benchmarks.md): ${first#*:}"
done <"$faults"

begin "every known exception still fails (else delete it from 94_sources.sh)"
case_asserts=$((case_asserts + 1))
while read -r k; do
    [[ -z "$k" ]] && continue
    grep -qxF -- "$k" "$faults" ||
        fail "known exception '$k' passes now: delete it from 94_sources.sh"
done <<<"$known_exceptions"
