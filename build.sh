#!/usr/bin/env bash
# Sets up, builds, and then runs the application (`run`) or the whole test suite (`test`).
#   bash build.sh run [specula arguments...]
#   bash build.sh test [ctest arguments...]
#   bash build.sh tsan [ctest arguments...]  the threaded code's suites under ThreadSanitizer
#                                            (build-tsan/): run it before submitting work that
#                                            touches threads; it must report nothing
# Installs missing Debian/Ubuntu packages first (with sudo when not root).
# BUILD_DIR (default build) and SPECULA_CUDA (AUTO|ON|OFF) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake ninja-build pkg-config git
          qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev libsentencepiece-dev libpcre2-dev libicu-dev
          libcli11-dev nlohmann-json3-dev zlib1g-dev libcpp-httplib-dev libcurl4-openssl-dev libssl-dev
          bubblewrap python3 python3-pip xvfb xauth)

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

# The real GGUF files some tests read (SmolLM2-135M-Instruct, Gemma 3 270M, as published),
# fetched by the shared data's script into SPECULA_REAL_MODELS_DIR's default; it keeps files
# already there and checks their sha256. Without them those tests skip, and fail under CI.
fetch_real_models() {
  local script=${SPECULA_SHARED_DIR:-../shared}/models/real/fetch.sh
  [ -f "$script" ] || return 0
  bash "$script" "$HOME/.cache/specula-real-models" >/dev/null ||
    echo "could not fetch the real models ($script): the tests that read them will say so" >&2
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
    fetch_real_models
    cd "${BUILD_DIR:-build}"
    exec ctest --output-on-failure --parallel "$(nproc)" "$@"
    ;;
  tsan)
    # The suites whose code runs on several threads: the app's engine worker, the server
    # (its I/O thread, workers and engine thread; OpenAI's, chat and llama.cpp's endpoints, the
    # prompt cache kept across requests, the suggestions ranked on the workers), the thread pool
    # under the forward pass, sessions and evaluation. CUDA is left out: ThreadSanitizer does not see the device.
    # test_cpu_kernels and test_spec_decode drive the thread pool under the kernels
    # (test_batch_invariance's forwards take over an hour instrumented, and are left out).
    install_missing_packages
    dir=${BUILD_DIR:-build-tsan}
    suites=(test_gui_engine test_serve test_serve_hostile test_serve_chat test_serve_editor test_serve_prompt_cache
            test_serve_suggestions test_http test_remote_client test_evaluation test_spec_decode test_session
            test_prompt_cache test_cpu_kernels)
    # Instrumented code runs 5-15 times slower: the suites' time limits are scaled.
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECULA_CUDA=OFF -DSPECULA_TEST_TIMEOUT_SCALE=10 \
          -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
          -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
    cmake --build "$dir" --parallel "$(nproc)" --target specula-cli "${suites[@]}"
    suppressions=$PWD/tools/tsan.supp
    cd "$dir"
    regex="^($(IFS='|'; echo "${suites[*]}"))\$"
    # halt_on_error: a report fails the suite (a server's report ends the server, and its test).
    # die_after_fork=0: QProcess forks the suites' multi-threaded processes to start
    # specula-cli, whose child only execs. tools/tsan.supp: why Qt's and GLib's own calls
    # are not reported. QT_NO_GLIB: Qt's own event dispatcher, whose wake-ups it can see.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0 suppressions=$suppressions ${TSAN_OPTIONS:-}"
    export QT_NO_GLIB=1
    exec ctest --output-on-failure --parallel "$(nproc)" -R "$regex" "$@"
    ;;
  *)
    echo "usage: bash build.sh run|test|tsan [arguments]" >&2
    exit 2
    ;;
esac
