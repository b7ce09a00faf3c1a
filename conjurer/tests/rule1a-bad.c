#include "common.h"

/* The copy on the stack is persisted, not the object in PM. */
void set_count(PMEMobjpool *pop, TOID(struct root) r, long n)
{
	struct root copy = *D_RO(r);
	copy.count = n;
	pmemobj_persist(pop, &copy, sizeof(copy)); /* rule 1a */
	long *heap = malloc(sizeof(long));
	if (!heap)
		return;
	*heap = n;
	pmem_persist(heap, sizeof(*heap)); /* rule 1a */
	free(heap);
}
