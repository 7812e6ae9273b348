#!/usr/bin/env bash
# The runtime as an outside project consumes it (run by ctest as "install"):
#   run.sh SOURCE_DIR WORK_DIR [COMFYQUANT_COMPILE MAIN_BUILD_DIR]
#  1. a runtime-only build (COMFYQUANT_BUILD_COMPILER=OFF) of SOURCE_DIR,
#     installed into WORK_DIR/prefix;
#  2. the install holds the library (SONAME), the C headers only, the CMake
#     package and comfyquant.pc;
#  3. libcomfyquant.so exports only cq_* symbols;
#  4. consumer/ built with find_package(comfyquant) runs (with an artifact
#     compiled by COMFYQUANT_COMPILE when given: kernels on the worker pool
#     and on a host scheduler);
#  5. consumer.c built with only `pkg-config --cflags --libs comfyquant` runs;
#  6. a Python ctypes smoke test of the shared library (with the artifact:
#     a session too);
#  7. a parent project that add_subdirectory()s SOURCE_DIR without
#     GoogleTest keeps its build type and test list;
#  8. with the compiler: MAIN_BUILD_DIR installed, and compiler-consumer/
#     built with find_package(comfyquant COMPONENTS compiler) runs.
# WORK_DIR is reused between runs (ccache hits on the same paths). Any failed
# step stops the script with exit 1 and names the step.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
compile=${3:-}
main_build=${4:-}
mkdir -p "$work"
work=$(cd "$work" && pwd)
prefix=$work/prefix
fixture=$src/test/fixtures/ckpt/sample_mixed.safetensors
jobs=${JOBS:-2}
step() { echo "== install test: $*"; }
die() { echo "install test: FAILED: $*" >&2; exit 1; }
trap 'echo "install test: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR

step "runtime-only configure, build and install"
rm -rf "$prefix"
cmake -S "$src" -B "$work/rt" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOMFYQUANT_BUILD_COMPILER=OFF -DCOMFYQUANT_BUILD_TESTS=OFF \
  -DCOMFYQUANT_BUILD_EXAMPLES=OFF > "$work/rt-configure.log" 2>&1 ||
  { cat "$work/rt-configure.log"; die "configure"; }
cmake --build "$work/rt" -j "$jobs" > "$work/rt-build.log" 2>&1 ||
  { tail -50 "$work/rt-build.log"; die "build"; }
cmake --install "$work/rt" --prefix "$prefix" > "$work/rt-install.log" 2>&1 ||
  { cat "$work/rt-install.log"; die "install"; }

step "installed files"
version=$(sed -n 's/^#define CQ_VERSION_STRING "\(.*\)"/\1/p' \
  "$prefix/include/comfyquant/version.h")
[ -n "$version" ] || die "no CQ_VERSION_STRING in the installed version.h"
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name 'libcomfyquant.so' | head -1)")
for f in "$libdir/libcomfyquant.so" "$libdir/libcomfyquant.so.$version" \
    "$prefix/include/comfyquant/comfyquant.h" \
    "$libdir/cmake/comfyquant/comfyquantConfig.cmake" \
    "$libdir/cmake/comfyquant/comfyquantConfigVersion.cmake" \
    "$libdir/cmake/comfyquant/comfyquantTargets.cmake" \
    "$libdir/pkgconfig/comfyquant.pc" "$prefix/bin/comfyquant-run"; do
  [ -e "$f" ] || die "not installed: $f"
done
[ ! -e "$prefix/include/comfyquant/runtime" ] ||
  die "the runtime's internal C++ headers are installed"
! grep -rq nlohmann "$prefix/include" "$libdir/pkgconfig" \
    "$libdir/cmake/comfyquant/comfyquantTargets.cmake" ||
  die "nlohmann/json leaks into the runtime's installed interface"
soname=$(readelf -d "$libdir/libcomfyquant.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case "$soname" in
  libcomfyquant.so.[0-9]*) ;;
  *) die "SONAME is '$soname'" ;;
esac

