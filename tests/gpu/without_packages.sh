#!/usr/bin/env bash
# scripts/gpu-check on a machine like a GPU machine with no package registry: the CUDA toolkit,
# CMake, a compiler and Python, and none of the project's system packages. Packs the libraries the
# GPU build needs from BUILD (scripts/gpu-deps), then, in a mount namespace of its own, hides every
# header, CMake file, library link name and tool of Boost, fmt, nlohmann-json, OpenBLAS, PCRE2, zlib,
# Catch2, MPI, Verilator, SystemC and pkg-config, and runs scripts/gpu-check --deps there with
# TESSERA_REQUIRE_GPU=0 (where there is no GPU its tests skip; the build and the rest must pass),
# then as on a GPU machine, where a missing GPU must fail it. Last, every library the binaries load
# from those packages must come from the carried prefix.
#
#   tests/gpu/without_packages.sh BUILD WORK      (as root: it mounts over system folders privately)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "$1")
work=$(realpath -m "$2")
if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2> /dev/null; then
  echo "skipped: hiding the system packages needs root and mount namespaces (unshare --mount)"
  exit 77
fi
mkdir -p "$work"
"$root/scripts/gpu-deps" --build "$build" "$work/gpu-deps.tar.gz"

unshare --mount --propagation private bash -s "$root" "$work" << 'EOF'
set -euo pipefail
root=$1 work=$2
lib=/usr/lib/x86_64-linux-gnu inc=/usr/include
hidden=()
for p in $inc/boost $inc/fmt $inc/nlohmann $inc/catch2 $inc/sysc $inc/x86_64-linux-gnu/openblas-pthread \
         $lib/openblas-pthread $lib/openmpi $lib/cmake $lib/pkgconfig /usr/lib/cmake /usr/share/cmake/nlohmann_json \
         /usr/share/verilator; do
  if [ -d "$p" ]; then mount -t tmpfs -o ro,size=64k none "$p"; hidden+=("$p"); fi
done
# Single files: an empty file in their place (a dangling link is already gone).
for p in $inc/zlib.h $inc/x86_64-linux-gnu/zconf.h $inc/pcre2.h $inc/systemc.h $inc/systemc $lib/libz.so $lib/libz.a \
         $lib/libboost_program_options.* $lib/libfmt.* $lib/libsystemc* \
         /usr/bin/verilator* /usr/bin/mpirun /usr/bin/mpiexec /usr/bin/mpicxx /usr/bin/pkg-config /usr/bin/pkgconf; do
  if [ -f "$p" ]; then mount --bind /dev/null "$p"; hidden+=("$p"); fi
done
echo "hidden: ${hidden[*]}"

export TESSERA_BUILD_DIR=$work/build-gpu
TESSERA_REQUIRE_GPU=0 "$root/scripts/gpu-check" --deps "$work/gpu-deps.tar.gz"
# As on a GPU machine, where a GPU is required: its absence must fail the check, and for that reason
# alone: the build and the GPU-free steps pass, and the GPU tests each fail saying a GPU is required.
if "$root/scripts/gpu-check" --deps "$work/gpu-deps.tar.gz" > "$work/required.log" 2>&1; then
  echo "FAIL gpu-check passed with no GPU although TESSERA_REQUIRE_GPU=1"; cat "$work/required.log"; exit 1
fi
required=$(grep -c "FAIL: a GPU is required here" "$work/required.log" || true)
steps=$(sed -n 's/^gpu-check: FAILED (steps: \(.*\))$/\1/p' "$work/required.log")
if [ "$required" -ge 2 ] && [ -n "$steps" ] && ! grep -qwE "devices|accelerator" <<< "$steps"; then
  echo "ok   with no GPU and TESSERA_REQUIRE_GPU=1, gpu-check fails ($steps): $required GPU tests say a GPU is required"
else
  echo "FAIL gpu-check failed, but not only because a GPU is required (steps: ${steps:-none named}):"
  cat "$work/required.log"; exit 1
fi

deps=$TESSERA_BUILD_DIR/gpu-deps/lib
export LD_LIBRARY_PATH=$deps
bad=0
for bin in "$TESSERA_BUILD_DIR/host/tessera" "$TESSERA_BUILD_DIR/tests/gpu/tessera_gpu_tests"; do
  while read -r name path; do
    case "$name" in
      libboost*|libfmt*|libopenblas*|libpcre2*|libz.*|libgfortran*|libquadmath*)
        if [ "${path%/*}" != "$deps" ]; then echo "FAIL ${bin##*/} loads $name from $path, not from the carried prefix"; bad=1; fi ;;
    esac
  done < <(ldd "$bin" | awk '$2 == "=>" {print $1, $3}')
done
[ $bad = 0 ] && echo "ok   every carried library is loaded from $deps"
exit $bad
EOF
