"""Celery integration: StagedTask (task_cls) and stage(), which write the message Celery builds to staged_jobs.

    app = Celery("proj", task_cls="stagedrain.celery:StagedTask")

Then task.delay(...) / task.apply_async(...) stage a row in the current
transaction of Django's database connection; the relay (--format celery)
pushes it to Redis once the transaction commits.
"""
from celery import Task, current_app

from stagedrain.producer import StagingProducer


def _django_connection():
    try:
        from django.conf import settings
        from django.db import connection
    except ImportError:
        settings = None
    if settings is None or not settings.configured:
        raise RuntimeError(
            "StagedTask stages through Django's database connection, and Django is not configured: "
            "configure Django, override StagedTask.staging_connection(), or call "
            "stagedrain.celery.stage(..., connection=...)"
        )
    return connection


def _send(app, name, args, kwargs, db_conn, options):
    # A broker connection or producer given by the caller (or by a group,
    # which hands its members one) would publish at once, outside the
    # transaction; the message is staged instead.
    for key in ("producer", "publisher", "connection"):
        options.pop(key, None)
    return app.send_task(name, args, kwargs, producer=StagingProducer(db_conn, app), **options)


def stage(name, args=None, kwargs=None, *, connection, app=None, **options):
    """Stage task `name` through `connection` (psycopg2, or an SQLAlchemy Session/Connection).

    Takes Celery's send_task options (countdown, eta, expires, queue,
    priority, headers, link, ...) and returns the AsyncResult; the task id is
    the one the worker will run under. Like send_task, it ignores
    task_always_eager.
    """
    return _send(app or current_app, name, args, kwargs, connection, dict(options))


class StagedTask(Task):
    """A Task whose apply_async (and so delay, retry, signatures) stages the message instead of publishing it."""

    def staging_connection(self):
        """The DB-API or SQLAlchemy connection to stage through; Django's by default."""
        return _django_connection()

    def apply_async(self, args=None, kwargs=None, task_id=None, producer=None, link=None, link_error=None,
                    shadow=None, **options):
        app = self._get_app()
        if app.conf.task_always_eager:
            # Celery runs it here and now; there is nothing to stage.
            return super().apply_async(args, kwargs, task_id=task_id, producer=producer, link=link,
                                       link_error=link_error, shadow=shadow, **options)
        for key in ("publisher", "connection"):
            options.pop(key, None)
        # Task.apply_async checks the arguments, applies the task's options
        # and routes, then calls send_task with our producer.
        return super().apply_async(args, kwargs, task_id=task_id,
                                   producer=StagingProducer(self.staging_connection(), app),
                                   link=link, link_error=link_error, shadow=shadow, **options)
