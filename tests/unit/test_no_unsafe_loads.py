"""Bytes from outside (the Hub, its CAS, another rank, a file) are parsed as data: nothing in
the package unpickles, unmarshals or ``torch.load``s them without ``weights_only=True`` (nor
exchanges them with torch.distributed's object collectives, which unpickle what another rank
sent), except where this file's allow-list says why.

A scan of the package's source (ast, so a comment or a docstring naming a call does not
count, and an alias does not hide one): a new ``pickle.loads``, ``Unpickler``,
``torch.load`` without ``weights_only=True``, ``marshal.loads``, a non-safe ``yaml.load``
... fails here until it is removed or its entry, with its reason, is added below.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ckpt_action"

_ALWAYS = {f"{m}.{n}" for m in ("pickle", "_pickle", "cPickle", "dill", "cloudpickle")
           for n in ("load", "loads", "Unpickler")}
_ALWAYS |= {"marshal.load", "marshal.loads", "shelve.open", "pandas.read_pickle", "joblib.load",
            "yaml.unsafe_load", "yaml.unsafe_load_all", "yaml.full_load", "yaml.full_load_all",
            "jsonpickle.decode", "torch.serialization.load"}
# torch.distributed's object collectives pickle on one rank and unpickle on the others: what
# a rank (or anything that reaches the job's network) sends runs on every rank that receives it.
_ALWAYS |= {f"{m}.{n}" for m in ("torch.distributed", "torch.distributed.distributed_c10d")
            for n in ("broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
                      "recv_object_list", "send_object_list", "_tensor_to_object")}
_SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}

ALLOWED: dict[tuple[str, str], str] = {
    ("ckpt_action/checkpoint/dcpmeta.py", "pickle.Unpickler"):
        "DCP's .metadata is a pickle by DCP's design; MetadataUnpickler's find_class answers only from"
        " the exact (module, name) table metadata_classes() and refuses persistent ids (the DCP reader"
        " and promote --as-model's consolidation both read .metadata through it)",
}
"""(file, call) -> why it is safe there. Every entry must still be used: a stale one fails."""


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


class _Scan:
    """Every reference to an unsafe loader in one module, as ``module.name``, with its line."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> the dotted name it stands for
        self.found: list[tuple[int, str]] = []
        self.calls: dict[int, ast.Call] = {}  # id(func node) -> the call it is the function of

    def imported(self, node: ast.Import | ast.ImportFrom) -> None:
        for a in node.names:
            if isinstance(node, ast.ImportFrom):
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}" if node.module else a.name
            else:
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def check(self, node: ast.Name | ast.Attribute) -> None:
        name = self._dotted(node)
        if name is None:
            return
        call = self.calls.get(id(node))
        unsafe = name in _ALWAYS
        if name == "torch.load":
            unsafe = call is None or not _is_const(_kwarg(call, "weights_only"), True)
        elif name in ("yaml.load", "yaml.load_all"):
            loader = _kwarg(call, "Loader") if call is not None else None
            loader_name = self._dotted(loader) if loader is not None else None
            unsafe = loader_name is None or loader_name.rsplit(".", 1)[-1] not in _SAFE_LOADERS
        elif name == "numpy.load":
            unsafe = call is None or not (_kwarg(call, "allow_pickle") is None
                                          or _is_const(_kwarg(call, "allow_pickle"), False))
        if unsafe:
            self.found.append((node.lineno, name))


def unsafe_uses(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    scan = _Scan()
    # Calls first, so a reference knows the call it is the function of; imports anywhere count.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            scan.calls[id(node.func)] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            scan.imported(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            scan.check(node)
    return sorted(set(scan.found))


def test_the_scan_sees_each_unsafe_form_and_passes_the_safe_ones() -> None:
    def names(src: str) -> list[str]:
        return [n for _line, n in unsafe_uses(src)]

    assert names("import pickle\npickle.loads(b'')") == ["pickle.loads"]
    assert names("import pickle as p\nclass U(p.Unpickler): pass") == ["pickle.Unpickler"]
    assert names("from pickle import loads as l\nl(b'')") == ["pickle.loads"]
    assert names("import marshal\nmarshal.loads(b'')") == ["marshal.loads"]
    assert names("import torch.distributed as dist\ndist.broadcast_object_list(box, src=0)") == [
        "torch.distributed.broadcast_object_list"]
    assert names("import torch.distributed as dist\ndist.all_gather_object(out, mine)") == [
        "torch.distributed.all_gather_object"]
    assert names("import torch\ntorch.load(f)") == ["torch.load"]
    assert names("import torch\ntorch.load(f, weights_only=False)") == ["torch.load"]
    assert names("from torch import load\nload(f, weights_only=flag)") == ["torch.load"]
    assert names("import torch\nfn = torch.load") == ["torch.load"]
    assert names("import torch\ntorch.load(f, map_location='cpu', weights_only=True)") == []
    assert names("import yaml\nyaml.load(s)") == ["yaml.load"]
    assert names("import yaml\nyaml.load(s, Loader=yaml.Loader)") == ["yaml.load"]
    assert names("import yaml\nyaml.load(s, Loader=yaml.SafeLoader)\nyaml.safe_load(s)") == []
    assert names("import numpy as np\nnp.load(f, allow_pickle=True)\nnp.load(f)") == ["numpy.load"]
    assert names("# pickle.loads(data)\n'''torch.load(f)'''\nimport json\njson.loads(s)") == []


def test_no_unsafe_load_of_bytes_outside_the_allow_list() -> None:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, name in unsafe_uses(path.read_text()):
            found.setdefault((rel, name), []).append(line)
    unexplained = [f"{rel}:{lines[0]}: {name}" for (rel, name), lines in sorted(found.items())
                   if (rel, name) not in ALLOWED]
    assert not unexplained, ("bytes from outside must be parsed as data, never unpickled or torch.load()ed"
                             " without weights_only=True; remove these, or add each to ALLOWED with why it is"
                             " safe there:\n" + "\n".join(unexplained))
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED names uses that are gone: drop them: {stale}"
