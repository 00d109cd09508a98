#!/usr/bin/env bash
# Builds the container image of the Dockerfile as tollgate:latest and tollgate:<version>, then
# smoke-tests it: the gateway in front of the image's demo upstream (tollgate-echo), /healthz,
# one proxied request, the HEALTHCHECK, the image's size. Run by hand as root on Debian 12 (not
# by CI); installs what it needs with apt-get. Exits non-zero on any failure.
#
#   scripts/image.sh [--base-debootstrap] [--no-smoke]
#
#   --base-debootstrap  (re)make the base images docker.io/library/debian:bookworm and
#                       :bookworm-slim locally with debootstrap, with today's updates (done
#                       anyway when they are missing and the pull fails: no registry reachable)
#   --no-smoke          build and tag only
#
# Docker is used when `docker info` answers (an engine is running), podman otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

base_debootstrap=0
smoke=1
for arg in "$@"; do
  case "$arg" in
    --base-debootstrap) base_debootstrap=1 ;;
    --no-smoke) smoke=0 ;;
    *) echo "usage: scripts/image.sh [--base-debootstrap] [--no-smoke]" >&2; exit 2 ;;
  esac
done

# The tags the Dockerfile's FROM lines name; a local image of that name is used without a pull.
base_full=docker.io/library/debian:bookworm
base_slim=docker.io/library/debian:bookworm-slim
image=tollgate

# deps.sh's install_deps, with this script's own list (deps.sh's list is the build's and tests').
source scripts/deps.sh
tollgate_packages=(curl debootstrap)

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=(docker)
else
  tollgate_packages+=(podman)
  engine=(podman)
fi
install_deps

if [ "${engine[0]}" = podman ]; then
  # Overlay storage needs a filesystem that takes overlay mounts (not every sandbox or nested
  # container does); vfs always works, only slower and larger. The first podman call that
  # touches storage tells.
  if ! podman image ls >/dev/null 2>&1; then
    echo "podman: overlay storage unavailable, using --storage-driver vfs"
    engine+=(--storage-driver vfs)
  fi
fi
echo "engine: ${engine[*]}"

image_exists() {
  if [ "${engine[0]}" = podman ]; then "${engine[@]}" image exists "$1"
  else "${engine[@]}" image inspect "$1" >/dev/null 2>&1; fi
}

# The Debian mirror of this machine's apt sources (deb.debian.org unless configured otherwise).
debian_mirror() {
  local m
  m=$(grep -hoE '^(URIs:|deb) +[^ ]+/debian/?( |$)' /etc/apt/sources.list \
        /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
      awk '{print $2; exit}')
  echo "${m:-http://deb.debian.org/debian}"
}

# Makes a Debian 12 base image with debootstrap and imports it as $tag. Both are minbase, as
# Debian's official images are; slim also drops documentation, manual pages and translations
# and keeps dpkg from installing them later (what the official -slim variant does).
debootstrap_base() {
  local tag=$1 slim=$2 mirror root
  mirror=$(debian_mirror)
  root=$(mktemp -d /var/tmp/tollgate-rootfs.XXXXXX)
  echo "debootstrap: $tag from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log"; rm -rf "$root" "$root.log"; return 1; }
  rm -f "$root.log"
  # Sources as in the official image: the release, its updates and security updates, which
  # debootstrap leaves out and are applied here, as the official images have them.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # As root: apt's _apt user cannot write the download folder debootstrap left. No pty for
  # dpkg's log: a chroot has no /dev/pts.
  chroot "$root" apt-get -o APT::Sandbox::User=root update -qq
  chroot "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0 upgrade -y -qq >/dev/null
  chroot "$root" apt-get clean
  if [ "$slim" = 1 ]; then
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# Keep the image small: no documentation, manual pages or translations (copyright files stay).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root"/usr/share/{info,man,groff,linda,lintian}/* "$root"/usr/share/locale/*
  fi
  # What belongs to the machine the rootfs was made on, and apt's downloads.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/etc/hostname "$root"/etc/resolv.conf
  : >"$root/etc/machine-id"
  local out
  out=$(tar -C "$root" --numeric-owner -c . |
          "${engine[@]}" import --change 'CMD ["bash"]' - "$tag" 2>&1) || { echo "$out"; return 1; }
  rm -rf "$root"
}

ensure_base() {
  local tag=$1 slim=$2
  if [ "$base_debootstrap" = 0 ]; then
    image_exists "$tag" && return 0
    # A registry that does not answer in a minute is taken as unreachable.
    if timeout 60 "${engine[@]}" pull -q "$tag" >/dev/null 2>&1; then return 0; fi
    echo "pull of $tag failed; making it with debootstrap"
  fi
  debootstrap_base "$tag" "$slim"
}

