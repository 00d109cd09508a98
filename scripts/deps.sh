# Sourced by the scripts: installs Debian 12 packages with apt-get, only when one is missing.
# install_deps installs the list in tollgate_packages: by default what building, running and
# testing need (scripts/test.sh, sanitize.sh, tsan.sh, the benchmarks); scripts/run.sh sets it
# to tollgate_run_packages alone, other scripts to their own lists.

# Building tollgate and tollgate-echo, and scripts/run.sh's tour (curl, python3-websockets).
tollgate_run_packages=(
  cmake ninja-build g++ ccache pkg-config
  libyaml-cpp-dev openssl libboost1.81-dev libssl-dev libspdlog-dev prometheus-cpp-dev
  libhiredis-dev libnghttp2-dev curl python3-websockets
)
# The tests and benchmarks on top: Catch2 and Google Benchmark for their build, the processes
# and tools the tests start (promtool from prometheus, nginx, Redis, headless Chromium, node,
# systemd-analyze from systemd, which installs in a container too, where it is not PID 1;
# python3-jwt, the tokens of the identity tests, made by a library that is not ours; h2load
# and nghttp from nghttp2-client and python3-h2, HTTP/2 clients that are not ours; pebble, the
# ACME test server, with pebble-challtestsrv for its DNS).
tollgate_test_packages=(
  catch2 libbenchmark-dev prometheus nginx-light redis-server redis-tools python3-yaml chromium
  nodejs systemd python3-jwt python3-cryptography nghttp2-client python3-h2 pebble
)
# `kubectl kustomize` for tests/deploy: Debian's kubectl, only when there is none, since a
# kubectl from another package (Google's, Kubernetes' own) conflicts with it.
command -v kubectl >/dev/null || tollgate_test_packages+=(kubernetes-client)
tollgate_packages=("${tollgate_run_packages[@]}" "${tollgate_test_packages[@]}")

# ccache's default 5 GB holds less than the five builds CI makes (test.sh's, clang.sh's,
# sanitize.sh's, fuzz.sh's, the benchmarks'): each evicted the others' objects and a CI run
# rebuilt most of Beast's translation units. Ours may use more unless the user said otherwise.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-16G}"

install_deps() {
  local missing=()
  for p in "${tollgate_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return 0; fi
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # RUNLEVEL=1: redis-server's package would otherwise start a Redis on port 6379 (tests start
  # their own on free ports).
  $sudo env RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Configures and builds everything into build/ (Ninja, ccache when present), tests included.
build_tollgate() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${TOLLGATE_BUILD_TYPE:-RelWithDebInfo}" \
    -DBUILD_TESTING=ON
  cmake --build build -j "$(nproc)"
}
