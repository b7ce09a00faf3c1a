#include "common.h"

void push_empty(PMEMobjpool *pop, TOID(struct root) r)
{
	TX_BEGIN(pop) {
		TOID(struct node) n = TX_ZNEW(struct node);
		TX_ADD_FIELD(r, head);
		D_RW(r)->head = n;
	} TX_END
}
