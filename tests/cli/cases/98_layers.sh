# shellcheck shell=bash
# 98_layers.sh -- the layers of docs/design.md hold in the code: each folder
# of src/ includes only the headers of the layers below it, and calls go one
# way -- no cycle between folders, none between files.  Includes are read
# from the sources; calls from the objects the build left beside the binary
# (nm: what each object defines against what it needs).
# Sourced by tests/cli/run.sh (see there for the helpers).

# Each folder of src/ belongs to the layer its first part names: model/
# and its rooms (lik/, kernel/, ssm/, gmrf/, stack/) are the components'
# layer with graph/.
folder_layers='cli mdl infer model graph io factor sparse band core'

# Each public header and the layer that implements it (checked below
# against the objects: every function a header declares is defined there).
header_layers='
alloc core      band band       constr model    draws io        factor factor
fit infer
formula mdl     gmrf model      gradcheck infer graph graph     hmc infer
hmc_chains infer                hmc_marginal infer              io io
json io         kernel model    laplace infer   latent model    likelihood model
loo infer       marglik model   model mdl       modelfile io    objective infer
obsmap model    problem infer   qfile io        rng core        spec model
ssm model       stack model     status core     summary infer   version core
vi infer        sparse sparse'

# Which layer may use which: down the stack cli > mdl > infer > components
# (model and graph, which may use each other: the cycle check keeps that
# one way) > factor (one interface to the factorisations) > band > core,
# and io beside it -- used by cli, mdl and infer,
# using band and core only.
allowed_edges='
cli>mdl cli>infer cli>model cli>graph cli>io cli>band cli>core
mdl>infer mdl>model mdl>graph mdl>io mdl>band mdl>core
infer>model infer>graph infer>io infer>band infer>core
model>graph graph>model model>band model>core graph>band graph>core
io>band io>core band>core
cli>factor mdl>factor infer>factor model>factor factor>band factor>core
cli>sparse mdl>sparse infer>sparse model>sparse graph>sparse factor>sparse sparse>core'

# Cycles between files that another change is removing, each the set of
# files of one strongly connected component (sorted, space-separated).
# Delete a line when its change lands: the test fails while a listed set
# is no longer a cycle.
known_file_cycles=''

