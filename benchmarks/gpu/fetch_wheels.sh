#!/usr/bin/env bash
# Downloads into .whl/ (repository root) the wheels a GPU machine with JAX but without Keras needs to run
# benchmarks/gpu/kit.py: Keras and keras-hub at the versions installed here, and those of their dependencies
# that such a machine (Python 3.12, x86-64, no package index) does not have. benchmarks/gpu/run.sh installs them.
#
#   bash benchmarks/gpu/fetch_wheels.sh            # here, with network access
#
# Dependencies the target machine is expected to have already: absl-py, numpy, rich, h5py, ml-dtypes, packaging,
# regex, sentencepiece, tokenizers, protobuf, requests, pyyaml, tqdm, typing-extensions.
# keras-hub's tensorflow-text requirement is not fetched: keras_hub imports without it (and without TensorFlow),
# and its Transformer layers need neither.
set -euo pipefail

cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

# The installed version of a distribution here, else the fallback given.
version() {
    "$PYTHON" - "$1" "$2" <<'EOF'
import importlib.metadata, sys
try:
    print(importlib.metadata.version(sys.argv[1]))
except importlib.metadata.PackageNotFoundError:
    print(sys.argv[2])
EOF
}

WANTED=(
    "keras==$(version keras 3.15.1)"
    "namex==$(version namex 0.1.0)"
    "optree==$(version optree 0.20.0)"
    "keras-hub==$(version keras-hub 0.32.0)"
    "kagglehub==$(version kagglehub 1.0.2)"
    "kagglesdk==$(version kagglesdk 0.1.28)"
)

# .whl/ must not be committed: ignore it in this clone.
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF "/.whl/" "$exclude" 2>/dev/null || echo "/.whl/" >>"$exclude"

mkdir -p .whl
for spec in "${WANTED[@]}"; do  # one version of each: two stop the whole install there
    name="${spec%%==*}"
    rm -f .whl/"${name//-/_}"-*.whl
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WANTED[@]}"

echo "wheels in .whl/ (install: benchmarks/gpu/run.sh does it):"
ls -l .whl/*.whl | awk '{printf "  %-60s %8.2f MiB\n", $NF, $5 / 1048576}'
du -sh .whl | awk '{print "total " $1}'
