#include "common.h"

/* The sum is a long double (16 bytes); a double's size is persisted. */
void set_sum(PMEMobjpool *pop, TOID(struct root) r, long double s)
{
	D_RW(r)->sum = s;
	pmemobj_persist(pop, &D_RW(r)->sum, sizeof(double)); /* rule 1b */
}
