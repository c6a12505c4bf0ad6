"""A small TOML writer for block configs (tables of scalars, arrays of tables)."""

import math


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"config value {v!r}: TOML has no such number here")
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"config value {v!r} of type {type(v).__name__} is not a TOML scalar")


def dumps(table, prefix=""):
    """``table`` (a dict) as TOML text; nested dicts become tables, lists of dicts arrays of tables."""
    lines, nested = [], []
    for key, v in table.items():
        if v is None:
            continue
        if isinstance(v, dict):
            nested.append(("table", key, v))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            nested.append(("array", key, v))
        else:
            lines.append(f"{key} = {_value(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for what, key, v in nested:
        name = f"{prefix}{key}"
        if what == "table":
            out += f"\n[{name}]\n" + dumps(v, name + ".")
        else:
            for item in v:
                out += f"\n[[{name}]]\n" + dumps(item, name + ".")
    return out
