#!/bin/sh
# Slim the dependency venv of the service image (run in the build's deps stage; image_check.py then
# imports and exercises what every process uses, so a removal that matters fails the build).
#   - test suites shipped inside wheels (numpy, scipy, networkx, ...);
#   - scipy subpackages outside what the graph channel imports: scipy.sparse, whose closure with
#     sparse.linalg and sparse.csgraph is _lib, linalg and sparse;
#   - onnxruntime's C-API library (libonnxruntime.so, for native programs and custom-op libraries:
#     the Python binding embeds its own runtime and does not load it) and its offline model tools
#     (transformers, quantization, tools, datasets);
#   - symbol tables of the packages' own shared objects (strip --strip-unneeded keeps what the
#     dynamic linker needs). The libraries auditwheel vendored into <name>.libs/ are left alone: they
#     were rewritten by patchelf, and strip then makes them unloadable ("ELF load command ... not
#     page-aligned"). image_check.py loads every shared object, so a damaged one fails the build.
set -eu
SITE=${1:?site-packages directory}
cd "$SITE"
find . -depth -type d -name tests -exec rm -rf {} +
for dir in scipy/*/; do
  case "$dir" in scipy/_lib/ | scipy/linalg/ | scipy/sparse/ | scipy/__pycache__/) ;; *) rm -rf "$dir" ;; esac
done
rm -f onnxruntime/capi/libonnxruntime.so*
rm -rf onnxruntime/transformers onnxruntime/quantization onnxruntime/tools onnxruntime/datasets
find . -type f -name '*.so*' -not -path './*.libs/*' -exec strip --strip-unneeded {} +
