/*
 * Small libpmemobj programs for `persim analyze`'s PMDK rules (docs/analysis.md): each
 * rule's bug in a function of its own, and the same function done right.
 *
 *   pmdk-rules POOL init      create the pool
 *   pmdk-rules POOL buggy     tx_update_unlogged: changes `count` in a transaction
 *                             without adding it (tx-unlogged-store); persist_stack:
 *                             pmemobj_persist of a stack variable (flush-not-pm);
 *                             persist_short: persists 16 of the record's 40 bytes
 *                             (persist-short)
 *   pmdk-rules POOL correct   the same three, right
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct record {
	uint64_t id;
	uint64_t len;
	char name[24];
};

struct root {
	uint64_t total;
	uint64_t count;
	struct record rec;
};

void tx_update(PMEMobjpool *pop, struct root *r, int log_count)
{
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&r->total, sizeof(r->total));
		if (log_count)
			pmemobj_tx_add_range_direct(&r->count, sizeof(r->count));
		r->total += 10;
		r->count += 1;
	} TX_END
}

__attribute__((noinline)) void tx_update_unlogged(PMEMobjpool *pop, struct root *r)
{
	tx_update(pop, r, 0);
}

__attribute__((noinline)) void tx_update_logged(PMEMobjpool *pop, struct root *r)
{
	tx_update(pop, r, 1);
}

__attribute__((noinline)) void persist_stack(PMEMobjpool *pop, struct root *r, int right)
{
	uint64_t total = r->total + 1;
	r->total = total;
	/* the bug: the address of the local copy, not of the field */
	pmemobj_persist(pop, right ? (void *)&r->total : (void *)&total, sizeof(total));
}

__attribute__((noinline)) void persist_short(PMEMobjpool *pop, struct root *r, size_t len)
{
	r->rec.id = 7;
	r->rec.len = 5;
	strcpy(r->rec.name, "seven");
	pmemobj_persist(pop, &r->rec, len);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: pmdk-rules POOL init|buggy|correct\n");
		return 2;
	}
	int init = strcmp(argv[2], "init") == 0;
	PMEMobjpool *pop = init ? pmemobj_create(argv[1], "pmdk-rules", PMEMOBJ_MIN_POOL, 0600)
				: pmemobj_open(argv[1], "pmdk-rules");
	if (pop == NULL) {
		fprintf(stderr, "%s: %s\n", argv[1], pmemobj_errormsg());
		return 1;
	}
	struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
	if (strcmp(argv[2], "buggy") == 0) {
		tx_update_unlogged(pop, r);
		persist_stack(pop, r, 0);
		persist_short(pop, r, 16);
	} else if (strcmp(argv[2], "correct") == 0) {
		tx_update_logged(pop, r);
		persist_stack(pop, r, 1);
		persist_short(pop, r, sizeof(r->rec));
	}
	pmemobj_close(pop);
	return 0;
}
