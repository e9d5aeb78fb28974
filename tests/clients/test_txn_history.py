"""The transaction history checker (txn_history.py), short: three writers
and a consume-transform-produce copier for 40 seconds on three agents,
with an agent killed (SIGKILL) every 12 seconds (the run goes on past
40 seconds until two kills have happened). The long run is
`python3 tests/clients/txn_history.py --seconds 300`."""

import json

from txn_history import run


def test_transactions_through_agent_kills_leave_a_clean_history(tmp_path):
    out = tmp_path / "history.json"
    summary = run(seconds=40, seed=11, writers=3, partitions=4, kill_every=12, out=str(out),
                  min_faults=2)
    print(json.dumps(summary, indent=2))
    assert summary["kills"] >= 2, summary
    assert summary["transactions"].get("committed", 0) >= 20, summary
    assert summary["transactions"].get("aborted", 0) >= 5, summary
    assert summary["anomaly_count"] == 0, summary["anomalies"]
