# shellcheck shell=bash
# 99_library_words.sh -- the library speaks of the model, never of the
# command line: no string literal below src/cli names an option ("--word")
# or a command ("gmm-infer hmc").  The CLI words a library failure in its
# options where it wants to (model.h: gmm_mdl_rule).
# Sourced by tests/cli/run.sh (see there for the helpers).

# Files that still name an option, each with its reason (none today): the
# test fails while a listed file is clean, so the list cannot go stale.
known_flag_files=''

begin "no string literal in the library names a command-line option or command"
# Comments dropped, adjacent literals joined (so a flag split over two
# lines is still one string), then each literal searched.
(cd "$ROOT" && find src/mdl src/infer src/model src/io src/graph src/band src/core \
    -name '*.[ch]' | sort | xargs perl -0777 -ne '
    my $f = $ARGV; my $t = $_;
    $t =~ s{/\*.*?\*/|//[^\n]*|(\x27(?:[^\x27\\]|\\.)*\x27)|("(?:[^"\\\n]|\\.)*")}
           {defined $1 ? " " : defined $2 ? $2 : " "}gse;
    $t =~ s{"\s+"}{}gs;
    while ($t =~ /"((?:[^"\\\n]|\\.)*)"/g) {
        my $s = $1;
        print "$f: \"$s\"\n" if $s =~ /(^|[^-\w])--[a-z]/ || $s =~ /gmm-infer [a-z]/;
    }') >"$CASE_TMP/words"
case_asserts=$((case_asserts + 1))
seen=
while IFS= read -r line; do
    file=${line%%: *}
    if grep -qxF -- "$file" <<<"$known_flag_files"; then
        seen="$seen|$file"
    else
        fail "the library names a command-line option or command: $line"
    fi
done <"$CASE_TMP/words"
while read -r k; do
    [[ -z "$k" || "$seen|" == *"|$k|"* ]] ||
        fail "known file '$k' names no option any more: delete it from 99_library_words.sh"
done <<<"$known_flag_files"
