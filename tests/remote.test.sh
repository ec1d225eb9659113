#!/usr/bin/env bash
# remote.test.sh — remote arms that only their owner can use, and arms started through a cluster's
# own tools (run by tests/run.sh from the repository root with $BUILD set; prints its closing line
# "N passed, N failed[, N skipped]"). On stories260K:
#   - where a worker may listen: no host = loopback; plain tcp:// on another address refused
#     without --allow-plain-tcp; tls+tcp:// needs all three certificate options, and they need it;
#   - mutual TLS on loopback: the owner's sweep through a TLS arm equals the same sweep with a local
#     arm byte for byte; a client with a certificate from another CA is refused at once (and gets
#     nothing); clients that send garbage or no certificate get nothing, the worker logs them, and
#     a sweep running meanwhile is unaffected (byte-identical);
#   - two "hosts" made of network namespaces joined by a veth pair: the same over a real
#     interface, and a worker on the default (loopback) address cannot be reached from the other
#     host; skipped with the reason when namespaces are not permitted;
#   - a sweep through a TLS arm killed and resumed with its certificates given anew beside --resume;
#   - needle: through a TLS arm, through --launch, and resumed through --launch (same cells.tsv);
#   - --launch through a fake srun and a fake ssh on PATH: the sweep equals the local one, the
#     launcher saw the worker's command line (with --allow-overcommit passed through), and a
#     SIGKILLed driver leaves no worker behind.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
MODEL=$FIX/models/stories260K.gguf
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)
skipped() { skip=$((skip + 1)); echo "skip - $1"; }

