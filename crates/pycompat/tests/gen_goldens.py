#!/usr/bin/env python3
"""Generate tests/goldens.json: what CPython prints, for tests/goldens.rs.

Run from anywhere with CPython 3.11 (the version the crate documents):

    python3 crates/pycompat/tests/gen_goldens.py

Every case is computed here by CPython itself; the Rust test feeds the same
inputs to the emulations and compares.  Parsers are described as data
(PARSERS below) so that both sides build them from one description.

argparse cases where CPython 3.11 fails a valid command line and the crate
keeps the later releases' behaviour (see src/argparse.rs) are left out
here and tested by unit tests instead: `--opt=--`, `-d -- x`, an unknown
letter in a flag cluster, `=` or `-` after a clustered flag.
"""

import argparse
import contextlib
import datetime
import io
import json
import os
import struct
import sys
import textwrap
import time

if sys.version_info[:2] != (3, 11):
    sys.exit(f"need CPython 3.11, this is {sys.version.split()[0]}")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens.json")


# --------------------------------------------------------------------- argparse


class FluxFormatter(argparse.HelpFormatter):
    """Help formatter with flux's layout: `-s, --long=ARG`, a lone long
    option indented by four spaces, help at most at column 40."""

    def __init__(self, prog):
        super().__init__(prog, max_help_position=40)

    def _format_action_invocation(self, action):
        if not action.option_strings:
            return super()._format_action_invocation(action)
        text = ", ".join(action.option_strings)
        if len(action.option_strings) == 1 and len(action.option_strings[0]) > 2:
            text = "    " + text
        if action.nargs == 0:
            return text
        default = self._get_default_metavar_for_optional(action)
        return text + "=" + self._format_args(action, default)


class RawFluxFormatter(FluxFormatter, argparse.RawDescriptionHelpFormatter):
    pass


class SetUpdate(argparse.Action):
    """Split the value on commas and add each part once, in order."""

    def __call__(self, parser, namespace, values, option_string=None):
        cur = list(getattr(namespace, self.dest) or [])
        for part in values.split(","):
            if part not in cur:
                cur.append(part)
        setattr(namespace, self.dest, cur)


def add_args(parser, spec):
    groups = [parser.add_mutually_exclusive_group() for _ in spec.get("groups", [])]
    owner = {d: groups[i] for i, g in enumerate(spec.get("groups", [])) for d in g}
    for a in spec.get("args", []):
        kind = a["kind"]
        if kind == "subparsers":
            sp = parser.add_subparsers(
                title=a["title"], description=a["description"], dest=a["dest"]
            )
            sp.required = True
            for sub in a["subs"]:
                q = sp.add_parser(sub["name"], formatter_class=formatter(sub))
                add_args(q, sub)
            continue
        kw = {}
        help_ = a.get("help")
        kw["help"] = argparse.SUPPRESS if help_ is None else help_
        if a.get("metavar") is not None:
            kw["metavar"] = a["metavar"]
        if a.get("choices") is not None:
            kw["choices"] = a["choices"]
        if a.get("type") == "int":
            kw["type"] = int
        names = a.get("opts", [])
        if kind == "flag":
            kw["action"] = "store_true"
        elif kind == "count":
            kw.update(action="count", default=0)
        elif kind == "append":
            kw.update(action="append", default=[])
        elif kind == "set_update":
            kw.update(action=SetUpdate, default=[])
        elif kind == "opt":
            if a.get("const") is not None:
                kw.update(nargs="?", const=a["const"])
            if a.get("default") is not None:
                kw["default"] = a["default"]
        elif kind == "pos_optional":
            kw["nargs"] = "?"
        elif kind == "remainder":
            kw["nargs"] = argparse.REMAINDER
        elif kind == "pos_any":
            kw["nargs"] = "*"
            kw["default"] = []
        elif kind != "pos":
            raise ValueError(kind)
        container = owner.get(a["dest"], parser)
        if names:
            container.add_argument(*names, dest=a["dest"], **kw)
        else:
            container.add_argument(a["dest"], **kw)


def formatter(spec):
    return RawFluxFormatter if spec.get("epilog") else FluxFormatter


