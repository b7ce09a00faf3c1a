/* The layouts the rule tests share. */
#include <libpmem.h>
#include <libpmemobj.h>
#include <stdlib.h>

TOID_DECLARE(struct node, 1);
TOID_DECLARE(struct root, 2);

struct node {
	long key;
	long value;
	TOID(struct node) next;
};

struct root {
	TOID(struct node) head;
	long count;
	long double sum;
};
