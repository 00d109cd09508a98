# Sourced by scripts/run.sh and scripts/test.sh: installs the Debian 12 packages the build and
# the tests need, with apt-get, only when one is missing.

tollgate_packages=(
  cmake ninja-build g++ ccache pkg-config
  libyaml-cpp-dev catch2 libbenchmark-dev openssl
  libboost1.81-dev libssl-dev libspdlog-dev prometheus-cpp-dev curl prometheus nginx-light python3-websockets
  libhiredis-dev redis-server redis-tools python3-yaml chromium
  nodejs
)

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

# Configures and builds into build/ (Ninja, ccache when present).
build_tollgate() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${TOLLGATE_BUILD_TYPE:-RelWithDebInfo}"
  cmake --build build -j "$(nproc)"
}
