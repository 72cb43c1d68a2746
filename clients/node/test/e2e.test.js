'use strict';
/*
 * End to end: the app stages through StagedQueue (as the app role, with
 * node-postgres and knex), the real relay (--format bullmq, as the relay
 * role) adds committed rows to Redis, and real BullMQ 6.7 Workers run them.
 * One relay serves every case (stopped and started where a case needs it);
 * each case has its own queue and Worker. Waits are on the jobs' runs and on
 * Redis and Postgres state, not on the clock, except to see that a job has
 * not run (a paused queue).
 */

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const pg = require('pg');
const knexLib = require('knex');
const IORedis = require('ioredis');
const { Queue, Worker, QueueEvents, Job } = require('bullmq');
const { StagedQueue } = require('stagedrain/bullmq');
const {
  APP_URL, REDIS_URL, appClient, adminClient, waitFor, now, startRelay, stopRelay, relayOnce,
} = require('./support');

let admin;
let app;
let knex;
let redis;
let connection;
let relay;
const closers = [];
const bus = new EventEmitter();
bus.setMaxListeners(0);
// queue -> what each run saw, in the order they ran
const ran = new Map();

function runsOf(queue) {
  if (!ran.has(queue)) ran.set(queue, []);
  return ran.get(queue);
}

// Until the queue's Worker has run n jobs (in all).
function waitRuns(queue, n, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (runsOf(queue).length < n) return false;
      clearTimeout(timer);
      bus.off('ran', check);
      resolve(runsOf(queue));
      return true;
    };
    const timer = setTimeout(() => {
      bus.off('ran', check);
      reject(new Error(`${queue}: ${runsOf(queue).length} of ${n} runs after ${timeoutMs} ms`));
    }, timeoutMs);
    if (!check()) bus.on('ran', check);
  });
}

// A Worker on queue that records each run (then calls processor, if any).
function worker(queue, opts = {}, processor) {
  const w = new Worker(
    queue,
    async (job) => {
      runsOf(queue).push({
        id: job.id, name: job.name, data: job.data, dataText: JSON.stringify(job.data),
        at: Date.now(), timestamp: job.timestamp, attemptsMade: job.attemptsMade,
      });
      bus.emit('ran', queue);
      if (processor) return processor(job);
      return null;
    },
    { connection, concurrency: 1, ...opts },
  );
  w.on('error', () => {}); // a closing connection; the cases' own waits report what matters
  closers.push(() => w.close());
  return w;
}

const plainQueues = new Map();

// A BullMQ Queue (one a name, when it takes no options).
function bullQueue(name, opts) {
  if (!opts && plainQueues.has(name)) return plainQueues.get(name);
  const q = new Queue(name, { connection, ...opts });
  closers.push(() => q.close());
  if (!opts) plainQueues.set(name, q);
  return q;
}

// Stages with fn(db) in one pg transaction as the app, and commits.
async function committed(fn) {
  await app.query('BEGIN');
  try {
    const out = await fn(app);
    await app.query('COMMIT');
    return out;
  } catch (err) {
    await app.query('ROLLBACK');
    throw err;
  }
}

async function stagedCount(queue) {
  const r = await admin.query('SELECT count(*)::int AS n FROM staged_jobs WHERE queue = $1', [queue]);
  return r.rows[0].n;
}

// The relay has taken every row of queue (they are in Redis now).
function drained(queue) {
  return waitFor(`the relay to drain ${queue}`, async () => (await stagedCount(queue)) === 0);
}

// Nothing waits, runs or is delayed in queue any more.
function idle(queue) {
  const q = bullQueue(queue);
  return waitFor(`${queue} to be idle`, async () => {
    const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'paused');
    return Object.values(c).every((n) => n === 0);
  });
}

// Each id ran exactly once: once every row is drained and nothing waits, no second run can come.
async function assertRanOnce(queue, ids) {
  await drained(queue);
  await idle(queue);
  const count = new Map();
  for (const r of runsOf(queue)) count.set(r.id, (count.get(r.id) || 0) + 1);
  for (const id of ids) assert.equal(count.get(id), 1, `job ${id} of ${queue} ran ${count.get(id) || 0} times`);
}

