#include "common.h"

void set_count(PMEMobjpool *pop, TOID(struct root) r, long n)
{
	D_RW(r)->count = n;
	pmemobj_persist(pop, &D_RW(r)->count, sizeof(D_RW(r)->count));
}