# awk with the tables: layer(folder or src/ path), hlayer(header base
# name), allowed(from, to); "?" for what the tables do not name.
layers_awk() {
    awk -v FL="$folder_layers" -v HL="$header_layers" -v AE="$allowed_edges" '
    BEGIN { n = split(FL, a, " "); for (i = 1; i <= n; i++) FLAYER[a[i]] = a[i]
            n = split(HL, a, /[ \n]+/); for (i = 1; i < n; i++) if (a[i] != "") { HLAYER[a[i]] = a[i + 1]; i++ }
            n = split(AE, a, /[ \n]+/); for (i = 1; i <= n; i++) OK[a[i]] = 1 }
    function layer(d,   p) { sub(/^src\//, "", d); p = d; sub(/\/.*/, "", p)
                             return (p in FLAYER) ? FLAYER[p] : "?" }
    function hlayer(h) { return (h in HLAYER) ? HLAYER[h] : "?" }
    function allowed(a, b) { return a == b || ((a ">" b) in OK) }
    '"$1" "${@:2}"
}

begin "every folder of src/ and every public header has its layer"
layers_tmp=$CASE_TMP
(cd "$ROOT" && find src -name '*.c' && ls include/gmm/*.h) | layers_awk '
    /^src\// { d = $0; sub(/\/[^\/]*$/, "", d)
               if (layer(d) == "?") print d ": no layer (98_layers.sh: folder_layers)" }
    /^include\// { h = $0; sub(/.*\//, "", h); sub(/\.h$/, "", h)
                   if (hlayer(h) == "?") print $0 ": not in the table of layers" }' \
    | sort -u >"$CASE_TMP/faults"
case_asserts=$((case_asserts + 1))
while IFS= read -r line; do fail "$line"; done <"$CASE_TMP/faults"

begin "every include points down the layers (io: below mdl and infer, above band)"
(cd "$ROOT" && find src include/gmm -name '*.[ch]' | sort | xargs awk '
    match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) {
        s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
        print FILENAME, s }') >"$CASE_TMP/includes"
layers_awk '
    function norm(p,   a, b, n, i, k, o) { n = split(p, a, "/"); k = 0
        for (i = 1; i <= n; i++) { if (a[i] == "..") k--; else if (a[i] != ".") b[++k] = a[i] }
        o = b[1]; for (i = 2; i <= k; i++) o = o "/" b[i]; return o }
    { f = $1; inc = $2
      if (f ~ /^include\//) { h = f; sub(/.*\//, "", h); sub(/\.h$/, "", h); from = hlayer(h) }
      else from = layer(f)
      if (inc ~ /^gmm\//) { h = inc; sub(/^gmm\//, "", h); sub(/\.h$/, "", h); to = hlayer(h) }
      else { d = f; sub(/\/[^\/]*$/, "", d); p = norm(d "/" inc)
             to = p ~ /^src\/.*\// ? layer(p) : "?" }
      if (to == "?") print f ": #include \"" inc "\": a header of no layer"
      else if (!allowed(from, to)) print f ": #include \"" inc "\": " from " may not include " to }' \
    "$CASE_TMP/includes" >"$CASE_TMP/faults"
case_asserts=$((case_asserts + 1))
[[ -s "$CASE_TMP/includes" ]] || fail "no includes found under src/"
while IFS= read -r line; do fail "$line"; done <"$CASE_TMP/faults"

# The objects: beside the binary under test, else the release build's; only
# those whose source still exists (a moved file leaves its old object).
objdir="$(dirname "$GMM_INFER")/src"
[[ -d "$objdir" ]] || objdir="$ROOT/build/release/src"
symbols="$layers_tmp/symbols"
calls="$layers_tmp/calls"
: >"$symbols"
: >"$calls"
if [[ -d "$objdir" ]] && command -v nm >/dev/null 2>&1; then
    (
        cd "$objdir" || exit 1
        objs=()
        for o in $(find . -name '*.o' | sed 's|^\./||' | sort); do
            [[ -f "$ROOT/src/${o%.o}.c" ]] && objs+=("$o")
        done
        [[ ${#objs[@]} -gt 0 ]] && nm -A "${objs[@]}"
    ) | awk '{ f = $1; sub(/\.o:.*/, "", f); sub(/^[^:]*\.o:/, "") }
             $1 == "U" { print "U", $2, f }
             NF == 3 && $2 ~ /^[TDBRCWVGS]$/ { print "D", $3, f }' >"$symbols"
    # "CALLER CALLEE SYMBOL" for every symbol one object needs from another
    awk '$1 == "D" { def[$2] = $3; next }
         { need[++n] = $3 " " $2 }
         END { for (i = 1; i <= n; i++) { split(need[i], a, " ")
                   if ((a[2] in def) && def[a[2]] != a[1]) print a[1], def[a[2]], a[2] } }' \
        "$symbols" | sort -u >"$calls"
fi
calls_noted=0
have_calls() {
    [[ -s "$calls" ]] && return 0
    [[ $calls_noted -eq 1 ]] ||
        echo "note: no objects in $objdir (or no nm): the call checks of 98_layers.sh skipped"
    calls_noted=1
    case_asserts=$((case_asserts + 1))
    return 1
}