def build(spec):
    p = argparse.ArgumentParser(
        prog=spec["prog"], formatter_class=formatter(spec), epilog=spec.get("epilog")
    )
    add_args(p, spec)
    return p


def run(spec, argv, columns):
    os.environ["COLUMNS"] = str(columns)
    parser = build(spec)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
    except SystemExit as e:
        if e.code == 0:
            return {"kind": "help", "text": out.getvalue()}
        return {"kind": "error", "text": err.getvalue()}
    return {"kind": "ok", "ns": vars(ns)}


LONG = (
    "Fallback to treating jobids that are not found as hostnames (for hostnames "
    "that are also valid jobids e.g. f1, fuzz100, etc), with a human-readable "
    "explanation that wraps"
)

HOSTS = {
    "prog": "tool hosts",
    "epilog": "SOURCES may include:\nstdin, '-'   read hosts on stdin\n\nMore text.\n",
    "args": [
        {"kind": "flag", "dest": "expand", "opts": ["-e", "--expand"], "help": "Expand"},
        {"kind": "opt", "dest": "delimiter", "opts": ["-d", "--delimiter"],
         "help": "Set output delimiter (default=' ')", "metavar": "S"},
        {"kind": "flag", "dest": "count", "opts": ["-c", "--count"], "help": "Count"},
        {"kind": "opt", "dest": "nth", "opts": ["-n", "--nth"],
         "help": "Output hosts at indices in idset IDS (-IDS to index from end)",
         "metavar": "[-]IDS"},
        {"kind": "opt", "dest": "limit", "opts": ["-L", "--limit"],
         "help": "Output at most N hosts (-N for the last N hosts)", "metavar": "N",
         "type": "int"},
        {"kind": "flag", "dest": "sort", "opts": ["-S", "--sort"], "help": "Sort"},
        {"kind": "flag", "dest": "union", "opts": ["-u", "--union", "--unique"],
         "help": LONG},
        {"kind": "flag", "dest": "intersect", "opts": ["-i", "--intersect"],
         "help": "Intersection"},
        {"kind": "flag", "dest": "minus", "opts": ["-m", "--minus"], "help": "Minus"},
        {"kind": "flag", "dest": "xor", "opts": ["-X", "--xor"], "help": "Xor"},
        {"kind": "flag", "dest": "quiet", "opts": ["-q", "--quiet"], "help": "Quiet"},
        {"kind": "pos_any", "dest": "sources", "metavar": "SOURCES",
         "help": "(optional) One or more hostlist sources"},
    ],
    "groups": [["expand", "count"], ["intersect", "minus", "xor"]],
}

RES = {
    "prog": "tool res",
    "args": [
        {"kind": "opt", "dest": "uri", "opts": ["--uri"], "help": "service URI",
         "metavar": "URI"},
        {"kind": "subparsers", "title": "subcommands", "description": "",
         "dest": "subcommand", "subs": [
             {"name": "drain", "args": [
                 {"kind": "count", "dest": "force", "opts": ["-f", "--force"],
                  "help": "Force drain of nodes already drained"},
                 {"kind": "flag", "dest": "update", "opts": ["-u", "--update"],
                  "help": "Update only"},
                 {"kind": "opt", "dest": "color", "opts": ["-L", "--color"],
                  "help": "Use color; WHEN can be 'never', 'always', or 'auto'",
                  "metavar": "WHEN", "choices": ["never", "always", "auto"],
                  "const": "always", "default": "auto"},
                 {"kind": "set_update", "dest": "queue", "opts": ["-q", "--queue"],
                  "help": "Filter by queue", "metavar": "QUEUE,..."},
                 {"kind": "opt", "dest": "secret", "opts": ["--secret"], "help": None},
                 {"kind": "pos_optional", "dest": "targets", "help": "IDSET or HOSTLIST"},
                 {"kind": "remainder", "dest": "reason", "help": "Reason"},
             ]},
             {"name": "undrain", "args": [
                 {"kind": "append", "dest": "tag", "opts": ["-t", "--tag"],
                  "help": "Add a tag", "metavar": "T"},
                 {"kind": "pos", "dest": "targets", "help": "IDSET or HOSTLIST"},
                 {"kind": "remainder", "dest": "reason", "help": "Reason"},
             ]},
             {"name": "eventlog", "args": [
                 {"kind": "opt", "dest": "format", "opts": ["-f", "--format"],
                  "help": "Output format", "choices": ["text", "json"],
                  "default": "text"},
                 {"kind": "flag", "dest": "follow", "opts": ["-F", "--follow"],
                  "help": "Follow"},
             ]},
         ]},
    ],
}

