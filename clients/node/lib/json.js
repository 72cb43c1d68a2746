'use strict';
// A job's JSON text as the relay will take it: what JSON.stringify wrote,
// refused here when the relay's check (relay/job_build.c) would refuse it.

const { StagedJobError } = require('./errors');

// The relay refuses args nesting deeper than 99 levels; args is [data].
const DATA_MAX_DEPTH = 98;
// and options deeper than 100 (the object itself is one level).
const OPTIONS_MAX_DEPTH = 100;

/*
 * JSON.stringify writes a lone surrogate as an escape (\ud800) and a pair
 * as the characters themselves, so an escape of the surrogate range
 * outside an escaped backslash is a lone one. The relay (jansson) refuses
 * it; a worker would read it back, so it must not reach the table.
 */
const LONE_SURROGATE = /(?:^|[^\\])(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/;

function hasLoneSurrogate(text) {
  return text.includes('\\ud') && LONE_SURROGATE.test(text);
}

// Whether JSON text (as JSON.stringify writes it) nests deeper than limit.
function deeperThan(text, limit) {
  // Each level takes two characters at least.
  if (text.length < 2 * (limit + 1)) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string: to the next quote not escaped by a backslash.
      let j = text.indexOf('"', i + 1);
      for (;;) {
        let k = j - 1;
        while (text.charCodeAt(k) === 0x5c) k--;
        if ((j - 1 - k) % 2 === 0) break;
        j = text.indexOf('"', j + 1);
      }
      i = j;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

// The job's data as text, as BullMQ's Job.asJSON writes it (undefined is {}).
function dataText(data) {
  let text;
  try {
    text = JSON.stringify(data === undefined ? {} : data);
  } catch (err) {
    throw new StagedJobError(`job data cannot be written as JSON: ${err.message}`, { cause: err });
  }
  if (text === undefined) {
    throw new StagedJobError(
      `job data is a ${typeof data}, which JSON cannot carry (BullMQ's own add would store undefined)`,
    );
  }
  if (hasLoneSurrogate(text)) {
    throw new StagedJobError('job data holds a string with a lone surrogate, which is not valid Unicode text');
  }
  if (deeperThan(text, DATA_MAX_DEPTH)) {
    throw new StagedJobError(`job data nests deeper than ${DATA_MAX_DEPTH} levels, which the relay refuses`);
  }
  return text;
}

// The options' text; they are ours (options.js made them), so only the relay's limits.
function optionsText(opts) {
  let text;
  try {
    text = JSON.stringify(opts);
  } catch (err) {
    throw new StagedJobError(`job options cannot be written as JSON: ${err.message}`, { cause: err });
  }
  if (hasLoneSurrogate(text)) {
    throw new StagedJobError('job options hold a string with a lone surrogate, which is not valid Unicode text');
  }
  if (deeperThan(text, OPTIONS_MAX_DEPTH)) {
    throw new StagedJobError(`job options nest deeper than ${OPTIONS_MAX_DEPTH} levels, which the relay refuses`);
  }
  return text;
}

module.exports = { dataText, optionsText, deeperThan, hasLoneSurrogate, DATA_MAX_DEPTH, OPTIONS_MAX_DEPTH };
