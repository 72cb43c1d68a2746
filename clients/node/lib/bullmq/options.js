'use strict';
/*
 * A job's options as BullMQ 6.7's own Queue.add makes, checks and stores
 * them (Queue.addJob and addBulk, the Job constructor, Job.validateOptions,
 * Backoffs.normalize, the Redis backend's optsAsJSON), and refused where the
 * relay cannot carry them: a bad option throws before anything is staged.
 */

const { StagedJobError } = require('../errors');

// BullMQ's PRIORITY_LIMIT.
const PRIORITY_LIMIT = 2 ** 21 - 1;

// BullMQ's optsEncodeMap: the short names the job hash stores.
const ENCODE = {
  deduplication: 'de',
  failParentOnFailure: 'fpof',
  continueParentOnFailure: 'cpof',
  ignoreDependencyOnFailure: 'idof',
  keepLogs: 'kl',
  removeDependencyOnFailure: 'rdof',
};

const EXCLUSIVE = [
  'removeDependencyOnFailure',
  'failParentOnFailure',
  'continueParentOnFailure',
  'ignoreDependencyOnFailure',
];

// What the relay cannot carry, and where to go instead.
const REFUSED = {
  repeat: 'repeatable jobs are job schedulers: add them with Queue.upsertJobScheduler on a BullMQ Queue',
  repeatJobKey: "repeatJobKey belongs to BullMQ's job schedulers (Queue.upsertJobScheduler)",
  parent: 'jobs with a parent (flows) are not staged: add them with BullMQ\'s FlowProducer',
  deduplication: 'deduplication is not staged: the relay adds a job whose id exists no second time, so a jobId ' +
    'of your own is the staged way to add a job once',
};

// Options keys the relay writes itself (relay/job_build.c): it refuses rows that set them.
const RESERVED = ['class', 'args', 'queue', 'jid', 'created_at', 'enqueued_at', 'at'];

const NUMBERS = ['timestamp', 'delay', 'priority', 'attempts', 'stackTraceLimit', 'keepLogs', 'sizeLimit'];

function fail(message) {
  throw new StagedJobError(message);
}

function given(v) {
  return v !== undefined && v !== null;
}

