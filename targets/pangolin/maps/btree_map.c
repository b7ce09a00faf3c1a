// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A B-tree in Pangolin objects, as libpmemobj's btree_map example keeps one: nodes of up to
 * 7 items and 8 children (order 8), full nodes split on the way down an insert, and a
 * remove that tops up every node it descends into (from a sibling, or merging two) so
 * that no node falls below 3 items.
 */
#include "map.h"

#define ORDER 8
#define MAX_ITEMS (ORDER - 1)
#define MIN_ITEMS (ORDER / 2 - 1)

struct btree {
	pgl_oid root;
};

struct item {
	uint64_t key;
	pgl_oid value;
};

struct bnode {
	uint64_t n;
	struct item items[MAX_ITEMS];
	pgl_oid slots[ORDER]; /* all 0 in a leaf */
};

#define NODE(pool, oid) MAP_RD(pool, struct bnode, oid)
#define NODE_RW(oid) MAP_RW(struct bnode, oid)

static int is_leaf(const struct bnode *node)
{
	return node->slots[0] == 0;
}

/* The first item position whose key is at least `key`. */
static uint64_t position(const struct bnode *node, uint64_t key)
{
	uint64_t i = 0;

	while (i < node->n && node->items[i].key < key)
		i++;
	return i;
}

static pgl_oid bt_create(PGLpool *pool, uint64_t seed)
{
	(void)pool;
	(void)seed;
	return pgl_tx_alloc(sizeof(struct btree), MAP_ROOT_TYPE);
}

/* The item of `key`, for reading, or NULL. */
static const struct item *find(PGLpool *pool, pgl_oid map, uint64_t key, pgl_oid *holder)
{
	pgl_oid oid = MAP_RD(pool, struct btree, map)->root;

	while (oid) {
		const struct bnode *node = NODE(pool, oid);
		uint64_t i = position(node, key);

		if (i < node->n && node->items[i].key == key) {
			*holder = oid;
			return &node->items[i];
		}
		oid = node->slots[i];
	}
	return NULL;
}

/* Splits the full child i of `parent` in two around its middle item, which moves up. */
static int split_child(pgl_oid parent_oid, uint64_t i)
{
	struct bnode *parent = NODE_RW(parent_oid);
	struct bnode *left = NODE_RW(parent->slots[i]);
	pgl_oid right_oid = pgl_tx_alloc(sizeof(struct bnode), MAP_NODE_TYPE);
	struct bnode *right;
	uint64_t mid = MAX_ITEMS / 2;

	if (!right_oid)
		return -1;
	right = NODE_RW(right_oid);
	right->n = MAX_ITEMS - mid - 1;
	for (uint64_t k = 0; k < right->n; k++)
		right->items[k] = left->items[mid + 1 + k];
	for (uint64_t k = 0; k <= right->n; k++) {
		right->slots[k] = left->slots[mid + 1 + k];
		left->slots[mid + 1 + k] = 0;
	}
	for (uint64_t k = parent->n; k > i; k--) {
		parent->items[k] = parent->items[k - 1];
		parent->slots[k + 1] = parent->slots[k];
	}
	parent->items[i] = left->items[mid];
	parent->slots[i + 1] = right_oid;
	parent->n++;
	left->n = mid;
	return 0;
}

static int insert_nonfull(PGLpool *pool, pgl_oid oid, struct item item)
{
	for (;;) {
		const struct bnode *node = NODE(pool, oid);
		uint64_t i = position(node, item.key);

		if (is_leaf(node)) {
			struct bnode *leaf = NODE_RW(oid);

			for (uint64_t k = leaf->n; k > i; k--)
				leaf->items[k] = leaf->items[k - 1];
			leaf->items[i] = item;
			leaf->n++;
			return 0;
		}
		if (NODE(pool, node->slots[i])->n == MAX_ITEMS) {
			if (split_child(oid, i) != 0)
				return -1;
			node = NODE(pool, oid);
			if (item.key > node->items[i].key)
				i++;
		}
		oid = node->slots[i];
	}
}

static int bt_insert(PGLpool *pool, pgl_oid map, uint64_t key, pgl_oid value)
{
	struct item item = { key, value };
	pgl_oid root = MAP_RD(pool, struct btree, map)->root, holder;
	const struct item *found = find(pool, map, key, &holder);

	if (found) {
		const struct bnode *node = NODE(pool, holder);
		uint64_t i = (uint64_t)(found - node->items);

		NODE_RW(holder)->items[i].value = value;
		return 0;
	}
	if (!root || NODE(pool, root)->n == MAX_ITEMS) {
		/* A new root: the only node, or the parent the old root splits under. */
		pgl_oid top = pgl_tx_alloc(sizeof(struct bnode), MAP_NODE_TYPE);

		if (!top)
			return -1;
		NODE_RW(top)->slots[0] = root;
		MAP_RW(struct btree, map)->root = top;
		if (root && split_child(top, 0) != 0)
			return -1;
		root = top;
	}
	return insert_nonfull(pool, root, item);
}

/* Moves an item from a sibling of child i (which has MIN_ITEMS) through the parent. */
static void rotate(pgl_oid parent_oid, uint64_t i, int from_left)
{
	struct bnode *parent = NODE_RW(parent_oid);
	struct bnode *child = NODE_RW(parent->slots[i]);

	if (from_left) {
		struct bnode *left = NODE_RW(parent->slots[i - 1]);

		for (uint64_t k = child->n; k > 0; k--)
			child->items[k] = child->items[k - 1];
		for (uint64_t k = child->n + 1; k > 0; k--)
			child->slots[k] = child->slots[k - 1];
		child->items[0] = parent->items[i - 1];
		child->slots[0] = left->slots[left->n];
		left->slots[left->n] = 0;
		parent->items[i - 1] = left->items[left->n - 1];
		left->n--;
	} else {
		struct bnode *right = NODE_RW(parent->slots[i + 1]);

		child->items[child->n] = parent->items[i];
		child->slots[child->n + 1] = right->slots[0];
		parent->items[i] = right->items[0];
		for (uint64_t k = 0; k + 1 < right->n; k++)
			right->items[k] = right->items[k + 1];
		for (uint64_t k = 0; k < right->n; k++)
			right->slots[k] = right->slots[k + 1];
		right->slots[right->n] = 0;
		right->n--;
	}
	child->n++;
}

