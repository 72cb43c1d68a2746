"""A stand-in for kombu's Producer: Celery's send_task publishes to it, and the message becomes a row."""
from contextlib import nullcontext

from stagedrain import db
from stagedrain.message import build_row


class _NoBroker:
    """send_task wraps publishing in producer.connection._reraise_as_library_errors(),
    which turns broker errors into kombu's; there is no broker here, and the
    database's own errors should reach the caller as they are."""

    def _reraise_as_library_errors(self):
        return nullcontext()


class StagingProducer:
    """Receives the one task message send_task publishes and stages it through db_conn.

    Celery builds everything before publish(): routing (task_routes, queue=),
    headers (before_task_publish receivers included), body, eta, priority.
    """

    # Read by Task.apply_async's eager path when it is handed a producer.
    serializer = None

    def __init__(self, db_conn, app):
        self._db = db_conn
        self._app = app
        self.connection = _NoBroker()
        self.staged = None

    @property
    def channel(self):
        # Only the rpc:// result backend asks, to declare its reply queue.
        raise NotImplementedError(
            "the rpc:// result backend cannot deliver results of staged tasks (nothing publishes them "
            "from this thread); use a backend that stores results by task id, e.g. redis:// or django-db"
        )

    def publish(self, body, routing_key=None, exchange=None, headers=None, declare=None, serializer=None,
                compression=None, retry=None, retry_policy=None, delivery_mode=None, **properties):
        if self.staged is not None:
            # A second publish is the "task-sent" event (task_send_sent_event):
            # the task is not sent yet, the relay sends it after commit.
            return None
        row = build_row(
            body, headers or {}, properties,
            exchange=exchange, routing_key=routing_key, declare=declare,
            serializer=serializer, compression=compression, tz=self._app.timezone,
        )
        db.insert(self._db, row)
        self.staged = row
        return None
