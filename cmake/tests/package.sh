#!/usr/bin/env bash
# cmake/tests/package.sh: cmake/gpusvc.cmake as a host's build uses it (scripts/test runs it).
#
#   cmake/tests/package.sh [PROFILE]     # release (default) or debug
#
# A copy of the source tree (tracked and untracked-but-not-ignored files, no target/) is made
# read-only, then a host project (cmake/tests/build) imports gpusvc from it with GL OFF and
# builds cargo's target folder inside its own build folder. Checks, one line each
# ("check NAME: ok" / "check NAME: FAILED ..."):
#   offline-vendored   the copy was vendored (`cargo vendor`) and built with --offline and an
#                      empty CARGO_HOME (needs the network for cargo vendor, else says SKIPPED)
#   wrong-source-dir   a SOURCE_DIR without gpusvc fails at configure time with a clear message
#   read-only-source   the build wrote nothing into the source copy (no target/, same Cargo.lock)
#   target-dir         cargo's target folder is <build>/gpusvc-cargo
#   import-twice       two includes and two gpusvc_import calls: no warning, no error
#   consumers          the C consumer linked static and shared runs
#   no-gl-symbols      libgpusvc.a and libgpusvc.so hold no glutin or glow symbol (GL OFF)
#   no-gl-exports      and no gpusvc_gl_context_* or gpusvc_restore_ahead_* export
#   static-stripped    the staged libgpusvc.a has no .debug_* sections (release)
#   soname             readelf -d: SONAME libgpusvc.so.0
#   exports            nm -D --defined-only: only gpusvc_* symbols
#   install-layout     include/gpusvc.h, lib/libgpusvc.a, libgpusvc.so.X.Y.Z <- .so.0 <- .so,
#                      lib/cmake/gpusvc/gpusvcConfig*.cmake, lib/pkgconfig/gpusvc.pc
#   find-package       a project using find_package(gpusvc 0.1) builds and runs both consumers
#   pkg-config         the consumer built with `pkg-config --cflags --libs gpusvc` (shared) and
#                      with `pkg-config --static --libs` (libgpusvc.a) runs
#   example-host       examples/host built against the installed GL-OFF package runs (its own
#                      EGL context, the program manager over its GL callbacks, the scheduler)
# The last line: "package: N passed, M failed" (exit status non-zero when M > 0).
set -uo pipefail

