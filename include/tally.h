/* What the relay moved since it started: the figures its last line gives. */
#ifndef STAGEDRAIN_TALLY_H
#define STAGEDRAIN_TALLY_H

struct tally {
	long long relayed; /* jobs pushed and deleted (a fence's deletes included) */
	long long dead;    /* rows moved to staged_jobs_dead */
};

#endif
