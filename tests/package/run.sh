#!/usr/bin/env bash
# ctest driver: install this build of volt into a scratch prefix, then build
# and run the consumer project against it, and again via add_subdirectory.
set -euo pipefail
binary_dir="$1" source_dir="$2" scratch="$3"
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$binary_dir" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source_dir/tests/package" -B "$scratch/installed" -DVOLT_MODE=installed \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/installed" -j2 >/dev/null
"$scratch/installed/volt_consumer"
cmake -S "$source_dir/tests/package" -B "$scratch/subdirectory" -DVOLT_MODE=subdirectory \
  -DVOLT_SOURCE_DIR="$source_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/subdirectory" -j2 >/dev/null
"$scratch/subdirectory/volt_consumer"
echo "volt consumed via find_package and add_subdirectory"
