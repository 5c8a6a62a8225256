"""Write plain data (dicts, lists, strings, numbers, booleans, None) as block-style YAML.

The workspace's YAML files (server config, environment config, Gym manifest) are built as
data and written here, so no template can leave a value unquoted or a key misspelt. Strings are
written as JSON strings, which YAML reads back exactly (quotes, colons, `${...}` included).
"""

from __future__ import annotations

from typing import Any

import orjson


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _lines(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError("YAML keys must be strings")
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{key}:")
                out += _lines(item, indent + 1)
            else:
                out.append(f"{pad}{key}: {_empty(item) if isinstance(item, (dict, list)) else _scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _lines(item, indent + 1)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out += nested[1:]
            else:
                out.append(f"{pad}- {_empty(item) if isinstance(item, (dict, list)) else _scalar(item)}")
    else:
        out.append(pad + _scalar(value))
    return out


def _empty(value: dict | list) -> str:
    return "{}" if isinstance(value, dict) else "[]"


def dump_yaml(doc: dict[str, Any], *, comment: str = "") -> str:
    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines()) if comment else ""
    return head + "\n".join(_lines(doc, 0)) + "\n"
