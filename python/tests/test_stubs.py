"""python/cgad/_cgad.pyi and _numerics.pyi describe the compiled modules: the same public names, each function, method
and property with the module's parameter names and defaults (read from pybind11's signature line, the first line of each
docstring), and the package's public Python functions and cgad.torch's public classes' methods are annotated
throughout. These run under both interpreters; mypy itself runs in the pinned environment only (test_typing.py)."""
import ast
import inspect
import pathlib

import pytest

import cgad
import cgad.bench
import cgad.differential
import cgad.numerics
import cgad.torch
from cgad import _cgad, _numerics

MODULES = {"_cgad": _cgad, "_numerics": _numerics}


def _stub(name):
    return ast.parse((pathlib.Path(cgad.__file__).parent / f"{name}.pyi").read_text())


def _public(names):
    return {n for n in names if not n.startswith("_")}


def _stub_definitions(body):
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = node
    return out


def _split_top_level(text):
    """The parameters of a signature line, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _module_parameters(obj):
    """(name, has default) of each parameter in pybind11's signature line, self left out."""
    line = obj.__doc__.splitlines()[0]
    inside = line[line.index("(") + 1:line.rindex(")")]
    params = [(p.split(":")[0].strip(), "=" in p) for p in _split_top_level(inside)]
    return [p for p in params if p[0] != "self"]


def _stub_parameters(node):
    args = node.args.args
    defaults = [False] * (len(args) - len(node.args.defaults)) + [True] * len(node.args.defaults)
    return [(a.arg, d) for a, d in zip(args, defaults) if a.arg != "self"]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_stub_names_are_the_module_names(module):
    stub = _stub_definitions(_stub(module).body)
    assert _public(stub) | {"__version__"} == _public(dir(MODULES[module])) | {"__version__"}
    assert ("__version__" in stub) == (module == "_cgad")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_stub_functions_have_the_module_parameters(module):
    for name, node in _stub_definitions(_stub(module).body).items():
        if isinstance(node, ast.FunctionDef):
            assert _stub_parameters(node) == _module_parameters(getattr(MODULES[module], name)), name


@pytest.mark.parametrize("module", sorted(MODULES))
def test_stub_classes_have_the_module_methods_properties_and_parameters(module):
    for name, node in _stub_definitions(_stub(module).body).items():
        if not isinstance(node, ast.ClassDef) or name == "InputError":
            continue
        cls = getattr(MODULES[module], name)
        members = _stub_definitions(node.body)
        assert _public(members) == _public(vars(cls)), name
        init = members["__init__"]
        assert _stub_parameters(init) == _module_parameters(cls.__init__), f"{name}.__init__"
        for member, stub_node in members.items():
            attr = vars(cls).get(member)
            is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in stub_node.decorator_list)
            assert is_property == isinstance(attr, property), f"{name}.{member}"
            if not is_property and member != "__init__":
                assert _stub_parameters(stub_node) == _module_parameters(attr), f"{name}.{member}"


def test_input_error_is_a_value_error_in_stub_and_module():
    node = _stub_definitions(_stub("_cgad").body)["InputError"]
    assert [b.id for b in node.bases] == ["ValueError"] and issubclass(_cgad.InputError, ValueError)


def test_public_python_functions_are_annotated():
    for module in (cgad.numerics, cgad.differential):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__ or name.startswith("_"):
                continue
            sig = inspect.signature(fn)
            missing = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty]
            assert not missing and sig.return_annotation is not inspect.Signature.empty, (name, missing)
    for name in cgad.bench.__all__:  # re-exported from the compiled module, typed by the stub
        assert name in _stub_definitions(_stub("_numerics").body), name


def _unannotated(fn):
    """The parameters of ``fn`` without an annotation (self and cls aside), and "return" if it has none."""
    sig = inspect.signature(fn)
    missing = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty and
               p not in ("self", "cls")]
    return missing + (["return"] if sig.return_annotation is inspect.Signature.empty else [])


def test_public_classes_methods_are_annotated():
    """Every public method, constructor and property of cgad.torch's public classes (the ones a user calls:
    step, state_dict, load_state_dict, metrics, ...), wherever in the class's cgad bases it is defined."""
    classes = [getattr(cgad.torch, name) for name in cgad.torch.__all__]
    classes = [c for c in classes if inspect.isclass(c)]
    checked = 0
    for cls in classes:
        for base in cls.__mro__:
            if not base.__module__.startswith("cgad"):
                continue
            for name, member in vars(base).items():
                if name.startswith("_") and name != "__init__":
                    continue
                fn = member.fget if isinstance(member, property) else member
                if not inspect.isfunction(fn):
                    continue
                assert not _unannotated(fn), (f"{cls.__name__}.{name}", _unannotated(fn))
                checked += 1
    assert checked > 50, checked  # the optimizers' and Gated's methods were found