PARSERS = {"hosts": HOSTS, "res": RES}

CASES = [
    ("hosts", ["-h"], 80),
    ("hosts", ["--help"], 40),
    ("hosts", ["-h"], 60),
    ("hosts", ["-h"], 120),
    ("hosts", ["-e", "-c", "x"], 80),
    ("hosts", ["-X", "-i"], 80),
    ("hosts", ["-i", "-m", "x"], 50),
    ("hosts", ["--u", "x"], 80),
    ("hosts", ["--un", "x"], 80),
    ("hosts", ["-L", "x", "y"], 80),
    ("hosts", ["-L", " 1_0 "], 80),
    ("hosts", ["-L", "-2", "a"], 80),
    ("hosts", ["a", "-e", "b"], 80),
    ("hosts", ["-z", "a"], 80),
    ("hosts", ["--bogus"], 80),
    ("hosts", ["-n"], 80),
    ("hosts", ["-n", "-1", "a"], 80),
    ("hosts", ["-n", "-1,3", "a"], 80),
    ("hosts", ["-n-1,3", "a"], 80),
    ("hosts", ["--nth=-1,3", "a"], 80),
    ("hosts", ["-qe", "a", "b"], 80),
    ("hosts", ["-Sed,", "a"], 80),
    ("hosts", ["-d=,", "a"], 80),
    ("hosts", ["--del=,", "--exp", "a"], 80),
    ("hosts", ["--expand=1"], 80),
    ("hosts", ["--", "-x", "a"], 80),
    ("hosts", ["-", "x"], 80),
    ("hosts", ["a b", "-c"], 80),
    ("hosts", ["-q", "-x\u00a0"], 80),
    ("hosts", [], 80),
    ("res", ["-h"], 80),
    ("res", ["-h"], 50),
    ("res", [], 80),
    ("res", ["bogus"], 80),
    ("res", ["drain", "-h"], 80),
    ("res", ["drain", "-h"], 45),
    ("res", ["undrain", "--help"], 80),
    ("res", ["eventlog", "-h"], 80),
    ("res", ["drain", "-ff", "1", "a", "b", "-u"], 80),
    ("res", ["drain"], 80),
    ("res", ["drain", "-L"], 80),
    ("res", ["drain", "-L", "1"], 80),
    ("res", ["drain", "-L\u00a0"], 80),
    ("res", ["--uri", "x", "drain", "-fuLnever"], 80),
    ("res", ["drain", "--force=2"], 80),
    ("res", ["drain", "-q", "a,b", "-q", "b,c"], 80),
    ("res", ["drain", "-x"], 80),
    ("res", ["drain", "--se", "s", "1"], 80),
    ("res", ["undrain"], 80),
    ("res", ["undrain", "1", "--x"], 80),
    ("res", ["undrain", "-t", "a", "--tag=b", "1"], 80),
    ("res", ["undrain", "--", "--"], 80),
    ("res", ["eventlog", "-f", "xml"], 80),
    ("res", ["eventlog", "--f", "json"], 80),
]


# --------------------------------------------------------------------- the rest

STRINGS = [
    "", "abc", "it's", 'say "hi"', "both ' and \"", "back\\slash",
    "\t\n\r", "\x00\x01\x1f\x7f", "\x80\x9f", "\u00a0", "a\u00a0b", "\u00ad",
    "é", "ƒ", "日本", "\u200b", "\u200e", "\u2028", "\u2029", "\u202e", "\u2060",
    "\ufeff", "\ue000", "\U000f0000", "\U0001f600", "\u3000", "\u2003", "\u1680",
    "\u0301", "e\u0301", "\u00e9\u0301", "\U0001d11e", "\u05d0", "\u0600", "\u061c",
    "\u180e", "\uffff", "\ufffd", "\U000e0001", "\U0010ffff", "\u202f", "\u2065",
    "\ufdd0", "\U0001fffe", "\u0890", "\U00013430",
]

