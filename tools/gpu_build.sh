#!/usr/bin/env bash
# Builds the binaries a GPU host runs and copies them into gpu-bin/ (git-ignored)
# with tools/gpu_run.sh, so that the folder alone can be carried to the GPU host
# (which has no Bazel and no liburcu):
#   cuda_suite       the CUDA layer's behaviour tests (--driver=libcuda|host)
#   ledger_bench     the ledger benchmark, if //bench:ledger_bench exists
#   *bench*          any other cc_binary named like a benchmark in //bench or //cuda
#   libsl_torch.so   PyTorch's allocator on the pool (torch_alloc/), with the
#                    liburcu it loads and torch_gpu_run.sh (test, example,
#                    benchmark against PyTorch's allocator)
# Built with --config=portable (optimised, liburcu linked statically). libcuda is
# not linked: the layer opens libcuda.so.1 at run time. The script checks with
# ldd that only glibc libraries remain, and prints the newest glibc symbol
# version each binary needs (the GPU host has glibc 2.39; this builds on 2.36).
# Usage: tools/gpu_build.sh [extra bazel flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

out=gpu-bin
targets=(//tests/cuda:cuda_suite)
for t in $(bazel query --noshow_progress \
  "attr(name, 'bench', kind('cc_binary', //bench/... + //cuda/...))" 2>/dev/null || true); do
  targets+=("$t")
done

# --as-needed: the toolchain links every C binary against libstdc++ (and so
# libgcc_s); nothing here uses it, so the linker drops it.
flags=(--config=portable --linkopt=-Wl,--as-needed "$@")
echo "=== bazel build ${flags[*]} ${targets[*]}"
bazel build "${flags[@]}" -- "${targets[@]}"
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)

rm -rf "$out"
mkdir -p "$out"
for t in "${targets[@]}"; do
  pkg=${t#//}
  pkg=${pkg%%:*}
  name=${t##*:}
  cp "$bin/$pkg/$name" "$out/$name"
  chmod u+w,a+rx "$out/$name"
done
cp tools/gpu_run.sh "$out/gpu_run.sh"
chmod a+rx "$out/gpu_run.sh"
cp bench/engine_bench_h200.sh "$out/engine_bench_h200.sh"
chmod a+rx "$out/engine_bench_h200.sh"
cp bench/pool_h200.sh bench/pool_torch.cpp "$out/"  # pool_h200.sh builds the .cpp there
chmod a+rx "$out/pool_h200.sh"
cp bench/multigpu_run.sh "$out/"  # issue 13: suite + serving at 1..N GPUs
chmod a+rx "$out/multigpu_run.sh"

# PyTorch's allocator on the pool (torch_alloc/, issue 14): libsl_torch.so.
# Not --config=portable: Debian's liburcu archives are not position-
# independent, so the .so links liburcu's shared libraries and finds them
# beside itself (RUNPATH $ORIGIN): they are copied here. Then the Python
# side and its run script (torch_gpu_run.sh: test, example, benchmark).
so_flags=(--config=opt "$@")
echo "=== bazel build ${so_flags[*]} //torch_alloc:libsl_torch.so"
bazel build "${so_flags[@]}" //torch_alloc:libsl_torch.so
so_bin=$(bazel info "${so_flags[@]}" bazel-bin 2>/dev/null)
cp "$so_bin/torch_alloc/libsl_torch.so" "$out/"
chmod u+w,a+r "$out/libsl_torch.so"
for lib in $(ldd "$out/libsl_torch.so" | awk '/liburcu/ {print $3}'); do
  cp -L "$lib" "$out/"
  chmod u+w,a+r "$out/$(basename "$lib")"
done
cp torch_alloc/sl_torch.py torch_alloc/serve.py torch_alloc/torch_gpu_test.py "$out/"
cp torch_alloc/gpu_run.sh "$out/torch_gpu_run.sh"
chmod a+rx "$out/torch_gpu_run.sh"

# Only the C library's own shared objects may remain (no liburcu, no libcuda,
# no libstdc++/libgcc_s).
allowed='^(linux-vdso\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|/lib64/ld-linux-x86-64\.so|ld-linux-x86-64\.so)'
# libsl_torch.so (loaded into PyTorch, which has libstdc++) also needs
# libstdc++/libgcc_s and the liburcu copied beside it.
so_allowed='^(libstdc\+\+\.so|libgcc_s\.so|liburcu-memb\.so|liburcu-common\.so)'
bad=0
for f in "$out"/*; do
  case "$f" in *.sh | *.cpp | *.py | *.txt) continue ;; esac
  echo "--- ldd $f"
  ldd "$f" | sed 's/^/    /'
  while read -r lib _; do
    [ -z "$lib" ] && continue
    if [[ "$(basename "$f")" == libsl_torch.so && "$lib" =~ $so_allowed ]]; then
      continue
    fi
    if ! [[ "$lib" =~ $allowed ]]; then
      echo "    NOT ALLOWED: $lib"
      bad=1
    fi
  done < <(ldd "$f" | awk '{print $1}')
  need=$(objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "    newest glibc symbol version needed: ${need:-none}"
done

{
  echo "built:    $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "compiler: $(gcc --version | head -1)"
  echo "glibc:    $(ldd --version | head -1)"
  echo "config:   bazel build ${flags[*]}"
  echo "targets:  ${targets[*]}"
} > "$out/BUILD_INFO.txt"

if [ "$bad" -ne 0 ]; then
  echo "=== gpu_build: a binary needs a library the GPU host may not have" >&2
  exit 1
fi
echo "=== gpu-bin/ is ready:"
ls -l "$out"
echo "Carry it to the GPU host and run: gpu-bin/gpu_run.sh (suite, benchmarks),"
echo "  gpu-bin/torch_gpu_run.sh OUT_DIR (PyTorch on the pool: test, example, benchmark)"
