/*
 * Small libpmemobj programs for `persim analyze`'s PMDK rules (docs/design/analysis.md): each
 * rule's bug in a function of its own, and the same function done right.
 *
 *   pmdk-rules POOL init      create the pool, with a record to drop later
 *   pmdk-rules POOL buggy     tx_update_unlogged: changes `count` in a transaction
 *                             without adding it (tx-unlogged-store); persist_stack:
 *                             pmemobj_persist of a stack variable (flush-not-pm);
 *                             persist_short: persists 16 of the record's 40 bytes
 *                             (persist-short); new_record: sets only the id of a
 *                             record it allocates (tx-uninitialised-alloc);
 *                             drop_record: reads the record init made after the
 *                             transaction that freed it (use-after-free, with --reads;
 *                             its allocation is not in the trace, so its size is the
 *                             tracer's reading of libpmemobj's header); add_total in two
 *                             threads: both transactions add `total` while both are
 *                             open (tx-overlapping-add)
 *   pmdk-rules POOL correct   the same six, right
 */
#include <libpmemobj.h>
#include <pthread.h>
#include <semaphore.h>
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
	PMEMoid old;
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

/* A new record: its stores need no add, but all of it must be set before commit. */
__attribute__((noinline)) PMEMoid new_record(PMEMobjpool *pop, int whole)
{
	PMEMoid oid = OID_NULL;

	TX_BEGIN(pop) {
		oid = pmemobj_tx_alloc(sizeof(struct record), 1);
		struct record *rec = pmemobj_direct(oid);

		rec->id = 9;
		if (whole) {
			rec->len = 4;
			/* all of the name: strncpy pads it with zeros */
			strncpy(rec->name, "nine", sizeof(rec->name));
		}
	} TX_END
	return oid;
}

/* Frees init's record and returns its length: the bug reads it after the free committed. */
__attribute__((noinline)) uint64_t drop_record(PMEMobjpool *pop, struct root *r, int right)
{
	volatile struct record *rec = pmemobj_direct(r->old);
	uint64_t len = right ? rec->len : 0;

	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&r->old, sizeof(r->old));
		pmemobj_tx_free(r->old);
		r->old = OID_NULL;
	} TX_END
	return right ? len : rec->len;
}

static void make_old_record(PMEMobjpool *pop, struct root *r)
{
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&r->old, sizeof(r->old));
		r->old = pmemobj_tx_zalloc(sizeof(struct record), 1);
		((struct record *)pmemobj_direct(r->old))->len = 3;
	} TX_END
}

struct adder {
	PMEMobjpool *pop;
	struct root *r;
	int first;
};

static sem_t added[2];
static pthread_mutex_t serial = PTHREAD_MUTEX_INITIALIZER;
static int overlapping;

/*
 * Adds to `total` in a transaction. The bug: the two threads' transactions are open at
 * once (each waits for the other's add before committing), so both log `total`; right,
 * a lock makes them one after the other.
 */
__attribute__((noinline)) void *add_total(void *arg)
{
	struct adder *a = arg;
	int me = a->first ? 0 : 1;

	if (!overlapping)
		pthread_mutex_lock(&serial);
	else if (!a->first)
		sem_wait(&added[0]);
	TX_BEGIN(a->pop) {
		pmemobj_tx_add_range_direct(&a->r->total, sizeof(a->r->total));
		a->r->total += 1;
		if (overlapping) {
			sem_post(&added[me]);
			if (a->first)
				sem_wait(&added[1]);
		}
	} TX_END
	if (!overlapping)
		pthread_mutex_unlock(&serial);
	return NULL;
}

static void two_adders(PMEMobjpool *pop, struct root *r, int overlap)
{
	struct adder a[2] = { { pop, r, 1 }, { pop, r, 0 } };
	pthread_t t[2];

	overlapping = overlap;
	sem_init(&added[0], 0, 0);
	sem_init(&added[1], 0, 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, add_total, &a[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
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
	int buggy = strcmp(argv[2], "buggy") == 0;

	if (buggy || strcmp(argv[2], "correct") == 0) {
		if (buggy)
			tx_update_unlogged(pop, r);
		else
			tx_update_logged(pop, r);
		persist_stack(pop, r, !buggy);
		persist_short(pop, r, buggy ? 16 : sizeof(r->rec));
		new_record(pop, !buggy);
		printf("dropped a record of length %lu\n",
		       (unsigned long)drop_record(pop, r, !buggy));
		two_adders(pop, r, buggy);
	} else if (init) {
		make_old_record(pop, r);
	}
	pmemobj_close(pop);
	return 0;
}
