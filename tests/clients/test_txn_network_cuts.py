"""The transaction history checker (txn_history.py) with network cuts
instead of kills: three agents in network namespaces of their own
(netns.py, as test_network_partition.py), three transactional writers and
a consume-transform-produce copier for 40 seconds, and every 10 seconds
one agent (often a partition leader, and so likely a coordinator too) cut
off from the others and from its clients for 2 to 5 seconds, then
reconnected. It must lose its leaderships and coordinator slots, and the
history must come out clean: no aborted record read, no committed one
lost or read twice, every transaction all or nothing, and the copier's
offsets moving only with its transactions."""

import json

import pytest

import netns
import txn_history
from cluster import VOTERS

pytestmark = pytest.mark.skipif(netns.available() is not None,
                                reason=str(netns.available()))


class Agents:
    """What the checker asks of a cluster: each agent's bootstrap."""

    def __init__(self, agents):
        self.agents = agents

    def agent(self, n):
        return self.agents[n]


def test_transactions_through_network_cuts_leave_a_clean_history(tmp_path):
    with netns.cluster(VOTERS) as (net, agents):
        out = tmp_path / "history.json"
        summary = txn_history.run(seconds=40, seed=23, writers=3, partitions=4, kill_every=10,
                                  out=str(out), cluster=Agents(agents),
                                  chaos=txn_history.cutter(net, agents), min_faults=2)
    print(json.dumps(summary, indent=2))
    assert summary["cuts"] >= 2, summary
    assert summary["transactions"].get("committed", 0) >= 20, summary
    assert summary["anomaly_count"] == 0, summary["anomalies"]
