'use strict';
/*
 * End to end on Redis Cluster: a 3-master, 3-replica cluster started here
 * (tests/services.sh cluster-start in TEST_DIR, stopped at the end), jobs
 * staged through StagedQueue, the real relay pushing them with
 * --redis-url redis-cluster://... (--format bullmq), and real BullMQ 6.7
 * Workers on an ioredis Cluster connection running them. Queues are
 * hash-tagged by name ({q1}, {q2}, ...: spread over the three masters) or
 * by a tagged prefix ({bull}: all in one slot, reached through a route);
 * an untagged queue is dead-lettered by the relay.
 */

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { Cluster } = require('ioredis');
const { Queue, Worker } = require('bullmq');
const { StagedQueue } = require('stagedrain/bullmq');
const { appClient, adminClient, waitFor, startRelay, stopRelay } = require('./support');

const DIR = process.env.TEST_DIR;

// tests/services.sh VERB DIR ARGS...: its output, trimmed.
function services(verb, ...args) {
  const script = process.env.TEST_SERVICES;
  if (!script) throw new Error('TEST_SERVICES is not set: run under tests/services.sh run');
  return execFileSync('bash', [script, verb, DIR, ...args], { encoding: 'utf8' }).trim();
}

// Tagged by name under BullMQ's default prefix: {q1}, {q2} and {q4} fall on
// the three masters' slot ranges (7450, 11641, 3519), the others anywhere.
const NAMED = ['{q1}', '{q2}', '{q4}', '{q5}', '{q6}', '{q7}'];
// Untagged names under a tagged prefix: every key in the slot of {bull}.
const PREFIXED = ['mail', 'push'];
const PREFIX = '{bull}';
const PER_QUEUE = 40;

let url;
let connection;
let relay;
let admin;
let app;
const workers = [];
const queues = new Map(); // name -> BullMQ Queue
const ran = new Map(); // name -> what each run saw, in the order they ran

const prefixOf = (name) => (PREFIXED.includes(name) ? PREFIX : 'bull');

before(async () => {
  services('cluster-start');
  url = fs.readFileSync(path.join(DIR, 'cluster.url'), 'utf8').trim();
  // The seeds as ioredis takes them; it learns the other nodes from them.
  const seeds = url.replace(/^redis-cluster:\/\//, '').split(',').map((hp) => {
    const [host, port] = hp.split(':');
    return { host, port: Number(port) };
  });
  connection = new Cluster(seeds, { redisOptions: { maxRetriesPerRequest: null } });
  admin = await adminClient();
  app = await appClient();
  await admin.query('DELETE FROM staged_jobs');
  await admin.query('DELETE FROM staged_jobs_dead');
  for (const name of [...NAMED, ...PREFIXED]) {
    ran.set(name, []);
    queues.set(name, new Queue(name, { connection, prefix: prefixOf(name) }));
    const w = new Worker(
      name,
      async (job) => {
        ran.get(name).push({ id: job.id, data: job.data });
      },
      { connection, prefix: prefixOf(name), concurrency: 1 },
    );
    w.on('error', () => {}); // a closing connection; the waits report what matters
    workers.push(w);
  }
  // One relay: its default target takes {qN} under "bull", a route the
  // prefixed queues under {bull}, both on the same cluster.
  relay = startRelay('cluster', [
    '--poll-interval', '10ms', '--batch-size', '50',
    '--route', `tagged-prefix ${PREFIXED.join(',')} --redis-url ${url} --bullmq-prefix ${PREFIX}`,
  ], url);
});

after(async () => {
  try {
    for (const w of workers) await w.close();
    for (const q of queues.values()) await q.close();
    const how = relay ? await stopRelay(relay) : { code: 0 };
    if (connection) await connection.quit();
    if (app) await app.end();
    if (admin) await admin.end();
    assert.equal(how.code, 0, `the relay exited with ${how.code ?? how.signal}; see ${relay.logPath}`);
  } finally {
    services('cluster-stop');
  }
});

