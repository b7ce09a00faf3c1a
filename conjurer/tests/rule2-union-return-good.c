#include "common.h"

/* A slot holds its object's TOID in a union, as libart's nodes do. new_slot is seven
 * calls down, deeper than the analyzer follows; it returns a TOID, a union, to which the
 * analyzer gives no value. The leaf read back from the slot is perhaps allocated in
 * this transaction (it is): its stores need no TX_ADD. */
TOID_DECLARE(struct slot, 3);
struct slot {
	int type;
	union {
		TOID(struct node) node;
		TOID(struct root) root;
	} u;
};

static TOID(struct slot) new_slot(int type)
{
	TOID(struct slot) s = TX_ZNEW(struct slot);
	D_RW(s)->type = type;
	switch (type) {
	case 0:
		D_RW(s)->u.node = TX_ZNEW(struct node);
		break;
	case 1:
		D_RW(s)->u.root = TX_ZNEW(struct root);
		break;
	default:
		break;
	}
	return s;
}
static void put5(long key)
{
	TOID(struct slot) s = new_slot(0);
	TOID(struct node) n = D_RO(s)->u.node;
	D_RW(n)->key = key;
}
static void put6(long key)
{
	if (!key)
		return;
	put5(key);
}
static void put4(long key)
{
	if (!key)
		return;
	put6(key);
}
static void put3(long key)
{
	if (!key)
		return;
	put4(key);
}
static void put2(long key)
{
	if (!key)
		return;
	put3(key);
}

void put(PMEMobjpool *pop, long key)
{
	TX_BEGIN(pop) {
		put2(key);
	} TX_END
}
