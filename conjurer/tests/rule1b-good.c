#include "common.h"

void set_sum(PMEMobjpool *pop, TOID(struct root) r, long double s)
{
	D_RW(r)->sum = s;
	pmemobj_persist(pop, &D_RW(r)->sum, sizeof(D_RW(r)->sum));
}
