#include "common.h"

/* A reserved node is filled in and published without a flush. */
void add(PMEMobjpool *pop, TOID(struct root) root, long key)
{
	struct pobj_action act[2];
	PMEMoid oid = pmemobj_reserve(pop, &act[0], sizeof(struct node), 1);
	if (OID_IS_NULL(oid))
		return;
	struct node *n = pmemobj_direct(oid);
	n->key = key;
	pmemobj_set_value(pop, &act[1], &D_RW(root)->head.oid.off, oid.off);
	pmemobj_publish(pop, act, 2);
} /* rule 1 */
