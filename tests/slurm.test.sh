#!/usr/bin/env bash
# slurm.test.sh — arms started through a real Slurm cluster (run by tests/run.sh from the repository
# root with $BUILD set; prints its closing line "N passed, N failed[, N skipped]"). The test makes a
# single-node cluster on localhost with Debian's slurm-wlm and munge (installed with apt-get when
# missing; the whole test is skipped, saying why, only where they cannot be installed or it does not
# run as root): munged with a key generated for the test, slurmctld and slurmd in the foreground with
# a minimal slurm.conf, everything (sockets, state, spool, logs) in a temp dir, no systemd, cgroups or
# accounting. On stories260K, with --launch 'srun -N1 -n1 -J NAME-{arm} {worker}':
#   - a sweep (2 arms, 3 depths, per position): exit 0, one Slurm job per arm (completed, exit 0,
#     on localhost), depths.tsv, forks.tsv and positions.tsv byte-identical to local arms';
#   - a needle: the same for cells.tsv;
#   - a sweep whose driver is SIGKILLed mid-run (STRATA_TEST_FAULT=die@N): its Slurm jobs end and
#     no worker or srun is left; `sweep --resume` relaunches through srun (two new jobs) and the
#     TSVs are byte-identical to the local run's; a needle cut after its first cells and resumed the
#     same way gives the local cells.tsv;
#   - at the end the cluster is stopped and nothing of it is left running (also on any exit: trap).
# A resume takes --launch from the run's record, or, where the driver wants it given again beside
# --resume (and says so, naming --launch), the test gives it again: either way the workers must
# come up through srun.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)
PATH=$PATH:/usr/sbin:/sbin
skip_all() { echo "skip: $1"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }

