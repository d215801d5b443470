#!/usr/bin/python3
"""Check a chart's merged values (JSON) against its values.schema.json, as Helm does before it
renders (helm pkg/chartutil ValidateAgainstSchema; JSON Schema draft 7).

Usage: check-values.py SCHEMA.json VALUES.json
Exit 0 when the values conform; 1 with one line per error on stderr
("values: <path>: <reason>"); 2 when python3-jsonschema (Debian) is missing or a file is
unreadable.
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("check-values.py: python3-jsonschema is not installed (scripts/deps.sh pkg)", file=sys.stderr)
    sys.exit(2)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            schema = json.load(f)
        with open(argv[2]) as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check-values.py: {e}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft7Validator(schema)
    errs = sorted(validator.iter_errors(values), key=lambda e: [str(p) for p in e.absolute_path])
    for e in errs:
        where = ".".join(str(p) for p in e.absolute_path) or "(top level)"
        print(f"values: {where}: {e.message}", file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