# --netns-inner: the part that runs inside `unshare -rn` (see section 4); reports on stdout
if [ "${1:-}" = "--netns-inner" ]; then
    T=$2; OUT=$3
    ip link set lo up
    unshare -n sleep 600 & HOSTB=$!
    sleep 0.3
    nsb() { nsenter -t "$HOSTB" -n "$@"; }
    say() { echo "$1" >> "$OUT"; }
    if ! ip link add va type veth peer name vb netns "$HOSTB" 2> "$T/veth.err"; then
        say "SKIP cannot create a veth pair here: $(head -n 1 "$T/veth.err")"; kill $HOSTB; exit 0
    fi
    ip addr add 10.77.0.1/24 dev va && ip link set va up
    nsb ip link set lo up; nsb ip addr add 10.77.0.2/24 dev vb; nsb ip link set vb up
    # host B: a TLS worker on its veth address, and a plain one on the default (loopback) address.
    # nsenter itself, not a shell function, so that $! is the worker (nsenter -n execs it); and
    # each reads a FIFO this script holds open: when the script ends, however, they end too
    mkfifo "$T/lifeline"
    nsenter -t "$HOSTB" -n "$WRK" --model "$MODEL" --kv int8 --threads 1 --listen tls+tcp://10.77.0.2:5555 \
        --tls-cert "$T/hostb.pem" --tls-key "$T/hostb.key" --tls-ca "$T/ca.pem" --exit-on-stdin-eof \
        < "$T/lifeline" > "$T/nb.out" 2> "$T/nb.err" & WB=$!
    nsenter -t "$HOSTB" -n "$WRK" --model "$MODEL" --kv int8 --threads 1 --listen tcp://:5556 --exit-on-stdin-eof \
        < "$T/lifeline" > "$T/nl.out" 2> "$T/nl.err" & WL=$!
    exec 7> "$T/lifeline"
    trap 'kill $WB $WL $HOSTB 2> /dev/null' EXIT
    nsb "$WRK" --model "$MODEL" --kv int8 --listen tcp://0.0.0.0:5557 > /dev/null 2> "$T/nplain.err"
    say "$([ $? -eq 2 ] && grep -q allow-plain-tcp "$T/nplain.err" && echo ok || echo FAIL) - host B: plain tcp://0.0.0.0 refused without --allow-plain-tcp"
    for _ in $(seq 50); do grep -q listening "$T/nb.out" && grep -q listening "$T/nl.out" && break; sleep 0.1; done
    say "$(grep -q '^strata-worker: listening tcp://127.0.0.1:5556$' "$T/nl.out" && echo ok || echo FAIL) - host B: tcp://:5556 listens on 127.0.0.1 ($(cat "$T/nl.out"))"
    # from host A: the loopback-only worker is unreachable, the TLS one serves the owner
    if timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.2/5556' 2> /dev/null; then r=FAIL; else r=ok; fi
    say "$r - host A cannot connect to host B's loopback-only worker (10.77.0.2:5556)"
    timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.2/5555; head -c 4096 /dev/urandom >&3; cat <&3 > "$0"' "$T/ngarbage.got" 2> /dev/null
    say "$([ ! -s "$T/ngarbage.got" ] && echo ok || echo FAIL) - host A: garbage to the TLS worker gets nothing back"
    timeout 60 "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16 --arm int8=tls+tcp://10.77.0.2:5555 \
        --tls-cert "$T/driver.pem" --tls-key "$T/driver.key" --tls-ca "$T/ca.pem" --threads 1 --depths 3 --fork 6 \
        --out "$T/nres" --quiet 2> "$T/nres.err"
    rc=$?
    say "$([ $rc -eq 0 ] && echo ok || echo FAIL) - host A's driver sweeps through host B's TLS worker (rc $rc: $(head -c 300 "$T/nres.err"))"
    say "$(cmp -s "$T/nres/depths.tsv" "$T/ref/depths.tsv" && cmp -s "$T/nres/forks.tsv" "$T/ref/forks.tsv" && echo ok || echo FAIL) - across the veth pair: depths.tsv and forks.tsv byte-identical to the local run"
    timeout 30 "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16 --arm int8=tls+tcp://10.77.0.2:5555 \
        --tls-cert "$T/intruder.pem" --tls-key "$T/intruder.key" --tls-ca "$T/ca.pem" --threads 1 --depths 3 --fork 6 \
        --out "$T/nintr" --quiet 2> "$T/nintr.err"
    rc=$?
    say "$([ $rc -ne 0 ] && grep -q 'TLS handshake failed' "$T/nintr.err" && echo ok || echo FAIL) - host A with another CA's certificate is refused (rc $rc: $(head -c 200 "$T/nintr.err"))"
    sleep 1.5
    say "$(grep -q 'refused' "$T/nb.err" && echo ok || echo FAIL) - host B's worker logged the refused connections"
    kill $WB $WL 2> /dev/null; wait $WB $WL 2> /dev/null
    kill $HOSTB 2> /dev/null
    exit 0
fi

