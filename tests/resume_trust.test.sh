#!/usr/bin/env bash
# resume_trust.test.sh — what `--resume` takes from a results folder, and what it salvages
# (docs/DESIGN.md §4.10), end to end on stories260K (run by tests/run.sh from the repository root
# with $BUILD set; prints "N passed, N failed"). tests/jtool.c edits journals as a hostile or
# clumsy user would:
#   - a journal whose header argv gained --launch 'touch PWNED; {worker}' (or --worker), with the
#     CRC recomputed: `sweep --resume` runs nothing of it, refuses naming the option, and changes
#     nothing; a needle meta.json edited the same way is refused the same way;
#   - a launched run (--launch) resumes only with --launch given again, and then byte-identically;
#     a needle run with a remote arm only with its --arm NAME=URL given again; a FIFO as the
#     journal or as needle's meta.json is refused at once;
#   - one flipped byte in a middle journal record (its payload or its length): the journal ends
#     there, --resume says how many depths it kept and dropped, and the results are byte-identical
#     to a clean run's;
#   - the "continue with ... --resume" advice only where a resume can work: not when the journal
#     header could not be written, not for an arm with NaN logits (tests/gguf_nan.c makes its
#     model); a refused resume says how many depths its journal keeps.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=$(realpath tests/fixtures/models/stories260K.gguf)
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh
need_engine
export SOURCE_DATE_EPOCH=1700000000
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
if ! cc -std=c11 -O1 -o "$T/jtool" tests/jtool.c 2> "$T/cc.err"; then
    bad "cannot build tests/jtool.c: $(cat "$T/cc.err")"
    echo "$pass passed, $fail failed"
    exit 1
