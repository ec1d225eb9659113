#!/usr/bin/env bash
# benchpeer.test.sh — how `make bench` builds and reports its llama.cpp peer (tests/bench/llama_peer.sh),
# without building or running anything: the CMake instruction-set options chosen from cpuinfo files
# (a Sapphire Rapids VM listing AMX, a Zen 3, an old AVX-only CPU, an AArch64 one), AMX only with
# BENCH_LLAMA_AMX=1; the line printed for a SIGILL (exit 132) and other exits; the ratio table coming
# out with strata's figures when llama.cpp produced none or died part-way; bench.sh's dry run
# (BENCH_LLAMA_FLAGS_ONLY=1) and bash -n of both scripts. Needs bash and python3 only.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

if [ ! -f tests/bench/llama_peer.sh ]; then
    bad "tests/bench/llama_peer.sh exists"
    echo "$pass passed, $fail failed"
    exit 1
fi
. tests/bench/llama_peer.sh

# cpuinfo files: the "flags" line is what counts (as many processors as the kernel lists: first one)
spr="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault invpcid_single ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd arat avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid cldemote movdiri movdir64b md_clear serialize tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities"
zen3="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext invpcid_single ssbd ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr rdpru wbnoinvd arat npt nrip_save umip pku ospke vaes vpclmulqdq rdpid fsrm"
sandy="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx rdtscp lm constant_tsc pni pclmulqdq ssse3 cx16 sse4_1 sse4_2 x2apic popcnt aes xsave avx hypervisor lahf_lm"
for c in spr zen3 sandy; do
    printf 'processor\t: 0\nmodel name\t: %s\nflags\t\t: %s\n\nprocessor\t: 1\nflags\t\t: fpu\n' "$c" "${!c}" > "$T/$c"
done
printf 'processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp\n' > "$T/arm"

# has WHAT OPTS OPTION...: every OPTION (e.g. -DGGML_AVX2=ON) is a word of OPTS
has() {
    local d=$1 opts=" $2 " o; shift 2
    for o in "$@"; do
        case "$opts" in *" $o "*) ;; *) bad "$d: $o missing in:$opts"; return ;; esac
    done
    ok "$d"
}

o=$(BENCH_LLAMA_AMX=0 lcpp_cmake_isa "$T/spr")
has "Sapphire Rapids VM: no GGML_NATIVE, AVX-512 family on, AMX off by default" "$o" -DGGML_NATIVE=OFF \
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_SSE42=ON -DGGML_AVX_VNNI=ON \
    -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
check "Sapphire Rapids VM: no option is ON for AMX unless asked" test "$(grep -c 'AMX_[A-Z0-9]*=ON' <<<"$o")" = 0
o=$(unset BENCH_LLAMA_AMX; lcpp_cmake_isa "$T/spr")
has "BENCH_LLAMA_AMX unset: AMX off" "$o" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
o=$(BENCH_LLAMA_AMX=1 lcpp_cmake_isa "$T/spr")
has "BENCH_LLAMA_AMX=1: AMX tile / int8 / bf16 on where listed" "$o" -DGGML_NATIVE=OFF -DGGML_AVX512=ON \
    -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON
o=$(BENCH_LLAMA_AMX=1 lcpp_cmake_isa "$T/zen3")
has "Zen 3: AVX2 / FMA / F16C / BMI2 on, no AVX-512, no AVX-VNNI, no AMX even when asked" "$o" -DGGML_NATIVE=OFF \
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_SSE42=ON -DGGML_AVX_VNNI=OFF \
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
o=$(lcpp_cmake_isa "$T/sandy")
has "AVX-only CPU: AVX2 / FMA / F16C / BMI2 turned off explicitly (ggml's default with native off is on)" "$o" \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_SSE42=ON -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF \
    -DGGML_AVX512=OFF
