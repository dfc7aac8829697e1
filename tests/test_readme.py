import pathlib
import re


def test_readme_layer_example_runs():
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "TransformerDecoder" in b)
    exec(compile(example, "README.md", "exec"), {})


def _readme_commands():
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s(?:#|<|\||>|&)", " " + command)[0].strip()
            if command.startswith("keras-transformer ") and "..." not in command:
                yield command


def test_readme_commands_parse_with_the_cli():
    """Every `keras-transformer` command README shows uses subcommands and flags that exist."""
    import shlex

    from keras_transformer.cli import build_parser

    commands = list(_readme_commands())
    assert any("--distribute mirrored" in c for c in commands) and any("--checkpoint-every" in c for c in commands)
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            raise AssertionError(f"README command does not parse: {command}") from None
