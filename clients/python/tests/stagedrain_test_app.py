"""The Celery app both sides of the tests load: the test process stages its tasks
(task_cls StagedTask), and `celery -A stagedrain_test_app worker` runs them.

Each run of t.record / t.routed is recorded atomically in Redis:
RPUSH t:ran <JSON {id, args, kwargs, shape, queue, eta, ran_at}> and HINCRBY t:runs <id> 1.
"""
import json
import os
import time

import redis
from celery import Celery

BROKER = os.environ["TEST_REDIS_URL"]

app = Celery("stagedrain_test_app", broker=BROKER, task_cls="stagedrain.celery:StagedTask")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_routes={"t.routed": {"queue": "routed"}},
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_redis = None


def shape(v):
    """v with the type of every scalar spelled out: 1e16 and 10000000000000000 are
    == in Python, but a task receiving one is not receiving the other."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [shape(x) for x in v]
    if v is None or isinstance(v, str):
        return v
    return [type(v).__name__, repr(v)]


def _record(request, args, kwargs):
    global _redis
    if _redis is None:
        _redis = redis.Redis.from_url(BROKER)
    run = {
        "id": request.id,
        "args": list(args),
        "kwargs": kwargs,
        "shape": shape([list(args), kwargs]),
        "queue": request.delivery_info.get("routing_key"),
        "eta": request.eta,
        "ran_at": time.time(),
    }
    pipe = _redis.pipeline(transaction=True)
    pipe.rpush("t:ran", json.dumps(run))
    pipe.hincrby("t:runs", request.id, 1)
    pipe.execute()


@app.task(name="t.record", bind=True)
def record(self, *args, **kwargs):
    _record(self.request, args, kwargs)


@app.task(name="t.routed", bind=True)
def routed(self, *args, **kwargs):
    _record(self.request, args, kwargs)


@app.task(name="t.flaky", bind=True)
def flaky(self, *args):
    """Fails its first attempt: the worker stages the retry (same task id) through StagedTask."""
    _record(self.request, args, {"retries": self.request.retries})
    if self.request.retries == 0:
        raise self.retry(countdown=0.5, max_retries=1)


@app.task(name="t.add")
def add(x, y):
    return x + y