FLOATS = [
    0.0, -0.0, 1.0, -2.5, 0.1, 0.2 + 0.1, 1.0 / 3, 2.0 / 3, 123456.5, 1e15, 1e16,
    1.5e16, 1e22, 1e-4, 1.5e-4, 1e-5, 2.5e-7, 5e-324, 2.2250738585072014e-308,
    1.7976931348623157e308, 1733965155.6272159, 1552593348.073045, 9007199254740993.0,
    float("inf"), float("-inf"), float("nan"),
]

JSON_TEXTS = [
    '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}',
    '[1.0, 0.1, 1e16, 1e-05, -0.0, 123456789012, "x"]',
    '{"s": "tab\\t nl\\n quote\\" bs\\\\ ctl\\u0001 del\\u007f"}',
    '{"u": "\\u00e9 \\u00a0 \\u65e5 \\ud83d\\ude00 \\u2028"}',
    '{"z": 1, "a": 2, "m": {}, "e": []}',
]

# (type, value, spec)
FORMATS = [
    ("str", "abc", ""), ("str", "abc", ">10"), ("str", "abc", "<10"),
    ("str", "abc", "^7"), ("str", "abc", "*^8"), ("str", "abcdef", ".2"),
    ("str", "abcdef", "^9.3"), ("str", "✔", ">5"), ("str", "x", "d"),
    ("str", "x", "=5"), ("str", "x", "+"), ("str", "x", ","), ("str", "x", "#"),
    ("str", "x", "05"), ("str", "x", "<<<"), ("str", "x", ".x"),
    ("int", 42, ""), ("int", 42, "05d"), ("int", -42, "05d"), ("int", 1234567, ","),
    ("int", 1234567, "_"), ("int", 255, "#x"), ("int", 255, "#X"), ("int", 255, "#o"),
    ("int", 255, "#b"), ("int", 255, "_b"), ("int", -5, "+"), ("int", 5, " "),
    ("int", 65, "c"), ("int", 42, "=+8"), ("int", 42, ".2"), ("int", 42, "s"),
    ("int", 42, "e"), ("int", 42, "%"), ("int", 1234, ",x"), ("int", 3, ">5"),
    ("float", 3.14159, ""), ("float", 3.14159, ".2f"), ("float", -3.14159, "+.3f"),
    ("float", 1e20, "g"), ("float", 1e20, ".3g"), ("float", 1e-5, "g"),
    ("float", 0.5, "%"), ("float", 0.5, ".1%"), ("float", 1234.5, ",.1f"),
    ("float", 1234567.891, "_.2f"), ("float", 1.5, ""), ("float", 1e16, ""),
    ("float", 12345.678, "e"), ("float", 12345.678, ".2E"), ("float", 0.0001, ".4g"),
    ("float", 100.0, ".4g"), ("float", 100.0, "#.4g"), ("float", 2.5, ".0f"),
    ("float", 3.5, ".0f"), ("float", float("inf"), "f"), ("float", float("nan"), "F"),
    ("float", -0.0, ".1f"), ("float", -0.0, "z.1f"), ("float", 1.5, "10.3"),
    ("float", 1.5, "d"), ("float", 1.5, "x"), ("float", 1.5, "c"),
    ("float", 12.0, "n"), ("float", 0.000012345, ".3"),
]

# (timestamp, offset seconds, zone name, format, aware)
TIMES = [
    (0, 0, "UTC", "%Y-%m-%d %H:%M:%S", False),
    (1733965155.6272159, 0, "UTC", "%Y-%m-%dT%H:%M:%S.%f", False),
    (1733965155.6272159, -18000, "EST", "%b %d %H:%M %Z%z", True),
    (1733965155.6272159, -18000, "EST", "%b %d %H:%M [%Z%z]", False),
    (1733965155, 19800, "IST", "%a %A %b %B %c", False),
    (1733965155, 19800, "IST", "%x %X %D %T %R %r %p %I %l %k", False),
    (1733965155, 0, "UTC", "%j %U %W %V %G %g %u %w %y %C %e %n%t%%", False),
    (951782400.5, 3600, "CET", "%F %T.%f %s", False),
    (-1, 0, "UTC", "%Y-%m-%d %H:%M:%S %f", False),
    (1e9 + 0.9999995, 0, "UTC", "%S.%f", False),
    (1700000000, 0, "UTC", "%h %E %O %Q", False),
]

