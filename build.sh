#!/usr/bin/env bash
# Sets up, builds, and then runs the application (`run`) or the whole test suite (`test`).
#   bash build.sh run [specula arguments...]
#   bash build.sh test [ctest arguments...]
# Installs missing Debian/Ubuntu packages first (with sudo when not root).
# BUILD_DIR (default build) and SPECULA_CUDA (AUTO|ON|OFF) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake ninja-build pkg-config git
          qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev libsentencepiece-dev libpcre2-dev libicu-dev
          libcli11-dev nlohmann-json3-dev zlib1g-dev libcpp-httplib-dev libcurl4-openssl-dev libssl-dev
          bubblewrap python3 xvfb xauth)

install_missing_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "Installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  local dir=${BUILD_DIR:-build}
  # The CUDA toolkit's default location is often not on PATH.
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECULA_CUDA="${SPECULA_CUDA:-AUTO}"
  cmake --build "$dir" --parallel "$(nproc)"
}

mode=${1:-}
shift || true
case "$mode" in
  run)
    install_missing_packages
    build
    if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
      echo "No display found: the application needs a desktop session (DISPLAY or WAYLAND_DISPLAY)." >&2
      echo "Headless, run it under xvfb-run, or with QT_QPA_PLATFORM=offscreen and --screenshot OUT.png." >&2
      exit 1
    fi
    exec "${BUILD_DIR:-build}/app/specula" "$@"
    ;;
  test)
    install_missing_packages
    build
    cd "${BUILD_DIR:-build}"
    exec ctest --output-on-failure --parallel "$(nproc)" "$@"
    ;;
  *)
    echo "usage: bash build.sh run|test [arguments]" >&2
    exit 2
    ;;
esac
