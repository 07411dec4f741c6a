"""python-rq unchanged against a server (argv: port): enqueue two jobs, run a burst worker
(it registers itself, SUBSCRIBEs to its command channel, moves jobs between registries, keeps
results in a stream), then read the result and the failure registry. Prints PASS."""

import sys

from redis import Redis
from rq import Queue, Worker

r = Redis(host="127.0.0.1", port=int(sys.argv[1]), db=2)
r.flushdb()
q = Queue("default", connection=r)
ok, bad = q.enqueue("jobs.add", 2, 3), q.enqueue("jobs.boom")
Worker([q], connection=r, name="w1").work(burst=True)
ok.refresh()
bad.refresh()
assert ok.get_status() == "finished" and ok.return_value() == 5, ok.get_status()
assert ok.latest_result().type.name == "SUCCESSFUL"
assert bad.get_status() == "failed" and q.failed_job_registry.get_job_ids() == [bad.id]
assert "ValueError: boom" in bad.latest_result().exc_string
assert q.count == 0 and r.scard("rq:workers") == 0
print("PASS")