TEXTS = [
    ("Display human-readable output now please", 18),
    ("Return only unique hosts in the final hostlist. Without other options, "
     "this is the same as the union of all hostlist args (default mode is append).", 38),
    ("abcdefghijklmnopqrstuvwxyz", 10),
    ("a very-long-hyphenated-compound-word-that-breaks here", 12),
    ("Use color; WHEN can be 'never', 'always', or 'auto' (default: auto)", 20),
    ("x--y --z -w a-b-c ab-cd-ef", 5),
    ("", 10),
]


FORMAT_STRINGS = [
    "", "plain", "{a}", "x{0.state:>10}y", "{{lit}}", "{a!r:^5}", "{a[k].b}", "{a:{b}}",
    "{", "}", "a}b", "{a", "{a!", "{a!r", "{a!rx}", "{a:", "{{{a}}}", "{a{b}", "{:>5}",
    "{a[}", "{!s}", "{0.x!d:%H:%M}",
]

WIDTHS = [
    "", "abc", "\u2714", "\u2717", "\u65e5\u672c", "e\u0301", "\x1b[01;32m", "a\x00b",
    "\u00a0", "\u200b", "\U0001f600", "\uff21", "\u3000", "\u0e01\u0e31",
    "\u1100\u1161", "\u00ad", "\u2028", "\x7f", "\x9f",
]


def bits(v):
    """The IEEE 754 bits of a float, so that JSON carries it exactly."""
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def fmt_case(ty, value, spec):
    try:
        return {"ok": format(value, spec)}
    except (ValueError, TypeError) as e:
        return {"err": str(e)}


def time_case(t, off, name, fmt, aware):
    # the process's zone is the case's zone, as for flux (glibc's %s reads it)
    sign = "-" if off >= 0 else "+"
    h, m = divmod(abs(off) // 60, 60)
    os.environ["TZ"] = f"{name}{sign}{h}:{m:02}"
    time.tzset()
    tz = datetime.timezone(datetime.timedelta(seconds=off), name)
    dt = datetime.datetime.fromtimestamp(t, tz)
    naive = dt.replace(tzinfo=None)
    return {"str": str(naive), "strftime": (dt if aware else naive).strftime(fmt)}


def parse_case(fmt):
    import string
    try:
        return {"ok": [list(t) for t in string.Formatter().parse(fmt)]}
    except ValueError as e:
        return {"err": str(e)}


def wcswidths():
    """wcwidth.wcswidth, which flux uses for `+:` columns (not stdlib: the
    section is left empty when the module is missing)."""
    try:
        import wcwidth
    except ImportError:
        return []
    return [[t, wcwidth.wcswidth(t)] for t in WIDTHS]


def main():
    out = {
        "python": sys.version.split()[0],
        "parsers": PARSERS,
        "argparse": [
            {"parser": p, "argv": argv, "columns": cols, **run(PARSERS[p], argv, cols)}
            for p, argv, cols in CASES
        ],
        "repr": [[s, repr(s), ascii(s), s.isprintable()] for s in STRINGS],
        "float_repr": [[bits(v), repr(v)] for v in FLOATS],
        "json_dumps": [
            [
                t,
                json.dumps(json.loads(t), separators=(",", ":"), ensure_ascii=False),
                json.dumps(json.loads(t), separators=(", ", ": "), ensure_ascii=True),
            ]
            for t in JSON_TEXTS
        ],
        "format": [[ty, str(bits(v)) if ty == "float" else v, spec, fmt_case(ty, v, spec)]
                   for ty, v, spec in FORMATS],
        "time": [[bits(float(t)), off, name, fmt, aware, time_case(t, off, name, fmt, aware)]
                 for t, off, name, fmt, aware in TIMES],
        "textwrap": [[text, width, textwrap.wrap(text, width)] for text, width in TEXTS],
        "wcswidth": wcswidths(),
        "strformat_parse": [[f, parse_case(f)] for f in FORMAT_STRINGS],
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, indent=1, allow_nan=False)
        f.write("\n")


if __name__ == "__main__":
    main()
