#include "common.h"

/* The head is freed by the transaction, then its value is read. */
long pop_head(PMEMobjpool *pop, TOID(struct root) r)
{
	TOID(struct node) n = D_RO(r)->head;
	if (TOID_IS_NULL(n))
		return -1;
	TX_BEGIN(pop) {
		TX_ADD_FIELD(r, head);
		D_RW(r)->head = D_RO(n)->next;
		TX_FREE(n);
	} TX_END
	return D_RO(n)->value; /* rule 4 */
}
