import atexit
import gc
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Under pytest-xdist, each worker gets its share of the cores for OpenMP (PyTorch's kernels, and the transformers
# references that tests and benchmark scripts run): N workers each spinning up a thread per core oversubscribe the
# machine, which made the PyTorch pass three times slower on 2 cores.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("OMP_NUM_THREADS", _share)
    # TensorFlow's own intra-op pool likewise (its threads spin while they wait for work): about a tenth off
    # TensorFlow-heavy test files on 2 cores. The commands and scripts that tests start inherit it.
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", _share)
# XLA compiles the test run's many small programs (TensorFlow's jit-compiled steps and exports, JAX's operations) with
# its LLVM back end at -O0: the same HLO programs, compiled faster (a quarter off XLA-heavy test files, a sixth off
# JAX's compile of one operation); the tests' models are too small for the generated code's speed to matter. The
# commands and scripts that tests start inherit it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
# What the commands keep between runs (`serve`'s compilation cache) goes to a directory of the test run, not the
# user's cache.
os.environ["XDG_CACHE_HOME"] = _CACHE = tempfile.mkdtemp(prefix="keras-transformer-tests-cache-")
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Each test starts from float32, a fixed seed and a fresh Keras name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Python's cyclic garbage collector, kept to what each test leaves behind.

    A worker's heap grows to millions of tracked objects (TensorFlow graphs, Keras models, imported modules), and
    every full collection walks all of them: about a seventh of a worker's time went to collections that found
    little. After each test, its garbage is collected and the survivors are frozen (left out of later collections);
    when the next test is in another file, after that file's fixtures are torn down, everything is unfrozen and
    collected once, so nothing a file released stays in memory."""
    yield
    if nextitem is None or nextitem.path != item.path:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


# The directories whose tests use keras.ops / Keras APIs only: they run on every Keras backend. Everything else
# (tf.data pipelines, tokenizers, export, the CLI) is TensorFlow's by design and runs in the TensorFlow pass only.
BACKEND_AGNOSTIC = ("tests/layers/", "tests/models/", "tests/decoding/", "tests/backends/", "tests/tasks/")


def pytest_ignore_collect(collection_path, config):
    """Under `KERAS_BACKEND=jax` or `torch`, the test files outside the backend-agnostic directories are not even
    imported (their imports, TensorFlow's export and serving stacks among them, cost each worker seconds)."""
    if keras.backend.backend() == "tensorflow" or not (collection_path.name.startswith("test_")
                                                       and collection_path.suffix == ".py"):
        return None
    path = os.path.relpath(str(collection_path), config.rootpath).replace(os.sep, "/")
    return None if path.startswith(BACKEND_AGNOSTIC) else True


def pytest_collection_modifyitems(config, items):
    """Under `KERAS_BACKEND=jax` or `torch`, keep only the backend-agnostic tests, and of a parametrized one its
    first case (the TensorFlow pass runs every case; the other cases vary the inputs, not the backend's code path),
    unless it is marked `every_case` (dtypes, policies, compiled decoders). The others are deselected, not
    skipped, so the summary counts only what ran on that backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    keep, drop, seen = [], [], set()
    for item in items:
        path = os.path.relpath(str(item.fspath), config.rootpath).replace(os.sep, "/")
        agnostic = path.startswith(BACKEND_AGNOSTIC) and item.get_closest_marker("tensorflow_only") is None
        case = (path, getattr(item, "originalname", item.name))
        first = case not in seen or item.get_closest_marker("every_case") is not None
        (keep if agnostic and first else drop).append(item)
        seen.add(case)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    return f"Keras backend: {keras.backend.backend()}"


def pytest_terminal_summary(terminalreporter):
    """One line that names the backend the run used (CI's log shows how many tests ran on each)."""
    stats = terminalreporter.stats
    # (Deselected tests are not counted here: under pytest-xdist the workers deselect, out of this process' view.)
    counts = ", ".join(f"{len(stats.get(key, []))} {key}" for key in ("passed", "failed", "skipped"))
    terminalreporter.write_line(f"Keras backend {keras.backend.backend()}: {counts}")
