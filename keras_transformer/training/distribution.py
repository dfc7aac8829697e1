"""Where training runs: one device, several local devices (tf.distribute), or several hosts (Keras + JAX).

This is the one module that knows the engines; the model and the data pipeline take a strategy-free shape.

* `mirrored`: `tf.distribute.MirroredStrategy` over the local GPUs (the first `devices` of them), or over
  `devices` logical CPU devices on a machine without GPUs (so that it can be tested anywhere). The model is built
  and compiled in the strategy's scope; each global batch is split across the replicas.
* `multi-host`: the Keras distribution API on the JAX backend (`keras.distribution.DataParallel` over every
  device of every process, after `jax.distributed.initialize`). Every process runs the same input pipeline and
  keeps its own rows of each global batch (`shard`); JAX's collectives (gloo on CPU, NCCL on GPU) average the
  gradients. `tf.distribute.MultiWorkerMirroredStrategy` is not used: with Keras 3 `fit()` it fails on our stack
  (docs/scaling.md has the evidence).
"""

import contextlib
import dataclasses
import os
import socket
import time
import warnings

from keras_transformer.extras import check_installed

MODES = ("mirrored", "multi-host")


class DistributionError(ValueError):
    """A distribution setting is wrong or the cluster cannot be formed; the message says which and why."""


@dataclasses.dataclass
class DistributionConfig:
    """How to distribute training (the `--distribute` flags).

    Args:
        mode: `None` (one device), `"mirrored"` or `"multi-host"`.
        devices: `mirrored`: the number of local devices (GPUs, or logical CPU devices without GPUs).
        coordinator: `multi-host`: `HOST:PORT` of process 0, which every process reaches.
        num_processes: `multi-host`: processes in the run.
        process_id: `multi-host`: this process, `0 <= process_id < num_processes`.
        timeout: seconds to wait for the other processes before giving up.
    """

    mode: str | None = None
    devices: int | None = None
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    timeout: float = 300.0

    def validate(self):
        """Raises `DistributionError` naming the first wrong setting (before any work starts)."""
        if self.mode is not None and self.mode not in MODES:
            raise DistributionError(f"--distribute {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.devices is not None and self.devices < 1:
            raise DistributionError(f"--devices {self.devices}: expected a number of devices >= 1")
        if self.devices is not None and self.mode != "mirrored":
            raise DistributionError("--devices goes with --distribute mirrored")
        multi = (self.coordinator, self.num_processes, self.process_id)
        if self.mode != "multi-host":
            if any(value is not None for value in multi):
                raise DistributionError("--coordinator, --num-processes and --process-id go with "
                                        "--distribute multi-host")
            return self
        if self.coordinator is None or self.num_processes is None or self.process_id is None:
            raise DistributionError("--distribute multi-host needs --coordinator HOST:PORT, --num-processes N and "
                                    "--process-id I")
        host, _, port = self.coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise DistributionError(f"--coordinator {self.coordinator!r}: expected HOST:PORT, e.g. 10.0.0.1:12345")
        if self.num_processes < 1:
            raise DistributionError(f"--num-processes {self.num_processes}: expected a number >= 1")
        if not 0 <= self.process_id < self.num_processes:
            raise DistributionError(f"--process-id {self.process_id}: expected 0 <= I < --num-processes "
                                    f"({self.num_processes})")
        if self.timeout <= 0:
            raise DistributionError(f"--coordinator-timeout {self.timeout}: expected seconds > 0")
        return self


@dataclasses.dataclass
class Placement:
    """What the trainer needs to know of the distribution it runs under.

    Attributes:
        scope: a context manager to build and compile the model in.
        is_chief: whether this process writes the run directory (process 0, or the only one).
        shard: `(process_id, num_processes)`: this process's rows of each global batch; `None` for all rows.
        replicas: devices that share each global batch.
        description: one line for the user.
        jit_compile: whether the train step may be XLA-compiled under this distribution (`mirrored`: no). The
            batches keep the shapes the run's `jit_compile` setting gives them either way, so a distributed run
            sees the batches of a one-device run with the same flags.
    """

    scope: object
    is_chief: bool = True
    shard: tuple | None = None
    replicas: int = 1
    description: str = "one device"
    jit_compile: bool = True


def setup_distribution(config):
    """Prepares the engine for `config` and returns a `Placement`. Call it before TensorFlow runs any op.

    Example:

    >>> placement = setup_distribution(DistributionConfig())
    >>> placement.is_chief, placement.shard
    (True, None)
    """
    config = (config or DistributionConfig()).validate()
    if config.mode is None:
        return Placement(scope=contextlib.nullcontext)
    if config.mode == "mirrored":
        return _mirrored(config.devices)
    return _multi_host(config)


def _mirrored(devices):
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        count = devices or len(gpus)
        if count > len(gpus):
            raise DistributionError(f"--devices {count}: this machine has {len(gpus)} GPUs")
        names = [f"/gpu:{i}" for i in range(count)]
    else:
        count = devices or 1
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
        except RuntimeError:
            if len(tf.config.list_logical_devices("CPU")) < count:
                raise DistributionError(
                    "--devices: TensorFlow already started with fewer CPU devices; set up the distribution before "
                    "running anything else in this process") from None
        names = [f"/cpu:{i}" for i in range(count)]
    strategy = tf.distribute.MirroredStrategy(devices=names)
    kind = "GPUs" if gpus else "logical CPU devices"
    return Placement(scope=strategy.scope, replicas=count, jit_compile=False,
                     description=f"tf.distribute.MirroredStrategy over {count} {kind}")


class DistributionWarning(UserWarning):
    """A setting changed to one the distribution supports (printed as one `note:` line by the CLI)."""


def check_mirrored_jit_compile(asked):
    """Checks the `jit_compile` setting (`None` when left unset) of a `mirrored` run before any work starts.

    Under `mirrored` the train step runs without XLA (`Placement.jit_compile`), as Keras itself chooses under
    `tf.distribute`: an XLA-compiled step reads the replicas' variables from one device (XLA's known issue
    "tf.Variable on a different device"), so TensorFlow stops at the first step. Left unset, this warns with a
    `DistributionWarning` (the batches keep the shapes of a run with XLA); asked for, it is refused.

    Raises:
        DistributionError: `asked` is True.
    """
    if asked:
        raise DistributionError(
            "--jit-compile with --distribute mirrored: XLA-compiled steps cannot read variables mirrored on other "
            "devices (tf.distribute runs without XLA); drop --jit-compile, or train compiled on JAX with "
            "--distribute multi-host")
    if asked is None:
        warnings.warn("--distribute mirrored trains without XLA (the train step is not compiled): XLA-compiled "
                      "steps cannot read variables mirrored on other devices", DistributionWarning, stacklevel=3)


def wait_for_coordinator(address, timeout, clock=time.monotonic):
    """Waits until something listens at `HOST:PORT`, or raises `DistributionError` after `timeout` seconds."""
    host, _, port = address.rpartition(":")
    deadline = clock() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(5.0, timeout)):
                return
        except OSError as error:
            if clock() >= deadline:
                raise DistributionError(
                    f"--coordinator {address}: nobody answered within {timeout:g} s ({error.strerror or error}); "
                    "start process 0 (--process-id 0) on that host and port") from None
            time.sleep(0.5)


