"""Checks that the source tree is self-contained: no file refers to a
document outside the repository (the research notes the formats were first
described in) or to an issue number. The project's own statement of the
rules is docs/Formats.md and docs/Numerics.md.

usage: check_self_contained.py ROOT     scan ROOT, list every hit, exit 1 if any
       check_self_contained.py --self-test

Build trees (build/, build-*/, any folder with a CMakeCache.txt), .git,
virtual environments and binary files are skipped. The patterns are
assembled from pieces so that this file does not match itself.
"""
import os
import re
import sys
import tempfile

PATTERNS = [
    ("path outside the repository", re.compile(re.escape("..") + "/" + "shared")),
    ("old spec folder", re.compile("shared" + "/" + "spec")),
    ("old spec document", re.compile("kitchen" + "-" + "numerics")),
    ("old spec document", re.compile("mlir" + "-" + "notes")),
    ("old spec document", re.compile("interop" + r"\.md")),
    # Lower-case: the old spec name; the project's document is Formats.md.
    ("old spec document", re.compile(r"(?<![\w/])" + "formats" + r"\.md")),
    ("issue number", re.compile(r"(?i)\b" + "issue" + r"s?\s*#?\s*\d")),
]

SKIP_DIRS = {".git", ".cache", "__pycache__", "fuzz-out", "node_modules"}


def skipped_dir(path, name):
    if name in SKIP_DIRS or name == "build" or name.startswith("build-"):
        return True
    return (os.path.exists(os.path.join(path, "CMakeCache.txt")) or
            os.path.exists(os.path.join(path, "pyvenv.cfg")))


def scan(root):
    """Returns (files scanned, [(path, line, what, text)])."""
    hits, files = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if not skipped_dir(os.path.join(dirpath, d), d))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            if b"\0" in data[:8192]:
                continue  # binary
            files += 1
            text = data.decode("utf-8", errors="replace")
            for lineno, line in enumerate(text.splitlines(), 1):
                for what, pattern in PATTERNS:
                    if pattern.search(line):
                        hits.append((os.path.relpath(path, root), lineno, what,
                                     line.strip()))
                        break
    return files, hits


def self_test():
    """The checker must find every forbidden form and skip build trees."""
    bad = {
        "a.md": "see " + ".." + "/" + "shared" + "/x",
        "b.h": "// " + "shared" + "/" + "spec" + "/y",
        "c.py": "# " + "kitchen" + "-" + "numerics" + ".md §3",
        "d.td": "mlir" + "-" + "notes" + " say",
        "e.txt": "interop" + ".md",
        "f.cpp": "// (" + "formats" + ".md §4.0)",
        "g.md": "# Fixtures (" + "Issue" + " 3)",
        "h.sh": "# fixed in " + "issue" + " #12",
    }
    clean = {"ok.md": "docs/Formats.md §4.0 and Formats.md §10; no issues here"}
    with tempfile.TemporaryDirectory() as root:
        for name, text in {**bad, **clean}.items():
            with open(os.path.join(root, name), "w") as f:
                f.write("first line\n" + text + "\n")
        for skip in ("build", "build-gcc", ".git"):
            os.makedirs(os.path.join(root, skip))
            with open(os.path.join(root, skip, "x.md"), "w") as f:
                f.write(bad["a.md"] + "\n")
        with open(os.path.join(root, "bin.dat"), "wb") as f:
            f.write(b"\0" + bad["a.md"].encode())
        files, hits = scan(root)
        found = {h[0] for h in hits}
        ok = found == set(bad) and all(h[1] == 2 for h in hits) and \
            files == len(bad) + len(clean)
        print("self-test: %d files, hits in %s" % (files, sorted(found)))
        if not ok:
            print("self-test FAILED: expected hits in exactly %s" % sorted(bad))
            return 1
    print("self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(os.path.join(root, "docs")):
        print("error: %s is not the source tree (no docs/)" % root,
              file=sys.stderr)
        return 2
    files, hits = scan(root)
    for path, lineno, what, text in hits:
        print("%s:%d: %s: %s" % (path, lineno, what, text))
    if hits:
        print("self-contained: %d references outside the repository "
              "(docs/Formats.md and docs/Numerics.md are the project's own "
              "statement of the rules)" % len(hits))
        return 1
    print("self-contained: %d files, no references outside the repository"
          % files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
