#!/usr/bin/env python3
"""Removes stale builds of this workspace's own crates from the shared
target directory, so that it does not grow without bound.

Every change to Cargo.lock, to a crate's features or to the compiler flags
gives this workspace's libraries, binaries and test binaries a new hash, and
cargo keeps the old ones: a target directory shared across many runs (as
scripts/test.sh shares $CARGO_TARGET_DIR) gathers tens of gigabytes of them,
and a full disk fails the next run. For each artifact name of this
workspace, in each `deps` directory, this keeps every build written in the
last KEEP_DAYS days and always the newest one; older ones go. Third-party
crates are left alone (they change only with Cargo.lock, and two versions of
one crate share a name). Prints what it freed.

Usage: scripts/ci/prune-target.py [TARGET_DIR]   (default $CARGO_TARGET_DIR)
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

KEEP_DAYS = 2
ARTIFACT = re.compile(r"^(lib)?(?P<stem>[A-Za-z0-9_]+)-(?P<hash>[0-9a-f]{16})(\..*)?$")


def workspace_names():
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
        check=True, capture_output=True, text=True).stdout)
    names = set()
    for package in meta["packages"]:
        names.add(package["name"].replace("-", "_"))
        for target in package["targets"]:
            names.add(target["name"].replace("-", "_"))
    return names


def prune(deps, names, now):
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for entry in os.scandir(deps):
        m = ARTIFACT.match(entry.name)
        if m and m["stem"] in names:
            groups[m["stem"]][m["hash"]].append(entry)
    freed = 0
    for builds in groups.values():
        if len(builds) < 2:
            continue
        newest = {h: max(e.stat(follow_symlinks=False).st_mtime for e in es) for h, es in builds.items()}
        keep = max(newest, key=newest.get)
        for h, entries in builds.items():
            if h == keep or now - newest[h] < KEEP_DAYS * 86400:
                continue
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    freed += sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(e.path) for f in fs)
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    freed += e.stat(follow_symlinks=False).st_size
                    os.remove(e.path)
    return freed


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CARGO_TARGET_DIR", "target")
    if not os.path.isdir(target):
        return
    names = workspace_names()
    now = time.time()
    total = 0
    for root, dirs, _ in os.walk(target):
        if os.path.basename(root) == "deps":
            dirs.clear()
            total += prune(root, names, now)
        elif os.path.basename(root) in ("incremental", "build", ".fingerprint", "corpus"):
            dirs.clear()
    print(f"pruned {total / 1e9:.1f} GB of stale workspace builds from {target}")


if __name__ == "__main__":
    main()
