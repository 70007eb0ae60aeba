# Loads each YAML file named in the listing (argv[1], one path a line) with
# PyYAML's safe loader, its Python parser and libyaml's, and parses each Python
# file (a path ending in .py) with Python's own; then prints, as JSON, by path
# and loader, the documents, the strings of the Python literals, or the error. A key that is not a string, and a
# value JSON has no type for, become a string naming it that begins with NUL.
import ast
import json
import math
import sys

import yaml


def canon(v):
    if isinstance(v, dict):
        return {k if isinstance(k, str) else "\x00key %s %r" % (type(k).__name__, k): canon(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canon(x) for x in v]
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    return "\x00%s %r" % (type(v).__name__, v)


def main():
    with open(sys.argv[1]) as f:
        paths = [line for line in f.read().split("\n") if line]
    out = {}
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        results = {}
        if path.endswith(".py"):
            try:
                tree = ast.parse(data)
                results["python"] = {"strings": [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]}
            except Exception as e:
                results["python"] = {"error": "%s: %s" % (type(e).__name__, e)}
            out[path] = results
            continue
        for name, loader in (("pyyaml", yaml.SafeLoader), ("libyaml", yaml.CSafeLoader)):
            try:
                results[name] = {"docs": [canon(d) for d in yaml.load_all(data, Loader=loader) if d is not None]}
            except Exception as e:
                results[name] = {"error": "%s: %s" % (type(e).__name__, e)}
        out[path] = results
    json.dump(out, sys.stdout)


main()
