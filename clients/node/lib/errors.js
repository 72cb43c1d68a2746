'use strict';
// The one error class the package throws: a job it will not stage, with why.

class StagedJobError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'StagedJobError';
  }
}

module.exports = { StagedJobError };