if [ ! -f "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
if ! command -v openssl > /dev/null; then
    echo "skip: needs the openssl command (Debian package openssl) to make test certificates"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
BGPIDS=""
cleanup() { for p in $BGPIDS; do kill "$p" 2> /dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# ---- certificates: a CA, the worker's (named 127.0.0.1 and 10.77.0.2), the driver's, and an
# intruder's from another CA --------------------------------------------------------------------
ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$T/$1.key" \
           -subj "/CN=$1" -days 2 -out "$T/$1.pem" 2> /dev/null; }
leaf() {   # name cn ca
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$T/$1.key" -subj "/CN=$2" \
        -out "$T/$1.csr" 2> /dev/null &&
    printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\n' "$2" > "$T/$1.ext" &&
    openssl x509 -req -in "$T/$1.csr" -CA "$T/$3.pem" -CAkey "$T/$3.key" -CAcreateserial -days 2 \
        -out "$T/$1.pem" -extfile "$T/$1.ext" 2> /dev/null
}
ca ca && ca evil && leaf worker 127.0.0.1 ca && leaf hostb 10.77.0.2 ca && leaf driver strata-driver ca &&
    leaf intruder strata-driver evil
check "test certificates made with openssl" test -s "$T/intruder.pem" -a -s "$T/worker.pem"
TLSW=(--tls-cert "$T/worker.pem" --tls-key "$T/worker.key" --tls-ca "$T/ca.pem")
TLSD=(--tls-cert "$T/driver.pem" --tls-key "$T/driver.key" --tls-ca "$T/ca.pem")

cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
SW=(sweep --model "$MODEL" --tokens-file "$T/doc.tok" --threads 1 --depths 3 --fork 6 --quiet)

# waits (5 s at most) for a worker's "listening URL" line in file $1; prints the URL
url_of() { for _ in $(seq 50); do grep -q '^strata-worker: listening ' "$1" 2> /dev/null && break; sleep 0.1; done
           sed -n 's/^strata-worker: listening //p' "$1" | head -n 1; }

# ---- 1. where a worker may listen (checked before the model is loaded) -------------------------
"$WRK" --model "$MODEL" --listen tcp://0.0.0.0:5555 2> "$T/l1.err"; rc=$?
check "plain tcp://0.0.0.0 is refused without --allow-plain-tcp (rc $rc)" test $rc -eq 2
check "... with one clear line naming TLS and --allow-plain-tcp" \
    bash -c "[ \$(wc -l < '$T/l1.err') -eq 1 ] && grep -q 'tls+tcp://' '$T/l1.err' && grep -q -- '--allow-plain-tcp' '$T/l1.err'"
"$WRK" --model "$MODEL" --listen tcp://*:5555 2> /dev/null; rc=$?
check "plain tcp://*:5555 is refused too (rc $rc)" test $rc -eq 2
"$WRK" --model "$MODEL" --listen tls+tcp://127.0.0.1:5555 2> "$T/l2.err"; rc=$?
check "tls+tcp:// without certificates is refused (rc $rc)" bash -c "[ $rc -eq 2 ] && grep -q -- '--tls-cert' '$T/l2.err'"
"$WRK" --model "$MODEL" --listen tcp://127.0.0.1:5555 "${TLSW[@]}" 2> "$T/l3.err"; rc=$?
check "certificates with a plain tcp:// URL are refused (rc $rc)" bash -c "[ $rc -eq 2 ] && grep -q 'tls+tcp' '$T/l3.err'"
"$WRK" --model "$MODEL" --listen tls+tcp://127.0.0.1:5555 --tls-cert "$T/worker.pem" --tls-key "$T/nonexistent.key" \
    --tls-ca "$T/ca.pem" 2> "$T/l4.err"; rc=$?
check "a missing key file is named (rc $rc)" bash -c "[ $rc -eq 2 ] && grep -q 'nonexistent.key' '$T/l4.err'"
"$WRK" --model "$MODEL" --listen tls+tcp://127.0.0.1:0 --tls-cert "$T/worker.pem" --tls-key "$T/driver.key" \
    --tls-ca "$T/ca.pem" > /dev/null 2> "$T/l5.err"; rc=$?
check "a key that does not match the certificate: exit 1 with a message (rc $rc)" \
    bash -c "[ $rc -eq 1 ] && grep -q 'do they match' '$T/l5.err'"
"$WRK" --model "$MODEL" --listen ws://127.0.0.1:5555 2> /dev/null; rc=$?
check "another transport (ws://) is refused (rc $rc)" test $rc -eq 2
"$WRK" --model "$MODEL" --threads 1 --listen tcp://:0 > "$T/l6.out" 2> /dev/null & W=$!; BGPIDS="$BGPIDS $W"
U=$(url_of "$T/l6.out")
check "tcp://:0 (no host) listens on loopback with a free port ($U)" bash -c "[[ '$U' =~ ^tcp://127\\.0\\.0\\.1:[0-9]+\$ ]] && [ '${U##*:}' != 0 ]"
kill $W 2> /dev/null; wait $W 2> /dev/null

# ---- 2. the reference: the same sweep with local arms ------------------------------------------
"$DRV" "${SW[@]}" --arms f16,int8 --out "$T/ref" 2> "$T/ref.err"; rc=$?
check "reference sweep with local arms f16,int8 exits 0 (rc $rc)" test $rc -eq 0

# ---- 3. mutual TLS on loopback -------------------------------------------------------------------
"$WRK" --model "$MODEL" --kv int8 --threads 1 --listen tls+tcp://127.0.0.1:0 "${TLSW[@]}" > "$T/w.out" 2> "$T/w.err" &
W=$!; BGPIDS="$BGPIDS $W"
U=$(url_of "$T/w.out")
check "a TLS worker announces its URL ($U)" bash -c "[[ '$U' =~ ^tls\\+tcp://127\\.0\\.0\\.1:[0-9]+\$ ]]"
PORT=${U##*:}
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" "${TLSD[@]}" --out "$T/tls" 2> "$T/tls.err"; rc=$?
check "the owner sweeps through the TLS arm (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && head -n 5 "$T/tls.err"
check "TLS arm: depths.tsv and forks.tsv byte-identical to the local arm's" \
    bash -c "cmp -s '$T/tls/depths.tsv' '$T/ref/depths.tsv' && cmp -s '$T/tls/forks.tsv' '$T/ref/forks.tsv'"
start=$(date +%s)
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/intruder.pem" --tls-key "$T/intruder.key" \
    --tls-ca "$T/ca.pem" --out "$T/intr" 2> "$T/intr.err"; rc=$?
took=$(( $(date +%s) - start ))
check "a client whose certificate another CA signed is refused (rc $rc)" test $rc -eq 1
check "... at once (${took}s, not the 60 s dial timeout), saying the TLS handshake failed" \
    bash -c "[ $took -lt 30 ] && grep -q 'TLS handshake failed' '$T/intr.err'"
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/driver.pem" --tls-key "$T/driver.key" \
    --tls-ca "$T/evil.pem" --out "$T/intr2" 2> "$T/intr2.err"; rc=$?
check "a driver that does not trust the worker's CA refuses it (rc $rc): $(head -c 160 "$T/intr2.err")" \
    bash -c "[ $rc -eq 1 ] && grep -q 'TLS handshake failed' '$T/intr2.err'"
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --out "$T/nocert" 2> "$T/nocert.err"; rc=$?
check "a tls+tcp:// arm without certificates: usage error naming the options (rc $rc)" \
    bash -c "[ $rc -ne 0 ] && grep -q -- '--tls-cert' '$T/nocert.err'"
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/driver.pem" --out "$T/half" 2> "$T/half.err"; rc=$?
check "--tls-cert alone is a usage error (rc $rc)" test $rc -eq 2
# garbage before any handshake: nothing comes back, the connection is closed
timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; head -c 4096 /dev/urandom >&3; cat <&3 > "$2"' _ "$PORT" "$T/garbage.got" 2> /dev/null
rc=$?
check "a client sending 4 KiB of garbage gets nothing back and is disconnected (rc $rc, $(stat -c %s "$T/garbage.got" 2> /dev/null) bytes)" \
    bash -c "[ $rc -ne 124 ] && [ ! -s '$T/garbage.got' ]"
# a TLS client without a certificate (openssl s_client): no application data, no session
echo hello | timeout 10 openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$T/ca.pem" -quiet > "$T/nocert.got" 2> "$T/nocert.s_client"
check "a TLS client without a certificate gets no data" test ! -s "$T/nocert.got"
# the owner, while intruders keep trying: results unchanged
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" "${TLSD[@]}" --per-position --out "$T/busy" 2> "$T/busy.err" & D=$!
for i in $(seq 20); do
    timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; head -c 512 /dev/urandom >&3' _ "$PORT" 2> /dev/null
    "$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/intruder.pem" --tls-key "$T/intruder.key" \
        --tls-ca "$T/ca.pem" --out "$T/intr-$i" 2> /dev/null
    kill -0 $D 2> /dev/null || break
done
wait $D; rc=$?
check "the owner's per-position sweep finished while intruders tried ($i rounds; rc $rc)" test $rc -eq 0
"$DRV" "${SW[@]}" --arms f16,int8 --per-position --out "$T/busyref" 2> /dev/null
check "... and its depths.tsv, forks.tsv and positions.tsv are byte-identical to a local run's" \
    bash -c "for f in depths forks positions; do cmp -s '$T/busy/'\$f.tsv '$T/busyref/'\$f.tsv || exit 1; done"
sleep 1.5
check "the worker logged the refused connections ($(grep -c refused "$T/w.err") lines)" grep -q 'refused' "$T/w.err"
check "the worker is still serving" kill -0 $W
"$DRV" "${SW[@]}" --arms f16 --arm int8="$U" "${TLSD[@]}" --out "$T/after" 2> /dev/null; rc=$?
check "... and serves the owner again afterwards, identically (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$T/after/depths.tsv' '$T/ref/depths.tsv'"
kill $W 2> /dev/null; wait $W 2> /dev/null

# ---- 4. two hosts made of network namespaces -----------------------------------------------------
if ! command -v unshare > /dev/null || ! command -v nsenter > /dev/null || ! command -v ip > /dev/null; then
    skipped "network namespaces: needs unshare, nsenter (util-linux) and ip (iproute2)"
elif ! unshare -rn true 2> "$T/unshare.err"; then
    skipped "network namespaces are not permitted here (unshare -rn: $(head -n 1 "$T/unshare.err"))"
else
    : > "$T/netns.out"
    MODEL=$MODEL WRK=$WRK DRV=$DRV timeout 300 unshare -rn bash "$0" --netns-inner "$T" "$T/netns.out" > "$T/netns.log" 2>&1
    if grep -q '^SKIP' "$T/netns.out"; then
        skipped "two hosts: $(sed -n 's/^SKIP //p' "$T/netns.out")"
    else
        n=0
        while IFS= read -r line; do
            n=$((n + 1))
            case "$line" in ok\ -\ *) ok "netns: ${line#ok - }";; *) bad "netns: ${line#FAIL - }";; esac
        done < "$T/netns.out"
        check "netns: all 8 checks ran ($n)" test "$n" -eq 8
    fi
    sleep 1.5   # (a worker notices the end of its stdin within a second)
    left=0
    for f in /proc/[0-9]*/cmdline; do
        { mapfile -d '' a < "$f"; } 2> /dev/null || continue
        [[ "${a[0]:-}" == "$WRK" && ( " ${a[*]} " == *10.77.0.2:5555* || " ${a[*]} " == *tcp://:5556* ) ]] && left=$((left + 1))
    done
    check "netns: host B's workers are gone ($left left)" test $left -eq 0
fi

# ---- 5. --launch through a fake srun and a fake ssh -----------------------------------------------
mkdir -p "$T/bin"
cat > "$T/bin/srun" << 'EOF'
#!/bin/sh
# fake srun: logs its arguments, drops its options, runs the command here (stdin and stdout kept)
printf '%s\n' "$*" >> "$FAKE_LOG/srun.log"
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
exec "$@"
EOF
cat > "$T/bin/ssh" << 'EOF'
#!/bin/sh
# fake ssh HOST COMMAND...: like ssh, joins the words and runs them with the (remote) shell
printf '%s\n' "$*" >> "$FAKE_LOG/ssh.log"
host=$1; shift
exec sh -c "$*"
EOF
chmod +x "$T/bin/srun" "$T/bin/ssh"
export FAKE_LOG=$T
PATH="$T/bin:$PATH" "$DRV" "${SW[@]}" --arms f16,int8 --launch 'srun -N1 -n1 --gpus=1 {worker}' --allow-overcommit \
    --out "$T/srun" 2> "$T/srun.err"; rc=$?
check "sweep with --launch 'srun -N1 -n1 --gpus=1 {worker}' exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && head -n 5 "$T/srun.err"
check "... srun started one worker per arm (2 lines)" test "$(wc -l < "$T/srun.log" 2> /dev/null)" = 2
check "... with the worker's command line: --kv-k int8, --listen tcp://127.0.0.1:0, --exit-on-stdin-eof" \
    bash -c "grep -q -- '--kv-k int8' '$T/srun.log' && grep -q -- '--listen tcp://127.0.0.1:0' '$T/srun.log' && grep -q -- '--exit-on-stdin-eof' '$T/srun.log'"
check "... and --allow-overcommit passed through to both workers" test "$(grep -c -- '--allow-overcommit' "$T/srun.log")" = 2
check "... results byte-identical to local arms" \
    bash -c "cmp -s '$T/srun/depths.tsv' '$T/ref/depths.tsv' && cmp -s '$T/srun/forks.tsv' '$T/ref/forks.tsv'"
PATH="$T/bin:$PATH" "$DRV" "${SW[@]}" --arms f16,int8 --launch 'ssh node{i} {worker}' --out "$T/ssh" 2> "$T/ssh.err"; rc=$?
check "sweep with --launch 'ssh node{i} {worker}' exits 0 (rc $rc)" test $rc -eq 0
check "... ssh was asked for node0 and node1" bash -c "grep -q '^node0 ' '$T/ssh.log' && grep -q '^node1 ' '$T/ssh.log'"
check "... results byte-identical to local arms" \
    bash -c "cmp -s '$T/ssh/depths.tsv' '$T/ref/depths.tsv' && cmp -s '$T/ssh/forks.tsv' '$T/ref/forks.tsv'"
PATH="$T/bin:$PATH" "$DRV" "${SW[@]}" --arms f16,int8 --launch-listen tls+tcp://127.0.0.1:0 "${TLSD[@]}" \
    --launch "srun -N1 {worker} --tls-cert $T/worker.pem --tls-key $T/worker.key --tls-ca $T/ca.pem" \
    --out "$T/srun-tls" 2> "$T/srun-tls.err"; rc=$?
check "launched workers over mutual TLS (--launch-listen tls+tcp://127.0.0.1:0): exit 0, identical results (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$T/srun-tls/depths.tsv' '$T/ref/depths.tsv'"
[ $rc -ne 0 ] && head -n 5 "$T/srun-tls.err"
# the fault hooks reach a launched worker: a launcher that keeps running beside the worker (not
# exec'ing it, as real srun and ssh do) is what the driver's pid names; STRATA_TEST_FAULT=stop@4:1
# must stop the worker itself (the launcher's process group), be detected by the request timeout,
# and the restarted worker must give the local run's results
cat > "$T/bin/wrapl" << 'EOF'
#!/bin/sh
# fake launcher that stays the parent of the command it runs
"$@"
EOF
chmod +x "$T/bin/wrapl"
STRATA_TEST_FAULT=stop@4:1 PATH="$T/bin:$PATH" "$DRV" "${SW[@]}" --arms f16,int8 --launch 'wrapl {worker}' \
    --request-timeout 20 --out "$T/lstop" 2> "$T/lstop.err"; rc=$?
check "STRATA_TEST_FAULT=stop@4:1 through a launcher that stays the worker's parent: the launched worker itself is stopped, detected and restarted (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'arm int8: the worker (pid [0-9]*, state T: stopped) sent no reply' '$T/lstop.err' && grep -q 'worker restarted' '$T/lstop.err'"
check "... results byte-identical to local arms" \
    bash -c "cmp -s '$T/lstop/depths.tsv' '$T/ref/depths.tsv' && cmp -s '$T/lstop/forks.tsv' '$T/ref/forks.tsv'"
"$DRV" "${SW[@]}" --arms f16,int8 --launch 'srun -N1' --out "$T/badl" 2> "$T/badl.err"; rc=$?
check "a template without {worker} is a usage error (rc $rc)" bash -c "[ $rc -eq 2 ] && grep -q '{worker}' '$T/badl.err'"
PATH="$T/bin:$PATH" "$DRV" "${SW[@]}" --arms f16,int8 --launch 'srun -N1 false {worker}' --out "$T/diel" 2> "$T/diel.err"; rc=$?
check "a launcher that fails: exit 1 naming the arm (rc $rc: $(head -c 200 "$T/diel.err"))" \
    bash -c "[ $rc -eq 1 ] && grep -q 'arm f16' '$T/diel.err'"
# a SIGKILLed driver leaves no launched worker behind (they see their stdin close)
cp "$MODEL" "$T/orphan-model.gguf"
# processes whose command line has "$1" (from /proc, without a fork per process: fast enough to
# see a short run's workers; procps may be missing)
nprocs() { local n=0 f a; for f in /proc/[0-9]*/cmdline; do
    { mapfile -d '' a < "$f"; } 2> /dev/null || continue
    [[ " ${a[*]} " == *"$1"* ]] && n=$((n + 1)); done; echo $n; }
cat tests/fixtures/texts/*.txt > "$T/long.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/long.txt" > "$T/long.tok"
PATH="$T/bin:$PATH" "$DRV" sweep --model "$T/orphan-model.gguf" --tokens-file "$T/long.tok" --threads 1 --depths 3 \
    --fork 6 --chunk 4 --quiet --per-position --arms f16,int8 --launch 'srun -N1 {worker}' --out "$T/orphan" 2> /dev/null & D=$!
for _ in $(seq 100); do [ "$(nprocs "$T/orphan-model.gguf --kv-k")" -ge 2 ] && break; sleep 0.05; done
n_before=$(nprocs "$T/orphan-model.gguf --kv-k")
kill -9 $D; wait $D 2> /dev/null
for _ in $(seq 50); do [ "$(nprocs "$T/orphan-model.gguf --kv-k")" = 0 ] && break; sleep 0.1; done
n_after=$(nprocs "$T/orphan-model.gguf --kv-k")
check "driver SIGKILLed with 2 launched workers running ($n_before): none left within 5 s ($n_after)" \
    bash -c "[ $n_before -ge 2 ] && [ $n_after = 0 ]"

# ---- 6. needle brings its arms up the same way: TLS arms, --launch, and a resume that relaunches --
NA=(needle --model "$MODEL" --lengths 256 --positions 0,100 --trials 2 --threads 1 --quiet)
"$DRV" "${NA[@]}" --arms f16,int8 --out "$T/nref" 2> "$T/nref.err"; rc=$?
check "needle with local arms exits 0 (rc $rc)" test $rc -eq 0
"$WRK" --model "$MODEL" --kv int8 --threads 1 --listen tls+tcp://127.0.0.1:0 "${TLSW[@]}" > "$T/nw.out" 2> /dev/null &
W=$!; BGPIDS="$BGPIDS $W"
U=$(url_of "$T/nw.out")
"$DRV" "${NA[@]}" --arms f16 --arm int8="$U" "${TLSD[@]}" --out "$T/ntls" 2> "$T/ntls.err"; rc=$?
check "needle through a mutual-TLS arm: exit 0, cells.tsv byte-identical to local arms' (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$T/ntls/cells.tsv' '$T/nref/cells.tsv'"
[ $rc -ne 0 ] && head -n 5 "$T/ntls.err"
"$DRV" "${NA[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/intruder.pem" --tls-key "$T/intruder.key" \
    --tls-ca "$T/ca.pem" --out "$T/nintr" 2> "$T/nintr.err"; rc=$?
check "needle with a certificate the worker's CA did not sign: refused, exit 1 (rc $rc)" test $rc -eq 1
# a sweep through the TLS arm whose driver dies mid-run, resumed after its certificates moved (renewed)
mkdir -p "$T/certs-old" "$T/certs-new"
cp "$T/driver.pem" "$T/driver.key" "$T/ca.pem" "$T/certs-old/"
STRATA_TEST_FAULT=die@6 "$DRV" "${SW[@]}" --arms f16 --arm int8="$U" --tls-cert "$T/certs-old/driver.pem" \
    --tls-key "$T/certs-old/driver.key" --tls-ca "$T/certs-old/ca.pem" --out "$T/tlsres" 2> /dev/null; rc0=$?
mv "$T/certs-old/"* "$T/certs-new/"
"$DRV" sweep --resume "$T/tlsres" --quiet 2> "$T/tlsres1.err"; rc1=$?
(cd "$T/certs-new" && "$DRV" sweep --resume "$T/tlsres" --quiet --arm int8="$U" --tls-cert driver.pem --tls-key driver.key \
    --tls-ca ca.pem 2> "$T/tlsres2.err"); rc2=$?
check "sweep through TLS killed (rc $rc0), resumed without its --arm and certificates (never taken from the journal): fails (rc $rc1); with them given beside --resume (relative paths): exit 0 (rc $rc2), results identical" \
    bash -c "[ $rc0 -ne 0 ] && [ $rc1 -eq 2 ] && grep -q 'records --tls-cert --tls-key --tls-ca --arm int8=URL' '$T/tlsres1.err' && [ $rc2 -eq 0 ] && cmp -s '$T/tlsres/depths.tsv' '$T/ref/depths.tsv' && cmp -s '$T/tlsres/forks.tsv' '$T/ref/forks.tsv'"
[ $rc2 -ne 0 ] && head -n 3 "$T/tlsres2.err"
"$DRV" sweep --resume "$T/tlsres" --tls-cert "$T/certs-new/driver.pem" 2> "$T/tlsres3.err"; rc=$?
check "--tls-cert alone beside --resume: usage error (rc $rc)" test $rc -eq 2
kill $W 2> /dev/null; wait $W 2> /dev/null
"$DRV" "${NA[@]}" --arms f16 --tls-cert "$T/driver.pem" --out "$T/nhalf" 2> "$T/nhalf.err"; rc=$?
check "needle: --tls-cert alone is a usage error (rc $rc)" test $rc -eq 2
: > "$T/srun.log"
PATH="$T/bin:$PATH" "$DRV" "${NA[@]}" --arms f16,int8 --launch 'srun -N1 -n1 {worker}' --allow-overcommit \
    --out "$T/nsrun" 2> "$T/nsrun.err"; rc=$?
check "needle with --launch 'srun -N1 -n1 {worker}': exit 0, srun started 2 workers with --allow-overcommit, cells.tsv identical (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && [ \$(grep -c -- '--allow-overcommit' '$T/srun.log') = 2 ] && cmp -s '$T/nsrun/cells.tsv' '$T/nref/cells.tsv'"
check "... meta.json records how the workers were started" \
    test "$(grep -c -e '"launch": "srun -N1 -n1 {worker}"' -e '"allow_overcommit": true' "$T/nsrun/meta.json")" = 2
# the run cut to its first 2 cells, resumed: the workers are launched again through srun
head -n 5 "$T/nsrun/cells.tsv" > "$T/nsrun/cells.cut" && mv "$T/nsrun/cells.cut" "$T/nsrun/cells.tsv"
sed -i 's/"complete": true/"complete": false/' "$T/nsrun/meta.json"
: > "$T/srun.log"
PATH="$T/bin:$PATH" "$DRV" needle --resume "$T/nsrun" --quiet --launch 'srun -N1 -n1 {worker}' 2> "$T/nres.err"; rc=$?
check "needle --resume of a launched run, --launch given again, relaunches through srun (2 workers) and completes identically (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && [ \$(wc -l < '$T/srun.log') = 2 ] && cmp -s '$T/nsrun/cells.tsv' '$T/nref/cells.tsv'"
[ $rc -ne 0 ] && head -n 5 "$T/nres.err"

if [ "$skip" != 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
