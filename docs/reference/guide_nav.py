"""mkdocs hook (mkdocs.yml `hooks:`): the nav's Guide section follows the pages that exist in docs/.

The guide pages are written and renamed independently of the site's configuration. This hook keeps
mkdocs.yml's order for the Guide entries whose page exists, drops those whose page does not (yet), and
appends, in name order, every other page of docs/ that no nav entry names (outside docs/reference/, whose
pages are listed explicitly: a missing or unlisted reference page still fails `mkdocs build --strict`).

It also writes the Guide's list of links into the home page, in place of the line `<!-- guide-pages -->`.
"""

import os

GUIDE = "Guide"
PLACEHOLDER = "<!-- guide-pages -->"
_guide = []  # the Guide section of the last configuration read


def _paths(entries):
    """Every page path named in a nav list (entries are `path`, `{title: path}` or `{title: [entries]}`)."""
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _paths(value)
        elif isinstance(value, str):
            yield value


def _exists(docs_dir, entry):
    value = next(iter(entry.values())) if isinstance(entry, dict) else entry
    return not isinstance(value, str) or "://" in value or os.path.isfile(os.path.join(docs_dir, value))


def _pages(docs_dir):
    """The Markdown pages under docs_dir, as nav paths (forward slashes), in name order."""
    found = []
    for root, dirs, files in os.walk(docs_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")) and d != "reference")
        relative = os.path.relpath(root, docs_dir)
        for name in files:
            if name.endswith(".md") and not name.startswith((".", "_")):
                found.append(name if relative == "." else f"{relative}/{name}".replace(os.sep, "/"))
    return sorted(found, key=lambda path: (path.count("/"), path))


def on_config(config):
    nav = config.get("nav")
    if not nav:
        return config
    for section in nav:
        if isinstance(section, dict) and isinstance(section.get(GUIDE), list):
            docs_dir = config["docs_dir"]
            guide = [entry for entry in section[GUIDE] if _exists(docs_dir, entry)]
            named = set(_paths(nav))
            guide += [path for path in _pages(docs_dir) if path not in named]
            section[GUIDE] = guide
            _guide[:] = [(entry, docs_dir) for entry in guide]
            break
    return config


def _title(entry, docs_dir):
    """A Guide entry's title: its nav title, else the page's first `# ` heading, else its file name."""
    if isinstance(entry, dict):
        return next(iter(entry))
    with open(os.path.join(docs_dir, entry), encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                return line[2:].strip()
    return os.path.splitext(os.path.basename(entry))[0]


def guide_links():
    """The Guide section as a Markdown list of links (paths relative to docs/, as the home page sees them)."""
    lines = []
    for entry, docs_dir in _guide:
        target = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(target, str):
            lines.append(f"- [{_title(entry, docs_dir)}]({target})")
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "index.md" and PLACEHOLDER in markdown:
        return markdown.replace(PLACEHOLDER, guide_links())
    return markdown
