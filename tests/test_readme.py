import pathlib
import re


def test_readme_layer_example_runs():
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "TransformerDecoder" in b)
    exec(compile(example, "README.md", "exec"), {})