start=$(date +%s)
ensure_base "$base_full" 0
ensure_base "$base_slim" 1
echo "base images ready in $(( $(date +%s) - start ))s"

# Options for `run` (and the matching ones for `build`) that this machine's podman needs. Tried in
# order until a container starts: none; then limits no higher than the host's, for a sandbox
# without CAP_SYS_RESOURCE where podman's defaults (1048576 files, no process limit) cannot be
# set (4096 processes: what such a sandbox accepted, plenty for the gateway's threads); then runc
# instead of crun as well, for cgroups in hybrid mode with a controller on the v2 hierarchy, which
# crun refuses.
run_opts=()
build_opts=()
if [ "${engine[0]}" = podman ]; then
  limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
  if ! "${engine[@]}" run --rm "$base_slim" true 2>/dev/null; then
    if "${engine[@]}" run --rm "${limits[@]}" "$base_slim" true 2>/dev/null; then
      echo "podman: host limits (${limits[*]})"
    else
      tollgate_packages=(runc)
      install_deps
      engine+=(--runtime runc)
      "${engine[@]}" run --rm "${limits[@]}" "$base_slim" true ||
        { echo "podman cannot start a container here" >&2; exit 1; }
      echo "podman: runc and host limits (${limits[*]})"
    fi
    run_opts=("${limits[@]}")
    build_opts=("${limits[@]}")
  fi
  # Docker's image format: OCI images have no HEALTHCHECK (podman drops it with a warning).
  # The base images are local by now: never look them up in a registry.
  build_opts+=(--format docker --pull=never)
fi

