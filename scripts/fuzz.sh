#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang into build-fuzz/ (TOLLGATE_FUZZ=ON:
# coverage, ASan and UBSan; only the targets and the modules they link) and runs each for
# SECONDS seconds (default 60) on a copy of its seed corpus, tests/fuzz/corpus/<target>/,
# which is never written to. Exits non-zero when any target finds a crash, a leak or a hang;
# its reproducer is build-fuzz/findings/<target>/crash-* (or leak-*, timeout-*), replayed
# with `build-fuzz/tests/fuzz/<target> <file>`. Works on a fresh Debian 12 as root.
#   usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
source scripts/deps.sh
# clang-14 alone leaves out compiler-rt (only recommended), which holds libFuzzer and the
# sanitizer runtimes.
tollgate_packages+=(clang-14 libclang-rt-14-dev)
install_deps

# Debug with -O1: assertions on (ours and Beast's BOOST_ASSERT), still fast enough to fuzz.
CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DTOLLGATE_FUZZ=ON -DBUILD_TESTING=OFF \
  -DTOLLGATE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" >/dev/null
cmake --build build-fuzz --target tollgate_fuzz -j "$(nproc)"

# Longest input per target: a little past what its format can use (a v1 PROXY line is at most
# 107 bytes, a v2 header 1 KiB; a proof 94 + 65), a whole policy file for the loaders.
declare -A max_len=(
  [fuzz_router]=1024 [fuzz_proxy_header]=1100 [fuzz_client_address]=512
  [fuzz_challenge]=256 [fuzz_config]=8192 [fuzz_http_heads]=8192 [fuzz_keys]=2048 [fuzz_ws_frames]=4096
  [fuzz_redis_replies]=4096 [fuzz_access_lines]=4096 [fuzz_sim_log]=4096 [fuzz_jwt]=9000 [fuzz_overrides]=4096
  [fuzz_standing]=1024 [fuzz_state_file]=65536
  [fuzz_h2_frames]=16384 [fuzz_message_type]=8192
)
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for target in fuzz_router fuzz_proxy_header fuzz_client_address fuzz_challenge fuzz_config \
  fuzz_http_heads fuzz_keys fuzz_ws_frames fuzz_redis_replies fuzz_access_lines fuzz_sim_log \
  fuzz_jwt fuzz_overrides fuzz_standing fuzz_state_file fuzz_h2_frames fuzz_message_type; do
  work="build-fuzz/corpus/$target" findings="build-fuzz/findings/$target"
  log="build-fuzz/logs/$target.log"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings" build-fuzz/logs
  cp tests/fuzz/corpus/"$target"/* "$work"/
  options=(-max_total_time="$seconds" -max_len="${max_len[$target]}" -timeout=10
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/")
  [ -f "tests/fuzz/$target.dict" ] && options+=(-dict="tests/fuzz/$target.dict")
  if "build-fuzz/tests/fuzz/$target" "${options[@]}" "$work" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "$target: no finding in ${seconds}s (${runs:-?} runs, corpus $(ls "$work" | wc -l))"
  else
    failed+=("$target")
    echo "$target: FINDING, reproducer: $(ls "$findings"/* 2>/dev/null | head -1)"
    grep -m1 -A40 -E '^==[0-9]+==ERROR|^fuzz_|runtime error|Sanitizer|deadly signal' "$log" \
      | head -60 || tail -40 "$log"
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "findings in: ${failed[*]} (logs in build-fuzz/logs/)"
  exit 1
fi
echo "all fuzz targets ran ${seconds}s without a finding"
