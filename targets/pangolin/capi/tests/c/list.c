// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A linked list in a Pangolin pool through the C ABI: build it in transactions, reopen
 * the pool and walk it, update one node alone, see a buffer overrun abort a transaction.
 * Usage: list POOL-FILE (a new file), or list check POOL-FILE: scrub the pool (repairing
 * what it can) and check the list. Prints "ok" and exits 0, or says what failed and
 * exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pangolin.h"

struct node {
	pgl_oid next;
	uint64_t value;
};

static int failed(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, pgl_errormsg());
	return 1;
}

/* The sum of the list's values, read directly. */
static uint64_t walk(PGLpool *pool)
{
	const struct node *seen;
	uint64_t sum = 0;
	pgl_oid oid;

	for (oid = *(const pgl_oid *)pgl_get(pool, pgl_root(pool)); oid; oid = seen->next) {
		seen = pgl_get(pool, oid);
		sum += seen->value;
	}
	return sum;
}

/* After the build below, the head holds 100 instead of 10: 45 + 100. */
static int check(const char *path)
{
	PGLpool *pool = pgl_open_pool(path);
	uint64_t sum;

	if (!pool)
		return failed("open");
	if (pgl_scrub(pool) != 0)
		return failed("scrub");
	sum = walk(pool);
	if (sum != 145) {
		fprintf(stderr, "the list sums to %llu, not 145\n", (unsigned long long)sum);
		return 1;
	}
	pgl_close_pool(pool);
	puts("ok");
	return 0;
}

int main(int argc, char **argv)
{
	PGLpool *pool;
	pgl_oid head, oid;
	struct node *node;
	const struct node *seen;
	uint64_t sum;
	int i;

	if (argc == 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s [check] POOL-FILE\n", argv[0]);
		return 2;
	}
	pool = pgl_create_pool(argv[1], 8 << 20, sizeof(pgl_oid));
	if (!pool)
		return failed("create");
	for (i = 1; i <= 10; i++) {
		if (pgl_tx_begin(pool))
			return failed("begin");
		oid = pgl_tx_alloc(sizeof(*node), 1);
		node = pgl_tx_open(oid);
		if (!oid || !node)
			return failed("alloc");
		node->value = i;
		node->next = *(const pgl_oid *)pgl_get(pool, pgl_root(pool));
		*(pgl_oid *)pgl_tx_add_range(pgl_root(pool), 0, sizeof(pgl_oid)) = oid;
		if (pgl_tx_commit() || pgl_tx_end())
			return failed("commit");
	}
	pgl_close_pool(pool);

	pool = pgl_open_pool(argv[1]);
	if (!pool)
		return failed("reopen");
	head = *(const pgl_oid *)pgl_get(pool, pgl_root(pool));
	sum = walk(pool);
	if (sum != 55) {
		fprintf(stderr, "the list sums to %llu, not 55\n", (unsigned long long)sum);
		return 1;
	}

	node = pgl_open(pool, head);
	if (!node)
		return failed("open");
	node->value = 100;
	if (pgl_commit())
		return failed("single-object commit");

	if (pgl_tx_begin(pool))
		return failed("begin");
	node = pgl_tx_open(head);
	node->value = 7;
	memset((char *)node + sizeof(*node), 0xff, 8); /* an overrun into the canary */
	if (pgl_tx_commit() == 0) {
		fprintf(stderr, "a commit after an overrun succeeded\n");
		return 1;
	}
	if (pgl_tx_end() == 0 || !strstr(pgl_errormsg(), "aborted")) {
		fprintf(stderr, "the aborted transaction ended as committed\n");
		return 1;
	}
	/* The thread has no transaction now: each call says so, and a second begin fails. */
	if (pgl_tx_commit() == 0 || pgl_tx_end() == 0 || !strstr(pgl_errormsg(), "no transaction")) {
		fprintf(stderr, "a commit or end without a transaction succeeded\n");
		return 1;
	}
	if (pgl_tx_begin(pool) || pgl_tx_begin(pool) == 0 || pgl_tx_end() == 0) {
		fprintf(stderr, "a second begin succeeded, or the first was not aborted\n");
		return 1;
	}
	seen = pgl_get(pool, head);
	if (seen->value != 100) {
		fprintf(stderr, "the head holds %llu, not 100\n", (unsigned long long)seen->value);
		return 1;
	}
	if (pgl_scrub(pool) != 0)
		return failed("scrub");
	pgl_close_pool(pool);
	puts("ok");
	return 0;
}
