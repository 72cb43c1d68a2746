'use strict';
// require('stagedrain'): the same as require('stagedrain/bullmq'), BullMQ being the one stack so far.
module.exports = require('./bullmq');
