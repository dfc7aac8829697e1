"""The shape of the house: import circles, back-arrows, private cross-package imports and file sizes.

    python tools/house.py            # a report of the package under ./keras_transformer
    python tools/house.py --root DIR # of another checkout (for before/after figures)

Layers, lowest first (a module may import its own layer and those below; data flows one way up the list):

    0  atomic, validation, scoring, extras leaf helpers (no package imports)
    1  layers                             keras.ops only
    2  data                               text, tokenizer, tf.data
    3  models                             the model object
    4  decoding                           samplers and the translator
    5  runs                               the run directory
    5.5 importers                         other toolkits' checkpoints -> a run directory
    5.7 tasks                             keras-hub's classes over a run (a preset is one of export's formats)
    6  training, export                   what is built on a run (export: the writers of every format)
    6.5 translators                       the clients of every artifact, and load_translator over them
    7  quickstart, cli                    the front

Every import of the package counts, at module level or inside a function (a lazy import is still an arrow).
The package's own `__init__` files (lazy re-exports) are not counted as importers.
"""

import argparse
import ast
import os
import sys

LAYERS = {
    "atomic": 0, "validation": 0, "scoring": 0, "extras": 0, "lazy": 0,
    "layers": 1,
    "data": 2,
    "models": 3,
    "decoding": 4,
    "runs": 5,
    "importers": 5.5,
    "tasks": 5.7,
    "training": 6, "export": 6,
    "translators": 6.5,
    "quickstart": 7,
    "serving": 7.5,
    "cli": 8,
}


def modules(root):
    package = os.path.join(root, "keras_transformer")
    for folder, _, names in os.walk(package):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                yield dotted.removesuffix(".__init__"), path


def imports(path, module):
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("keras_transformer"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = module.split(".")[: -node.level]
                base = ".".join(parts + ([base] if base else []))
            if base.startswith("keras_transformer"):
                for alias in node.names:
                    found.add(f"{base}.{alias.name}")
    return found


def layer_of(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def analyse(root):
    known = dict(modules(root))
    graph = {}
    for module, path in known.items():
        if path.endswith("__init__.py"):
            continue
        targets = set()
        for name in imports(path, module):
            # `from keras_transformer.x import y`: y may be a module or a name in x.
            target = name if name in known else name.rsplit(".", 1)[0]
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != module and target != "keras_transformer":
                targets.add((target, name))
        graph[module] = targets
    back, private = [], []
    for module, targets in graph.items():
        for target, name in targets:
            source_layer, target_layer = layer_of(module), layer_of(target)
            if target_layer is None or source_layer is None:
                continue
            if LAYERS.get(target_layer, 99) > LAYERS.get(source_layer, 99):
                back.append(f"{module} -> {target}")
            elif source_layer != target_layer and LAYERS.get(target_layer) == LAYERS.get(source_layer) == 6:
                back.append(f"{module} -> {target} (sideways: training and export stand on runs alone)")
            last = name.split(".")[-1]
            if source_layer != target_layer and (last.startswith("_") or any(p.startswith("_") and p != "__init__"
                                                                               for p in target.split(".")[1:])):
                private.append(f"{module} -> {name}")
    edges = {m: {t for t, _ in ts if not known[t].endswith("__init__.py")} for m, ts in graph.items()}
    circles = _cycles(edges)
    sizes = sorted(((sum(1 for _ in open(p, encoding="utf-8")), m) for m, p in known.items()), reverse=True)
    return {"circles": circles, "back_arrows": sorted(back), "private": sorted(private), "sizes": sizes}


def _cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args(argv)
    report = analyse(args.root)
    print(f"import circles: {len(report['circles'])}")
    for circle in report["circles"]:
        print("   ", " <-> ".join(circle))
    print(f"back-arrows (a module importing a higher or sideways layer): {len(report['back_arrows'])}")
    for arrow in report["back_arrows"]:
        print("   ", arrow)
    print(f"private imports across packages: {len(report['private'])}")
    for arrow in report["private"]:
        print("   ", arrow)
    print("largest files: " + ", ".join(f"{m} {n}" for n, m in report["sizes"][:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