/* Merges child i + 1 of the parent and their separator into child i, freeing the former. */
static int merge(pgl_oid parent_oid, uint64_t i)
{
	struct bnode *parent = NODE_RW(parent_oid);
	pgl_oid right_oid = parent->slots[i + 1];
	struct bnode *left = NODE_RW(parent->slots[i]);
	struct bnode *right = NODE_RW(right_oid);

	left->items[left->n] = parent->items[i];
	for (uint64_t k = 0; k < right->n; k++)
		left->items[left->n + 1 + k] = right->items[k];
	for (uint64_t k = 0; k <= right->n; k++)
		left->slots[left->n + 1 + k] = right->slots[k];
	left->n += right->n + 1;
	for (uint64_t k = i; k + 1 < parent->n; k++) {
		parent->items[k] = parent->items[k + 1];
		parent->slots[k + 1] = parent->slots[k + 2];
	}
	parent->slots[parent->n] = 0;
	parent->n--;
	return pgl_tx_free(right_oid);
}

/* Gives child i of the parent more than MIN_ITEMS items; returns the child that now
 * covers its keys (the left one if it merged into it), or 0 on failure. */
static pgl_oid top_up(PGLpool *pool, pgl_oid parent_oid, uint64_t i)
{
	const struct bnode *parent = NODE(pool, parent_oid);

	if (NODE(pool, parent->slots[i])->n > MIN_ITEMS)
		return parent->slots[i];
	if (i > 0 && NODE(pool, parent->slots[i - 1])->n > MIN_ITEMS) {
		rotate(parent_oid, i, 1);
	} else if (i < parent->n && NODE(pool, parent->slots[i + 1])->n > MIN_ITEMS) {
		rotate(parent_oid, i, 0);
	} else {
		if (i == parent->n)
			i--;
		if (merge(parent_oid, i) != 0)
			return 0;
	}
	return NODE(pool, parent_oid)->slots[i];
}

/* Removes `key` (present) from the subtree at `oid`, which has more than MIN_ITEMS items
 * unless it is the root. */
static int remove_from(PGLpool *pool, pgl_oid oid, uint64_t key)
{
	for (;;) {
		const struct bnode *node = NODE(pool, oid);
		uint64_t i = position(node, key);
		int here = i < node->n && node->items[i].key == key;

		if (is_leaf(node)) {
			struct bnode *leaf = NODE_RW(oid);

			for (uint64_t k = i; k + 1 < leaf->n; k++)
				leaf->items[k] = leaf->items[k + 1];
			leaf->n--;
			return 0;
		}
		if (here) {
			pgl_oid left = node->slots[i], right = node->slots[i + 1];
			int from_left = NODE(pool, left)->n > MIN_ITEMS;

			if (from_left || NODE(pool, right)->n > MIN_ITEMS) {
				/* Replace the key by its predecessor (or successor), removed below. */
				pgl_oid c = from_left ? left : right;
				struct item next;

				while (!is_leaf(NODE(pool, c)))
					c = NODE(pool, c)->slots[from_left ? NODE(pool, c)->n : 0];
				next = NODE(pool, c)->items[from_left ? NODE(pool, c)->n - 1 : 0];
				NODE_RW(oid)->items[i] = next;
				oid = from_left ? left : right;
				key = next.key;
				continue;
			}
			if (merge(oid, i) != 0)
				return -1;
			oid = NODE(pool, oid)->slots[i];
			continue;
		}
		oid = top_up(pool, oid, i);
		if (!oid)
			return -1;
	}
}

static int bt_remove(PGLpool *pool, pgl_oid map, uint64_t key)
{
	pgl_oid root = MAP_RD(pool, struct btree, map)->root, holder;
	const struct bnode *top;

	if (!find(pool, map, key, &holder))
		return 0;
	if (remove_from(pool, root, key) != 0)
		return -1;
	top = NODE(pool, root);
	if (top->n == 0) {
		/* An empty root gives way to its only child (or to none). */
		MAP_RW(struct btree, map)->root = top->slots[0];
		if (pgl_tx_free(root) != 0)
			return -1;
	}
	return 1;
}

static int bt_lookup(PGLpool *pool, pgl_oid map, uint64_t key)
{
	pgl_oid holder;

	return find(pool, map, key, &holder) != NULL;
}

static void walk(PGLpool *pool, pgl_oid oid,
		 void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg)
{
	const struct bnode *node = NODE(pool, oid);

	for (uint64_t i = 0; i <= node->n; i++) {
		if (node->slots[i])
			walk(pool, node->slots[i], each, arg);
		if (i < node->n)
			each(node->items[i].key, node->items[i].value, arg);
	}
}

static void bt_foreach(PGLpool *pool, pgl_oid map,
		       void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg)
{
	pgl_oid root = MAP_RD(pool, struct btree, map)->root;

	if (root)
		walk(pool, root, each, arg);
}

const struct map_ops btree_map_ops = {
	.name = "btree",
	.create = bt_create,
	.insert = bt_insert,
	.remove = bt_remove,
	.lookup = bt_lookup,
	.foreach = bt_foreach,
};