# One line per strongly connected component of the graph "FROM TO SYMBOL"
# on stdin: its members, "|", and a shortest cycle through one of them with
# the first symbols of each edge ("a -(f, g)-> b -(h)-> a").
cycles() {
    awk '
    { k = $1 SUBSEP $2
      if (!(k in E)) { E[k] = $3; ns[k] = 1; out[$1] = out[$1] " " $2 }
      else if (ns[k] < 3) { E[k] = E[k] ", " $3; ns[k]++ }
      else if (ns[k] == 3) { E[k] = E[k] ", ..."; ns[k]++ }
      N[$1]; N[$2] }
    END {
        for (v in N) {
            split("", R); h = 1; t = 1; q[1] = v
            while (h <= t) { u = q[h++]; n = split(out[u], a, " ")
                for (i = 1; i <= n; i++) if (!(a[i] in R)) { R[a[i]] = 1; q[++t] = a[i] } }
            for (w in R) RR[v SUBSEP w] = 1
        }
        for (v in N) {
            if ((v in comp) || !((v SUBSEP v) in RR)) continue
            m = ""
            for (w in N)
                if (((v SUBSEP w) in RR) && ((w SUBSEP v) in RR)) { comp[w] = v; m = m " " w }
            # breadth-first from v back to v, inside the component
            split("", par); h = 1; t = 1; q[1] = v; last = ""
            while (h <= t && last == "") { u = q[h++]; n = split(out[u], a, " ")
                for (i = 1; i <= n; i++) { w = a[i]
                    if (!(w in comp) || comp[w] != v) continue
                    if (w == v) { last = u; break }
                    if (!(w in par)) { par[w] = u; q[++t] = w } } }
            k = 0; x = last
            while (x != v) { st[++k] = x; x = par[x] }
            path = v; prev = v
            for (i = k; i >= 1; i--) { path = path " -(" E[prev SUBSEP st[i]] ")-> " st[i]; prev = st[i] }
            print substr(m, 2) "|" path " -(" E[prev SUBSEP v] ")-> " v
        } }'
}
sorted_words() { tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//'; }

begin "every call points down the layers (nm of the objects)"
if have_calls; then
    layers_awk '{ la = layer($1); lb = layer($2)
                  if (!allowed(la, lb))
                      print "src/" $1 ".c calls " $3 " of src/" $2 ".c: " la " may not call " lb }' \
        "$calls" >"$CASE_TMP/faults"
    case_asserts=$((case_asserts + 1))
    while IFS= read -r line; do fail "$line"; done <"$CASE_TMP/faults"
fi

begin "every function a public header declares is defined in the header's layer"
if have_calls; then
    # "HEADER NAME" for each gmm_NAME( of a public header, comments removed
    (cd "$ROOT/include/gmm" && awk '
        FNR == 1 { inc = 0 }
        { line = $0; o = ""
          while (line != "") {
              if (inc) { p = index(line, "*/"); if (!p) break
                         line = substr(line, p + 2); inc = 0; continue }
              p = index(line, "/*")
              if (!p) { o = o line; break }
              o = o substr(line, 1, p - 1) " "; line = substr(line, p + 2); inc = 1 }
          while (match(o, /gmm_[a-z0-9_]*[ \t]*\(/)) {
              name = substr(o, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
              print FILENAME, name; o = substr(o, RSTART + RLENGTH) } }' *.h) |
        sort -u >"$CASE_TMP/declared"
    layers_awk 'NR == FNR { if ($1 == "D") def[$2] = $3; next }
                ($2 in def) { h = $1; sub(/\.h$/, "", h); want = hlayer(h); got = layer(def[$2])
                              if (got != want && !bad[$1]++)
                                  print "include/gmm/" $1 " declares " $2 ", defined in src/" \
                                        def[$2] ".c (" got "), not in " want }' \
        "$symbols" "$CASE_TMP/declared" >"$CASE_TMP/faults"
    case_asserts=$((case_asserts + 1))
    while IFS= read -r line; do fail "$line"; done <"$CASE_TMP/faults"
fi

begin "no cycle between folders (calls: nm of the objects)"
if have_calls; then
    case_asserts=$((case_asserts + 1))
    awk '{ a = $1; b = $2; sub(/\/[^\/]*$/, "", a); sub(/\/[^\/]*$/, "", b)
           if (a != b) print a, b, $3 }' "$calls" | cycles >"$CASE_TMP/cycles"
    while IFS='|' read -r members path; do
        fail "a cycle between folders: $path"
    done <"$CASE_TMP/cycles"
fi

begin "no cycle between files (calls: nm of the objects), but the known ones"
if have_calls; then
    case_asserts=$((case_asserts + 1))
    cycles <"$calls" >"$CASE_TMP/cycles"
    seen=
    while IFS='|' read -r members path; do
        members=$(sorted_words <<<"$members")
        if grep -qxF -- "$members" <<<"$known_file_cycles"; then
            seen="$seen|$members"
        else
            fail "a cycle between files: $path"
        fi
    done <"$CASE_TMP/cycles"
    while read -r k; do
        [[ -z "$k" || "$seen|" == *"|$k|"* ]] ||
            fail "known cycle '$k' is no longer one: delete it from 98_layers.sh"
    done <<<"$known_file_cycles"
fi
