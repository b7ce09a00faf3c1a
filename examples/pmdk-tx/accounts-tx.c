/*
 * A correct libpmemobj program: two account balances in a persistent-memory pool, moved
 * with one PMDK transaction. The subject that shows what `--strategy reads` saves on real
 * PM libraries (docs/results/results.md): libpmemobj keeps run-time bookkeeping in the mapped
 * pool (lanes, the heap's allocation state) that it never makes durable on purpose, so
 * `global-prefix` explores lines no recovery depends on.
 *
 *   accounts-tx POOL init       create the pool: a = 100, b = 0
 *   accounts-tx POOL move N     move N from a to b in one transaction
 *   accounts-tx POOL move-unlogged N
 *                               the same with a bug: the balances are changed inside the
 *                               transaction without adding them to it (no undo log, and
 *                               libpmemobj flushes only what was added)
 *   accounts-tx POOL show       open the pool (libpmemobj's recovery rolls back an
 *                               unfinished transaction) and print {"a", "b", "sum"}
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT "persim-accounts"
/* libpmemobj's smallest pool */
#define POOL_SIZE PMEMOBJ_MIN_POOL

struct accounts {
	uint64_t a;
	uint64_t b;
};

static PMEMobjpool *open_pool(const char *path, int create)
{
	PMEMobjpool *pop = create ? pmemobj_create(path, LAYOUT, POOL_SIZE, 0600)
				  : pmemobj_open(path, LAYOUT);
	if (pop == NULL) {
		fprintf(stderr, "%s: %s\n", path, pmemobj_errormsg());
		exit(1);
	}
	return pop;
}

static struct accounts *root(PMEMobjpool *pop)
{
	PMEMoid oid = pmemobj_root(pop, sizeof(struct accounts));
	if (OID_IS_NULL(oid)) {
		fprintf(stderr, "no root object: %s\n", pmemobj_errormsg());
		exit(1);
	}
	return pmemobj_direct(oid);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: accounts-tx POOL init|move N|move-unlogged N|show\n");
		return 2;
	}
	int create = strcmp(argv[2], "init") == 0;
	PMEMobjpool *pop = open_pool(argv[1], create);
	struct accounts *acc = root(pop);
	int failed = 0;
	if (create) {
		TX_BEGIN(pop) {
			pmemobj_tx_add_range_direct(acc, sizeof(*acc));
			acc->a = 100;
			acc->b = 0;
		} TX_ONABORT {
			failed = 1;
		} TX_END
	} else if (strcmp(argv[2], "move") == 0 && argc == 4) {
		uint64_t n = strtoull(argv[3], NULL, 10);
		TX_BEGIN(pop) {
			pmemobj_tx_add_range_direct(acc, sizeof(*acc));
			acc->a -= n;
			acc->b += n;
		} TX_ONABORT {
			failed = 1;
		} TX_END
	} else if (strcmp(argv[2], "move-unlogged") == 0 && argc == 4) {
		uint64_t n = strtoull(argv[3], NULL, 10);
		TX_BEGIN(pop) {
			acc->a -= n;
			acc->b += n;
		} TX_ONABORT {
			failed = 1;
		} TX_END
	} else if (strcmp(argv[2], "show") == 0) {
		printf("{\"a\": %llu, \"b\": %llu, \"sum\": %llu}\n", (unsigned long long)acc->a,
		       (unsigned long long)acc->b, (unsigned long long)(acc->a + acc->b));
	} else {
		fprintf(stderr, "usage: accounts-tx POOL init|move N|move-unlogged N|show\n");
		failed = 2;
	}
	if (failed == 1)
		fprintf(stderr, "transaction aborted: %s\n", pmemobj_errormsg());
	pmemobj_close(pop);
	return failed;
}
