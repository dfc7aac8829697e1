#!/usr/bin/env bash
# What a GPU machine runs, from the repository root: installs the wheels carried in .whl/ (if any, and if Keras
# is not installed) into ${SITE:-/tmp/site}, then runs the benchmark kit on the JAX backend. Extra arguments go
# to kit.py (e.g. --tiny).
#
#   bash benchmarks/gpu/run.sh                 # full size; results in ${OUT:-benchmarks/gpu/out}
#   OUT=/some/dir bash benchmarks/gpu/run.sh --tiny
set -uo pipefail

cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}

# Install the carried wheels unless Keras and keras-hub are installed already (KIT_INSTALL_WHEELS=1: always).
have_keras() {
    "$PYTHON" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("keras") and u.find_spec("keras_hub")))'
}
if compgen -G ".whl/*.whl" >/dev/null && { [ "${KIT_INSTALL_WHEELS:-0}" = 1 ] || ! have_keras; }; then
    echo "run.sh: installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into $SITE"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        .whl/*.whl || { echo "run.sh: installing the wheels in .whl/ failed" >&2; exit 1; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KERAS_BACKEND=jax
export PYTHONUNBUFFERED=1
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}

out="${OUT:-benchmarks/gpu/out}"
"$PYTHON" benchmarks/gpu/kit.py --out "$out" "$@"
rc=$?
if [ $rc -ne 0 ] && [ -f "$out/gpu_kit.md" ]; then
    echo "run.sh: kit.py exited with $rc; what it wrote:"
    cat "$out/gpu_kit.md"
fi
exit $rc