if [ ! -f "$FIX/models/stories260K.gguf" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    skip_all "needs $FIX/models/stories260K.gguf, $DRV and $WRK"
fi
[ "$(id -u)" = 0 ] || skip_all "a Slurm cluster of its own needs root (slurmd starts job steps as their user; apt-get installs slurm-wlm and munge)"
# a test run inside a real allocation must not use it
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

T=$(mktemp -d)
chmod 711 "$T"   # munged wants every directory above its socket searchable by all
POLICY_MADE=""; MUNGED=""; CTLD=""; SLURMD=""
# ours: a process whose environment names this cluster's slurm.conf (daemons, srun, job steps and
# the tasks they start) or whose command line names a file under $T (munged, launched workers)
ours() {
    local f p a e out=""
    for f in /proc/[0-9]*; do
        p=${f#/proc/}
        [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
        { mapfile -d '' a < "$f/cmdline"; } 2> /dev/null || continue
        [ ${#a[@]} -gt 0 ] || continue   # kernel threads, zombies
        { mapfile -d '' e < "$f/environ"; } 2> /dev/null || e=()
        if [[ " ${e[*]} " == *" SLURM_CONF=$T/slurm.conf "* || " ${a[*]} " == *"$T/"* ]]; then out="$out $p"; fi
    done
    echo $out
}
# launched: the PIDs of ours() that are workers or srun
launched() {
    local p a out=""
    for p in $(ours); do
        { mapfile -d '' a < "/proc/$p/cmdline"; } 2> /dev/null || continue
        [[ "${a[0]:-}" == "$WRK" || "${a[0]:-}" == srun || "${a[0]:-}" == */srun ]] && out="$out $p"
    done
    echo $out
}
# alive PID: exists and is not a zombie
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -c1)" != Z ]; }
# stop PID...: SIGTERM, up to 10 s, then SIGKILL; reaps the script's own children
stop_pids() {
    local p i
    for p in "$@"; do kill -TERM "$p" 2> /dev/null; done
    for i in $(seq 100); do
        for p in "$@"; do alive "$p" && break; p=""; done
        [ -z "$p" ] && break
        sleep 0.1
    done
    for p in "$@"; do alive "$p" && kill -KILL "$p" 2> /dev/null; done
    for p in "$@"; do wait "$p" 2> /dev/null; done
}
stop_cluster() {
    local jobs p left daemons
    if [ -n "$CTLD" ] && alive "$CTLD"; then
        jobs=$(timeout 10 squeue -h -o %i 2> /dev/null)
        [ -n "$jobs" ] && timeout 10 scancel $jobs 2> /dev/null
        for _ in $(seq 100); do [ -z "$(timeout 5 squeue -h -o %i 2> /dev/null)" ] && break; sleep 0.1; done
        # and the job steps' slurmstepd end on their own
        daemons=($MUNGED $CTLD $SLURMD)
        for _ in $(seq 100); do left=($(ours)); [ ${#left[@]} -le ${#daemons[@]} ] && break; sleep 0.1; done
    fi
    [ -n "$SLURMD" ] && stop_pids "$SLURMD"
    [ -n "$CTLD" ] && stop_pids "$CTLD"
    [ -n "$MUNGED" ] && stop_pids "$MUNGED"
    SLURMD=""; CTLD=""; MUNGED=""
    left=$(ours)
    [ -n "$left" ] && stop_pids $left
}
cleanup() {
    stop_cluster
    [ -n "$POLICY_MADE" ] && rm -f "$POLICY_MADE"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP   # (the EXIT trap then stops the cluster)

# ---- 0. the packages: slurm-wlm (slurmctld, slurmd, srun, ...) and munge --------------------------
have_slurm() {
    local c
    for c in slurmctld slurmd slurmstepd srun scontrol squeue sinfo scancel munged munge unmunge; do
        command -v "$c" > /dev/null || return 1
    done
}
apt_install() {
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq -o DPkg::Lock::Timeout=120 \
        --no-install-recommends slurm-wlm munge >> "$T/apt.log" 2>&1
}
if ! have_slurm; then
    command -v apt-get > /dev/null || skip_all "Slurm is not installed and there is no apt-get to install slurm-wlm and munge"
    echo "# installing the Debian packages slurm-wlm and munge"
    # the packages' services must not start now (in a container no init would stop them): the
    # standard policy-rc.d "no", only while installing and only where the system has none
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && POLICY_MADE=/usr/sbin/policy-rc.d
    fi
    apt_install || { timeout 300 apt-get update -qq >> "$T/apt.log" 2>&1 && apt_install; }
    [ -n "$POLICY_MADE" ] && rm -f "$POLICY_MADE"; POLICY_MADE=""
    have_slurm || skip_all "the Debian packages slurm-wlm and munge cannot be installed here ($(grep -E '^(E|W):' "$T/apt.log" | tail -n 1 | cut -c1-200))"
fi

# ---- 1. the cluster: munged, slurmctld, slurmd ------------------------------------------------------
mkdir -p "$T/munge" "$T/run" "$T/state" "$T/spool" "$T/log"
chmod 700 "$T/munge"; chmod 755 "$T/run"
SOCK=$T/run/munge.sock
# two free ports next to each other for slurmctld and slurmd
port_free() { ! timeout 1 bash -c "exec 3<> /dev/tcp/127.0.0.1/$1" 2> /dev/null; }
for _ in $(seq 20); do
    PCTL=$((20000 + RANDOM % 30000)); PD=$((PCTL + 1))
    port_free "$PCTL" && port_free "$PD" && break
done
# this machine as slurmd sees it (CPUs, sockets, cores, threads, memory); the node is named localhost
NODE=$(timeout 20 slurmd -C 2> /dev/null | sed -n 's/^NodeName=[^ ]* //p' | head -n 1)
[[ "$NODE" == *CPUs=*RealMemory=* ]] ||
    NODE="CPUs=$(nproc) RealMemory=$(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) / 1024 ))"
cat > "$T/slurm.conf" << EOF
# a one-node cluster for tests/slurm.test.sh (everything under $T)
ClusterName=stratatest
SlurmctldHost=localhost
SlurmctldPort=$PCTL
SlurmdPort=$PD
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
# jobs share CPUs: the arms' workers run together whatever the number of CPUs
NodeName=localhost NodeAddr=127.0.0.1 $NODE State=UNKNOWN
PartitionName=strata Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$T/slurm.conf
log_tail() { tail -n 3 "$@" 2> /dev/null | grep -v '^$' | tr '\n' ' ' | cut -c1-600; }

head -c 128 /dev/urandom > "$T/munge/munge.key" && chmod 400 "$T/munge/munge.key"   # (what mungekey -c writes)
munged -F -S "$SOCK" --key-file="$T/munge/munge.key" --log-file="$T/munge/munged.log" \
    --pid-file="$T/run/munged.pid" --seed-file="$T/munge/munged.seed" > "$T/log/munged.out" 2>&1 &
MUNGED=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; alive "$MUNGED" || break; sleep 0.1; done
cred=$(timeout 10 munge -n -S "$SOCK" 2> /dev/null | timeout 10 unmunge -S "$SOCK" 2>&1 | head -n 1)
check "munged runs with the test's own key and socket ($cred)" bash -c "[[ '$cred' == *Success* ]]"
[[ "$cred" == *Success* ]] || echo "# munged: $(log_tail "$T/log/munged.out" "$T/munge/munged.log")"

slurmctld -D > "$T/log/slurmctld.out" 2>&1 & CTLD=$!
for _ in $(seq 150); do timeout 5 scontrol ping 2> /dev/null | grep -q 'UP' && break; alive "$CTLD" || break; sleep 0.2; done
ping=$(timeout 5 scontrol ping 2>&1 | head -n 1)
check "slurmctld answers ($ping)" bash -c "[[ '$ping' == *UP* ]]"
[[ "$ping" == *UP* ]] || echo "# slurmctld: $(log_tail "$T/log/slurmctld.out" "$T/log/slurmctld.log")"

slurmd -D -N localhost > "$T/log/slurmd.out" 2>&1 & SLURMD=$!
state=""
for _ in $(seq 150); do
    state=$(timeout 5 sinfo -h -N -n localhost -o %t 2> /dev/null | head -n 1)
    [ "$state" = idle ] && break; alive "$SLURMD" || break; sleep 0.2
done
check "slurmd registered: node localhost is idle ($state; $NODE)" test "$state" = idle
[ "$state" = idle ] || echo "# slurmd: $(log_tail "$T/log/slurmd.out" "$T/log/slurmd.log")"

if [ "$fail" != 0 ]; then   # no cluster: the runs below would only wait for it
    echo "$pass passed, $fail failed"
    exit 1
fi
id=$(timeout 30 srun -N1 -n1 -J smoke --quiet printenv SLURM_JOB_ID 2> "$T/smoke.err" < /dev/null)
check "srun runs a job step on the node (job $id)" bash -c "[[ '$id' =~ ^[0-9]+\$ ]]"
[[ "$id" =~ ^[0-9]+$ ]] || echo "# srun: $(head -c 300 "$T/smoke.err")"

# ---- 2. the references: the same runs with local arms ----------------------------------------------
MODEL=$T/model.gguf   # a copy: its path names this test's workers
cp "$FIX/models/stories260K.gguf" "$MODEL"
cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt > "$T/doc.txt"
timeout 60 "$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
SW=(sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --threads 1 --depths 3 --fork 6
    --per-position --quiet)
NA=(needle --model "$MODEL" --arms f16,int8 --lengths 256 --positions 0,50,100 --trials 2 --threads 1 --quiet)
timeout 120 "$DRV" "${SW[@]}" --out "$T/ref" > /dev/null 2> "$T/ref.err"; rc=$?
check "reference sweep with local arms exits 0 (rc $rc)" test $rc -eq 0
timeout 120 "$DRV" "${NA[@]}" --out "$T/nref" > /dev/null 2> "$T/nref.err"; rc=$?
check "reference needle with local arms exits 0 (rc $rc)" test $rc -eq 0

# same_tsv DIR REF FILE...: each FILE byte-identical in DIR and REF (and not empty)
same_tsv() { local d=$1 r=$2 f; shift 2; for f in "$@"; do [ -s "$r/$f" ] && cmp -s "$d/$f" "$r/$f" || return 1; done; }
# jobs_done NAME: Slurm jobs named NAME that completed with exit 0 on localhost
jobs_done() { timeout 10 scontrol -o show jobs 2> /dev/null | grep -F " JobName=$1 " | grep -F 'JobState=COMPLETED' |
              grep -F 'ExitCode=0:0' | grep -c -F 'NodeList=localhost'; }
# jobs_named PREFIX: Slurm jobs whose name starts with PREFIX
jobs_named() { timeout 10 scontrol -o show jobs 2> /dev/null | grep -c -F " JobName=$1"; }
# resume KIND DIR TEMPLATE: KIND --resume DIR; when the driver refuses naming --launch (it wants the
# options that start processes given again), again with --launch TEMPLATE beside --resume. Sets rc
# and how.
resume() {
    local kind=$1 dir=$2 tpl=$3
    how="--launch from the run's record"
    timeout 120 "$DRV" "$kind" --resume "$dir" --quiet > /dev/null 2> "$dir.res.err"; rc=$?
    if [ $rc -ne 0 ] && grep -q -- '--launch' "$dir.res.err"; then
        how="--launch given again beside --resume"
        timeout 120 "$DRV" "$kind" --resume "$dir" --quiet --launch "$tpl" > /dev/null 2> "$dir.res.err"; rc=$?
    fi
    [ $rc -ne 0 ] && echo "# $kind --resume: $(head -c 400 "$dir.res.err")"
}

# ---- 3. a sweep and a needle through srun ---------------------------------------------------------
L='srun -N1 -n1 -J sweep-{arm} --quiet {worker}'
timeout 120 "$DRV" "${SW[@]}" --launch "$L" --out "$T/sweep" > /dev/null 2> "$T/sweep.err"; rc=$?
check "sweep with --launch '$L' exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && echo "# $(head -c 400 "$T/sweep.err")"
n1=$(jobs_done sweep-f16); n2=$(jobs_done sweep-int8)
check "... Slurm ran one job per arm, completed with exit 0 on localhost (sweep-f16 $n1, sweep-int8 $n2)" \
    test "$n1:$n2" = 1:1
check "... depths.tsv, forks.tsv and positions.tsv byte-identical to local arms'" \
    same_tsv "$T/sweep" "$T/ref" depths.tsv forks.tsv positions.tsv

L='srun -N1 -n1 -J needle-{arm} --quiet {worker}'
timeout 120 "$DRV" "${NA[@]}" --launch "$L" --out "$T/needle" > /dev/null 2> "$T/needle.err"; rc=$?
n1=$(jobs_done needle-f16); n2=$(jobs_done needle-int8)
check "needle with --launch '$L': exit 0, one completed job per arm (rc $rc; $n1, $n2)" test "$rc:$n1:$n2" = 0:1:1
[ $rc -ne 0 ] && echo "# $(head -c 400 "$T/needle.err")"
check "... cells.tsv byte-identical to local arms'" same_tsv "$T/needle" "$T/nref" cells.tsv

# ---- 4. the driver SIGKILLed mid-run, resumed through srun ----------------------------------------
L='srun -N1 -n1 -J killed-{arm} --quiet {worker}'
{ STRATA_TEST_FAULT=die@8 timeout 120 "$DRV" "${SW[@]}" --launch "$L" --out "$T/killed" > /dev/null 2> "$T/killed.err"; } \
    2> /dev/null   # (bash's "Killed")
rc=$?
rows=$(($(wc -l < "$T/killed/depths.tsv" 2> /dev/null || echo 1) - 1))
check "sweep through srun, driver SIGKILLed before request batch 8: killed (rc $rc) with $rows of 3 depths written" \
    bash -c "[ $rc -eq 137 ] && [ $rows -ge 1 ] && [ $rows -lt 3 ]"
# its Slurm jobs end and leave no worker or srun behind
busy=x
for _ in $(seq 100); do
    busy=$(timeout 5 squeue -h -o '%j %T' 2> /dev/null | grep '^killed-')
    procs=$(launched)
    [ -z "$busy" ] && [ -z "$procs" ] && break
    sleep 0.2
done
check "... its Slurm jobs ended and no worker or srun is left within 20 s (jobs: ${busy:-none}; processes: ${procs:-none})" \
    bash -c "[ -z '$busy' ] && [ -z '$procs' ]"
before=$(jobs_named killed-)
resume sweep "$T/killed" "$L"
after=$(jobs_named killed-)
check "sweep --resume ($how): exit 0, the workers launched again through srun ($before then $after jobs)" \
    test "$rc:$((after - before))" = 0:2
check "... depths.tsv, forks.tsv and positions.tsv byte-identical to the local run's" \
    same_tsv "$T/killed" "$T/ref" depths.tsv forks.tsv positions.tsv

# a needle cut after its first 2 cells (both arms' rows), as a kill leaves it, and resumed
cp -r "$T/needle" "$T/ncut"
head -n 5 "$T/needle/cells.tsv" > "$T/ncut/cells.tsv"
sed -i 's/"complete": true/"complete": false/' "$T/ncut/meta.json"
before=$(jobs_named needle-)
resume needle "$T/ncut" 'srun -N1 -n1 -J needle-{arm} --quiet {worker}'
after=$(jobs_named needle-)
check "needle --resume of a cut run ($how): exit 0, relaunched through srun ($before then $after jobs)" \
    test "$rc:$((after - before))" = 0:2
check "... cells.tsv byte-identical to local arms'" same_tsv "$T/ncut" "$T/nref" cells.tsv

# ---- 5. the cluster stopped: nothing of it left -------------------------------------------------------
stop_cluster
left=$(ours)
check "the cluster stopped: no daemon, job step, srun or worker of this test left (${left:-none})" test -z "$left"

if [ "$skip" != 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
