"""gratingsim: electromagnetic diffraction by periodic gratings, from Python.

    import gratingsim
    case = gratingsim.load("configs/default.yaml")      # or gratingsim.from_dict({...}), same schema
    results = gratingsim.solve(case, backend="cpu-fftw")  # every sweep point, without holding the GIL
    psi = results["results/psi_deg"]                      # NumPy, [Nw, Nθ, Nφ]: io/SCHEMA.md's names
    results.write("default.h5")                           # the file `gratingsim run` writes

Errors in a case raise gratingsim.CaseError (a ValueError) with file, line, column and message; for a
dict also path, the key path of the offending value ("layers[0].thickness"). Other failures raise
gratingsim.Error.
"""
import math
import numbers
import os
import re

from ._core import (  # noqa: F401  (the public names of the package)
    Case,
    CaseError,
    Ellipse,
    Error,
    IncidenceSweep,
    Lattice,
    Layer,
    LayerList,
    Material,
    Numerics,
    Point,
    Polygon,
    Raster,
    Rectangle,
    Results,
    SlopedPolygon,
    Structure,
    TaperedEllipse,
    TrapezoidLine,
    info,
    load,
    parse_case,
    solve,
)

__all__ = [
    "Case", "CaseError", "Ellipse", "Error", "IncidenceSweep", "Lattice", "Layer", "LayerList", "Material",
    "Numerics", "Point", "Polygon", "Raster", "Rectangle", "Results", "SlopedPolygon", "Structure",
    "TaperedEllipse", "TrapezoidLine", "case_yaml", "from_dict", "info", "load", "parse_case", "solve",
]

# A string written without quotes when it is a plain word YAML reads back as that same string (not a
# number, bool or null); anything else is double-quoted (JSON's escapes are YAML's).
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.+\-]*")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
            return value
        import json
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"a case holds mappings, lists, strings, numbers, booleans and None, not {type(value).__name__}")


def _emit(value, indent, path, lines):
    """Appends block-style YAML for `value` to `lines` as (text, key path) pairs, one value per line."""
    pad = " " * indent
    if hasattr(value, "tolist"):  # NumPy arrays and scalars
        value = value.tolist()
    if isinstance(value, dict):
        items = [(str(key), item) for key, item in value.items()]
        entries = [(key, f"{path}.{key}" if path else key, item) for key, item in items]
        prefix = lambda key: f"{pad}{key if _PLAIN.fullmatch(key) else _scalar(key)}:"  # noqa: E731
    else:
        entries = [(None, f"{path}[{i}]", item) for i, item in enumerate(value)]
        prefix = lambda key: f"{pad}-"  # noqa: E731
    for key, where, item in entries:
        if hasattr(item, "tolist"):
            item = item.tolist()
        if isinstance(item, (dict, list, tuple)) and len(item) > 0:
            lines.append((prefix(key), where))
            _emit(item, indent + 2, where, lines)
        elif isinstance(item, dict):
            lines.append((f"{prefix(key)} {{}}", where))
        elif isinstance(item, (list, tuple)):
            lines.append((f"{prefix(key)} []", where))
        else:
            lines.append((f"{prefix(key)} {_scalar(item)}", where))


def case_yaml(case):
    """The YAML text of a case given as a dict, and per line of it the key path of its value."""
    if not isinstance(case, dict):
        raise TypeError(f"a case is a dict (the YAML file's mapping), not {type(case).__name__}")
    lines = []
    _emit(case, 0, "", lines)
    return "".join(text + "\n" for text, _ in lines), [where for _, where in lines]


def from_dict(case, name="<dict>", base_directory="."):
    """A case from a dict with the YAML file's schema (io/SCHEMA.md), read and checked by the same
    reader as a file: the dict is written as YAML, one value per line. A CaseError's line and column
    are in that text (Case.yaml holds it); its `path` names the key ("numerics.harmonics",
    "layers[0].shapes[1].width") and its message starts with it. Material tables are found relative
    to base_directory."""
    text, paths = case_yaml(case)
    try:
        return parse_case(text, name, os.fspath(base_directory))
    except CaseError as error:
        where = paths[error.line - 1] if 1 <= error.line <= len(paths) else None
        if where is None:
            raise
        # The reader's messages name the key they are about; a message that does not gets it in front.
        said = error.message if error.message.startswith(where) else f"{where}: {error.message}"
        located = CaseError(f"{name}: error: {said}")
        located.file, located.line, located.column = error.file, error.line, error.column
        located.message, located.path = error.message, where
        raise located from None
