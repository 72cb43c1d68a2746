/* A sentinel that lies: a thread serving the Sentinel protocol's one question
 * with whatever address the test sets, for the cases real sentinels will not
 * stage on demand (one that still names a demoted master, or a replica). */
#ifndef STAGEDRAIN_SUPPORT_FAKE_SENTINEL_H
#define STAGEDRAIN_SUPPORT_FAKE_SENTINEL_H

#include "fmacros.h"

#include <pthread.h>
#include <stdbool.h>

#define FAKE_SENTINEL_CLIENTS 32

struct fake_sentinel {
	int lfd;  /* listening on 127.0.0.1:port */
	int port; /* chosen by the kernel */
	pthread_t thread;
	pthread_mutex_t lock;
	int answer_port; /* SENTINEL get-master-addr-by-name answers 127.0.0.1:answer_port */
	int asked;       /* how many times it was asked that */
	bool stop;
};

/* Listens and starts answering 127.0.0.1:answer_port; 0 or -errno. SUBSCRIBE
 * is confirmed (and never followed by news), anything else answers +OK. */
int fake_sentinel_start(struct fake_sentinel *f, int answer_port) SD_MUSTCHECK;
void fake_sentinel_answer(struct fake_sentinel *f, int answer_port);
int fake_sentinel_asked(struct fake_sentinel *f);
void fake_sentinel_stop(struct fake_sentinel *f);

#endif
