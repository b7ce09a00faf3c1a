/*
 * A small PM program to show how Persim tests your own code (suites/README.md, "Testing
 * your own PM program"). It keeps two account balances in a file on a DAX file system,
 * mapped with PMDK's libpmem, and moves money between them. The invariant: the balances
 * add up to 100.
 *
 *   transfer FILE init       create the file: a = 100, b = 0
 *   transfer FILE move N     move N from a to b, between checkpoints 1 and 2
 *   transfer FILE show       print {"a": .., "b": .., "sum": ..} (the recovered state)
 *
 * The bug Persim finds: `move` updates both balances and persists them with one
 * pmem_persist. A crash in between can leave either store without the other, and the
 * invariant broken. (A fix: write the new balances to a log entry, persist it, then apply.)
 *
 * `move` marks the interval Persim judges itself (persim_checkpoint, include/persim.h), so
 * the interval holds the program's stores, not its start-up; outside Persim the marks are
 * harmless.
 */
#include <libpmem.h>
#include <persim.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct accounts {
	uint64_t a;
	uint64_t b;
};

static struct accounts *map(const char *path, int create)
{
	size_t len;
	int is_pmem;
	void *addr = pmem_map_file(path, create ? sizeof(struct accounts) : 0,
				   create ? PMEM_FILE_CREATE : 0, 0600, &len, &is_pmem);
	if (addr == NULL) {
		perror(path);
		exit(1);
	}
	if (len < sizeof(struct accounts)) {
		fprintf(stderr, "%s: too short\n", path);
		exit(1);
	}
	return addr;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: transfer FILE init|move N|show\n");
		return 2;
	}
	if (strcmp(argv[2], "init") == 0) {
		struct accounts *acc = map(argv[1], 1);
		acc->a = 100;
		acc->b = 0;
		pmem_persist(acc, sizeof(*acc));
	} else if (strcmp(argv[2], "move") == 0 && argc == 4) {
		struct accounts *acc = map(argv[1], 0);
		uint64_t n = strtoull(argv[3], NULL, 10);
		persim_checkpoint(1);
		acc->a -= n;
		acc->b += n;
		pmem_persist(acc, sizeof(*acc));
		persim_checkpoint(2);
	} else if (strcmp(argv[2], "show") == 0) {
		struct accounts *acc = map(argv[1], 0);
		printf("{\"a\": %llu, \"b\": %llu, \"sum\": %llu}\n", (unsigned long long)acc->a,
		       (unsigned long long)acc->b, (unsigned long long)(acc->a + acc->b));
	} else {
		fprintf(stderr, "usage: transfer FILE init|move N|show\n");
		return 2;
	}
	return 0;
}
