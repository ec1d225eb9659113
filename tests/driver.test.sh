#!/usr/bin/env bash
# driver.test.sh — strata-driver end to end on stories260K (run by tests/run.sh from the repo root
# with $BUILD set; prints its own closing line "N passed, N failed").
#   - a sweep f16,int8,f16 over 4 depths writes the results folder; the repeated f16 arm is
#     bit-identical (KL exactly 0, identical forks); the one-pass rows and fork tokens equal
#     separate from-scratch runs of the worker on each prefix, byte for byte;
#   - ref:SPEC arms (the plain C reference backend) give the rows of the same arms on strata's own engine;
#   - per-position mode writes one positions.tsv row per position per non-reference arm;
#   - bad input (missing / non-GGUF / truncated model, token id >= vocab, --max-depth past the
#     context, an unknown KV format, a non-empty results folder, a different model) fails with one
#     clear error line; a worker answers garbage with an error and keeps serving;
#   - SIGINT mid-sweep exits 130, leaves no worker behind and keeps the rows measured.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
MODEL=$FIX/models/stories260K.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
BGPIDS=""
cleanup() { for p in $BGPIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# ---- the document: the reference texts, at least 400 tokens ------------------------------------
cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt tests/fixtures/texts/*.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
N=$(wc -w < "$T/doc.tok")
check "the test document has at least 400 tokens ($N)" test "$N" -ge 400
# D = min(N - 1, n_ctx 2048 - fork 8); d_k = round(k D / 4)
D=$(( N - 1 < 2040 ? N - 1 : 2040 ))
EXPECT_DEPTHS=$(for k in 1 2 3 4; do echo $(( (2 * k * D + 4) / 8 )); done | tr '\n' ' ')

# ---- 1. the one-pass sweep ----------------------------------------------------------------------
R1=$T/r1
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 4 --fork 8 \
    --chunk 100 --out "$R1" --dump-rows "$T/rows" --quiet 2> "$T/r1.err"
rc=$?
check "sweep f16,int8,f16 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r1.err"
for f in README.md depths.tsv forks.tsv meta.json summary.json; do
    check "results folder has $f" test -s "$R1/$f"
done
check "no positions.tsv without --per-position" test ! -e "$R1/positions.tsv"
check "meta.json says complete" grep -q '"complete": true' "$R1/meta.json"
check "depths.tsv: header + 4 depths x 2 non-reference arms" test "$(wc -l < "$R1/depths.tsv")" -eq 9
GOT_DEPTHS=$(awk -F'\t' 'NR > 1 && $2 == "int8" { printf "%s ", $1 }' "$R1/depths.tsv")
check "depths are round(k*D/4) for D = $D: $EXPECT_DEPTHS(got $GOT_DEPTHS)" test "$GOT_DEPTHS" = "$EXPECT_DEPTHS"
check "every depth has an int8 and an f16#2 row" \
    test "$(awk -F'\t' 'NR > 1 { n[$1] += ($2 == "int8") + 2 * ($2 == "f16#2") } END { for (d in n) if (n[d] != 3) bad++; print bad + 0 }' "$R1/depths.tsv")" = 0
check "repeated f16 arm: KL(arm||ref), KL(ref||arm), JS exactly 0 and identical 8-token forks at every depth" \
    test "$(awk -F'\t' '$2 == "f16#2" && $3 == "0" && $4 == "0" && $5 == "0" && $6 == "1" && $14 == "8" && $15 == "1"' "$R1/depths.tsv" | wc -l)" -eq 4
check "int8 differs from f16 (KL > 0) at every depth" \
    test "$(awk -F'\t' '$2 == "int8" && $3 + 0 > 0' "$R1/depths.tsv" | wc -l)" -eq 4
check "forks.tsv: header + 8 rows, f16#2 streams equal the reference's" \
    test "$(wc -l < "$R1/forks.tsv")" -eq 9 -a "$(awk -F'\t' '$2 == "f16#2" && $5 == $6 && $4 == 1' "$R1/forks.tsv" | wc -l)" -eq 4

# one pass == separate from-scratch runs: the worker by hand on each prefix (default prefill chunk
# 512, 2 threads) vs the sweep's rows (100-token requests, nested prefixes, truncations)
same_rows=0; same_tok=0; twin_rows=0
for d in $EXPECT_DEPTHS; do
    tr ' ' '\n' < "$T/doc.tok" | grep . | head -n "$d" > "$T/prefix.tok"
    for kv in f16 int8; do
        "$WRK" --model "$MODEL" --kv $kv --tokens-file "$T/prefix.tok" --dump-logits "$T/dump.bin" --max-new 8 \
            > "$T/gen.txt" 2> /dev/null
        tail -c $((512 * 4)) "$T/dump.bin" | cmp -s - "$T/rows/$kv-$d.f32" && same_rows=$((same_rows + 1))
        col=6; [ $kv = int8 ] && col=5
        want=$(tr ' ' ',' < "$T/gen.txt")
        got=$(awk -F'\t' -v d="$d" -v c=$col '$1 == d && $2 == "int8" { print $c }' "$R1/forks.tsv")
        [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
    done
    cmp -s "$T/rows/f16-$d.f32" "$T/rows/f16#2-$d.f32" && twin_rows=$((twin_rows + 1))
done
check "teacher-forced rows of f16 and int8 at 4 depths equal from-scratch prefills bit for bit ($same_rows/8)" test $same_rows -eq 8
check "fork tokens of f16 and int8 at 4 depths equal from-scratch greedy generation ($same_tok/8)" test $same_tok -eq 8
check "f16#2 rows equal f16 rows byte for byte ($twin_rows/4)" test $twin_rows -eq 4

# ---- 1b. ref:SPEC arms (--backend ref, kernels/backend_ref.c: the plain C reference pass) ---------
RR=$T/rref
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,ref:f16,ref:int8 --depths 2 --fork 4 \
    --chunk 100 --max-depth 200 --out "$RR" --quiet 2> "$T/rref.err"
rc=$?
check "sweep f16,int8,ref:f16,ref:int8 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/rref.err"
check "ref:f16 = f16: KL(arm||ref), KL(ref||arm), JS exactly 0 and identical 4-token forks at both depths" \
    test "$(awk -F'\t' '$2 == "ref:f16" && $3 == "0" && $4 == "0" && $5 == "0" && $6 == "1" && $14 == "4" && $15 == "1"' "$RR/depths.tsv" | wc -l)" -eq 2
check "ref:int8 = int8: the same KL and JS strings at both depths (and KL > 0)" \
    test "$(awk -F'\t' '$2 == "int8" { k[$1] = $3 " " $4 " " $5 } $2 == "ref:int8" && $3 + 0 > 0 && k[$1] == $3 " " $4 " " $5 { n++ } END { print n + 0 }' "$RR/depths.tsv")" -eq 2
check "meta.json: the two ref arms ran on backend ref, ISA c" \
    test "$(grep -Ec '"backend": "ref"|"isa": "c"' "$RR/meta.json")" -eq 4

# ---- 2. per-position mode, document given as text ---------------------------------------------
R2=$T/r2
"$DRV" sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16,int8,f16 --depths 3 --fork 4 --per-position \
    --chunk 37 --max-depth 300 --out "$R2" --quiet 2> "$T/r2.err"
rc=$?
check "per-position sweep exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r2.err"
check "meta.json: the text was tokenised to the worker's $N tokens" grep -q "\"n_tokens\": $N," "$R2/meta.json"
check "positions.tsv: header + 300 positions x 2 non-reference arms" test "$(wc -l < "$R2/positions.tsv")" -eq 601
check "positions.tsv: int8 has each position 0..299 once" \
    test "$(awk -F'\t' '$2 == "int8" { if (seen[$1]++) dup++; n++; if ($1 > max) max = $1 } END { print n, dup + 0, max }' "$R2/positions.tsv")" = "300 0 299"
check "positions.tsv: f16#2 has KL exactly 0 everywhere" \
    test "$(awk -F'\t' '$2 == "f16#2" && $3 != "0"' "$R2/positions.tsv" | wc -l)" -eq 0
check "positions.tsv at pos d-1 agrees with depths.tsv at depth d (same KL, same string)" \
    test "$(awk -F'\t' 'FNR == NR { if ($2 == "int8") k[$1 + 1] = $3; next } $2 == "int8" && FNR > 1 { n++; if (k[$1] == $3) same++ } END { print n, same }' "$R2/positions.tsv" "$R2/depths.tsv")" = "3 3"

# the rows are compared on several threads: 1 and 3 threads give the same bytes as the default
for th in 1 3; do
    "$DRV" sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16,int8,f16 --depths 3 --fork 4 --per-position \
        --chunk 37 --max-depth 300 --out "$T/r2t$th" --quiet --compare-threads $th 2> "$T/r2t$th.err"
    rc=$?
    check "--compare-threads $th: exit 0, positions.tsv and depths.tsv identical to the default's (rc $rc)" \
        test $rc -eq 0 -a "$(cat "$T/r2t$th/positions.tsv" "$T/r2t$th/depths.tsv" | md5sum)" = \
        "$(cat "$R2/positions.tsv" "$R2/depths.tsv" | md5sum)"
done
"$DRV" sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16,int8 --compare-threads 0 --out "$T/r2t0" --quiet 2> "$T/r2t0.err"
rc=$?
check "--compare-threads 0 is refused with one message (rc $rc)" test $rc -eq 2 -a "$(grep -c 'compare-threads' "$T/r2t0.err")" -ge 1

# ---- 2b. --corpus DIR and the default document ------------------------------------------------
# the corpus is the sorted files, each followed by a newline when it lacks one
for f in $(find tests/fixtures/texts -type f | LC_ALL=C sort); do
    cat "$f"; [ -n "$(tail -c 1 "$f")" ] && echo
done > "$T/corpus.txt"
NC=$("$WRK" --model "$MODEL" --tokenize < "$T/corpus.txt" | wc -w)
"$DRV" sweep --model "$MODEL" --corpus tests/fixtures/texts --arms f16,int8 --depths 2 --max-depth 100 --fork 4 \
    --out "$T/rc" --quiet 2> "$T/rc.err"
rc=$?
check "--corpus: exit 0 and the sorted concatenation's $NC tokens (rc $rc)" \
    test $rc -eq 0 -a "$(grep -c "\"n_tokens\": $NC," "$T/rc/meta.json" 2> /dev/null)" = 1
"$DRV" sweep --model "$MODEL" --arms f16,int8 --depths 2 --max-depth 100 --fork 4 --out "$T/rd" --quiet 2> "$T/rd.err"
rc=$?
want=$(bible -f 'Gen1:1-Rev22:21' | sed -E 's/^[1-9]?[A-Za-z]+[0-9]+:[0-9]+ //' | "$WRK" --model "$MODEL" --tokenize | wc -w)
check "default document: the KJV, exit 0, its sha256 and all $want tokens in meta.json (rc $rc)" \
    test $rc -eq 0 -a "$(grep -c "King James Bible.*b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d" "$T/rd/meta.json" 2> /dev/null)" = 1 \
    -a "$(grep -c "\"n_tokens\": $want," "$T/rd/meta.json" 2> /dev/null)" = 1
"$DRV" sweep --model "$MODEL" --corpus self --arms f16,int8 --depths 2 --max-depth 100 --fork 4 --out "$T/rs" --quiet 2> "$T/rs.err"
rc=$?
check "--corpus self: exit 0, described as strata's own sources (rc $rc)" \
    test $rc -eq 0 -a "$(grep -c "strata's own README.md" "$T/rs/meta.json" 2> /dev/null)" = 1
cmp -s "$T/rd/depths.tsv" "$T/rs/depths.tsv"
check "--corpus self and kjv measure different documents" test $? -ne 0

# ---- 2c. make run, twice: the default results folder never collides -----------------------------
# (the main job's own command line, on stories260K and 64 tokens; committed results stay untouched)
SANFLAG=""; [ "$BUILD" = build-san ] && SANFLAG="SAN=1"
tag="maketest-$$"
before=$(git status --porcelain -- results 2> /dev/null)
for k in 1 2; do
    make -s run $SANFLAG MODEL_SMOL="$PWD/$MODEL" RUN_ARGS="--max-depth 64 --fork 4 --quiet --tag $tag" \
        > "$T/mr$k.out" 2>&1
    rc=$?
    check "make run #$k exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || tail -n 5 "$T/mr$k.out"
done
n=$(ls -d results/*-"$tag" results/*-"$tag"-[0-9]* 2> /dev/null | wc -l)
check "make run twice wrote two results folders (results/*-$tag and -2, or two minutes)" test "$n" -eq 2
for d in results/*-"$tag" results/*-"$tag"-[0-9]*; do [ -d "$d" ] && ls "$d"/README.md > /dev/null && rm -rf "$d"; done
check "the committed results are untouched" test "$(git status --porcelain -- results 2> /dev/null)" = "$before"

# ---- 3. bad input -------------------------------------------------------------------------------
# each: non-zero exit, exactly one error line, containing a meaningful word
head -c 100000 "$MODEL" > "$T/trunc.gguf"
printf '1 2 3 600 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n' > "$T/badtok.tok"
bad_input "missing model" nz "not found" sweep --model "$T/none.gguf" --doc "$T/doc.txt" --out "$T/b1" --quiet
bad_input "a text file as model" nz "not a GGUF" sweep --model "$T/doc.txt" --doc "$T/doc.txt" --out "$T/b2" --quiet
bad_input "a truncated GGUF" nz "truncated|outside|short" sweep --model "$T/trunc.gguf" --doc "$T/doc.txt" --out "$T/b3" --quiet
bad_input "a token id >= vocab" nz "vocabulary" sweep --model "$MODEL" --tokens-file "$T/badtok.tok" --depths 2 --out "$T/b4" --quiet
bad_input "--max-depth past the context" nz "context" sweep --model "$MODEL" --doc "$T/doc.txt" --max-depth 5000 --out "$T/b5" --quiet
bad_input "an unknown KV format" 2 "unknown KV format" sweep --model "$MODEL" --arms f16,int9 --out "$T/b6" --quiet
bad_input "a non-empty results folder" 2 "not empty" sweep --model "$MODEL" --doc "$T/doc.txt" --out "$R1" --quiet
# the engine options sweep and needle share (driver/cli.c's cli_engine_opt): the same ranges and
# messages in both commands, each taken by both, and --max-context reaching each command's workers
for cmd in sweep needle; do
    for opt in "chunk 1048576" "threads 1024" "prefill 65536" "max-context 4194304"; do
        bad_input "$cmd --${opt% *} 0 is refused" 2 "error: --${opt% *} needs an integer in \[1, ${opt#* }\], got '0'\$" \
            "$cmd" --model "$MODEL" "--${opt% *}" 0 --quiet
    done
    bad_input "$cmd takes --worker --chunk --threads --prefill --max-context (the tag after them is refused)" 2 \
        "error: --tag 'a/b': use letters" "$cmd" --model "$MODEL" --worker "$WRK" --chunk 16 --threads 1 --prefill 8 \
        --max-context 64 --tag a/b --quiet
done
bad_input "sweep --max-context 64 reaches the workers" 1 "n_ctx 64 minus the fork" sweep --model "$MODEL" --doc "$T/doc.txt" \
    --max-context 64 --max-depth 100 --out "$T/b7" --quiet
bad_input "needle --max-context 64 reaches the workers (lengths capped at 64 - 12)" 1 "a 52-token prompt has no room" \
    needle --model "$MODEL" --doc "$T/doc.txt" --max-context 64 --lengths 1024 --positions 50 --trials 1 --template raw \
    --arms f16 --out "$T/b8" --quiet
# a FIFO where the document is expected: refused at once, never a read that blocks (issue 22 F6)
mkfifo "$T/doc.fifo"
timeout 20 "$DRV" sweep --model "$MODEL" --doc "$T/doc.fifo" --arms f16,int8 --depths 1 --max-depth 100 \
    --out "$T/b8" --quiet > /dev/null 2> "$T/fifo.err"
rc=$?
check "a FIFO as --doc: refused at once with one error (rc $rc: $(head -c 200 "$T/fifo.err"))" \
    test $rc -ne 0 -a $rc -ne 124 -a "$(grep -c 'error:' "$T/fifo.err")" = 1 -a -n "$(grep 'FIFO' "$T/fifo.err")"
check "failed runs left no results folder behind" test ! -e "$T/b3" -a ! -e "$T/b4" -a ! -e "$T/b5"

# a different model behind a remote arm: exit 3, the differing field named
if [ -f tests/fixtures/models/rand-llama.gguf ]; then
    "$WRK" --model tests/fixtures/models/rand-llama.gguf --kv int8 --listen "ipc://$T/other.ipc" 2> /dev/null &
    wp=$!; BGPIDS="$BGPIDS $wp"
    bad_input "an arm with a different model" 3 "differ.*model_sha256" sweep --model "$MODEL" --arms f16 \
        --arm "int8=ipc://$T/other.ipc" --doc "$T/doc.txt" --out "$T/b7" --quiet
    check "the remote worker is left running" kill -0 $wp
    kill $wp; wait $wp 2> /dev/null
fi

# garbage to a worker: error replies, then a valid hello is still answered
if [ -x "$BUILD/tests/test_sweep" ]; then
    "$WRK" --model "$MODEL" --listen "ipc://$T/g.ipc" 2> /dev/null &
    wp=$!; BGPIDS="$BGPIDS $wp"
    "$BUILD/tests/test_sweep" --garbage "ipc://$T/g.ipc" > "$T/garbage.out" 2>&1
    rc=$?
    check "a worker answers malformed messages with errors and keeps serving" test $rc -eq 0
    [ $rc -ne 0 ] && cat "$T/garbage.out"
    kill $wp; wait $wp 2> /dev/null
else
    bad "$BUILD/tests/test_sweep is missing (make $BUILD/tests/test_sweep)"
fi

# ---- 4. SIGINT mid-sweep ---------------------------------------------------------------------------
R3=$T/r3
mkdir -p "$T/tmp"
TMPDIR=$T/tmp "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 64 --fork 8 \
    --per-position --chunk 1 --out "$R3" --quiet 2> "$T/r3.err" &
dp=$!
for _ in $(seq 1 200); do
    [ -f "$R3/depths.tsv" ] && [ "$(wc -l < "$R3/depths.tsv")" -ge 5 ] && break
    sleep 0.1
done
kids=$(pgrep -P $dp | tr '\n' ' ')
kill -INT $dp
wait $dp
rc=$?
check "SIGINT: exit code 130 (rc $rc)" test $rc -eq 130
check "SIGINT: there were 3 workers ($kids)" test "$(echo $kids | wc -w)" -eq 3
alive=0
for k in $kids; do kill -0 "$k" 2> /dev/null && alive=$((alive + 1)); done
check "SIGINT: no worker process left" test $alive -eq 0
check "SIGINT: the private temp dir is removed" test -z "$(ls -A "$T/tmp")"
rows=$(( $(wc -l < "$R3/depths.tsv") - 1 ))
done_k=$(grep -o '"depths_done": [0-9]*' "$R3/meta.json" | grep -o '[0-9]*$')
check "SIGINT: depths.tsv keeps the measured rows ($rows rows = 2 x $done_k depths, 0 < $done_k < 64)" \
    test "$rows" -eq $((2 * done_k)) -a "$done_k" -gt 0 -a "$done_k" -lt 64
check "SIGINT: meta.json says complete: false" grep -q '"complete": false' "$R3/meta.json"
check "SIGINT: the partial results are rendered" test -s "$R3/README.md"

# ---- 5. report and compare ---------------------------------------------------------------------
rm -f "$R1/README.md"
"$DRV" report "$R1" 2> /dev/null
check "strata-driver report re-renders README.md" test -s "$R1/README.md"
"$DRV" compare "$R1" "$R2" > "$T/cmp.md" 2> /dev/null
rc=$?
check "strata-driver compare exits 0 and prints Markdown" test $rc -eq 0 -a -s "$T/cmp.md"
"$DRV" report > /dev/null 2>&1
check "report without DIR is a usage error (2)" test $? -eq 2

# ---- 6. RoPE angles: exact by default, llama.cpp's f32 ones on request --------------------------
RA=(sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f32,f16 --ref f16 --depths 2 --fork 4 --max-depth 400
    --threads 1 --quiet)
"$DRV" "${RA[@]}" --out "$T/rx" 2> /dev/null; rc1=$?
"$DRV" "${RA[@]}" --rope-angles f32 --out "$T/rf" 2> /dev/null; rc2=$?
check "--rope-angles f32: exit 0 (rc $rc1, $rc2); its workers say cpu-*+rope-f32 in meta.json, the default ones do not" \
    test $rc1 -eq 0 -a $rc2 -eq 0 -a "$(grep -c '"device": "cpu-[a-z0-9]*+rope-f32"' "$T/rf/meta.json")" -eq 2 \
         -a "$(grep -c 'rope-f32' "$T/rx/meta.json")" -eq 0
check "... and the two modes measure different rows (the f32 noise floor's KL differs at depth 400)" \
    test "$(awk -F'\t' 'NR > 1 { print $0 }' "$T/rx/depths.tsv" | md5sum)" != "$(awk -F'\t' 'NR > 1 { print $0 }' "$T/rf/depths.tsv" | md5sum)"
"$DRV" "${RA[@]}" --rope-angles f64 --out "$T/rbad" 2> "$T/rbad.err"; rc=$?
check "--rope-angles f64: usage error (rc $rc) naming the choices" \
    test $rc -eq 2 -a "$(grep -c "exact or f32" "$T/rbad.err")" -eq 1

# ---- 7. the weights copied onto huge pages (default) or mapped (--mmap-weights): the same bits -----
for w in copy mmap; do
    flag=(); [ $w = mmap ] && flag=(--mmap-weights)
    "$WRK" --model "$MODEL" --kv f16 --threads 2 --prefill 7 --tokens-file "$T/prefix.tok" --dump-logits "$T/w.$w.bin" \
        --max-new 8 --timing "${flag[@]}" > "$T/w.$w.ids" 2> "$T/w.$w.err"
done
check "worker: weights copied (default) and --mmap-weights give the same logit rows" \
    sh -c 'test -s "$1" && cmp -s "$1" "$2"' _ "$T/w.copy.bin" "$T/w.mmap.bin"
check "... the same generated ids" cmp -s "$T/w.copy.ids" "$T/w.mmap.ids"
check "... and --timing says which: weights=copy / weights=mmap (huge_bytes=0 when mapped)" \
    test "$(grep -c ' weights=copy huge_bytes=[0-9]' "$T/w.copy.err")" -eq 1 -a "$(grep -c ' weights=mmap huge_bytes=0$' "$T/w.mmap.err")" -eq 1
"$DRV" "${RA[@]}" --mmap-weights --out "$T/rm" 2> /dev/null; rc=$?
check "sweep --mmap-weights: exit 0 (rc $rc), depths.tsv and forks.tsv byte-identical to the default run's" \
    test $rc -eq 0 -a "$(cat "$T/rm/depths.tsv" "$T/rm/forks.tsv" | md5sum)" = "$(cat "$T/rx/depths.tsv" "$T/rx/forks.tsv" | md5sum)"
check "... and its meta.json records the option (a resume passes it again)" test "$(grep -c '"--mmap-weights"' "$T/rm/meta.json")" -ge 1

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
