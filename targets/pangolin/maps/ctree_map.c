// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A crit-bit tree in Pangolin objects, as libpmemobj's ctree_map example keeps one: leaves
 * hold the entries, each inner node the highest bit in which the keys below its two slots
 * differ, so a key's path tests its bits from high to low.
 */
#include "map.h"

enum { INNER, LEAF };

struct ctree {
	pgl_oid root;
};

/* Both kinds of node start with their kind. */
struct leaf {
	uint64_t kind;
	uint64_t key;
	pgl_oid value;
};

struct inner {
	uint64_t kind;
	uint64_t diff; /* the bit tested */
	pgl_oid slot[2];
};

/* Where a node's id is stored: the map's root, or a slot of an inner node. */
struct link {
	pgl_oid holder;
	uint64_t offset;
};

static uint64_t kind(PGLpool *pool, pgl_oid node)
{
	return *MAP_RD(pool, uint64_t, node);
}

static int bit(uint64_t key, uint64_t diff)
{
	return (key >> diff) & 1;
}

static pgl_oid follow(PGLpool *pool, struct link link)
{
	return *(const pgl_oid *)((const char *)map_need(pgl_get(pool, link.holder)) + link.offset);
}

static void set_link(struct link link, pgl_oid node)
{
	char *data = map_need(pgl_tx_add_range(link.holder, link.offset, sizeof(pgl_oid)));

	*(pgl_oid *)(data + link.offset) = node;
}

static struct link slot_link(pgl_oid inner, int dir)
{
	struct link link = { inner, offsetof(struct inner, slot) + dir * sizeof(pgl_oid) };

	return link;
}

/* The leaf a key's bits lead to from `node`. */
static pgl_oid nearest_leaf(PGLpool *pool, pgl_oid node, uint64_t key)
{
	while (kind(pool, node) == INNER) {
		const struct inner *in = MAP_RD(pool, struct inner, node);

		node = in->slot[bit(key, in->diff)];
	}
	return node;
}

static pgl_oid ct_create(PGLpool *pool, uint64_t seed)
{
	(void)pool;
	(void)seed;
	return pgl_tx_alloc(sizeof(struct ctree), MAP_ROOT_TYPE);
}

static pgl_oid new_leaf(uint64_t key, pgl_oid value)
{
	pgl_oid oid = pgl_tx_alloc(sizeof(struct leaf), MAP_ENTRY_TYPE);
	struct leaf *leaf;

	if (!oid)
		return 0;
	leaf = MAP_RW(struct leaf, oid);
	leaf->kind = LEAF;
	leaf->key = key;
	leaf->value = value;
	return oid;
}

static int ct_insert(PGLpool *pool, pgl_oid map, uint64_t key, pgl_oid value)
{
	struct link link = { map, offsetof(struct ctree, root) };
	pgl_oid root = follow(pool, link), near, leaf, node, cur;
	uint64_t near_key, diff;
	struct inner *in;

	if (!root) {
		leaf = new_leaf(key, value);
		if (!leaf)
			return -1;
		set_link(link, leaf);
		return 0;
	}
	near = nearest_leaf(pool, root, key);
	near_key = MAP_RD(pool, struct leaf, near)->key;
	if (near_key == key) {
		MAP_RW_FIELD(struct leaf, near, value)->value = value;
		return 0;
	}
	diff = 63 - (uint64_t)__builtin_clzll(near_key ^ key);
	leaf = new_leaf(key, value);
	node = pgl_tx_alloc(sizeof(struct inner), MAP_NODE_TYPE);
	if (!leaf || !node)
		return -1;
	/* The new node goes above the first node testing a lower bit. */
	for (cur = root; kind(pool, cur) == INNER;) {
		const struct inner *at = MAP_RD(pool, struct inner, cur);

		if (at->diff < diff)
			break;
		link = slot_link(cur, bit(key, at->diff));
		cur = at->slot[bit(key, at->diff)];
	}
	in = MAP_RW(struct inner, node);
	in->kind = INNER;
	in->diff = diff;
	in->slot[bit(key, diff)] = leaf;
	in->slot[!bit(key, diff)] = cur;
	set_link(link, node);
	return 0;
}

static int ct_remove(PGLpool *pool, pgl_oid map, uint64_t key)
{
	struct link link = { map, offsetof(struct ctree, root) }, parent_link = link;
	pgl_oid node = follow(pool, link), parent = 0;
	int dir = 0;

	if (!node)
		return 0;
	while (kind(pool, node) == INNER) {
		const struct inner *in = MAP_RD(pool, struct inner, node);

		parent_link = link;
		parent = node;
		dir = bit(key, in->diff);
		link = slot_link(node, dir);
		node = in->slot[dir];
	}
	if (MAP_RD(pool, struct leaf, node)->key != key)
		return 0;
	if (parent) {
		/* The sibling takes the parent's place. */
		set_link(parent_link, MAP_RD(pool, struct inner, parent)->slot[!dir]);
		if (pgl_tx_free(parent) != 0)
			return -1;
	} else {
		set_link(link, 0);
	}
	return pgl_tx_free(node) == 0 ? 1 : -1;
}

static int ct_lookup(PGLpool *pool, pgl_oid map, uint64_t key)
{
	pgl_oid root = MAP_RD(pool, struct ctree, map)->root;

	return root && MAP_RD(pool, struct leaf, nearest_leaf(pool, root, key))->key == key;
}

static void walk(PGLpool *pool, pgl_oid node,
		 void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg)
{
	if (kind(pool, node) == LEAF) {
		const struct leaf *leaf = MAP_RD(pool, struct leaf, node);

		each(leaf->key, leaf->value, arg);
		return;
	}
	walk(pool, MAP_RD(pool, struct inner, node)->slot[0], each, arg);
	walk(pool, MAP_RD(pool, struct inner, node)->slot[1], each, arg);
}

static void ct_foreach(PGLpool *pool, pgl_oid map,
		       void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg)
{
	pgl_oid root = MAP_RD(pool, struct ctree, map)->root;

	if (root)
		walk(pool, root, each, arg);
}

const struct map_ops ctree_map_ops = {
	.name = "ctree",
	.create = ct_create,
	.insert = ct_insert,
	.remove = ct_remove,
	.lookup = ct_lookup,
	.foreach = ct_foreach,
};
