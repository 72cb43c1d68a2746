'use strict';
/*
 * What the Node client's tests share: connections as the app, the relay and
 * the superuser (test/run made the roles), the relay started and stopped by
 * PID, and waits on a condition rather than on the clock.
 */

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run under test/run`);
  return v;
};

const ADMIN_URL = env('TEST_PG_URL');
const APP_URL = env('STAGEDRAIN_APP_PG_URL');
const RELAY_URL = env('STAGEDRAIN_RELAY_PG_URL');
const REDIS_URL = env('TEST_REDIS_URL');
const LOG_DIR = path.join(env('TEST_DIR'), 'node-client');
fs.mkdirSync(LOG_DIR, { recursive: true });

// A connected pg.Client, as the app (the rows go in as the app role would write them).
async function appClient() {
  const c = new pg.Client({ connectionString: APP_URL });
  await c.connect();
  return c;
}

async function adminClient() {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  return c;
}

// The app's rows as the table holds them, in id order (args and options as text).
async function stagedRows(admin, queue) {
  const r = await admin.query(
    `SELECT id, queue, job_class, args::text AS args, options::text AS options, uuid::text AS uuid,
            (extract(epoch FROM created_at) * 1000)::float8 AS created_ms, run_at
       FROM staged_jobs WHERE queue = $1 ORDER BY id`,
    [queue],
  );
  return r.rows;
}

const now = () => Number(process.hrtime.bigint() / 1000000n);

// Until fn() gives something truthy (checked every 10 ms); fails after timeoutMs.
async function waitFor(what, fn, timeoutMs = 20000) {
  const deadline = now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function relayArgv(extra, redisUrl) {
  return ['--pg-url', RELAY_URL, '--redis-url', redisUrl, '--format', 'bullmq', '--log-level', 'info', ...extra];
}

// The relay, running until stopRelay (its log in TEST_DIR/node-client/NAME.log),
// pushing to the harness's Redis or to redisUrl.
function startRelay(name, extra = ['--poll-interval', '10ms'], redisUrl = REDIS_URL) {
  const log = fs.openSync(path.join(LOG_DIR, `${name}.log`), 'a');
  const child = spawn(env('STAGEDRAIN_BIN'), relayArgv(extra, redisUrl), { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  child.logPath = path.join(LOG_DIR, `${name}.log`);
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return child;
}

// SIGTERM (or the signal given) by PID, and its exit.
async function stopRelay(child, signal = 'SIGTERM') {
  if (child.exitCode !== null || child.signalCode !== null) return child.exited;
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
  const how = await child.exited;
  clearTimeout(timer);
  return how;
}

// `stagedrain --once`: drains what is committed, then exits 0.
async function relayOnce(name) {
  const child = startRelay(name, ['--once']);
  const how = await child.exited;
  if (how.code !== 0) throw new Error(`relay --once exited with ${how.code ?? how.signal}; see ${child.logPath}`);
}

module.exports = {
  ADMIN_URL,
  APP_URL,
  REDIS_URL,
  LOG_DIR,
  appClient,
  adminClient,
  stagedRows,
  waitFor,
  now,
  startRelay,
  stopRelay,
  relayOnce,
};