before(async () => {
  admin = await adminClient();
  app = await appClient();
  knex = knexLib({ client: 'pg', connection: APP_URL, pool: { min: 0, max: 2 } });
  redis = new IORedis(REDIS_URL);
  connection = new IORedis(REDIS_URL, { maxRetriesPerRequest: null });
  relay = startRelay('relay');
});

after(async () => {
  for (const close of closers.reverse()) await close();
  const how = await stopRelay(relay);
  connection.disconnect();
  redis.disconnect();
  await knex.destroy();
  await app.end();
  const dead = await admin.query('SELECT queue, job_class, reason FROM staged_jobs_dead');
  await admin.end();
  assert.deepEqual(dead.rows, [], 'the relay dead-lettered rows');
  assert.equal(how.code, 0, `the relay exited with ${how.code ?? how.signal}; see ${relay.logPath}`);
});

describe('jobs staged in a transaction', () => {
  it("a committed transaction's jobs run exactly once, with their name, data (key order kept) and id", async () => {
    const seen = new Map();
    worker('commit', {}, async (job) => {
      if (job.data && job.data.userId) {
        const r = await admin.query('SELECT email FROM node_users WHERE id = $1', [job.data.userId]);
        seen.set(job.id, r.rows.length === 1);
      }
    });
    const datas = [
      { b: 2, a: 1, nested: { z: [3, 2, 1], y: null }, 10: 'n', 2: 'm' },
      { at: new Date(Date.UTC(2024, 1, 29, 12, 0, 0, 7)), s: 'nul\u0000inside', e: '\u{1F600} é\u2028', n: NaN },
      'a string',
      null,
      undefined,
      [1, 'two', { three: 3 }],
      -0,
    ];
    // pg Client: the app's row and its job in one transaction.
    const fromClient = await committed(async (db) => {
      const user = await db.query("INSERT INTO node_users (email) VALUES ('a@example.com') RETURNING id");
      const q = new StagedQueue('commit', { db });
      const jobs = [await q.add('welcome', { userId: Number(user.rows[0].id), b: 1, a: 2 })];
      for (const data of datas) jobs.push(await q.add('shape', data));
      return jobs;
    });
    // PoolClient: addBulk.
    const pool = new pg.Pool({ connectionString: APP_URL, max: 1 });
    const client = await pool.connect();
    await client.query('BEGIN');
    const fromPool = await new StagedQueue('commit', { db: client })
      .addBulk(datas.map((data) => ({ name: 'bulk', data })));
    await client.query('COMMIT');
    client.release();
    await pool.end();
    // knex: a custom id.
    const fromKnex = await knex.transaction(async (trx) => {
      const [{ id }] = await trx('node_users').insert({ email: 'b@example.com' }).returning('id');
      return [await new StagedQueue('commit', { db: trx }).add('welcome', { userId: Number(id) }, { jobId: 'welcome-b' })];
    });
    const staged = [...fromClient, ...fromPool, ...fromKnex];
    await waitRuns('commit', staged.length);
    await assertRanOnce('commit', staged.map((j) => j.id));
    const byId = new Map(runsOf('commit').map((r) => [r.id, r]));
    const wrote = [{ userId: 0 }, ...datas, ...datas, { userId: 0 }];
    staged.forEach((job, i) => {
      const r = byId.get(job.id);
      assert.equal(r.name, job.name);
      assert.deepStrictEqual(r.data, job.data);
      if (!job.data || !job.data.userId) {
        const text = JSON.stringify(wrote[i] === undefined ? {} : wrote[i]);
        assert.equal(r.dataText, text, 'the data as JSON.stringify wrote it, key order kept');
      }
      assert.equal(r.timestamp, job.timestamp);
    });
    assert.equal(byId.get('welcome-b').data.userId, fromKnex[0].data.userId);
    assert.deepEqual([...seen.values()], [true, true], "the worker sees the app's row of the same transaction");
  });

  it("a rolled-back transaction's and a rolled-back savepoint's jobs never run", async () => {
    worker('rollback');
    const q = (db) => new StagedQueue('rollback', { db });
    await app.query('BEGIN');
    const gone = [await q(app).add('gone', { n: 1 })];
    await app.query('ROLLBACK');
    const kept = [];
    await knex.transaction(async (trx) => {
      kept.push(await q(trx).add('kept', { n: 2 }));
      await trx.transaction(async (sp) => {
        gone.push(await q(sp).add('gone', { n: 3 }, { jobId: 'gone-savepoint' }));
        throw new Error('roll the savepoint back');
      }).catch(() => {});
    });
    await committed(async (db) => {
      await db.query('SAVEPOINT s');
      gone.push(await q(db).add('gone', { n: 4 }));
      await db.query('ROLLBACK TO SAVEPOINT s');
      // Staged last, run last (one at a time, in order): the others had their chance.
      kept.push(await q(db).add('kept', { n: 5 }));
    });
    const runs = await waitRuns('rollback', 2);
    assert.deepEqual(runs.map((r) => r.id), kept.map((j) => j.id));
    await assertRanOnce('rollback', kept.map((j) => j.id));
    for (const job of gone) assert.equal(await redis.exists(`bull:rollback:${job.id}`), 0);
    assert.equal(runsOf('rollback').length, 2);
  });

  it('1,000 jobs added in one transaction run in add order (concurrency 1)', async () => {
    worker('order');
    const staged = await committed(async (db) => {
      const q = new StagedQueue('order', { db });
      const jobs = [];
      for (let i = 0; i < 400; i++) jobs.push(await q.add('step', { i }));
      jobs.push(...await q.addBulk(Array.from({ length: 200 }, (_, k) => ({ name: 'step', data: { i: 400 + k } }))));
      for (let i = 600; i < 1000; i++) jobs.push(await q.add('step', { i }));
      return jobs;
    });
    const runs = await waitRuns('order', 1000, 60000);
    assert.deepEqual(runs.map((r) => r.data.i), Array.from({ length: 1000 }, (_, i) => i));
    assert.deepEqual(runs.map((r) => r.id), staged.map((j) => j.id));
    await assertRanOnce('order', staged.map((j) => j.id));
  });

  it('ids BullMQ accepts, the relay takes as they are', async () => {
    worker('ids');
    const ids = ['0123', '12345678901234567890', 'a:b:c', '-0', ' 7', 'x'.repeat(300), 'ünï-cödé'];
    const staged = await committed(async (db) => {
      const q = new StagedQueue('ids', { db });
      const jobs = [];
      for (const jobId of ids) jobs.push(await q.add('id', {}, { jobId }));
      jobs.push(await q.add('id', {}, { jobId: '' }));
      return jobs;
    });
    await waitRuns('ids', staged.length);
    assert.deepEqual(runsOf('ids').map((r) => r.id), staged.map((j) => j.id));
    assert.deepEqual(staged.slice(0, ids.length).map((j) => j.id), ids);
    await assertRanOnce('ids', staged.map((j) => j.id));
  });
});