fi
J=$T/jtool
cat tests/fixtures/texts/*.txt tests/fixtures/texts/*.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
# 6 depths of 80 tokens in chunks of 40: journal records 0 header, then per depth a CHUNK and a DEPTH
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 6 --fork 8 --per-position
      --chunk 40 --max-depth 480 --quiet)
"$DRV" sweep "${ARGS[@]}" --out "$T/ref" 2> "$T/ref.err"
rc=$?
check "the clean reference run exits 0 (rc $rc)" test $rc -eq 0
same_as_ref() {
    local f
    for f in depths.tsv forks.tsv positions.tsv summary.json; do
        cmp -s "$T/ref/$f" "$1/$f" || { echo "# $f differs"; return 1; }
    done
}
# offset ROW: the byte offset of journal record SEQ in FILE (jtool list: seq type offset length)
rec_off() { "$J" list "$1" | awk -v s="$2" '$1 == s { print $3 }'; }

# ---- 1. a journal edited to launch a command --------------------------------------------------------
mkdir -p "$T/cwd"
(cd "$T/cwd" && STRATA_TEST_FAULT=die@11 "$DRV" sweep "${ARGS[@]}" --out "$T/h"; :) 2> /dev/null   # killed
"$J" header-sub "$T/h/journal" '"argv":["sweep",' '"argv":["sweep","--launch","touch PWNED; {worker}",'
check "the header's argv now holds --launch, its CRC recomputed (the journal still lists 6 records)" \
    bash -c "grep -q 'touch PWNED' '$T/h/journal' && [ \$('$J' list '$T/h/journal' | wc -l) = 6 ]"
cp "$T/h/journal" "$T/h.journal"
"$DRV" sweep --resume "$T/h" --quiet 2> "$T/h.err"
rc=$?
no_pwned() { [ -z "$(find "$T" -name 'PWNED*')" ] && [ ! -e PWNED ] && [ ! -e /PWNED ]; }
check "resume of the edited journal: refused (rc $rc), nothing ran: no PWNED anywhere" \
    bash -c "[ $rc -eq 2 ]" && no_pwned
check "... one error line naming --launch and saying to give it again" \
    bash -c "[ \$(grep -c 'error:' '$T/h.err') = 1 ] && grep -q 'records --launch, which a resume never takes from a journal.*give it again beside --resume' '$T/h.err'"
check "... and the journal is untouched, no resume advice" \
    bash -c "cmp -s '$T/h/journal' '$T/h.journal' && ! grep -q 'continue with' '$T/h.err'"
"$DRV" sweep --resume "$T/h" --quiet --launch 'exec {worker}' 2> "$T/h2.err"
rc=$?
check "... given --launch of one's own, the recorded one is ignored: exit 0 (rc $rc), no PWNED" \
    bash -c "[ $rc -eq 0 ]" && no_pwned
same_as_ref "$T/h" && ok "... identical results" || bad "... identical results"
# a recorded --worker (the binary a resume would start) is not taken either
(STRATA_TEST_FAULT=die@11 "$DRV" sweep "${ARGS[@]}" --out "$T/hw"; :) 2> /dev/null   # killed (SIGKILL)
printf '#!/bin/sh\ntouch "%s/PWNED2"\nexit 1\n' "$T" > "$T/evil-worker" && chmod +x "$T/evil-worker"
"$J" header-sub "$T/hw/journal" '"argv":["sweep",' "\"argv\":[\"sweep\",\"--worker\",\"$T/evil-worker\","
"$DRV" sweep --resume "$T/hw" --quiet 2> "$T/hw.err"
rc=$?
check "a journal edited to name another --worker: refused (rc $rc) naming --worker; the binary did not run" \
    bash -c "[ $rc -eq 2 ] && grep -q 'records --worker' '$T/hw.err' && [ ! -e '$T/PWNED2' ]"
"$DRV" sweep --resume "$T/hw" --quiet --worker "$WRK" 2> /dev/null
rc=$?
check "... with --worker given: exit 0 (rc $rc)" test $rc -eq 0
same_as_ref "$T/hw" && ok "... identical results" || bad "... identical results"

# ---- 2. a launched run resumes only with its --launch given again -------------------------------------
(STRATA_TEST_FAULT=die@11 "$DRV" sweep "${ARGS[@]}" --launch 'exec {worker}' --out "$T/l"; :) 2> /dev/null   # killed (SIGKILL)
"$DRV" sweep --resume "$T/l" --quiet 2> "$T/l1.err"
rc1=$?
"$DRV" sweep --resume "$T/l" --quiet --launch 'exec {worker}' 2> "$T/l2.err"
rc2=$?
check "a --launch run killed: resumed without --launch refused naming it (rc $rc1); with it: exit 0 (rc $rc2)" \
    bash -c "[ $rc1 -eq 2 ] && grep -q 'records --launch' '$T/l1.err' && [ $rc2 -eq 0 ]"
same_as_ref "$T/l" && ok "... identical results" || bad "... identical results"

# ---- 3. needle: meta.json is not trusted either ----------------------------------------------------------
NA=(needle --model "$MODEL" --doc "$T/doc.txt" --lengths 256 --positions 0,100 --trials 2 --threads 1 --quiet)
"$DRV" "${NA[@]}" --arms f16,int8 --launch 'exec {worker}' --out "$T/n" 2> "$T/n.err"
rc=$?
check "needle through --launch exits 0 (rc $rc)" test $rc -eq 0
cp "$T/n/cells.tsv" "$T/n.cells"
head -n 3 "$T/n.cells" > "$T/n/cells.tsv"
sed -i 's/"complete": true/"complete": false/' "$T/n/meta.json"
cp -r "$T/n" "$T/ne"
sed -i 's/"launch": "exec {worker}"/"launch": "touch PWNED3; {worker}"/' "$T/ne/meta.json"
(cd "$T" && "$DRV" needle --resume "$T/ne" --quiet 2> "$T/ne.err"); rc=$?
check "needle --resume of a meta.json edited to launch a command: refused naming --launch (rc $rc), nothing ran" \
    bash -c "[ $rc -eq 2 ] && grep -q 'records --launch' '$T/ne.err' && [ -z \"\$(find '$T' -name PWNED3)\" ]"
"$DRV" needle --resume "$T/n" --quiet --launch 'exec {worker}' 2> "$T/n2.err"
rc=$?
check "needle --resume with --launch given again: exit 0 (rc $rc), the cells of an uninterrupted run" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(LC_ALL=C sort '$T/n/cells.tsv')\" = \"\$(LC_ALL=C sort '$T/n.cells')\" ]"

# needle with a remote arm: its --arm NAME=URL is not taken from meta.json either
"$WRK" --model "$MODEL" --kv int8 --threads 1 --listen tcp://127.0.0.1:0 > "$T/rw.out" 2> /dev/null &
RW=$!
for _ in $(seq 50); do grep -q '^strata-worker: listening ' "$T/rw.out" 2> /dev/null && break; sleep 0.1; done
U=$(sed -n 's/^strata-worker: listening //p' "$T/rw.out" | head -n 1)
"$DRV" "${NA[@]}" --arms f16 --arm int8="$U" --out "$T/nr" 2> /dev/null
head -n 3 "$T/nr/cells.tsv" > "$T/nr/cells.cut" && mv "$T/nr/cells.cut" "$T/nr/cells.tsv"
sed -i 's/"complete": true/"complete": false/' "$T/nr/meta.json"
"$DRV" needle --resume "$T/nr" --quiet 2> "$T/nr1.err"; rc1=$?
"$DRV" needle --resume "$T/nr" --quiet --arm int8="$U" 2> "$T/nr2.err"; rc2=$?
kill $RW 2> /dev/null; wait $RW 2> /dev/null
check "needle with a remote arm: resumed without its --arm refused naming it (rc $rc1); with it: exit 0 (rc $rc2)" \
    bash -c "[ $rc1 -eq 2 ] && grep -q 'records --arm int8=URL' '$T/nr1.err' && [ $rc2 -eq 0 ] && [ \$(awk 'NR > 1' '$T/nr/cells.tsv' | wc -l) = 8 ]"

# a FIFO where the journal or needle's meta.json should be: refused at once, no hang
mkdir -p "$T/fifo" "$T/nfifo"
mkfifo "$T/fifo/journal" "$T/nfifo/meta.json"
timeout 20 "$DRV" sweep --resume "$T/fifo" --quiet 2> "$T/fifo.err"; rc1=$?
timeout 20 "$DRV" needle --resume "$T/nfifo" --quiet 2> "$T/nfifo.err"; rc2=$?
check "a FIFO as the journal / as needle's meta.json: --resume refuses at once (rc $rc1, $rc2), naming it" \
    bash -c "[ $rc1 -eq 1 ] && [ $rc2 -eq 2 ] && grep -q 'journal' '$T/fifo.err' && grep -q 'FIFO' '$T/nfifo.err'"

# ---- 4. a damaged middle record ends the journal; --resume salvages the rest --------------------------
for what in payload length; do
    d=$T/dmg-$what
    cp -r "$T/ref" "$d"
    off=$(rec_off "$d/journal" 5)
    case $what in payload) at=$((off + 12 + 100)) ;; length) at=$((off + 3)) ;; esac
    "$J" flip "$d/journal" "$at"
    "$DRV" sweep --resume "$d" --quiet 2> "$d.err"
    rc=$?
    check "one byte flipped in record 5's $what: --resume exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -ne 0 ] && sed 's/^/# /' "$d.err"
    check "... it says where and how much: kept 2 of 6 depths, dropped 4" \
        grep -q "journal damaged at record 5 (byte $off: .*): kept 2 of 6 depths, dropped 4; .* saved in $d/journal.damaged.$off" "$d.err"
    same_as_ref "$d" && ok "... results byte-identical to the clean run" || bad "... results byte-identical to the clean run"
done
# a damaged journal whose resume is refused (another document) is left as it was
d=$T/dmg-refused
cp -r "$T/ref" "$d"
"$J" flip "$d/journal" $(( $(rec_off "$d/journal" 5) + 100 ))
cp "$d/journal" "$T/dmg-refused.journal"
cp "$T/doc.tok" "$T/doc.tok.orig"
sed -i '1s/^[0-9]*/7/' "$T/doc.tok"
"$DRV" sweep --resume "$d" --quiet 2> "$d.err"
rc=$?
cp "$T/doc.tok.orig" "$T/doc.tok"
check "a damaged journal whose resume is refused (the document changed, rc $rc): journal unchanged, nothing saved aside" \
    bash -c "[ $rc -eq 1 ] && cmp -s '$d/journal' '$T/dmg-refused.journal' && ! ls '$d' | grep -q damaged"
