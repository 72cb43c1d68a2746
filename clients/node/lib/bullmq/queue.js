'use strict';
/*
 * StagedQueue: BullMQ's Queue.add and addBulk, writing each job as a row of
 * staged_jobs in the caller's transaction instead of into Redis. The
 * stagedrain relay (--format bullmq) adds committed rows to Redis as
 * BullMQ's own add would; a rolled-back row never reaches a worker.
 */

const { randomUUID } = require('node:crypto');
const { StagedJobError } = require('../errors');
const { dataText, optionsText } = require('../json');
const { handle, insertRows } = require('../db');
const { jobOpts } = require('./options');

// A name the relay reads back as the text it was: a string with no nul and no lone surrogate.
function checkText(what, s) {
  if (typeof s !== 'string' || s === '') throw new StagedJobError(`${what} must be a non-empty string`);
  if (s.includes('\0')) throw new StagedJobError(`${what} contains a nul character`);
  if (!s.isWellFormed()) throw new StagedJobError(`${what} holds a lone surrogate, which is not valid Unicode text`);
}

// QueueBase's rules for a queue's name, and the relay's one reserved name.
function checkQueueName(name) {
  if (!name) throw new StagedJobError('Queue name must be provided');
  checkText('the queue name', name);
  if (name.includes(':')) throw new StagedJobError('Queue name cannot contain :');
  if (name === 'stagedrain') throw new StagedJobError('queue "stagedrain" would share its keys with the relay\'s own');
}

/*
 * A staged job as the worker will see it: its id (the custom jobId, else
 * the one drawn at add()), name, data (as JSON.parse reads what
 * JSON.stringify wrote), opts (as the job hash stores them), timestamp
 * (ms, the add() call's unless opts.timestamp), delay and priority. It is
 * no BullMQ Job: it lives in Postgres until the transaction commits.
 */
class StagedJob {
  constructor(queueName, id, name, data, opts, timestamp) {
    this.queueName = queueName;
    this.id = id;
    this.name = name;
    this.data = data;
    this.opts = opts;
    this.timestamp = timestamp;
    this.delay = opts.delay || 0;
    this.priority = opts.priority || 0;
  }
}

class StagedQueue {
  #handle;
  #jobsOpts;

  /*
   * name: the BullMQ queue's name; opts.db: the handle whose transaction
   * the rows join; opts.defaultJobOptions as BullMQ's Queue takes them;
   * opts.prefix: BullMQ's prefix, which the relay's --bullmq-prefix must
   * equal (nothing of it is stored).
   */
  constructor(name, opts = {}) {
    checkQueueName(name);
    const h = handle(opts.db);
    if (!h) {
      throw new TypeError(
        'StagedQueue needs opts.db: a node-postgres Client or PoolClient, a knex transaction, ' +
          'or an object with query(text, values)',
      );
    }
    const defaults = opts.defaultJobOptions;
    if (defaults !== undefined && (typeof defaults !== 'object' || defaults === null || Array.isArray(defaults))) {
      throw new TypeError('opts.defaultJobOptions must be an object');
    }
    const prefix = opts.prefix === undefined ? 'bull' : opts.prefix;
    if (typeof prefix !== 'string') throw new TypeError('opts.prefix must be a string');
    this.name = name;
    this.prefix = prefix;
    this.#jobsOpts = { ...defaults };
    this.#handle = h;
  }

  /** Returns this queue's default job options, as BullMQ's Queue does. */
  get defaultJobOptions() {
    return { ...this.#jobsOpts };
  }

  /** The row for one job, and the job the worker will see; throws if it cannot be staged. */
  #prepare(name, data, opts, bulk) {
    const now = Date.now();
    checkText('the job name', name);
    const text = dataText(data);
    const { stored, jobId } = jobOpts(this.#jobsOpts, opts, name, text, bulk);
    const options = optionsText(stored);
    const uuid = jobId === undefined ? randomUUID() : null;
    const timestamp = stored.timestamp ? stored.timestamp : now;
    const job = new StagedJob(this.name, jobId === undefined ? uuid : jobId, name, JSON.parse(text),
      JSON.parse(options), timestamp);
    const row = {
      queue: this.name,
      name,
      args: `[${text}]`,
      options,
      uuid,
      createdAt: new Date(now).toISOString(),
    };
    return { row, job };
  }

  /**
   * Stages one job in db's transaction: BullMQ's Queue.add(name, data, opts).
   * Rejects, staging nothing, if BullMQ would refuse the job or the relay
   * could not carry it.
   */
  async add(name, data, opts) {
    const { row, job } = this.#prepare(name, data, opts, false);
    await insertRows(this.#handle, [row]);
    return job;
  }

  /**
   * Stages jobs ({ name, data, opts } each) in one INSERT: BullMQ's
   * Queue.addBulk. All are checked before any is written.
   */
  async addBulk(jobs) {
    if (!Array.isArray(jobs)) throw new StagedJobError('addBulk takes an array of { name, data, opts }');
    const prepared = jobs.map((j, i) => {
      try {
        return this.#prepare(j && j.name, j && j.data, j && j.opts, true);
      } catch (err) {
        if (!(err instanceof StagedJobError)) throw err;
        throw new StagedJobError(`job ${i} of addBulk: ${err.message}`, { cause: err });
      }
    });
    if (prepared.length > 0) await insertRows(this.#handle, prepared.map((p) => p.row));
    return prepared.map((p) => p.job);
  }
}

module.exports = { StagedQueue, StagedJob };
