"""`keras-transformer ARGS` in the test's own process: no TensorFlow start-up per command, for the checks of what a
command writes, prints and returns, where a fresh process proves nothing more (tests/test_cli.py checks the
installed console script, tests/test_reliability.py one case through a fresh process)."""

import io
import sys
import types


def cli_here(capsys, *args, stdin=None):
    """Runs the command, with `stdin` (text) as its standard input if given (else the test's own); returns
    `returncode`, `stdout` and `stderr`, as `subprocess.run(..., capture_output=True, text=True)` would."""
    from keras_transformer import cli

    capsys.readouterr()
    before = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    try:
        returncode = cli.main([str(arg) for arg in args])
    finally:
        sys.stdin = before
    captured = capsys.readouterr()
    return types.SimpleNamespace(returncode=returncode, stdout=captured.out, stderr=captured.err)
