#include "common.h"

void push(PMEMobjpool *pop, TOID(struct root) r, long key)
{
	TX_BEGIN(pop) {
		TOID(struct node) n = TX_NEW(struct node);
		D_RW(n)->key = key;
		D_RW(n)->value = 0;
		D_RW(n)->next = D_RO(r)->head;
		TX_ADD_FIELD(r, head);
		D_RW(r)->head = n;
		TX_ADD_FIELD(r, count);
		D_RW(r)->count++;
	} TX_END
}