def _multi_host(config):
    import keras

    if keras.backend.backend() != "jax":
        raise DistributionError(
            "--distribute multi-host trains with the Keras distribution API on the JAX backend: set "
            f"KERAS_BACKEND=jax before Keras is imported (this process uses {keras.backend.backend()!r})")
    import jax

    if config.process_id != 0:
        # jax.distributed aborts the process with a stack trace when it cannot reach the coordinator: check first.
        wait_for_coordinator(config.coordinator, config.timeout)
    # Collectives between the CPU devices of several processes (what the tests here run on) go through gloo; GPUs
    # use NCCL whatever this says. (Asking jax which backend it has would start it, and initialize() must come first.)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=config.coordinator, num_processes=config.num_processes,
                               process_id=config.process_id, initialization_timeout=int(config.timeout))
    devices = jax.devices()
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False))
    return Placement(
        scope=contextlib.nullcontext,
        is_chief=config.process_id == 0,
        shard=(config.process_id, config.num_processes) if config.num_processes > 1 else None,
        replicas=len(devices),
        description=(f"keras.distribution.DataParallel on JAX over {len(devices)} devices in "
                     f"{config.num_processes} processes (this is process {config.process_id})"),
    )


def set_backend_for(mode):
    """Sets `KERAS_BACKEND` for a distribution mode before Keras is imported (the CLI calls it first).

    `multi-host` needs the JAX backend; other modes keep the environment's choice (TensorFlow by default).
    """
    if mode == "multi-host":
        check_installed("jax", "jax", "--distribute multi-host (the Keras distribution API on JAX)")
        os.environ["KERAS_BACKEND"] = "jax"
