#!/usr/bin/env python3
"""Shared dependency versions live in the root [workspace.dependencies].

    .ci/wsdeps.py           list dependencies with a version in two or more crates
    .ci/wsdeps.py --check   fail if there is one (run by .ci/run)
    .ci/wsdeps.py --write   move each such version to [workspace.dependencies]
                            (members keep their own features)

Also checks that every member inherits the workspace lints
(`[lints] workspace = true`), except the crates allowed unsafe code
(UNSAFE_OK), which must declare `unsafe_code = "deny"` themselves and allow
it only where they call libc.
"""
import glob
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# agent, store, roster call libc; transport registers its Unix listeners
# with tokio (AsyncFd::register); transport and model also in tests and
# benches (getuid, kill, a counting allocator).
UNSAFE_OK = {"agent", "store", "roster", "transport", "model"}
SECTIONS = ("dependencies", "dev-dependencies", "build-dependencies")


def members():
    for f in sorted(glob.glob(str(ROOT / "crates/*/Cargo.toml"))):
        yield Path(f), tomllib.loads(Path(f).read_text())


def shared():
    uses = {}
    for path, t in members():
        for sec in SECTIONS:
            for name, spec in t.get(sec, {}).items():
                if isinstance(spec, dict) and spec.get("workspace"):
                    continue
                uses.setdefault(name, []).append((path, sec, spec))
    return {n: u for n, u in uses.items() if len({str(p) for p, _, _ in u}) >= 2}


def lint_problems():
    out = []
    for path, t in members():
        crate = path.parent.name
        lints = t.get("lints", {})
        if crate in UNSAFE_OK:
            if lints.get("rust", {}).get("unsafe_code") != "deny":
                out.append(f"{path.relative_to(ROOT)}: needs [lints.rust] unsafe_code = \"deny\"")
        elif lints.get("workspace") is not True:
            out.append(f"{path.relative_to(ROOT)}: needs [lints] workspace = true")
    return out


def ws_entry(name, uses):
    versions = set()
    nodefault = False
    path = None
    for _, _, spec in uses:
        if isinstance(spec, str):
            versions.add(spec)
        else:
            if "version" in spec:
                versions.add(spec["version"])
            if "path" in spec:
                path = spec["path"]
            if spec.get("default-features") is False:
                nodefault = True
    if path is not None:
        return f'{name} = {{ path = "crates/{Path(path).name}" }}'
    if len(versions) != 1:
        raise SystemExit(f"wsdeps: {name} has several versions {sorted(versions)}: pick one by hand")
    v = versions.pop()
    extra = ", default-features = false" if nodefault else ""
    return f'{name} = {{ version = "{v}"{extra} }}'


def member_line(name, spec):
    if isinstance(spec, str):
        return f"{name}.workspace = true"
    keep = []
    if "features" in spec:
        keep.append("features = [" + ", ".join(f'"{f}"' for f in spec["features"]) + "]")
    if spec.get("optional"):
        keep.append("optional = true")
    if not keep:
        return f"{name}.workspace = true"
    return f"{name} = {{ workspace = true, " + ", ".join(keep) + " }"


def write(sh):
    root = ROOT / "Cargo.toml"
    text = root.read_text()
    head, sep, rest = text.partition("[workspace.dependencies]\n")
    body, nxt, tail = rest.partition("\n[")
    have = {l.split("=")[0].strip().split(".")[0] for l in body.splitlines() if "=" in l}
    add = [ws_entry(n, u) for n, u in sorted(sh.items()) if n not in have]
    body = body.rstrip("\n") + "\n" + "".join(a + "\n" for a in add)
    root.write_text(head + sep + body + nxt + tail)
    for name, uses in sh.items():
        for path, sec, spec in uses:
            lines = path.read_text().split("\n")
            pat = re.compile(rf"^{re.escape(name)}\s*=")
            current = None
            for i, l in enumerate(lines):
                m = re.match(r"^\[([^\]]+)\]\s*$", l)
                if m:
                    current = m.group(1)
                elif current == sec and pat.match(l):
                    lines[i] = member_line(name, spec)
            path.write_text("\n".join(lines))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    sh = shared()
    if mode == "--write":
        write(sh)
        return
    for n, u in sorted(sh.items()):
        print(f"wsdeps: {n} is versioned in " + ", ".join(sorted({p.parent.name for p, _, _ in u})),
              file=sys.stderr)
    lp = lint_problems()
    for l in lp:
        print(f"wsdeps: {l}", file=sys.stderr)
    if mode == "--check":
        if sh or lp:
            print("wsdeps: FAILED (run .ci/wsdeps.py --write for the versions)", file=sys.stderr)
            sys.exit(1)
        print("wsdeps: ok (shared versions in [workspace.dependencies], lints inherited)")


if __name__ == "__main__":
    main()
