#include "common.h"

/* The new node is linked in but never written: its fields are garbage. */
void push_empty(PMEMobjpool *pop, TOID(struct root) r)
{
	TX_BEGIN(pop) {
		TOID(struct node) n = TX_NEW(struct node);
		TX_ADD_FIELD(r, head);
		D_RW(r)->head = n;
	} TX_END /* rule 3 */
}
