#include "common.h"

/* Two objects are stored to; only the node is flushed before the fence. */
void bump(PMEMobjpool *pop, TOID(struct root) r)
{
	TOID(struct node) n = D_RO(r)->head;
	D_RW(n)->value++;
	D_RW(r)->count++;
	pmemobj_flush(pop, &D_RW(n)->value, sizeof(D_RW(n)->value));
	pmemobj_drain(pop); /* rule 1 */
}
