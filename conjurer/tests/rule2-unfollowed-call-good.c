#include "common.h"

/* As pminvaders2.c's new_level: a list emptied, then refilled. The analyzer gives up on
 * clear's loop after four turns and evaluates the call as unknown, so `used` reads back
 * as any OID: perhaps one clear allocated in this transaction (it is OID_NULL), whose
 * store needs no TX_ADD. */
TOID_DECLARE(struct lists, 6);
struct lists {
	TOID(struct node) used;
	TOID(struct node) spare;
};

static void clear(TOID(struct node) *head)
{
	while (!TOID_IS_NULL(*head)) {
		TOID(struct node) n = D_RO(*head)->next;
		TX_FREE(*head);
		*head = n;
	}
}

void refill(PMEMobjpool *pop, TOID(struct lists) l)
{
	TX_BEGIN(pop) {
		TX_ADD(l);
		clear(&D_RW(l)->used);
		TOID(struct node) n = TX_ZNEW(struct node);
		TOID(struct node) u = D_RO(l)->used;
		D_RW(n)->next = u;
		if (!TOID_IS_NULL(u))
			D_RW(u)->value = 1;
		D_RW(l)->used = n;
	} TX_END
}