function isPlainObject(v) {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

// Queue.addJob's check, for addBulk too (BullMQ's addBulk skips it, but the
// relay refuses such an id either way).
function checkJobIdShape(jobId) {
  if (!given(jobId)) return;
  if (typeof jobId !== 'string') {
    fail(`opts.jobId must be a string, not ${typeof jobId} (BullMQ's ids are strings)`);
  }
  if (jobId === '0' || jobId.startsWith('0:')) fail("JobId cannot be '0' or start with '0:'");
}

// Queue.addJob / addBulk: defaults, then the job's own, with jobId (and in
// addBulk telemetry) taken from the job's own only.
function merge(defaults, opts, bulk) {
  const merged = { ...defaults, ...opts, jobId: opts ? opts.jobId : undefined };
  if (bulk) merged.telemetry = opts ? opts.telemetry : undefined;
  return merged;
}

// Backoffs.normalize.
function normalizeBackoff(backoff) {
  if (Number.isFinite(backoff)) return { type: 'fixed', delay: backoff };
  if (backoff) return backoff;
  return undefined;
}

// The Job constructor: attempts first, repeatJobKey taken out, backoff normalized.
function jobOptions(merged) {
  const { repeatJobKey, ...rest } = merged;
  const opts = { attempts: 0, ...rest };
  opts.backoff = normalizeBackoff(merged.backoff);
  return { opts, repeatJobKey };
}

// Job.validateOptions, as BullMQ 6.7 words it.
function validateAsBullmq(opts, name, dataText) {
  if (opts.sizeLimit && Buffer.byteLength(dataText, 'utf8') > opts.sizeLimit) {
    fail(`The size of job ${name} exceeds the limit ${opts.sizeLimit} bytes`);
  }
  const exclusive = EXCLUSIVE.filter((o) => opts[o]);
  if (exclusive.length > 1) fail(`The following options cannot be used together: ${exclusive.join(', ')}`);
  if (opts.jobId) {
    if (`${parseInt(opts.jobId, 10)}` === opts.jobId) fail('Custom Id cannot be integers');
    if (opts.jobId.includes(':') && opts.jobId.split(':').length !== 3) fail('Custom Id cannot contain :');
  }
  if (opts.priority) {
    if (Math.trunc(opts.priority) !== opts.priority) fail('Priority should not be float');
    if (opts.priority > PRIORITY_LIMIT) fail(`Priority should be between 0 and ${PRIORITY_LIMIT}`);
  }
  if (Object.prototype.hasOwnProperty.call(opts, 'debounce')) {
    fail('Debounce option has been removed. Use deduplication option instead');
  }
  if (typeof opts.backoff === 'object' && typeof opts.backoff.jitter === 'number') {
    if (opts.backoff.jitter < 0 || opts.backoff.jitter > 1) fail('Jitter should be between 0 and 1');
  }
}

// What BullMQ lets through but the relay cannot carry, or carries otherwise.
function validateForRelay(opts, repeatJobKey) {
  const refused = { ...opts, repeatJobKey };
  for (const key of Object.keys(REFUSED)) {
    if (given(refused[key])) fail(`opts.${key}: ${REFUSED[key]}`);
  }
  for (const key of NUMBERS) {
    if (given(opts[key]) && !Number.isFinite(opts[key])) {
      fail(`opts.${key} must be a finite number, not ${String(opts[key])}`);
    }
  }
  if (given(opts.priority) && opts.priority < 0) fail(`Priority should be between 0 and ${PRIORITY_LIMIT}`);
  if (given(opts.lifo) && typeof opts.lifo !== 'boolean') fail('opts.lifo must be true or false');
  if (given(opts.jobId) && opts.jobId.includes('\0')) fail('opts.jobId contains a nul character');
  if (given(opts.backoff) && (typeof opts.backoff !== 'object' || Array.isArray(opts.backoff))) {
    fail('opts.backoff must be a number of milliseconds or an object such as { type: "fixed", delay: 1000 }');
  }
  for (const key of ['removeOnComplete', 'removeOnFail']) {
    const v = opts[key];
    if (!given(v)) continue;
    if (typeof v === 'boolean' || Number.isFinite(v)) continue;
    if (typeof v === 'object' && !Array.isArray(v)) continue;
    fail(`opts.${key} must be true or false, a number of jobs to keep, or { count, age }`);
  }
}

/*
 * A null is no value in BullMQ's Redis scripts (a Lua table holds no nil):
 * its own add stores no key for it, in opts and in any object inside them
 * (arrays keep theirs). The same here, so the job hash's opts match.
 */
function withoutNulls(v, depth) {
  if (depth > 100) fail('job options nest deeper than 100 levels (or hold a cycle), which the relay refuses');
  if (Array.isArray(v)) return v.map((x) => (x === null ? x : withoutNulls(x, depth + 1)));
  if (!isPlainObject(v)) return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (x !== null && x !== undefined) out[k] = withoutNulls(x, depth + 1);
  }
  return out;
}

// optsAsJSON: the short names, undefined left out (and null, as above).
function storedOptions(opts) {
  const out = {};
  for (const [key, value] of Object.entries(opts)) {
    if (value === undefined || value === null) continue;
    if (Object.prototype.hasOwnProperty.call(ENCODE, key)) {
      out[ENCODE[key]] = withoutNulls(value, 1);
    } else if (key === 'telemetry') {
      if (given(value.metadata)) out.tm = withoutNulls(value.metadata, 1);
      if (given(value.omitContext)) out.omc = withoutNulls(value.omitContext, 1);
    } else {
      out[key] = withoutNulls(value, 1);
    }
  }
  for (const key of RESERVED) {
    if (Object.prototype.hasOwnProperty.call(out, key)) {
      fail(`opts.${key}: the relay writes "${key}" itself and refuses jobs whose options set it`);
    }
  }
  return out;
}

/*
 * One job's options, from the queue's defaults and the add() call's own,
 * checked against the job's name and data text. Returns the options as
 * stored and the custom id ('' or undefined: none).
 */
function jobOpts(defaults, callOpts, name, dataText, bulk) {
  if (given(callOpts) && (typeof callOpts !== 'object' || Array.isArray(callOpts))) fail('opts must be an object');
  const jobId = callOpts ? callOpts.jobId : undefined;
  checkJobIdShape(jobId);
  const { opts, repeatJobKey } = jobOptions(merge(defaults, callOpts, bulk));
  validateAsBullmq(opts, name, dataText);
  validateForRelay(opts, repeatJobKey);
  return { stored: storedOptions(opts), jobId: given(jobId) && jobId !== '' ? jobId : undefined };
}

module.exports = { jobOpts, PRIORITY_LIMIT };
