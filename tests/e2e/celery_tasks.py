"""A Celery app on the test Redis for tests/check_e2e_celery.c.

As a worker module (celery -A celery_tasks worker): the task "e2e.record"
records each run atomically, RPUSH e2e:celery:ran <JSON {id, args, kwargs,
queue, eta, ran_at}> and HINCRBY e2e:celery:runs <id> 1.

As a script, `celery_tasks.py send QUEUE ARGS KWARGS [PRIORITY ETA_SECONDS
EXPIRES]` publishes one task with Celery's own send_task, for the test to
compare with what the relay wrote.
"""
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone

import redis
from celery import Celery

BROKER = os.environ["CELERY_BROKER_URL"]

app = Celery("celery_tasks", broker=BROKER)
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
# E2E_RECORD_URL: record into that Redis instead of the broker (the routed
# test records every worker's runs in one list).
_redis = redis.Redis.from_url(os.environ.get("E2E_RECORD_URL", BROKER))


@app.task(name="e2e.record", bind=True)
def record(self, *args, **kwargs):
    run = {
        "id": self.request.id,
        "args": list(args),
        "kwargs": kwargs,
        "queue": self.request.delivery_info.get("routing_key"),
        "eta": self.request.eta,
        "ran_at": time.time(),
    }
    if os.environ.get("E2E_SHARD"):
        run["shard"] = os.environ["E2E_SHARD"]
    pipe = _redis.pipeline(transaction=True)
    pipe.rpush("e2e:celery:ran", json.dumps(run))
    pipe.hincrby("e2e:celery:runs", self.request.id, 1)
    pipe.execute()


def send(argv):
    queue, args, kwargs = argv[0], json.loads(argv[1]), json.loads(argv[2])
    options = {}
    if len(argv) > 3:
        options["priority"] = int(argv[3])
        eta = datetime.now(timezone.utc) + timedelta(seconds=float(argv[4]))
        options["eta"] = eta
        options["expires"] = float(argv[5])
    app.send_task("e2e.record", args=args, kwargs=kwargs, queue=queue, **options)


if __name__ == "__main__" and sys.argv[1:2] == ["send"]:
    send(sys.argv[2:])