step "exported symbols"
nm -D --defined-only "$libdir/libcomfyquant.so" | awk '{print $3}' > "$work/symbols.txt"
grep -qx cq_version "$work/symbols.txt" || die "cq_version is not exported"
grep -qx cq_session_open_checked "$work/symbols.txt" || die "cq_session_open_checked is not exported"
if grep -v '^cq_' "$work/symbols.txt" > "$work/foreign.txt"; then
  head -20 "$work/foreign.txt" >&2
  die "$(wc -l < "$work/foreign.txt") exported symbols outside cq_*"
fi
echo "$(wc -l < "$work/symbols.txt") symbols, all cq_*"

artifact=
if [ -n "$compile" ] && [ -x "$compile" ] && grep -qw avx2 /proc/cpuinfo; then
  step "compile an artifact for the consumer"
  rm -rf "$work/art"
  "$compile" "$fixture" --target cpu -o "$work/art" --variants x86-64-v3 \
    --dtypes f32 > "$work/compile.log" 2>&1 ||
    { cat "$work/compile.log"; die "comfyquant-compile"; }
  artifact=$work/art
fi

step "find_package(comfyquant) consumer"
rm -rf "$work/consumer"
cmake -S "$src/test/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" 2>&1 ||
  { cat "$work/consumer-configure.log"; die "consumer configure"; }
cmake --build "$work/consumer" > "$work/consumer-build.log" 2>&1 ||
  { cat "$work/consumer-build.log"; die "consumer build"; }
"$work/consumer/consumer" "$fixture" $artifact

step "pkg-config consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion comfyquant)" = "$version" ] ||
  die "pkg-config --modversion: $(pkg-config --modversion comfyquant)"
# shellcheck disable=SC2046 # word splitting of the flags is intended
cc -std=c99 -o "$work/pc-consumer" "$src/test/install/consumer/consumer.c" \
  $(pkg-config --cflags --libs comfyquant) -lm
LD_LIBRARY_PATH=$libdir "$work/pc-consumer" "$fixture"
readelf -d "$work/pc-consumer" | grep -q "NEEDED.*\[$soname\]" ||
  die "pc-consumer does not link $soname"

step "Python ctypes"
python3 "$src/test/install/ctypes_smoke.py" "$libdir/libcomfyquant.so" "$fixture" \
  $artifact

step "add_subdirectory from a parent project, without GoogleTest"
rm -rf "$work/parent"
cmake -S "$src/test/install/subproject" -B "$work/parent" -G Ninja \
  -DCOMFYQUANT_SOURCE_DIR="$src" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  > "$work/parent-configure.log" 2>&1 ||
  { cat "$work/parent-configure.log"; die "parent configure"; }
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$work/parent/CMakeCache.txt")
[ -z "$build_type" ] || die "comfyquant set the parent's CMAKE_BUILD_TYPE to '$build_type'"
cmake --build "$work/parent" -j "$jobs" > "$work/parent-build.log" 2>&1 ||
  { tail -50 "$work/parent-build.log"; die "parent build"; }
tests=$(cd "$work/parent" && ctest -N | sed -n 's/^Total Tests: //p')
[ "$tests" = 1 ] || die "the parent has $tests tests (comfyquant added its own)"
(cd "$work/parent" && ctest --output-on-failure) > "$work/parent-ctest.log" 2>&1 ||
  { cat "$work/parent-ctest.log"; die "parent ctest"; }

if [ -n "$main_build" ]; then
  step "compiler libraries: install and find_package(... COMPONENTS compiler)"
  rm -rf "$work/full-prefix" "$work/compiler-consumer"
  cmake --install "$main_build" --prefix "$work/full-prefix" \
    > "$work/full-install.log" 2>&1 ||
    { cat "$work/full-install.log"; die "install of the full build"; }
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$main_build/CMakeCache.txt")
  cmake -S "$src/test/install/compiler-consumer" -B "$work/compiler-consumer" \
    -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/full-prefix" \
    > "$work/compiler-consumer.log" 2>&1 ||
    { cat "$work/compiler-consumer.log"; die "compiler consumer configure"; }
  cmake --build "$work/compiler-consumer" >> "$work/compiler-consumer.log" 2>&1 ||
    { tail -30 "$work/compiler-consumer.log"; die "compiler consumer build"; }
  "$work/compiler-consumer/compiler-consumer"
fi

echo "install test: OK (comfyquant $version)"
