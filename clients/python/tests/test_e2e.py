"""End to end: Django (as the app role) stages through StagedTask / stage(), the real relay
(--format celery) pushes after commit, and a real Celery 5.2 worker runs the tasks. One
worker and one relay serve every case; each case waits for its own
task ids, then for a barrier task staged after them, so a duplicate would have run by then.

The worker runs one task at a time in the order it takes them: one prefork child,
prefetch 1. (The solo pool with prefetch 1 idles between tasks here: kombu's Redis
transport starts its next BRPOP only on a timer, 1 to 10 s later.)"""
import json
import os
import signal
import subprocess
import unittest
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import support  # noqa: F401  (configures Django first)
import psycopg2
import redis
from celery import chain
from django.db import transaction
from kombu.utils.json import dumps as kombu_dumps
from kombu.utils.json import loads as kombu_loads
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from stagedrain.celery import stage
from stagedrain_test_app import app, flaky, record, shape

QUEUES = "celery,order,other,routed"


def _start(name, argv, **kw):
    with open(os.path.join(os.environ["TEST_DIR"], name + ".log"), "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=os.environ["TEST_DIR"], **kw)


def _stop(proc, what):
    """SIGTERM (the relay's and Celery's clean shutdown), then its exit status, within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    assert rc == 0, "%s exited with %s; see its log in %s" % (what, rc, os.environ["TEST_DIR"])


class EndToEndTest(unittest.TestCase):
    relay = None

    @classmethod
    def setUpClass(cls):
        cls.db = support.admin()
        cls.addClassCleanup(cls.db.close)
        support.clear(cls.db)
        cls.redis = redis.Redis.from_url(os.environ["TEST_REDIS_URL"])
        cls.addClassCleanup(cls.redis.close)
        cls.redis.delete("t:ran", "t:runs")
        # Class cleanups run even when setUpClass fails half-way.
        cls.worker = _start("celery-worker", [
            "/usr/bin/python3", "-m", "celery", "-A", "stagedrain_test_worker", "worker", "--pool", "prefork",
            "-c", "1", "--prefetch-multiplier", "1", "-Q", QUEUES, "--without-heartbeat", "--without-gossip",
            "--without-mingle", "--loglevel", "INFO",
        ])
        cls.addClassCleanup(_stop, cls.worker, "the celery worker")
        cls.addClassCleanup(cls.stop_relay)
        cls.start_relay()
        # The worker is up once a first task has run.
        first = record.delay("first")
        support.wait_for("the worker's first task", lambda: cls.redis.hget("t:runs", first.id), timeout=90)

    @classmethod
    def start_relay(cls):
        cls.relay = _start("relay", [
            os.environ["STAGEDRAIN_BIN"], "run", "--pg-url", support.ADMIN_URL,
            "--redis-url", os.environ["TEST_REDIS_URL"], "--format", "celery", "--poll-interval", "50ms",
        ])

    @classmethod
    def stop_relay(cls):
        if cls.relay is not None:
            _stop(cls.relay, "the relay")
            cls.relay = None

    def tearDown(self):
        with self.db.cursor() as cur:
            cur.execute("SELECT count(*), min(reason) FROM staged_jobs_dead")
            dead, reason = cur.fetchone()
        self.assertEqual(dead, 0, "the relay dead-lettered a staged row: %s" % reason)

    # ---- helpers ----

    def runs(self, ids):
        return [int(n) if n is not None else 0 for n in self.redis.hmget("t:runs", list(ids))]

    def ran(self):
        """Every recorded run, in the order the worker ran them."""
        return [json.loads(x) for x in self.redis.lrange("t:ran", 0, -1)]

    def wait_ran(self, ids, timeout=60):
        ids = list(ids)
        support.wait_for("%d tasks to run" % len(ids), lambda: all(self.runs(ids)), timeout=timeout)

    def barrier(self, queue="celery"):
        """Stages and waits for one more task on queue: what the relay pushed before it has run."""
        b = record.apply_async(("barrier",), queue=queue)
        self.wait_ran([b.id])

    def by_id(self):
        return {r["id"]: r for r in self.ran()}

    # ---- cases ----

    def test_committed_tasks_run_once_with_the_arguments_celery_passes(self):
        cases = [
            ((1, -7, 2**63, 2**70, -(2**80)), {}),
            ((0.1, 2.5, -1.25, 1e16, 1e-7, 1.7976931348623157e308, 100.0), {}),
            (("plain", "é日本😀", "it's \"quoted\"\n\ttab", "a\\u0000b", ""), {}),
            (([1, [2, [3]]], {"b": {"c": [None, True]}, "a": 1}), {}),
            ((None, True, False), {"flag": False, "n": None, "list": [1, "x"], "longer_key": 1.5}),
            ((datetime(2024, 2, 3, 4, 5, 6, 789, tzinfo=timezone.utc), datetime(2024, 1, 1, 12, 0)),
             {"d": Decimal("1.10"), "u": uuid.UUID("12345678-1234-5678-1234-567812345678")}),
            ((), {"only": "kwargs"}),
        ]
        with transaction.atomic():
            results = [record.apply_async(a, k) for a, k in cases]
            results.append(record.delay(3, x=4))
        cases.append(((3,), {"x": 4}))
        # The plain stage() paths, committed by their own transactions.
        conn = psycopg2.connect(support.APP_URL)
        with conn:
            results.append(stage("t.record", ["psycopg2", 1.0], {"k": [1]}, connection=conn, app=app))
        conn.close()
        cases.append((("psycopg2", 1.0), {"k": [1]}))
        engine = create_engine(support.APP_URL, future=True)
        with Session(engine) as s, s.begin():
            results.append(stage("t.record", ["sqlalchemy"], connection=s, app=app))
        engine.dispose()
        cases.append((("sqlalchemy",), {}))

        ids = [r.id for r in results]
        self.wait_ran(ids)
        self.barrier()
        self.assertEqual(self.runs(ids), [1] * len(ids))
        runs = self.by_id()
        for r, (args, kwargs) in zip(results, cases):
            # What a worker gets from Celery's own publish: kombu's json, there and back.
            want = kombu_loads(kombu_dumps([list(args), kwargs]))
            self.assertEqual(runs[r.id]["shape"], shape(want), "task %s%r" % (args, kwargs))
            self.assertEqual(runs[r.id]["queue"], "celery")

    def test_key_order_number_spelling_and_nul_arrive_as_kombu_wrote_them(self):
        # The json columns keep kombu's text, and the relay pushes it as it is.
        with transaction.atomic():
            r = record.apply_async(("a\x00b", -0.0, 1e16, {"zeta": 1, "alpha": {"b": 1, "a": 2}}), {"zz": 1, "aa": "\x00"})
        self.wait_ran([r.id])
        got = self.by_id()[r.id]
        self.assertEqual(got["shape"][0][:3], ["a\x00b", ["float", "-0.0"], ["float", "1e+16"]])
        self.assertEqual(list(got["args"][3]), ["zeta", "alpha"])
        self.assertEqual(list(got["args"][3]["alpha"]), ["b", "a"])
        self.assertEqual(list(got["kwargs"].items()), [("zz", 1), ("aa", "\x00")])

    def test_rolled_back_transaction_and_savepoint_never_run(self):
        never, kept = [], []
        try:
            with transaction.atomic():
                never.append(record.delay("rolled back"))
                never.append(record.apply_async(("rolled back", 2), queue="other"))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        with transaction.atomic():
            kept.append(record.delay("kept before"))
            try:
                with transaction.atomic():
                    never.append(record.delay("savepoint"))
                    with transaction.atomic():
                        never.append(record.delay("nested savepoint"))
                    raise RuntimeError("roll back the savepoint")
            except RuntimeError:
                pass
            kept.append(record.delay("kept after"))
        self.wait_ran([r.id for r in kept])
        self.barrier()
        self.barrier("other")
        self.assertEqual(self.runs(r.id for r in kept), [1, 1])
        self.assertEqual(self.runs(r.id for r in never), [0, 0, 0, 0])

    def test_thousand_tasks_in_one_transaction_run_in_staging_order(self):
        with transaction.atomic():
            ids = [record.apply_async((i,), queue="order").id for i in range(1000)]
        self.wait_ran(ids, timeout=90)
        self.barrier("order")
        self.assertEqual(self.runs(ids), [1] * 1000)
        order = [r["args"][0] for r in self.ran() if r["queue"] == "order" and r["args"] != ["barrier"]]
        self.assertEqual(order, list(range(1000)))

    def test_countdown_and_eta_tasks_run_at_their_time_not_before(self):
        eta = datetime.now(timezone.utc) + timedelta(seconds=4)
        with transaction.atomic():
            soon = record.delay("now")
            a = record.apply_async(("countdown",), countdown=3)
            b = record.apply_async(("eta",), eta=eta)
        due_a = datetime.fromisoformat(self.headers_eta(a.id))
        self.wait_ran([soon.id, a.id, b.id])
        runs = self.by_id()
        self.assertGreaterEqual(runs[a.id]["ran_at"], due_a.timestamp())
        self.assertGreaterEqual(runs[b.id]["ran_at"], eta.timestamp())
        self.assertLess(runs[soon.id]["ran_at"], due_a.timestamp())  # the eta tasks held nothing up
        self.barrier()
        self.assertEqual(self.runs([soon.id, a.id, b.id]), [1, 1, 1])

    def headers_eta(self, task_id):
        """The eta Celery wrote for task_id, read in the Redis message or the worker's run."""
        return support.wait_for("the run of %s" % task_id, lambda: self.by_id().get(task_id), timeout=60)["eta"]

    def test_tasks_staged_while_the_relay_is_stopped_run_once_it_starts(self):
        self.stop_relay()
        try:
            with transaction.atomic():
                staged = [record.delay("while stopped", i) for i in range(5)]
            ids = [r.id for r in staged]
            with self.db.cursor() as cur:
                cur.execute("SELECT uuid::text FROM staged_jobs ORDER BY id")
                self.assertEqual([u for (u,) in cur.fetchall()], ids)
            self.assertEqual(self.redis.llen("celery"), 0)
            self.assertEqual(self.runs(ids), [0] * 5)
        finally:
            self.start_relay()
        self.wait_ran(ids)
        self.barrier()
        self.assertEqual(self.runs(ids), [1] * 5)

    def test_worker_stages_retries_callbacks_and_chains(self):
        child, second, third = (str(uuid.uuid4()) for _ in range(3))
        with transaction.atomic():
            linked = record.apply_async(("parent",), link=record.si("child").set(task_id=child))
            retried = flaky.delay("flaky")
            chained = chain(record.si("first"), record.si("second").set(task_id=second),
                            record.si("third").set(task_id=third)).apply_async()
        with self.db.cursor() as cur:
            cur.execute("SELECT count(*) FROM staged_jobs")
            self.assertLessEqual(cur.fetchone()[0], 3)  # the app staged only the first task of each
        self.wait_ran([linked.id, child, second, third, chained.id])
        support.wait_for("the retry", lambda: self.runs([retried.id]) == [2], timeout=60)
        self.barrier()
        self.assertEqual(self.runs([linked.id, child, retried.id, second, third]), [1, 1, 2, 1, 1])
        attempts = [r["kwargs"]["retries"] for r in self.ran() if r["id"] == retried.id]
        self.assertEqual(attempts, [0, 1])
        runs = self.by_id()
        self.assertLess(runs[second]["ran_at"], runs[third]["ran_at"])

    def test_delay_result_id_is_the_task_id_the_worker_ran(self):
        marker = "id check %s" % uuid.uuid4()
        result = record.delay(marker)  # autocommit: outside a transaction the row commits at once
        self.wait_ran([result.id])
        (run,) = [r for r in self.ran() if r["args"] == [marker]]
        self.assertEqual(run["id"], result.id)


if __name__ == "__main__":
    unittest.main()