describe('BullMQ sees relayed jobs as its own', () => {
  it('a delayed job does not run before its delay, counted from the add() call', async () => {
    worker('delayed');
    await app.query('BEGIN');
    const job = await new StagedQueue('delayed', { db: app }).add('later', { n: 1 }, { delay: 1500 });
    await new Promise((r) => setTimeout(r, 500)); // the COMMIT comes later than the add()
    await app.query('COMMIT');
    const score = await waitFor('the delayed set', () => redis.zscore('bull:delayed:delayed', job.id));
    assert.equal(Math.floor(Number(score) / 0x1000), job.timestamp + 1500, 'due 1,500 ms after the add() call');
    const [run] = await waitRuns('delayed', 1);
    assert.ok(run.at >= job.timestamp + 1500, `ran ${run.at - job.timestamp} ms after the add() call`);
    await assertRanOnce('delayed', [job.id]);
  });

  it('among waiting jobs the higher priority (the lower number) runs first', async () => {
    const w = worker('priority', { autorun: false });
    const staged = await committed(async (db) => {
      const q = new StagedQueue('priority', { db });
      return [
        await q.add('p5', {}, { priority: 5 }),
        await q.add('p1', {}, { priority: 1 }),
        await q.add('none', {}),
        await q.add('p3', {}, { priority: 3 }),
      ];
    });
    await drained('priority');
    const counts = await bullQueue('priority').getJobCounts('waiting', 'prioritized');
    assert.deepEqual(counts, { waiting: 1, prioritized: 3 });
    w.run().catch(() => {});
    const runs = await waitRuns('priority', 4);
    // BullMQ runs a job without priority before prioritized ones.
    assert.deepEqual(runs.map((r) => r.name), ['none', 'p1', 'p3', 'p5']);
    await assertRanOnce('priority', staged.map((j) => j.id));
  });

  it("attempts and backoff retry a failing job, which lands in the failed set with its reason, as with BullMQ's own add", async () => {
    const failed = new Map();
    const w = worker('retry', {}, (job) => {
      throw new Error(`boom ${job.attemptsMade}`);
    });
    w.on('failed', (job) => {
      if (job.attemptsMade >= job.opts.attempts) failed.set(job.id, job);
    });
    const opts = { attempts: 3, backoff: { type: 'fixed', delay: 50 } };
    const staged = await committed((db) => new StagedQueue('retry', { db }).add('flaky', { n: 1 }, opts));
    const own = await bullQueue('retry').add('flaky', { n: 1 }, opts);
    await waitFor('both jobs to fail for good', () => failed.size === 2);
    const q = bullQueue('retry');
    const outcome = async (id) => {
      const job = await Job.fromId(q, id);
      return {
        state: await job.getState(),
        attemptsMade: job.attemptsMade,
        failedReason: job.failedReason,
        traces: job.stacktrace.length,
        inFailedSet: (await redis.zscore('bull:retry:failed', id)) !== null,
        runs: runsOf('retry').filter((r) => r.id === id).length,
      };
    };
    const mine = await outcome(staged.id);
    assert.deepEqual(mine, { state: 'failed', attemptsMade: 3, failedReason: 'boom 2', traces: 3, inFailedSet: true, runs: 3 });
    assert.deepEqual(mine, await outcome(own.id));
  });

  it('QueueEvents hears added and waiting (and delayed) for relayed jobs', async () => {
    const qe = new QueueEvents('events', { connection, lastEventId: '0' });
    closers.push(() => qe.close());
    const heard = [];
    for (const event of ['added', 'waiting', 'delayed']) {
      qe.on(event, (args) => {
        heard.push({ event, ...args });
        bus.emit('heard');
      });
    }
    await qe.waitUntilReady();
    const [now1, later] = await committed(async (db) => {
      const q = new StagedQueue('events', { db });
      return [await q.add('now', {}), await q.add('later', {}, { delay: 60000 })];
    });
    await waitFor('four events', () => heard.length >= 4);
    const by = (event, id) => heard.filter((h) => h.event === event && h.jobId === id);
    assert.equal(by('added', now1.id).length, 1);
    assert.equal(by('added', now1.id)[0].name, 'now');
    assert.equal(by('waiting', now1.id).length, 1);
    assert.equal(by('added', later.id)[0].name, 'later');
    assert.equal(Number(by('delayed', later.id)[0].delay), later.timestamp + 60000);
    assert.equal(by('waiting', later.id).length, 0);
  });

  it('Queue.getJobCounts() and Job.fromId() see relayed jobs as the add() call returned them', async () => {
    const q = bullQueue('counts');
    const staged = await committed(async (db) => {
      const sq = new StagedQueue('counts', { db, defaultJobOptions: { removeOnComplete: 100 } });
      return [
        await sq.add('w1', { k: 1 }),
        await sq.add('w2', { k: 2 }, { jobId: 'counts-w2', attempts: 2, backoff: 10 }),
        await sq.add('d1', { k: 3 }, { delay: 60000 }),
        await sq.add('p1', { k: 4 }, { priority: 2 }),
      ];
    });
    await drained('counts');
    assert.deepEqual(await q.getJobCounts('waiting', 'delayed', 'prioritized', 'active'),
      { waiting: 2, delayed: 1, prioritized: 1, active: 0 });
    const states = [];
    for (const s of staged) {
      const job = await Job.fromId(q, s.id);
      assert.equal(job.id, s.id);
      assert.equal(job.name, s.name);
      assert.deepStrictEqual(job.data, s.data);
      assert.deepStrictEqual(JSON.parse(JSON.stringify(job.opts)), s.opts);
      assert.equal(job.timestamp, s.timestamp);
      assert.equal(job.delay, s.delay);
      assert.equal(job.priority, s.priority);
      states.push(await job.getState());
    }
    assert.deepEqual(states, ['waiting', 'waiting', 'delayed', 'prioritized']);
  });

  it("the job hash holds what BullMQ's own add writes, for each kind of options", async () => {
    const defaults = { removeOnComplete: true, attempts: 2 };
    const own = bullQueue('same', { defaultJobOptions: defaults });
    const cases = [
      ['plain', { b: 1, a: 2 }, {}],
      ['undefined data', undefined, {}],
      ['delayed', { d: 1 }, { delay: 60000 }],
      ['prioritized', [1, 2], { priority: 7 }],
      ['lifo', 'text', { lifo: true }],
      ['many', { m: 1 }, {
        attempts: 3, backoff: 1000, removeOnComplete: { age: 60, count: null }, removeOnFail: 5, keepLogs: 5,
        stackTraceLimit: 2, sizeLimit: 1000, mine: [1, null, 3], delay: null, priority: undefined,
      }],
      ['old timestamp', { t: 1 }, { timestamp: 1700000000000, delay: 5 }],
      ['telemetry', {}, { telemetry: { metadata: 'meta', omitContext: true }, failParentOnFailure: true }],
    ];
    const staged = await committed(async (db) => {
      const sq = new StagedQueue('same', { db, defaultJobOptions: defaults });
      const jobs = [];
      for (const [name, data, opts] of cases) {
        jobs.push(await sq.add(name, data, opts));
        jobs.push(await sq.add(name, data, { ...opts, jobId: `staged-${name.replace(/ /g, '-')}` }));
      }
      return jobs;
    });
    const theirs = [];
    for (const [name, data, opts] of cases) {
      theirs.push(await own.add(name, data, opts));
      theirs.push(await own.add(name, data, { ...opts, jobId: `own-${name.replace(/ /g, '-')}` }));
    }
    await drained('same');
    const withoutId = (text) => {
      const o = JSON.parse(text);
      delete o.jobId;
      return o;
    };
    for (let i = 0; i < staged.length; i++) {
      const mine = await redis.hgetall(`bull:same:${staged[i].id}`);
      const hers = await redis.hgetall(`bull:same:${theirs[i].id}`);
      const what = `${cases[i >> 1][0]}${i % 2 ? ' with a jobId' : ''}`;
      assert.deepEqual(Object.keys(mine).sort(), Object.keys(hers).sort(), `${what}: the same fields`);
      for (const f of ['name', 'data', 'delay', 'priority']) assert.equal(mine[f], hers[f], `${what}: ${f}`);
      assert.deepEqual(withoutId(mine.opts), withoutId(hers.opts), `${what}: opts`);
      assert.equal(Number(mine.timestamp), staged[i].timestamp, `${what}: the add() call's timestamp`);
      if (cases[i >> 1][2].timestamp) assert.equal(mine.timestamp, hers.timestamp);
      const state = async (id) => (await Job.fromId(own, id)).getState();
      assert.equal(await state(staged[i].id), await state(theirs[i].id), `${what}: the same state`);
    }
  });
});

