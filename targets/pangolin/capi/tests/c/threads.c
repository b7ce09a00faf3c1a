// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Two pthreads share one Pangolin pool through the C ABI, each with its own transactions
 * (a transaction belongs to the thread that began it): each allocates its own counters,
 * then increments them in many transactions while the other does the same, and checks
 * that the other thread's open transaction never shows in its own. Then the pool is
 * reopened and scrubbed: every counter holds its final value and nothing is damaged.
 * Usage: threads POOL-FILE (a new file). Prints "ok" and exits 0, or says what failed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pangolin.h"

#define COUNTERS 8
#define ROUNDS 2000

struct worker {
	PGLpool *pool;
	int id;
	pgl_oid counters[COUNTERS];
	const char *error;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t *value;
	int i, k;

	if (pgl_tx_begin(w->pool))
		return w->error = "begin", NULL;
	for (k = 0; k < COUNTERS; k++)
		if (!(w->counters[k] = pgl_tx_alloc(sizeof(uint64_t), w->id + 1)))
			return w->error = "alloc", NULL;
	if (pgl_tx_commit() || pgl_tx_end())
		return w->error = "commit of the allocations", NULL;
	for (i = 0; i < ROUNDS; i++) {
		if (pgl_tx_begin(w->pool))
			return w->error = "begin", NULL;
		for (k = 0; k < COUNTERS; k++) {
			value = pgl_tx_add_range(w->counters[k], 0, sizeof(*value));
			if (!value)
				return w->error = "add_range", NULL;
			if (*value != (uint64_t)i)
				return w->error = "a counter lost an increment", NULL;
			*value += 1;
		}
		/* This thread's buffer, not the PM copy another thread might read. */
		if (*(const uint64_t *)pgl_get(w->pool, w->counters[0]) != (uint64_t)i + 1)
			return w->error = "pgl_get missed this thread's micro-buffer", NULL;
		if (pgl_tx_commit() || pgl_tx_end())
			return w->error = "commit", NULL;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker workers[2];
	pthread_t threads[2];
	PGLpool *pool;
	int t, k;

	if (argc != 2) {
		fprintf(stderr, "usage: threads POOL-FILE\n");
		return 2;
	}
	pool = pgl_create_pool(argv[1], 8 << 20, 64);
	if (!pool) {
		fprintf(stderr, "create: %s\n", pgl_errormsg());
		return 1;
	}
	for (t = 0; t < 2; t++) {
		workers[t] = (struct worker){ .pool = pool, .id = t };
		if (pthread_create(&threads[t], NULL, work, &workers[t]))
			return 1;
	}
	for (t = 0; t < 2; t++) {
		pthread_join(threads[t], NULL);
		if (workers[t].error) {
			fprintf(stderr, "thread %d: %s: %s\n", t, workers[t].error, pgl_errormsg());
			return 1;
		}
	}
	pgl_close_pool(pool);
	pool = pgl_open_pool(argv[1]);
	if (!pool || pgl_scrub(pool) != 0 || pgl_repairs(pool) != 0) {
		fprintf(stderr, "reopen and scrub: %s\n", pgl_errormsg());
		return 1;
	}
	for (t = 0; t < 2; t++)
		for (k = 0; k < COUNTERS; k++)
			if (*(const uint64_t *)pgl_get(pool, workers[t].counters[k]) != ROUNDS ||
			    pgl_type_num(pool, workers[t].counters[k]) != t + 1) {
				fprintf(stderr, "thread %d counter %d is wrong\n", t, k);
				return 1;
			}
	pgl_close_pool(pool);
	printf("ok\n");
	return 0;
}
