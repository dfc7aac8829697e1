"""griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): doctest examples render as code.

The package's docstrings show examples as doctest blocks (`>>> ...` lines and their output, up to a blank
line), often under a prose lead such as "Example (`run_dir` is a run directory):" that no docstring parser
reads as a section. Markdown would render such a block as a nested quotation, and read an output such as
`[1, 1, 1]` as a link reference. This extension fences each doctest block as a `pycon` code block before
the docstring is parsed; the docstrings themselves (and `python -m doctest`) are unchanged.
"""

import griffe

FENCE = "```"


def fence_doctests(text):
    """`text` with each doctest block (a `>>>` line through the next blank line) in a pycon code fence."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not (stripped == ">>>" or stripped.startswith(">>> ")):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        if out and out[-1].strip():
            out.append("")
        out.append(f"{indent}{FENCE}pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}{FENCE}")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctest blocks of every docstring griffe loads."""

    def on_instance(self, *, node, obj, agent, **kwargs):
        docstring = obj.docstring
        if docstring is not None and ">>>" in docstring.value and FENCE not in docstring.value:
            docstring.value = fence_doctests(docstring.value)