version=$(sed -n 's/^project(tollgate VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The revision says so when the files the image is built from differ from it.
if [ -n "$(git status --porcelain -- CMakeLists.txt gateway tools policies deploy/docker Dockerfile 2>/dev/null)" ]; then
  revision+=-dirty
fi

# The images tollgate:latest and the build stage's tollgate-build:latest name now, removed below
# once the new ones have the tags (unless a container still uses them, or they are the same):
# repeated runs keep one image and one build cache, not one more of each per run.
image_id() { "${engine[@]}" image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
previous=$(image_id "$image:latest")
previous_build=$(image_id "$image-build:latest")

start=$(date +%s)
"${engine[@]}" build "${build_opts[@]}" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$image:latest" -t "$image:$version" .
build_seconds=$(( $(date +%s) - start ))
echo "built $image:latest and $image:$version in ${build_seconds}s (revision $revision)"
# The build stage by name (every layer cached by the build above: takes a second).
"${engine[@]}" build "${build_opts[@]}" -q --target build -t "$image-build:latest" . >/dev/null
[ -n "$previous" ] && [ "$previous" != "$(image_id "$image:latest")" ] &&
  { "${engine[@]}" rmi "$previous" >/dev/null 2>&1 || true; }
[ -n "$previous_build" ] && [ "$previous_build" != "$(image_id "$image-build:latest")" ] &&
  { "${engine[@]}" rmi "$previous_build" >/dev/null 2>&1 || true; }

# The binary in the image is the version it is tagged with.
image_version=$("${engine[@]}" run --rm --no-healthcheck "${run_opts[@]}" "$image:latest" --version)
[ "$image_version" = "tollgate $version" ] ||
  { echo "the image says '$image_version', the tag is $version" >&2; exit 1; }

size=$("${engine[@]}" image inspect -f '{{.Size}}' "$image:latest")
size_mb=$(( (size + 500000) / 1000000 ))
[ "$smoke" = 1 ] || { echo "image size: ${size_mb} MB"; exit 0; }

# ---- smoke test ------------------------------------------------------------------------------
# The demo upstream in one container, publishing the ports on the host's loopback (ports the
# kernel picks); the gateway in a second one sharing its network namespace, as in a pod, so the
# image's default configuration (upstream app at 127.0.0.1:9000) reaches it unchanged.
upstream=tollgate-smoke-upstream-$$
gateway=tollgate-smoke-$$
# -v: the anonymous volume of the image's VOLUME goes with the container. podman's rm -f waits
# for the stop timeout unless told not to; docker's kills at once.
rm_now=(rm -f -v)
[ "${engine[0]}" = podman ] && rm_now+=(-t 0)
# The gateway first: the upstream's container cannot go while one shares its network.
cleanup() {
  "${engine[@]}" "${rm_now[@]}" "$gateway" >/dev/null 2>&1 || true
  "${engine[@]}" "${rm_now[@]}" "$upstream" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() {
  echo "smoke test FAILED: $*" >&2
  for c in "$upstream" "$gateway"; do
    echo "--- logs of $c" >&2
    "${engine[@]}" logs --tail 30 "$c" >&2 2>&1 || true
  done
  exit 1
}
# Runs an engine command, showing its output only when it fails: podman on a machine without
# systemd logs an error on every start and stop of a container with a HEALTHCHECK (no timer can
# be set up for periodic checks), which `healthcheck run` below does not need.
quiet() {
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; return 1; }
}
random_hex() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin_token=$(random_hex)

# The image's HEALTHCHECK is the gateway's, not the echo's.
quiet "${engine[@]}" run -d --name "$upstream" "${run_opts[@]}" -p 127.0.0.1::8080 -p 127.0.0.1::9090 \
  --no-healthcheck --entrypoint /usr/local/bin/tollgate-echo "$image:latest" \
  --address 127.0.0.1 --port 9000 --threads 1
quiet "${engine[@]}" run -d --name "$gateway" "${run_opts[@]}" --network "container:$upstream" \
  -e TOLLGATE_POW_SECRET="$(random_hex)" -e TOLLGATE_ADMIN_TOKEN="$admin_token" "$image:latest"
host_port() { "${engine[@]}" port "$upstream" "$1/tcp" | head -1 | sed 's/.*://'; }
public=$(host_port 8080)
admin=$(host_port 9090)
echo "smoke: gateway on 127.0.0.1:$public (public), 127.0.0.1:$admin (admin)"

ready=0
for _ in $(seq 60); do
  if curl -fsS -o /dev/null "http://127.0.0.1:$admin/healthz" 2>/dev/null; then ready=1; break; fi
  sleep 0.5
done
[ "$ready" = 1 ] || fail "/healthz did not answer 200 within 30 s"
echo "smoke: /healthz 200"

# One request through the gateway: the echo's JSON, status 200, with the gateway's headers.
headers=$(mktemp)
body=$(curl -sS -D "$headers" -o - -w '\n%{http_code}' "http://127.0.0.1:$public/api/smoke?from=image.sh") ||
  fail "proxied request failed"
status=${body##*$'\n'}
body=${body%$'\n'*}
body=${body%$'\n'}
echo "smoke: GET /api/smoke -> $status $body"
[ "$status" = 200 ] || fail "proxied request answered $status"
grep -q '"target":"/api/smoke?from=image.sh"' <<<"$body" || fail "not the echo's JSON"
grep -qi '^RateLimit-Policy:' "$headers" || fail "no RateLimit-Policy header: not through the gateway"
grep -i '^RateLimit' "$headers" | sed 's/^/smoke:   /'
rm -f "$headers"

# The admin token came from the environment: /admin/* refuses a request without it.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/admin/bans")
[ "$code" = 401 ] || fail "/admin/bans without the token answered $code, expected 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin_token" \
  "http://127.0.0.1:$admin/admin/bans")
[ "$code" = 200 ] || fail "/admin/bans with the token answered $code"
echo "smoke: /admin/bans 401 without the token, 200 with it"
"${engine[@]}" logs "$gateway" 2>&1 | tail -4 | sed 's/^/smoke: log: /'

# The image's HEALTHCHECK: healthy now, and unhealthy when nothing answers on its port.
if [ "${engine[0]}" = podman ]; then
  quiet "${engine[@]}" healthcheck run "$gateway" || fail "podman healthcheck run: unhealthy"
  health=$("${engine[@]}" inspect -f '{{.State.Health.Status}}' "$gateway")
else
  # Docker runs it every --interval (10 s) after the start period.
  for _ in $(seq 30); do
    health=$(docker inspect -f '{{.State.Health.Status}}' "$gateway")
    [ "$health" = starting ] || break
    sleep 1
  done
fi
[ "$health" = healthy ] || fail "health status '$health'"
echo "smoke: HEALTHCHECK $health"
if "${engine[@]}" exec "$gateway" tollgate-healthcheck 9 >/dev/null 2>&1; then
  fail "the healthcheck passed against a closed port"
fi
echo "smoke: the healthcheck fails against a closed port"

# STOPSIGNAL SIGTERM: the gateway drains and exits 0 well before the runtime's kill.
start=$(date +%s)
quiet "${engine[@]}" stop -t 20 "$gateway"
code=$("${engine[@]}" inspect -f '{{.State.ExitCode}}' "$gateway")
[ "$code" = 0 ] || fail "the gateway exited $code on SIGTERM"
echo "smoke: stopped by SIGTERM in $(( $(date +%s) - start ))s, exit code 0"

echo "smoke test passed"
"${engine[@]}" images "$image"
echo "image size: ${size_mb} MB"
