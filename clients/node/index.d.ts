// require('stagedrain'): the same as require('stagedrain/bullmq').
export * from './bullmq';
