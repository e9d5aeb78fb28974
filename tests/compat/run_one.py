"""Runs one client's scenarios against one running broker and prints a JSON
line per scenario:

    python3 tests/compat/run_one.py BOOTSTRAP CLIENT [SCENARIO...]

{"client": ..., "scenario": ..., "result": "pass"|"fail"|"n/a",
 "seconds": ..., "error": ...}. Exits 0 whatever the results (the matrix
decides what a failure means)."""

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenarios  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bootstrap, client = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3:] or [s for s, _ in scenarios.SCENARIOS]
    for s in wanted:
        t0 = time.time()
        line = {"client": client, "scenario": s}
        try:
            note = scenarios.run(client, s, bootstrap)
            line["result"] = "pass"
            if note:
                line["note"] = note
        except scenarios.Unsupported as e:
            line["result"] = "n/a"
            line["error"] = str(e)
        except Exception as e:  # a client's own exception types vary: report them all
            line["result"] = "fail"
            line["error"] = f"{type(e).__name__}: {scenarios.describe_error(e)}"
            if os.environ.get("COMPAT_TRACE"):
                traceback.print_exc()
        line["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