check "AArch64 (no flags line): its native detection" test "$(lcpp_cmake_isa "$T/arm")" = "-DGGML_NATIVE=ON"
o=$(lcpp_cmake_isa "$T/spr")
check "every option is one word -DGGML_NAME=ON|OFF (15 of them)" \
    test "$(tr ' ' '\n' <<<"$o" | grep -cE '^-DGGML_[A-Z0-9_]+=(ON|OFF)$')" = 15

check "exit 0: no note" test -z "$(lcpp_exit_note 0)"
n=$(lcpp_exit_note 132)
check "exit 132: one line naming SIGILL and exit 132 ($n)" \
    bash -c '[ "$(wc -l <<<"$1")" = 1 ] && grep -q "SIGILL" <<<"$1" && grep -q "exit 132" <<<"$1"' _ "$n"
check "exit 137: the signal number" bash -c 'grep -q "signal 9 (exit 137)" <<<"$1"' _ "$(lcpp_exit_note 137)"
check "exit 1: the status" bash -c 'grep -q "status 1;" <<<"$1"' _ "$(lcpp_exit_note 1)"

ours="prefill,f16,512=1000.0 prefill,int8,512=900.0 decode,f16,512=50.0 decode,int8,512=45.0 decode,f16,2048=40.0"
: > "$T/empty.jsonl"
tab=$(lcpp_ratio_table "$T/empty.jsonl" "512" "$ours")
check "no llama.cpp lines: strata's 4 figures at the asked depths, llama.cpp columns '-'" \
    test "$(grep -c '| - | - |$' <<<"$tab")" = 4
check "no llama.cpp lines: the decode at 2048 (no llama.cpp depth) left out" bash -c '! grep -q "| 2048 |" <<<"$1"' _ "$tab"
check "no llama.cpp lines: strata's prefill figure printed" bash -c 'grep -q "| prefill of | 512 | f16 | 1000.0 | f16 | - | - |" <<<"$1"' _ "$tab"
# a crash part-way: one full line, then a line cut short
printf '%s\n' '{"phase": "prefill", "kv": "f16", "tokens": 512, "tokens_per_s": 800.0}' '{"phase": "prefill", "kv": "q8_' > "$T/cut.jsonl"
tab=$(lcpp_ratio_table "$T/cut.jsonl" "512" "$ours")
check "a crash part-way: the figure it made gives a ratio (1000 / 800 = 1.25)" \
    bash -c 'grep -q "| prefill of | 512 | f16 | 1000.0 | f16 | 800.0 | 1.25 |" <<<"$1"' _ "$tab"
check "a crash part-way: the cut line skipped, the other 3 strata figures with '-'" \
    test "$(grep -c '| - | - |$' <<<"$tab")" = 3
tab=$(lcpp_ratio_table "$T/missing.jsonl" "512" "$ours")
check "no llama.cpp output file at all: the table still comes out" test "$(grep -c '| - | - |$' <<<"$tab")" = 4

check "bash -n tests/bench/bench.sh" bash -n tests/bench/bench.sh
check "bash -n tests/bench/llama_peer.sh" bash -n tests/bench/llama_peer.sh
# the dry run only where bench.sh knows it (a bench.sh without it would start the real bench)
o="bench.sh has no BENCH_LLAMA_FLAGS_ONLY"
grep -q 'BENCH_LLAMA_FLAGS_ONLY:-0}" = 1' tests/bench/bench.sh && o=$(BENCH_LLAMA_FLAGS_ONLY=1 bash tests/bench/bench.sh 2>&1)
check "bench.sh dry run (BENCH_LLAMA_FLAGS_ONLY=1) prints this machine's flags and stops ($o)" \
    test "$o" = "native: $(lcpp_cmake_isa)"
check "bench.sh builds its native peer from lcpp_cmake_isa, not GGML_NATIVE=ON" \
    bash -c '! grep -q "section1 native.*GGML_NATIVE=ON" tests/bench/bench.sh && grep -c "section1 native.*lcpp_cmake_isa" tests/bench/bench.sh | grep -qx 2'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
