#include "common.h"

long pop_head(PMEMobjpool *pop, TOID(struct root) r)
{
	TOID(struct node) n = D_RO(r)->head;
	if (TOID_IS_NULL(n))
		return -1;
	long value = D_RO(n)->value;
	TX_BEGIN(pop) {
		TX_ADD_FIELD(r, head);
		D_RW(r)->head = D_RO(n)->next;
		TX_FREE(n);
		/* Before the commit the object is still there. */
		value += D_RO(n)->key;
	} TX_END
	return value;
}
