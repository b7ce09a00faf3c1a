#include "common.h"

/* rule2-union-return-good.c, and a store to the node of the caller's slot: an object
 * read from a union of an object the transaction did not allocate still needs TX_ADD. */
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
static void put5(TOID(struct slot) old, long key)
{
	TOID(struct slot) s = new_slot(0);
	TOID(struct node) n = D_RO(s)->u.node;
	D_RW(n)->key = key;
	n = D_RO(old)->u.node;
	D_RW(n)->key = key; /* rule 2 */
}
static void put6(TOID(struct slot) old, long key)
{
	if (!key)
		return;
	put5(old, key);
}
static void put4(TOID(struct slot) old, long key)
{
	if (!key)
		return;
	put6(old, key);
}
static void put3(TOID(struct slot) old, long key)
{
	if (!key)
		return;
	put4(old, key);
}
static void put2(TOID(struct slot) old, long key)
{
	if (!key)
		return;
	put3(old, key);
}

void put(PMEMobjpool *pop, TOID(struct slot) old, long key)
{
	TX_BEGIN(pop) {
		put2(old, key);
	} TX_END
}