"$DRV" sweep --resume "$d" --quiet 2> "$d.err"
rc=$?
check "... resumed with the document back: exit 0 (rc $rc), the damage reported then" \
    bash -c "[ $rc -eq 0 ] && grep -q 'journal damaged at record 5' '$d.err'"
same_as_ref "$d" && ok "... identical results" || bad "... identical results"
# a killed run whose journal is then damaged in the middle
d=$T/dmg-killed
(STRATA_TEST_FAULT=die@16 "$DRV" sweep "${ARGS[@]}" --out "$d"; :) 2> /dev/null   # killed (SIGKILL)
"$J" flip "$d/journal" $(( $(rec_off "$d/journal" 3) + 40 ))
"$DRV" sweep --resume "$d" --quiet 2> "$d.err"
rc=$?
check "a killed run, record 3 (a chunk) damaged: exit 0 (rc $rc), kept 1 of 6 depths, dropped the 2 after it" \
    bash -c "[ $rc -eq 0 ] && grep -q 'kept 1 of 6 depths, dropped 2;' '$d.err'"
same_as_ref "$d" && ok "... identical results" || bad "... identical results"

# ---- 5. the resume advice only where a resume can work -----------------------------------------------
if cc -shared -fPIC -o "$T/faultfs.so" tests/faultfs.c -ldl 2> "$T/cc.err"; then
    # fsync 1 is the journal header's
    FAULTFS_FSYNC_AT=1 LD_PRELOAD=$T/faultfs.so "$DRV" sweep "${ARGS[@]}" --out "$T/hdr" 2> "$T/hdr.err"
    rc=$?
    check "the journal header cannot be synced: exit 1 (rc $rc), and no 'continue with ... --resume' advice" \
        bash -c "[ $rc -eq 1 ] && grep -q 'cannot sync .*journal' '$T/hdr.err' && ! grep -q -- '--resume' '$T/hdr.err'"
    FAULTFS_FSYNC_AT=3 LD_PRELOAD=$T/faultfs.so "$DRV" sweep "${ARGS[@]}" --out "$T/eio" 2> "$T/eio.err"
    check "a journal fsync failing at depth 2: the advice, with kept 1 of 6" \
        grep -q "kept 1 of 6 depths in $T/eio (continue with: strata-driver sweep --resume $T/eio)" "$T/eio.err"
