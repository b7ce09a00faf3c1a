#include "common.h"

void bump(PMEMobjpool *pop, TOID(struct root) r)
{
	TOID(struct node) n = D_RO(r)->head;
	D_RW(n)->value++;
	D_RW(r)->count++;
	pmemobj_flush(pop, &D_RW(n)->value, sizeof(D_RW(n)->value));
	pmemobj_flush(pop, &D_RW(r)->count, sizeof(D_RW(r)->count));
	pmemobj_drain(pop);
}