async function slotOf(key) {
  return Number(await connection.call('CLUSTER', 'KEYSLOT', key));
}

describe('a Redis Cluster target', () => {
  it('jobs on queues over all three masters and under a tagged prefix run once each, in order per queue', async () => {
    // Where each queue's keys live: its wait list's slot, and that slot's master now.
    const masters = new Set();
    for (const name of NAMED) masters.add(services('cluster-master-of', String(await slotOf(`bull:${name}:wait`))));
    assert.equal(masters.size, 3, 'the tagged names spread the queues over the three masters');
    const prefixed = await Promise.all(PREFIXED.map((n) => slotOf(`${PREFIX}:${n}:wait`)));
    assert.equal(new Set(prefixed).size, 1, 'the tagged prefix puts every queue in one slot');

    // Two transactions, each with every queue's jobs interleaved: each batch
    // the relay takes holds several slots.
    const staged = new Map([...queues.keys()].map((n) => [n, []]));
    const half = PER_QUEUE / 2;
    await app.query('BEGIN');
    for (let i = 0; i < half; i++) {
      for (const name of staged.keys()) {
        staged.get(name).push(await new StagedQueue(name, { db: app, prefix: prefixOf(name) }).add('step', { q: name, i }));
      }
    }
    await app.query('COMMIT');
    await app.query('BEGIN');
    for (const name of staged.keys()) {
      const jobs = Array.from({ length: PER_QUEUE - half }, (_, k) => ({ name: 'step', data: { q: name, i: half + k } }));
      staged.get(name).push(...await new StagedQueue(name, { db: app, prefix: prefixOf(name) }).addBulk(jobs));
    }
    await app.query('COMMIT');

    await waitFor('every job to run', () => [...ran.values()].every((r) => r.length >= PER_QUEUE), 60000);
    await waitFor('the relay to drain staged_jobs', async () =>
      (await admin.query('SELECT count(*)::int AS n FROM staged_jobs')).rows[0].n === 0);
    for (const [name, q] of queues) {
      await waitFor(`${name} to be idle`, async () => {
        const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'paused');
        return Object.values(c).every((n) => n === 0);
      });
    }
    // Drained and idle: no second run can come now.
    for (const [name, jobs] of staged) {
      const runs = ran.get(name);
      assert.deepEqual(runs.map((r) => r.id), jobs.map((j) => j.id), `${name}: each job once, in the order staged`);
      assert.deepEqual(runs.map((r) => r.data), jobs.map((j) => j.data), `${name}: the data as staged`);
    }
    assert.deepEqual((await admin.query('SELECT queue FROM staged_jobs_dead')).rows, [], 'nothing dead-lettered');
  });

  it("an untagged queue's job is dead-lettered with the fix in its reason, where BullMQ's own add is refused", async () => {
    // StagedQueue does not know the relay's target (a route may send the
    // queue anywhere): it stages the job, and the relay says what is wrong.
    await app.query('BEGIN');
    const job = await new StagedQueue('untagged', { db: app }).add('lost', { n: 1 });
    await app.query('COMMIT');
    const dead = await waitFor('the relay to dead-letter it', async () =>
      (await admin.query("SELECT queue, job_class, args::text, reason FROM staged_jobs_dead WHERE queue = 'untagged'")).rows[0]);
    assert.equal(dead.job_class, 'lost');
    assert.deepEqual(JSON.parse(dead.args), [job.data]);
    assert.match(dead.reason, /^queue "untagged" has no hash tag for Redis Cluster: .*\{untagged\}.*prefix/);
    assert.equal((await admin.query("SELECT count(*)::int AS n FROM staged_jobs WHERE queue = 'untagged'")).rows[0].n, 0);
    const own = new Queue('untagged', { connection });
    try {
      await assert.rejects(own.add('lost', { n: 1 }), /CROSSSLOT/);
    } finally {
      await own.close();
    }
  });
});