describe('queue and relay states', () => {
  it('a paused queue holds relayed jobs until resume()', async () => {
    const q = bullQueue('paused');
    await q.pause();
    worker('paused');
    const job = await committed((db) => new StagedQueue('paused', { db }).add('held', { n: 1 }));
    await drained('paused');
    assert.equal(await redis.exists(`bull:paused:${job.id}`), 1);
    await new Promise((r) => setTimeout(r, 500)); // a running Worker's chance to take it
    assert.equal(runsOf('paused').length, 0);
    await q.resume();
    await waitRuns('paused', 1);
    await assertRanOnce('paused', [job.id]);
  });

  it('jobs staged while the relay is stopped run once it starts', async () => {
    worker('stopped');
    const how = await stopRelay(relay);
    assert.equal(how.code, 0, `the relay exited with ${how.code ?? how.signal}`);
    const job = await committed((db) => new StagedQueue('stopped', { db }).add('waited', { n: 1 }));
    assert.equal(await stagedCount('stopped'), 1);
    assert.equal(await redis.exists(`bull:stopped:${job.id}`), 0);
    relay = startRelay('relay');
    await waitRuns('stopped', 1);
    await assertRanOnce('stopped', [job.id]);
  });

  it('a relay killed between push and commit does not make a job run twice', async () => {
    worker('crash');
    const how = await stopRelay(relay);
    assert.equal(how.code, 0);
    // The relay's delete waits, at COMMIT, for an advisory lock this session holds.
    await admin.query(`CREATE OR REPLACE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_advisory_xact_lock_shared(42425); RETURN NULL; END $$`);
    await admin.query('DROP TRIGGER IF EXISTS test_hold_commit ON staged_jobs');
    await admin.query(`CREATE CONSTRAINT TRIGGER test_hold_commit AFTER DELETE ON staged_jobs
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_hold_commit()`);
    const lock = await adminClient();
    await lock.query('SELECT pg_advisory_lock(42425)');
    // removeOnComplete: once it ran, BullMQ's own rule (an existing id is not
    // added again) no longer guards it: only the relay's fence does.
    const job = await committed((db) => new StagedQueue('crash', { db }).add('once', { n: 1 }, { removeOnComplete: true }));
    const a = startRelay('relay-killed');
    await waitFor('the relay to push', async () => (await redis.xlen('bull:crash:events')) > 0);
    await waitFor("the relay's COMMIT to wait", async () => (await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'stagedrain' AND wait_event_type = 'Lock'",
    )).rows[0].n > 0);
    assert.equal((await stopRelay(a, 'SIGKILL')).signal, 'SIGKILL');
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'stagedrain'");
    await waitFor('its session to end', async () => (await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'stagedrain'",
    )).rows[0].n === 0);
    await lock.query('SELECT pg_advisory_unlock(42425)');
    await lock.end();
    await admin.query('DROP TRIGGER test_hold_commit ON staged_jobs');
    await admin.query('DROP FUNCTION test_hold_commit()');
    assert.equal(await stagedCount('crash'), 1, 'the killed relay deleted nothing');
    await waitRuns('crash', 1);
    await waitFor('the job to be removed on completion', async () => (await redis.exists(`bull:crash:${job.id}`)) === 0);
    relay = startRelay('relay');
    await assertRanOnce('crash', [job.id]);
    const events = await redis.xrange('bull:crash:events', '-', '+');
    const added = events.filter(([, f]) => f[1] === 'added');
    assert.equal(added.length, 1, 'added once');
    assert.equal(runsOf('crash').length, 1);
  });

  it('an idle Worker with a long drainDelay runs a relayed job at once', async () => {
    worker('idle', { drainDelay: 300 });
    const name = `bull:${Buffer.from('idle').toString('base64')}`;
    await waitFor('the Worker to block for 300 s', async () => (await redis.client('LIST')).split('\n')
      .some((l) => l.includes(` name=${name} `) && / cmd=bzpopmin /.test(l)));
    const t0 = now();
    const job = await committed((db) => new StagedQueue('idle', { db }).add('wake', {}));
    await waitRuns('idle', 1);
    const took = now() - t0;
    assert.ok(took < 5000, `ran ${took} ms after the COMMIT`);
    await assertRanOnce('idle', [job.id]);
  });

  it('relay --once drains what is committed and exits', async () => {
    worker('once');
    const how = await stopRelay(relay);
    assert.equal(how.code, 0);
    const job = await committed((db) => new StagedQueue('once', { db }).add('drained', { n: 1 }));
    await relayOnce('relay-once');
    assert.equal(await stagedCount('once'), 0);
    relay = startRelay('relay');
    await waitRuns('once', 1);
    await assertRanOnce('once', [job.id]);
  });
});
