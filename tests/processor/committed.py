"""The state a processor committed, read from its `_checkpoints/` objects:
the latest delta `<epoch>.json`, the base it names (`<epoch>.base.json`)
and the deltas between them; an object of the old layout (a whole
checkpoint) stands alone. Returns a dict with `epoch`, `offsets`, `files`
and `late_files` (every committed data file), or None."""

import json
import re
import time

DELTA = re.compile(r"^(\d{20})\.json$")


def latest(list_names, read):
    """`list_names()`: the object names under `_checkpoints/`; `read(name)`:
    one object's bytes. A running processor may delete old chains while
    this reads: the read starts again then."""
    for attempt in range(10):
        try:
            return _latest(list_names(), read)
        except Exception:
            if attempt == 9:
                raise
            time.sleep(0.2)


def delta_names(names):
    """The names of the deltas (one per committed checkpoint), oldest first."""
    return sorted(n for n in names if DELTA.match(n))


def _latest(names, read):
    deltas = delta_names(names)
    if not deltas:
        return None
    head = json.loads(read(deltas[-1]))
    if "base" not in head:
        return head
    state = json.loads(read(f"{head['base']:020}.base.json"))
    for epoch in range(head["base"] + 1, head["epoch"] + 1):
        d = head if epoch == head["epoch"] else json.loads(read(f"{epoch:020}.json"))
        state["files"] += d["files"]
        state["late_files"] += d["late_files"]
    state["epoch"] = head["epoch"]
    state["offsets"] = head["offsets"]
    return state


def latest_in_folder(folder):
    """[`latest`] of a `_checkpoints` folder on local disk."""
    import os

    def names():
        return os.listdir(folder) if os.path.isdir(folder) else []

    def read(name):
        with open(os.path.join(folder, name), "rb") as f:
            return f.read()

    return latest(names, read)
