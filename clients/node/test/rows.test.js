'use strict';
/*
 * Row level: what add() and addBulk() write into staged_jobs through the
 * app's own handle (pg Client, PoolClient, knex transaction, any query()),
 * and what they refuse, staging nothing. Postgres only; no relay runs.
 */

const { describe, it, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const pg = require('pg');
const knexLib = require('knex');
const { StagedQueue, StagedJob, StagedJobError } = require('stagedrain/bullmq');
const { APP_URL, appClient, adminClient, stagedRows } = require('./support');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let admin;
let owner;
let app;

before(async () => {
  admin = await adminClient();
  owner = await adminClient();
  app = await appClient();
});
after(async () => {
  await app.end();
  await owner.end();
  await admin.end();
});
beforeEach(async () => {
  await admin.query('DELETE FROM staged_jobs');
});

/*
 * Runs fn(db) in a transaction that is rolled back after, on a connection
 * of the tables' owner, which can read back the rows it has not committed
 * (the app role may only insert them: the tests of the caller's
 * transaction below stage as the app and commit).
 */
async function inTx(fn) {
  await owner.query('BEGIN');
  try {
    return await fn(owner);
  } finally {
    await owner.query('ROLLBACK');
  }
}

// The rows the open transaction holds; a query in an aborted transaction throws.
async function txRows(queue) {
  const r = await owner.query(
    `SELECT queue, job_class, args::text AS args, options::text AS options, uuid::text AS uuid,
            (extract(epoch FROM created_at) * 1000)::float8 AS created_ms
       FROM staged_jobs WHERE queue = $1 ORDER BY id`,
    [queue],
  );
  return r.rows;
}

describe('what add() writes', () => {
  it('one row: queue, name, [data] as JSON.stringify wrote it, opts as BullMQ stores them, uuid, created_at', async () => {
    await app.query('BEGIN');
    const q = new StagedQueue('emails', { db: app });
    const before = Date.now();
    const job = await q.add('welcome', { z: 1, a: [1, 'two'], m: { y: null, x: true } });
    const after = Date.now();
    await app.query('COMMIT');
    const [row] = await stagedRows(admin, 'emails');
    assert.equal(row.queue, 'emails');
    assert.equal(row.job_class, 'welcome');
    assert.equal(row.args, '[{"z":1,"a":[1,"two"],"m":{"y":null,"x":true}}]');
    assert.equal(row.options, '{"attempts":0}');
    assert.match(row.uuid, UUID);
    assert.equal(job.id, row.uuid);
    assert.equal(row.created_ms, job.timestamp);
    assert.ok(job.timestamp >= before && job.timestamp <= after);
    assert.ok(job instanceof StagedJob);
    assert.deepEqual({ ...job }, {
      queueName: 'emails',
      id: row.uuid,
      name: 'welcome',
      data: { z: 1, a: [1, 'two'], m: { y: null, x: true } },
      opts: { attempts: 0 },
      timestamp: job.timestamp,
      delay: 0,
      priority: 0,
    });
  });

  it('data as JSON.stringify writes it: key order, a Date, \\u0000, emoji, -0, NaN and undefined', async () => {
    const cases = [
      [{ b: 2, a: 1, 10: 'n', '2': 'm' }, '{"2":"m","10":"n","b":2,"a":1}'],
      [{ at: new Date(Date.UTC(2024, 1, 29, 12, 0, 0, 7)) }, '{"at":"2024-02-29T12:00:00.007Z"}'],
      [{ s: 'a\u0000b', t: '\t"\\' }, '{"s":"a\\u0000b","t":"\\t\\"\\\\"}'],
      [{ e: '\u{1F600} é' }, '{"e":"\u{1F600} é"}'],
      [{ z: -0, n: NaN, i: -Infinity, u: undefined, f() {} }, '{"z":0,"n":null,"i":null}'],
      [undefined, '{}'],
      [null, 'null'],
      ['text', '"text"'],
      [42, '42'],
      [[1, undefined, () => 1], '[1,null,null]'],
      [{ toJSON: () => ({ wrapped: true }) }, '{"wrapped":true}'],
    ];
    await inTx(async (db) => {
      const q = new StagedQueue('data', { db });
      for (const [data] of cases) await q.add('d', data);
      const rows = await txRows('data');
      assert.deepEqual(rows.map((r) => r.args), cases.map(([, text]) => `[${text}]`));
    });
  });

  it('returns the data the worker will read: JSON.parse of the text', async () => {
    await inTx(async (db) => {
      const q = new StagedQueue('data', { db });
      const job = await q.add('d', { at: new Date(0), n: NaN, u: undefined });
      assert.deepEqual(job.data, { at: '1970-01-01T00:00:00.000Z', n: null });
      assert.deepEqual((await q.add('d', undefined)).data, {});
    });
  });

  it('data nesting 98 levels is staged (the relay takes [data] to 99)', async () => {
    let deep = 1;
    for (let i = 0; i < 98; i++) deep = [deep];
    await inTx(async (db) => {
      await new StagedQueue('data', { db }).add('deep', deep);
      assert.equal((await txRows('data'))[0].args, `[${JSON.stringify(deep)}]`);
    });
  });
});

describe('options, as BullMQ 6.7 stores them', () => {
  const cases = [
    ['none', undefined, {}, '{"attempts":0}'],
    ['attempts first, then the order given', undefined, { delay: 5, attempts: 3 }, '{"attempts":3,"delay":5}'],
    ['a backoff number becomes fixed', undefined, { backoff: 250 }, '{"attempts":0,"backoff":{"type":"fixed","delay":250}}'],
    ['a backoff object kept', undefined, { backoff: { type: 'exponential', delay: 10, jitter: 0.5 } },
      '{"attempts":0,"backoff":{"type":"exponential","delay":10,"jitter":0.5}}'],
    ['a NaN backoff dropped, as Backoffs.normalize drops it', undefined, { backoff: NaN }, '{"attempts":0}'],
    ['short names', undefined,
      { keepLogs: 3, failParentOnFailure: true, telemetry: { metadata: 'm', omitContext: true } },
      '{"attempts":0,"kl":3,"fpof":true,"tm":"m","omc":true}'],
    ['the other short names', undefined,
      { continueParentOnFailure: true }, '{"attempts":0,"cpof":true}'],
    ['idof, rdof', undefined, { ignoreDependencyOnFailure: false, removeDependencyOnFailure: true },
      '{"attempts":0,"idof":false,"rdof":true}'],
    ['undefined and null dropped, in objects too; arrays keep null', undefined,
      { delay: undefined, priority: null, removeOnComplete: { age: 60, count: null }, tags: [1, null] },
      '{"attempts":0,"removeOnComplete":{"age":60},"tags":[1,null]}'],
    ['defaults first, the call overrides', { attempts: 5, removeOnFail: true, delay: 9 }, { delay: 1, lifo: true },
      '{"attempts":5,"removeOnFail":true,"delay":1,"lifo":true}'],
    ['a default jobId is not taken', { jobId: 'from-defaults', attempts: 2 }, {}, '{"attempts":2}'],
    ['jobId kept where it was given', undefined, { priority: 2, jobId: 'order-7', lifo: false },
      '{"attempts":0,"priority":2,"jobId":"order-7","lifo":false}'],
    ['timestamp only when given', undefined, { timestamp: 1700000000000 }, '{"attempts":0,"timestamp":1700000000000}'],
    ['options BullMQ does not know kept', undefined, { mine: { deep: 'x' }, removeOnComplete: 10 },
      '{"attempts":0,"mine":{"deep":"x"},"removeOnComplete":10}'],
    ['priority at the limit', undefined, { priority: 2097151 }, '{"attempts":0,"priority":2097151}'],
  ];
  for (const [what, defaults, opts, text] of cases) {
    it(what, async () => {
      await inTx(async (db) => {
        const job = await new StagedQueue('opts', { db, defaultJobOptions: defaults }).add('o', {}, opts);
        const [row] = await txRows('opts');
        assert.equal(row.options, text);
        assert.deepEqual(job.opts, JSON.parse(text));
      });
    });
  }

  it("addBulk takes telemetry from the job's own options only, as BullMQ's addBulk does", async () => {
    await inTx(async (db) => {
      const q = new StagedQueue('opts', { db, defaultJobOptions: { telemetry: { metadata: 'd' }, attempts: 1 } });
      await q.add('one', {});
      await q.addBulk([{ name: 'bulk', data: {} }]);
      const rows = await txRows('opts');
      assert.deepEqual(rows.map((r) => r.options), ['{"attempts":1,"tm":"d"}', '{"attempts":1}']);
    });
  });

  it('the id: the custom jobId, else a UUID drawn at add() (the row keeps it; a custom id keeps the default)',
    async () => {
      await inTx(async (db) => {
        const q = new StagedQueue('ids', { db });
        const drawn = await q.add('a', {});
        const custom = await q.add('b', {}, { jobId: 'invoice:42:mail' });
        const empty = await q.add('c', {}, { jobId: '' });
        const rows = await txRows('ids');
        assert.match(drawn.id, UUID);
        assert.equal(rows[0].uuid, drawn.id);
        assert.equal(custom.id, 'invoice:42:mail');
        assert.match(rows[1].uuid, UUID);
        assert.notEqual(rows[1].uuid, drawn.id);
        // BullMQ takes an empty jobId as none (and keeps it in opts): a UUID is drawn.
        assert.match(empty.id, UUID);
        assert.equal(rows[2].uuid, empty.id);
        assert.equal(rows[2].options, '{"attempts":0,"jobId":""}');
        for (const id of ['0123', '12345678901234567890', '1e3', ' 12', 'a:b:c']) {
          assert.equal((await q.add('d', {}, { jobId: id })).id, id);
        }
      });
    });

  it('timestamp and delay count from the add() call; created_at is that time', async () => {
    await inTx(async (db) => {
      const q = new StagedQueue('time', { db });
      const t0 = Date.now();
      const job = await q.add('later', {}, { delay: 60000 });
      const given = await q.add('given', {}, { timestamp: 1234567 });
      const rows = await txRows('time');
      assert.ok(job.timestamp >= t0 && job.timestamp <= Date.now());
      assert.equal(rows[0].created_ms, job.timestamp);
      assert.equal(job.delay, 60000);
      assert.equal(given.timestamp, 1234567);
      assert.ok(rows[1].created_ms >= t0, 'created_at stays the time of the call');
      assert.equal(rows[1].options, '{"attempts":0,"timestamp":1234567}');
    });
  });

  it("defaultJobOptions reads back a copy, as BullMQ's Queue's does", () => {
    const defaults = { attempts: 2 };
    const q = new StagedQueue('q', { db: app, defaultJobOptions: defaults });
    q.defaultJobOptions.attempts = 9;
    defaults.attempts = 7;
    assert.deepEqual(q.defaultJobOptions, { attempts: 2 });
    assert.equal(q.prefix, 'bull');
    assert.equal(new StagedQueue('q', { db: app, prefix: '{bull}' }).prefix, '{bull}');
  });
});

describe('what add() refuses, staging nothing', () => {
  const circular = {};
  circular.self = circular;
  let deep = 1;
  for (let i = 0; i < 99; i++) deep = [deep];
  let deepOpts = 1;
  for (let i = 0; i < 100; i++) deepOpts = { d: deepOpts };
  const cases = [
    // BullMQ's own checks, in its words.
    ["jobId '0'", 'n', {}, { jobId: '0' }, /JobId cannot be '0' or start with '0:'/],
    ["jobId starting '0:'", 'n', {}, { jobId: '0:a:b' }, /JobId cannot be '0' or start with '0:'/],
    ['an integer jobId', 'n', {}, { jobId: '123' }, /Custom Id cannot be integers/],
    ['a negative integer jobId', 'n', {}, { jobId: '-5' }, /Custom Id cannot be integers/],
    ["a jobId with one ':'", 'n', {}, { jobId: 'a:b' }, /Custom Id cannot contain :/],
    ["a jobId with three ':'", 'n', {}, { jobId: 'a:b:c:d' }, /Custom Id cannot contain :/],
    ['a float priority', 'n', {}, { priority: 1.5 }, /Priority should not be float/],
    ['a priority over the limit', 'n', {}, { priority: 2097152 }, /Priority should be between 0 and 2097151/],
    ['a jitter over 1', 'n', {}, { backoff: { type: 'fixed', delay: 1, jitter: 1.5 } }, /Jitter should be between 0 and 1/],
    ['a jitter under 0', 'n', {}, { backoff: { type: 'fixed', jitter: -0.1 } }, /Jitter should be between 0 and 1/],
    ['data over sizeLimit', 'big', { text: 'abcdef' }, { sizeLimit: 10 }, /The size of job big exceeds the limit 10 bytes/],
    ['debounce', 'n', {}, { debounce: { id: 'x' } }, /Debounce option has been removed/],
    ['debounce, even undefined', 'n', {}, { debounce: undefined }, /Debounce option has been removed/],
    ['exclusive parent-failure options', 'n', {}, { failParentOnFailure: true, removeDependencyOnFailure: true },
      /The following options cannot be used together: removeDependencyOnFailure, failParentOnFailure/],
    // What the relay cannot carry.
    ['repeat', 'n', {}, { repeat: { every: 1000 } }, /opts\.repeat: .*upsertJobScheduler/],
    ['repeatJobKey', 'n', {}, { repeatJobKey: 'k' }, /opts\.repeatJobKey/],
    ['parent', 'n', {}, { parent: { id: 'p', queue: 'bull:other' } }, /opts\.parent: .*FlowProducer/],
    ['deduplication', 'n', {}, { deduplication: { id: 'd' } }, /opts\.deduplication/],
    ['a number jobId', 'n', {}, { jobId: 7 }, /opts\.jobId must be a string, not number/],
    ['an object jobId', 'n', {}, { jobId: { id: 1 } }, /opts\.jobId must be a string/],
    ['a jobId with a nul', 'n', {}, { jobId: 'a\0b' }, /opts\.jobId contains a nul/],
    ['a jobId with a lone surrogate', 'n', {}, { jobId: 'a\ud800' }, /options hold a string with a lone surrogate/],
    ['a NaN delay', 'n', {}, { delay: NaN }, /opts\.delay must be a finite number, not NaN/],
    ['an Infinity delay', 'n', {}, { delay: Infinity }, /opts\.delay must be a finite number/],
    ['a string delay', 'n', {}, { delay: '100' }, /opts\.delay must be a finite number/],
    ['a NaN priority', 'n', {}, { priority: NaN }, /opts\.priority must be a finite number/],
    ['a string priority', 'n', {}, { priority: '3' }, /Priority should not be float|opts\.priority/],
    ['a negative priority', 'n', {}, { priority: -1 }, /Priority should be between 0 and 2097151/],
    ['a string timestamp', 'n', {}, { timestamp: '5' }, /opts\.timestamp must be a finite number/],
    ['a string attempts', 'n', {}, { attempts: '3' }, /opts\.attempts must be a finite number/],
    ['a string keepLogs', 'n', {}, { keepLogs: '3' }, /opts\.keepLogs must be a finite number/],
    ['a string stackTraceLimit', 'n', {}, { stackTraceLimit: '3' }, /opts\.stackTraceLimit must be a finite number/],
    ['a string lifo', 'n', {}, { lifo: 'yes' }, /opts\.lifo must be true or false/],
    ['a number lifo', 'n', {}, { lifo: 1 }, /opts\.lifo must be true or false/],
    ['a string backoff', 'n', {}, { backoff: 'fixed' }, /opts\.backoff must be a number/],
    ['an array backoff', 'n', {}, { backoff: [100] }, /opts\.backoff must be a number/],
    ['a string removeOnComplete', 'n', {}, { removeOnComplete: 'yes' }, /opts\.removeOnComplete must be/],
    ['an array removeOnFail', 'n', {}, { removeOnFail: [1] }, /opts\.removeOnFail must be/],
    ['options that are not an object', 'n', {}, 'fast', /opts must be an object/],
    ['options that are an array', 'n', {}, [{ delay: 1 }], /opts must be an object/],
    ...['class', 'args', 'queue', 'jid', 'created_at', 'enqueued_at', 'at'].map((k) => [
      `the relay's own options key ${k}`, 'n', {}, { [k]: 'x' }, new RegExp(`opts\\.${k}: the relay writes`)]),
    ['options nesting deeper than 100 levels', 'n', {}, { mine: deepOpts }, /options nest deeper than 100/],
    ['options holding a cycle', 'n', {}, { mine: circular }, /options nest deeper than 100 levels \(or hold a cycle\)/],
    ['a BigInt in options', 'n', {}, { mine: 1n }, /job options cannot be written as JSON: .*BigInt/],
    // The name and the data.
    ['an empty name', '', {}, {}, /the job name must be a non-empty string/],
    ['no name', undefined, {}, {}, /the job name must be a non-empty string/],
    ['a number name', 5, {}, {}, /the job name must be a non-empty string/],
    ['a name with a nul', 'a\0b', {}, {}, /the job name contains a nul/],
    ['a name with a lone surrogate', 'a\udc00', {}, {}, /the job name holds a lone surrogate/],
    ['a BigInt in data', 'n', { n: 10n }, {}, /job data cannot be written as JSON: Do not know how to serialize a BigInt/],
    ['a cycle in data', 'n', circular, {}, /job data cannot be written as JSON: Converting circular structure/],
    ['a function as the data', 'n', () => 1, {}, /job data is a function, which JSON cannot carry/],
    ['a symbol as the data', 'n', Symbol('s'), {}, /job data is a symbol, which JSON cannot carry/],
    ['data whose toJSON gives undefined', 'n', { toJSON: () => undefined }, {}, /job data is a object/],
    ['a lone surrogate in data', 'n', { s: 'x\ud800' }, {}, /job data holds a string with a lone surrogate/],
    ['a lone surrogate in a key', 'n', { ['\udfff']: 1 }, {}, /job data holds a string with a lone surrogate/],
    ['data nesting deeper than 98 levels', 'n', deep, {}, /job data nests deeper than 98 levels/],
  ];
  for (const [what, name, data, opts, message] of cases) {
    it(what, async () => {
      await inTx(async (db) => {
        const q = new StagedQueue('bad', { db });
        await assert.rejects(q.add(name, data, opts), (err) => {
          assert.ok(err instanceof StagedJobError, `${err.name}: ${err.message}`);
          assert.match(err.message, message);
          return true;
        });
        // Nothing written, and nothing sent that failed: the transaction still works.
        assert.deepEqual(await txRows('bad'), []);
      });
    });
  }

  it('a bad default option refuses every add()', async () => {
    await inTx(async (db) => {
      const q = new StagedQueue('bad', { db, defaultJobOptions: { priority: 0.5 } });
      await assert.rejects(q.add('n', {}), /Priority should not be float/);
      assert.ok(await q.add('n', {}, { priority: 1 }));
    });
  });

  it('a tricky backslash is no lone surrogate', async () => {
    await inTx(async (db) => {
      const job = await new StagedQueue('ok', { db }).add('n', { s: '\\ud800', t: '\\\\ud800' });
      assert.deepEqual(job.data, { s: '\\ud800', t: '\\\\ud800' });
    });
  });

  it('addBulk: one bad job refuses them all, naming it', async () => {
    await inTx(async (db) => {
      const q = new StagedQueue('bad', { db });
      await assert.rejects(
        q.addBulk([{ name: 'ok', data: {} }, { name: 'worse', data: {}, opts: { jobId: '12' } }]),
        { name: 'StagedJobError', message: 'job 1 of addBulk: Custom Id cannot be integers' },
      );
      await assert.rejects(q.addBulk([{ name: 'ok', data: {} }, null]), /job 1 of addBulk: the job name/);
      await assert.rejects(q.addBulk('jobs'), /addBulk takes an array/);
      assert.deepEqual(await txRows('bad'), []);
    });
  });

  it('the queue: named as BullMQ allows, with a handle it can use', () => {
    assert.throws(() => new StagedQueue('', { db: app }), /Queue name must be provided/);
    assert.throws(() => new StagedQueue(undefined, { db: app }), /Queue name must be provided/);
    assert.throws(() => new StagedQueue('a:b', { db: app }), /Queue name cannot contain :/);
    assert.throws(() => new StagedQueue(7, { db: app }), /the queue name must be a non-empty string/);
    assert.throws(() => new StagedQueue('a\0b', { db: app }), /the queue name contains a nul/);
    assert.throws(() => new StagedQueue('stagedrain', { db: app }), /share its keys with the relay/);
    assert.throws(() => new StagedQueue('q'), { name: 'TypeError', message: /StagedQueue needs opts\.db/ });
    assert.throws(() => new StagedQueue('q', { db: {} }), /StagedQueue needs opts\.db/);
    assert.throws(() => new StagedQueue('q', { db: app, prefix: 5 }), /opts\.prefix must be a string/);
    assert.throws(() => new StagedQueue('q', { db: app, defaultJobOptions: 'fast' }), /defaultJobOptions must be an object/);
  });
});

describe('addBulk', () => {
  it('writes every job in ONE INSERT, in order, and resolves to the jobs', async () => {
    await inTx(async (client) => {
      const sent = [];
      const db = { query: (text, values) => { sent.push(text); return client.query(text, values); } };
      const q = new StagedQueue('bulk', { db, defaultJobOptions: { attempts: 2 } });
      const jobs = await q.addBulk([
        { name: 'a', data: { n: 1 } },
        { name: 'b', data: { n: 2 }, opts: { jobId: 'bulk-b', delay: 10 } },
        { name: 'c', data: undefined, opts: { priority: 4 } },
      ]);
      assert.equal(sent.length, 1);
      assert.match(sent[0], /^INSERT INTO staged_jobs /);
      const rows = await txRows('bulk');
      assert.deepEqual(rows.map((r) => [r.job_class, r.args, r.options]), [
        ['a', '[{"n":1}]', '{"attempts":2}'],
        ['b', '[{"n":2}]', '{"attempts":2,"jobId":"bulk-b","delay":10}'],
        ['c', '[{}]', '{"attempts":2,"priority":4}'],
      ]);
      assert.deepEqual(jobs.map((j) => j.id), [rows[0].uuid, 'bulk-b', rows[2].uuid]);
      rows.forEach((r, i) => assert.equal(r.created_ms, jobs[i].timestamp));
      assert.deepEqual(await q.addBulk([]), []);
      assert.equal(sent.length, 1, 'an empty addBulk sends nothing');
    });
  });

  it('past 10,000 jobs, one INSERT a 10,000 (Postgres binds at most 65,535 values)', async () => {
    await inTx(async (client) => {
      let sent = 0;
      const db = { query: (text, values) => { sent++; return client.query(text, values); } };
      const jobs = Array.from({ length: 10001 }, (_, i) => ({ name: 'n', data: i }));
      await new StagedQueue('bulk', { db }).addBulk(jobs);
      assert.equal(sent, 2);
      const r = await client.query("SELECT args::text AS a FROM staged_jobs WHERE queue = 'bulk' ORDER BY id");
      assert.deepEqual(r.rows.map((x) => x.a), jobs.map((j) => `[${j.data}]`));
    });
  });
});

describe("the caller's transaction", () => {
  it('pg Client: a rollback takes the jobs with it; a rolled-back savepoint its own', async () => {
    const q = new StagedQueue('tx', { db: app });
    await app.query('BEGIN');
    await q.add('gone', {});
    await app.query('ROLLBACK');
    await app.query('BEGIN');
    await q.add('kept', { n: 1 });
    await app.query('SAVEPOINT s');
    await q.addBulk([{ name: 'gone', data: {} }, { name: 'gone', data: {} }]);
    await app.query('ROLLBACK TO SAVEPOINT s');
    await q.add('kept', { n: 2 });
    await app.query('COMMIT');
    const rows = await stagedRows(admin, 'tx');
    assert.deepEqual(rows.map((r) => [r.job_class, r.args]), [['kept', '[{"n":1}]'], ['kept', '[{"n":2}]']]);
  });

  it('pg PoolClient and Pool', async () => {
    const pool = new pg.Pool({ connectionString: APP_URL, max: 2 });
    try {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await new StagedQueue('pool', { db: client }).add('in-tx', {});
        await client.query('COMMIT');
        await client.query('BEGIN');
        await new StagedQueue('pool', { db: client }).add('rolled-back', {});
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      // The pool itself: each statement its own transaction.
      await new StagedQueue('pool', { db: pool }).add('autocommit', {});
    } finally {
      await pool.end();
    }
    assert.deepEqual((await stagedRows(admin, 'pool')).map((r) => r.job_class), ['in-tx', 'autocommit']);
  });

  it('knex: trx commits, a thrown error rolls back, a nested transaction is a savepoint', async () => {
    const knex = knexLib({ client: 'pg', connection: APP_URL, pool: { min: 0, max: 2 } });
    try {
      await knex.transaction(async (trx) => {
        await trx('node_users').insert({ email: 'a@example.com' });
        const q = new StagedQueue('knex', { db: trx, defaultJobOptions: { attempts: 3 } });
        await q.add('kept', { n: 1 }, { jobId: 'k-1' });
        await trx.transaction(async (sp) => {
          await new StagedQueue('knex', { db: sp }).add('gone', {});
          throw new Error('roll back the savepoint');
        }).catch(() => {});
        await q.addBulk([{ name: 'kept', data: { n: 2 } }, { name: 'kept', data: { n: 3 } }]);
      });
      await knex.transaction(async (trx) => {
        await new StagedQueue('knex', { db: trx }).add('gone', {});
        throw new Error('roll back');
      }).catch(() => {});
      // knex itself, outside a transaction.
      await new StagedQueue('knex', { db: knex }).add('autocommit', {});
    } finally {
      await knex.destroy();
    }
    const rows = await stagedRows(admin, 'knex');
    assert.deepEqual(rows.map((r) => [r.job_class, r.args, r.options]), [
      ['kept', '[{"n":1}]', '{"attempts":3,"jobId":"k-1"}'],
      ['kept', '[{"n":2}]', '{"attempts":3}'],
      ['kept', '[{"n":3}]', '{"attempts":3}'],
      ['autocommit', '[{}]', '{"attempts":0}'],
    ]);
  });

  it('a statement that fails in the database rejects add() with the database error', async () => {
    const closed = await appClient();
    await closed.end();
    await assert.rejects(new StagedQueue('q', { db: closed }).add('n', {}), (err) => !(err instanceof StagedJobError));
  });
});

describe('TypeScript', () => {
  it('the shipped types compile with a typed example (tsc --noEmit)', () => {
    const tsc = require.resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types')], { stdio: 'pipe' });
  });
});
