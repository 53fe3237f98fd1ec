#!/usr/bin/env bash
# ctest driver: install this build of volt into a scratch prefix, then build
# and run against it, as a user who has only the installed package would:
#   1. the consumer project (tests/package) with find_package(volt 0.1);
#   2. examples/, unchanged, as a stand-alone project (it must not need
#      anything of volt's build tree);
#   3. a one-file program compiled with pkg-config's flags, no CMake;
# and 4. the consumer again with add_subdirectory of the source tree (static
# builds only: see there).
# A shared build (BUILD_SHARED_LIBS) also checks the soname's symlinks.
set -euo pipefail
binary_dir="$1" source_dir="$2" scratch="$3"
rm -rf "$scratch" && mkdir -p "$scratch"
prefix="$scratch/prefix"
cmake --install "$binary_dir" --prefix "$prefix" >/dev/null
libdir="$(dirname "$(find "$prefix" -name 'voltConfig.cmake' -print -quit)")/../.."
compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$binary_dir/CMakeCache.txt")"

cmake -S "$source_dir/tests/package" -B "$scratch/installed" -DVOLT_MODE=installed \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/installed" -j2 >/dev/null
LD_LIBRARY_PATH="$libdir" "$scratch/installed/volt_consumer"

# Debug at -O0 without -g: whether they build and link against the package
# is the question, and -O0 compiles them in half the time of -O2, -O0 alone
# in a sixth less than -O0 -g (CI runs this twice).
cmake -S "$source_dir/examples" -B "$scratch/examples" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 >/dev/null
cmake --build "$scratch/examples" -j2 >/dev/null
# echo_client's self-test needs a server: run the pair over loopback.
LD_LIBRARY_PATH="$libdir" "$scratch/examples/echo_server" 127.0.0.1:0 >"$scratch/echo.out" 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  [ -s "$scratch/echo.out" ] && break
  sleep 0.05
done
address="$(head -n1 "$scratch/echo.out" | grep -o '[0-9.]*:[0-9]*$')"
LD_LIBRARY_PATH="$libdir" "$scratch/examples/echo_client" "$address" --count 20 >/dev/null
kill "$server"
wait "$server" || true
trap - EXIT

export PKG_CONFIG_PATH="$libdir/pkgconfig"
"$compiler" -std=c++20 "$source_dir/tests/package/main.cpp" -o "$scratch/pkg_config_consumer" \
  $(pkg-config --cflags --libs volt)
LD_LIBRARY_PATH="$libdir" "$scratch/pkg_config_consumer"
shared="$(find "$libdir" -name 'libvolt.so*' -print -quit)"
if [ -n "$shared" ]; then
  version="$(pkg-config --modversion volt)"
  soname="$(objdump -p "$libdir/libvolt.so.$version" | awk '/SONAME/ {print $2}')"
  [ "$soname" = "libvolt.so.${version%.*}" ] || { echo "unexpected soname $soname" >&2; exit 1; }
  [ -L "$libdir/libvolt.so" ] && [ -L "$libdir/$soname" ]
fi

# add_subdirectory builds volt from source with the consumer's own settings,
# whatever this build was: the same check for a static and a shared build, so
# only a static build makes it (CI's clang stage, a shared build, saves the
# 40 s of compiling the library once more).
if [ -n "$shared" ]; then
  echo "volt consumed via find_package (a program and the examples) and pkg-config"
  exit 0
fi
cmake -S "$source_dir/tests/package" -B "$scratch/subdirectory" -DVOLT_MODE=subdirectory \
  -DVOLT_SOURCE_DIR="$source_dir" -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG=-O0 >/dev/null
cmake --build "$scratch/subdirectory" -j2 >/dev/null
"$scratch/subdirectory/volt_consumer"
echo "volt consumed via find_package (a program and the examples), pkg-config and add_subdirectory"
