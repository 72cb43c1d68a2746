'use strict';
// require('stagedrain/bullmq'): BullMQ's Queue.add, staged in your transaction.
const { StagedQueue, StagedJob } = require('./lib/bullmq/queue');
const { StagedJobError } = require('./lib/errors');

module.exports = { StagedQueue, StagedJob, StagedJobError };
