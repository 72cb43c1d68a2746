"""The row for one task message Celery published: the contract's columns, built from publish()'s arguments."""
import json
from datetime import datetime

from celery.utils.time import maybe_make_aware
from kombu import serialization
from kombu.utils.json import dumps as kombu_json

from stagedrain.errors import NotStageable


def _queue(exchange, routing_key, declare):
    """The Redis list kombu's Redis transport would push to.

    Celery sends direct routes through the anonymous exchange, whose routing
    key is the queue's name. A named exchange is resolved through its bindings
    at publish time; only a direct one bound to a queue Celery declared for
    this message (with that routing key) names one list we can know here.
    """
    name = getattr(exchange, "name", exchange)
    if not name:
        return routing_key
    for q in declare or ():
        ex = getattr(q, "exchange", None)
        if ex is not None and ex.name == name and ex.type == "direct" and q.routing_key == routing_key:
            return q.name
    raise NotStageable(
        "cannot stage a task routed through exchange %r with routing key %r: only a queue name (or a direct "
        "exchange's queue in task_queues) names the list the relay pushes to" % (name, routing_key)
    )


def _json(text, what):
    """text, as kombu's json wrote it, for a json column; NotStageable if it holds NaN or Infinity.

    Python's json writes those for float("nan") and float("inf"), but they are
    not JSON: Postgres' json refuses them, and the failed INSERT would abort the
    caller's transaction. Everything else is stored as written.
    """
    if "NaN" in text or "Infinity" in text:  # else no such token, and no parse

        def refuse(token):
            raise NotStageable("%s: %s is not a JSON number, and Postgres' json refuses it" % (what, token))

        json.loads(text, parse_constant=refuse)
    return text


def _run_at(eta, tz):
    """headers["eta"] as an aware datetime; a naive one is in the app's timezone (UTC by default), as the worker reads it."""
    if not eta:
        return None
    when = datetime.fromisoformat(eta)
    return maybe_make_aware(when, tz) if when.tzinfo is None else when


def build_row(body, headers, properties, *, exchange, routing_key, declare, serializer, compression, tz):
    """The staged_jobs values for a protocol-2 task message, or NotStageable / kombu's EncodeError."""
    if not isinstance(body, tuple) or "task" not in headers or "id" not in headers:
        raise NotStageable("only Celery's task protocol 2 can be staged (task_protocol = 2, the default)")
    if serializer != "json":
        raise NotStageable("the relay writes JSON messages: set task_serializer = 'json' (this task uses %r)" % serializer)
    if compression:
        raise NotStageable("the relay writes uncompressed messages: unset task_compression (got %r)" % compression)
    # Celery's producer would serialize the body here too: an argument json
    # cannot encode raises kombu's EncodeError before anything is written.
    _, _, args = serialization.dumps(body, "json")
    queue = _queue(exchange, routing_key, declare)
    if not queue or "\x00" in queue:
        raise NotStageable("queue name %r cannot be a Redis list the relay pushes to" % (queue,))
    options = {"serialized": True, "headers": headers}
    if properties.get("priority") is not None:
        options["priority"] = properties["priority"]
    if properties.get("reply_to"):
        options["reply_to"] = properties["reply_to"]
    return {
        "queue": queue,
        "job_class": headers["task"],
        "args": _json(args, "task arguments"),
        "run_at": _run_at(headers.get("eta"), tz),
        "options": _json(kombu_json(options), "task headers"),
        "uuid": headers["id"],
    }