profile=${1:-release}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d -t gpusvc-package.XXXXXX)
cleanup() {
  chmod -R u+w "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
check() { # check NAME COMMAND...: one line, counted
  local name=$1
  shift
  local out
  if out=$("$@" 2>&1); then
    echo "check $name: ok${out:+ ($out)}"
    passed=$((passed + 1))
  else
    echo "check $name: FAILED${out:+: $out}"
    failed=$((failed + 1))
  fi
}
quiet() { # quiet PROGRAM...: runs it; its stderr (the consumer's caught panic prints there) only
  # shows when it fails
  "$@" 2>"$work/quiet.err" || { cat "$work/quiet.err"; return 1; }
}
finish() {
  echo "package: $passed passed, $failed failed"
  ((failed == 0))
  exit
}

# The read-only source copy.
src=$work/src
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$src" || { echo "copying the sources failed"; exit 1; }

# Offline: the copy gets vendored sources (`cargo vendor`, the README's recipe) and the build
# runs with --offline and an empty CARGO_HOME, so nothing can come from the network or from this
# machine's registry cache. cargo vendor itself needs the network once; without it the build
# runs online and the check says so.
offline=OFF
if (cd "$src" && cargo vendor --locked vendor >"$work/vendor-config.toml" 2>"$work/vendor.log"); then
  mkdir -p "$src/.cargo"
  cp "$work/vendor-config.toml" "$src/.cargo/config.toml"
  export CARGO_HOME=$work/cargo-home
  mkdir -p "$CARGO_HOME"
  offline=ON
else
  tail -n 3 "$work/vendor.log"
fi
chmod -R a-w "$src"
lock_sum=$(sha256sum <"$src/Cargo.lock")

wrong_source_dir() {
  local log=$work/wrong.log
  if cmake -S "$root/cmake/tests/build" -B "$work/wrong" -G Ninja \
    -DGPUSVC_SOURCE_DIR="$work" >"$log" 2>&1; then
    echo "configure succeeded"
    return 1
  fi
  local text
  text=$(tr -s ' \n' ' ' <"$log") # CMake wraps its messages
  grep -q "is not a gpusvc source tree" <<<"$text" || { tail -5 "$log"; return 1; }
  echo "configure failed: $(grep -oE 'gpusvc_import: SOURCE_DIR [^)]*\)' <<<"$text")"
}
check wrong-source-dir wrong_source_dir

build=$work/build
echo "== configure + build (cargo build -p gpusvc-ffi --$profile --no-default-features from scratch, offline $offline)"
t=$SECONDS
if ! cmake -S "$root/cmake/tests/build" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGPUSVC_SOURCE_DIR="$src" -DGPUSVC_PROFILE="$profile" -DGPUSVC_WITH_GL=OFF -DGPUSVC_OFFLINE=$offline \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" >"$work/configure.log" 2>&1; then
  cat "$work/configure.log"
  echo "check configure: FAILED"
  failed=$((failed + 1))
  finish
fi
if ! cmake --build "$build" >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log"
  echo "check build: FAILED"
  failed=$((failed + 1))
  finish
fi
echo "== built in $((SECONDS - t)) s"

offline_vendored() {
  [[ $offline == ON ]] || { echo "SKIPPED because cargo vendor could not download the crates (no network?); built online"; return 0; }
  [[ ! -e $CARGO_HOME/registry ]] || { echo "cargo used $CARGO_HOME/registry"; return 1; }
  echo "cargo --offline from $(find "$src/vendor" -mindepth 1 -maxdepth 1 | wc -l) vendored crates, empty CARGO_HOME"
}
check offline-vendored offline_vendored
check read-only-source bash -c "[[ ! -e '$src/target' ]] && [[ \$(sha256sum <'$src/Cargo.lock') == '$lock_sum' ]] && echo 'no target/, Cargo.lock unchanged'"
check target-dir test -f "$build/gpusvc-cargo/$profile/libgpusvc.a"
check import-twice bash -c "! grep -E 'CMake (Warning|Error)' '$work/configure.log'"
consumers() { quiet "$build/consumer_static" && quiet "$build/consumer_shared"; }
check consumers consumers

lib=$build/gpusvc/lib
no_gl_symbols() {
  local a s
  a=$(nm "$lib/libgpusvc.a" 2>/dev/null | grep -ci 'glutin\|glow')
  s=$(nm "$lib/libgpusvc.so.0" 2>/dev/null | grep -ci 'glutin\|glow')
  echo "nm libgpusvc.a | grep -ci 'glutin\\|glow': $a; libgpusvc.so: $s"
  ((a == 0 && s == 0))
}
check no-gl-symbols no_gl_symbols
check no-gl-exports bash -c "! nm -D --defined-only '$lib/libgpusvc.so.0' | grep -E 'gpusvc_gl_context_|gpusvc_restore_ahead_'"
static_stripped() {
  local cargo_size staged_size debug
  cargo_size=$(stat -c %s "$build/gpusvc-cargo/$profile/libgpusvc.a")
  staged_size=$(stat -c %s "$lib/libgpusvc.a")
  debug=$(objdump -h "$lib/libgpusvc.a" 2>/dev/null | grep -c ' \.debug_')
  echo "cargo's libgpusvc.a $cargo_size bytes, staged $staged_size bytes, $debug .debug_* sections"
  [[ $profile != release ]] || ((debug == 0))
}
check static-stripped static_stripped

prefix=$work/prefix
cmake --install "$build" >"$work/install.log" 2>&1 || { cat "$work/install.log"; echo "check install: FAILED"; failed=$((failed + 1)); finish; }
libdir=$(dirname "$(find "$prefix" -name libgpusvc.a | head -n1)")
version=$(grep -m1 -oE '^version = "[0-9.]+"' "$root/Cargo.toml" | grep -oE '[0-9.]+')
soname() {
  local s
  s=$(readelf -d "$libdir/libgpusvc.so.$version" | grep -oE 'Library soname: \[[^]]*\]')
  echo "$s"
  [[ $s == "Library soname: [libgpusvc.so.0]" ]]
}
check soname soname
exports() {
  local all other
  all=$(nm -D --defined-only "$libdir/libgpusvc.so.$version" | awk '{print $3}')
  other=$(grep -v '^gpusvc_' <<<"$all")
  echo "$(wc -l <<<"$all") defined dynamic symbols, $(grep -c . <<<"$other") not gpusvc_*${other:+: $other}"
  [[ -z $other ]]
}
check exports exports
install_layout() {
  [[ -f $prefix/include/gpusvc.h && -f $prefix/include/gpusvc.hpp ]] || { echo "headers"; return 1; }
  [[ -f $libdir/libgpusvc.a && -f $libdir/libgpusvc.so.$version && ! -L $libdir/libgpusvc.so.$version ]] || { echo "libraries"; return 1; }
  [[ $(readlink "$libdir/libgpusvc.so.0") == "libgpusvc.so.$version" ]] || { echo "libgpusvc.so.0"; return 1; }
  [[ $(readlink "$libdir/libgpusvc.so") == "libgpusvc.so.$version" ]] || { echo "libgpusvc.so"; return 1; }
  [[ -f $libdir/cmake/gpusvc/gpusvcConfig.cmake && -f $libdir/cmake/gpusvc/gpusvcConfigVersion.cmake ]] || { echo "config"; return 1; }
  [[ -f $libdir/pkgconfig/gpusvc.pc ]] || { echo "gpusvc.pc"; return 1; }
  echo "libgpusvc.so -> libgpusvc.so.$version, libgpusvc.so.0 -> libgpusvc.so.$version"
}
check install-layout install_layout

find_package_consumer() {
  cmake -S "$root/cmake/tests/consumer" -B "$work/consumer" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer.log" 2>&1 &&
    cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 &&
    quiet "$work/consumer/consumer_static" && quiet "$work/consumer/consumer_shared" ||
    { tail -n 20 "$work/consumer.log"; return 1; }
}
check find-package find_package_consumer

pkg_config_consumer() {
  local pc=(env PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config)
  # shellcheck disable=SC2046
  cc -o "$work/pc_shared" "$root/cmake/tests/consumer.c" $("${pc[@]}" --cflags --libs gpusvc) \
    -Wl,-rpath,"$libdir" || return 1
  # shellcheck disable=SC2046
  cc -o "$work/pc_static" "$root/cmake/tests/consumer.c" $("${pc[@]}" --cflags gpusvc) \
    $("${pc[@]}" --static --libs gpusvc | sed 's/-lgpusvc\b/-l:libgpusvc.a/') || return 1
  quiet "$work/pc_shared" && quiet "$work/pc_static" || return 1
  readelf -d "$work/pc_shared" | grep -q 'NEEDED.*libgpusvc.so.0' || { echo "pc_shared does not need libgpusvc.so.0"; return 1; }
  ! readelf -d "$work/pc_static" | grep -q 'NEEDED.*libgpusvc' || { echo "pc_static needs libgpusvc.so"; return 1; }
  echo "$("${pc[@]}" --cflags --libs gpusvc); --static: $("${pc[@]}" --static --libs gpusvc)"
}
check pkg-config pkg_config_consumer

if [[ -f $root/examples/host/CMakeLists.txt ]]; then
  example_host() {
    cmake -S "$root/examples/host" -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_PREFIX_PATH="$prefix" >"$work/example.log" 2>&1 &&
      cmake --build "$work/example" >>"$work/example.log" 2>&1 ||
      { tail -n 30 "$work/example.log"; return 1; }
    MESA_SHADER_CACHE_DIR=$work/mesa-shader-cache "$work/example/gpusvc_example_host" \
      >"$work/example-run.log" 2>&1 ||
      { tail -n 30 "$work/example-run.log"; return 1; }
    tail -n 1 "$work/example-run.log"
  }
  check example-host example_host
fi

finish