else
    bad "cannot build the fault shim: $(cat "$T/cc.err")"
fi
# an arm whose model gives NaN logits stops the sweep for good: a resume would meet it again
if cc -std=c11 -D_GNU_SOURCE -O1 -I. -o "$T/gguf_nan" tests/gguf_nan.c 2> "$T/cc.err" &&
   "$T/gguf_nan" "$MODEL" "$T/nan.gguf" output_norm.weight; then
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16 --arm-model nan="$T/nan.gguf" --depths 3 \
        --fork 4 --max-depth 60 --quiet --out "$T/nan" 2> "$T/nan.err"
    rc=$?
    check "an arm with NaN logits: exit 1 (rc $rc) naming it, no resume advice, the folder keeps 0 of 3 depths" \
        bash -c "[ $rc -eq 1 ] && grep -q 'arm nan: non-finite' '$T/nan.err' && ! grep -q -- '--resume' '$T/nan.err' && grep -q 'keeps 0 of 3 depths' '$T/nan.err'"
else
    bad "cannot make the NaN model: $(cat "$T/cc.err")"
fi
d=$T/changed
(STRATA_TEST_FAULT=die@11 "$DRV" sweep "${ARGS[@]}" --out "$d"; :) 2> /dev/null   # killed (SIGKILL)
cp "$T/doc.tok" "$T/doc.tok.orig"
sed -i '1s/^[0-9]*/7/' "$T/doc.tok"
"$DRV" sweep --resume "$d" --quiet 2> "$d.err"
rc=$?
cp "$T/doc.tok.orig" "$T/doc.tok"
check "a refused resume (the document changed, rc $rc): it says the journal keeps 2 of 6 depths, no advice" \
    bash -c "[ $rc -eq 1 ] && grep -q 'keeps 2 of 6 depths' '$d.err' && ! grep -q 'kept 0\|continue with' '$d.err'"
"$DRV" sweep --resume "$d" --quiet 2> /dev/null
rc=$?
check "... and with the document back, the resume completes (rc $rc)" test $rc -eq 0
same_as_ref "$d" && ok "... identical results" || bad "... identical results"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
