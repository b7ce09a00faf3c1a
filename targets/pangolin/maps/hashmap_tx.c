// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A hash map of chained entries in Pangolin objects, as libpmemobj's hashmap_tx example
 * keeps one: a universal hash drawn from a seed, 10 buckets to start, twice as many after
 * an insert that makes a chain longer than 10, or longer than 5 while the entries
 * outnumber the buckets twice over; half as many after a remove that leaves fewer entries
 * than buckets. Every change is in the caller's transaction (libpmemobj's example
 * rebuilds in a transaction of its own).
 */
#include "map.h"

#define INIT_BUCKETS 10
/* chain lengths that call for more buckets: always above LONG, above SHORT if crowded */
#define LONG_CHAIN 10
#define SHORT_CHAIN 5
/* A prime above every 32-bit key slice the hash multiplies. */
#define HASH_PRIME 4294967311ULL

struct hashmap {
	uint64_t a, b; /* the hash: ((a * key + b) mod HASH_PRIME) mod buckets */
	uint64_t count;
	pgl_oid buckets;
};

struct buckets {
	uint64_t n;
	pgl_oid head[];
};

struct entry {
	uint64_t key;
	pgl_oid value;
	pgl_oid next;
};

/* splitmix64: the seed's stream of hash parameters. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t hash(const struct hashmap *map, uint64_t n, uint64_t key)
{
	unsigned __int128 h = (unsigned __int128)map->a * key + map->b;

	return (uint64_t)(h % HASH_PRIME) % n;
}

static pgl_oid new_buckets(uint64_t n)
{
	pgl_oid oid = pgl_tx_alloc(sizeof(struct buckets) + n * sizeof(pgl_oid), MAP_BUCKETS_TYPE);
	struct buckets *b;

	if (!oid)
		return 0;
	b = MAP_RW_FIELD(struct buckets, oid, n);
	b->n = n;
	return oid;
}

static pgl_oid hm_create(PGLpool *pool, uint64_t seed)
{
	pgl_oid oid = pgl_tx_alloc(sizeof(struct hashmap), MAP_ROOT_TYPE);
	struct hashmap *map;
	uint64_t state = seed;

	(void)pool;
	if (!oid)
		return 0;
	map = MAP_RW(struct hashmap, oid);
	map->a = next_random(&state) % (HASH_PRIME - 1) + 1;
	map->b = next_random(&state) % HASH_PRIME;
	map->buckets = new_buckets(INIT_BUCKETS);
	return map->buckets ? oid : 0;
}

/* Moves every entry into n buckets. */
static int rebuild(PGLpool *pool, pgl_oid map_oid, uint64_t n)
{
	const struct hashmap *map = MAP_RD(pool, struct hashmap, map_oid);
	pgl_oid old_oid = map->buckets;
	const struct buckets *old = MAP_RD(pool, struct buckets, old_oid);
	pgl_oid new_oid = new_buckets(n);
	struct buckets *fresh;

	if (!new_oid)
		return -1;
	fresh = MAP_RW(struct buckets, new_oid);
	for (uint64_t i = 0; i < old->n; i++) {
		pgl_oid e = old->head[i];

		while (e) {
			pgl_oid next = MAP_RD(pool, struct entry, e)->next;
			uint64_t h = hash(map, n, MAP_RD(pool, struct entry, e)->key);

			MAP_RW_FIELD(struct entry, e, next)->next = fresh->head[h];
			fresh->head[h] = e;
			e = next;
		}
	}
	MAP_RW_FIELD(struct hashmap, map_oid, buckets)->buckets = new_oid;
	return pgl_tx_free(old_oid);
}

static int hm_insert(PGLpool *pool, pgl_oid map_oid, uint64_t key, pgl_oid value)
{
	const struct hashmap *map = MAP_RD(pool, struct hashmap, map_oid);
	pgl_oid b = map->buckets;
	const struct buckets *buckets = MAP_RD(pool, struct buckets, b);
	uint64_t h = hash(map, buckets->n, key);
	pgl_oid e, fresh;
	struct entry *entry;
	uint64_t count, chain = 1, n = buckets->n;

	for (e = buckets->head[h]; e; e = MAP_RD(pool, struct entry, e)->next, chain++) {
		if (MAP_RD(pool, struct entry, e)->key == key) {
			MAP_RW_FIELD(struct entry, e, value)->value = value;
			return 0;
		}
	}
	fresh = pgl_tx_alloc(sizeof(struct entry), MAP_ENTRY_TYPE);
	if (!fresh)
		return -1;
	entry = MAP_RW(struct entry, fresh);
	entry->key = key;
	entry->value = value;
	entry->next = buckets->head[h];
	((struct buckets *)map_need(pgl_tx_add_range(b, offsetof(struct buckets, head) +
							   h * sizeof(pgl_oid),
						   sizeof(pgl_oid))))->head[h] = fresh;
	count = ++MAP_RW_FIELD(struct hashmap, map_oid, count)->count;
	if (chain > LONG_CHAIN || (chain > SHORT_CHAIN && count > 2 * n))
		return rebuild(pool, map_oid, 2 * n);
	return 0;
}

static int hm_remove(PGLpool *pool, pgl_oid map_oid, uint64_t key)
{
	const struct hashmap *map = MAP_RD(pool, struct hashmap, map_oid);
	pgl_oid b = map->buckets;
	const struct buckets *buckets = MAP_RD(pool, struct buckets, b);
	uint64_t h = hash(map, buckets->n, key), count, n = buckets->n;
	pgl_oid prev = 0, e;

	for (e = buckets->head[h]; e; prev = e, e = MAP_RD(pool, struct entry, e)->next) {
		pgl_oid next = MAP_RD(pool, struct entry, e)->next;

		if (MAP_RD(pool, struct entry, e)->key != key)
			continue;
		if (prev)
			MAP_RW_FIELD(struct entry, prev, next)->next = next;
		else
			((struct buckets *)map_need(pgl_tx_add_range(
				 b, offsetof(struct buckets, head) + h * sizeof(pgl_oid),
				 sizeof(pgl_oid))))->head[h] = next;
		count = --MAP_RW_FIELD(struct hashmap, map_oid, count)->count;
		if (pgl_tx_free(e) != 0)
			return -1;
		if (count < n && n > 1 && rebuild(pool, map_oid, n / 2) != 0)
			return -1;
		return 1;
	}
	return 0;
}

static int hm_lookup(PGLpool *pool, pgl_oid map_oid, uint64_t key)
{
	const struct hashmap *map = MAP_RD(pool, struct hashmap, map_oid);
	const struct buckets *buckets = MAP_RD(pool, struct buckets, map->buckets);
	pgl_oid e;

	for (e = buckets->head[hash(map, buckets->n, key)]; e;
	     e = MAP_RD(pool, struct entry, e)->next)
		if (MAP_RD(pool, struct entry, e)->key == key)
			return 1;
	return 0;
}

static void hm_foreach(PGLpool *pool, pgl_oid map_oid,
		       void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg)
{
	const struct hashmap *map = MAP_RD(pool, struct hashmap, map_oid);
	const struct buckets *buckets = MAP_RD(pool, struct buckets, map->buckets);

	for (uint64_t i = 0; i < buckets->n; i++) {
		pgl_oid e;

		for (e = buckets->head[i]; e; e = MAP_RD(pool, struct entry, e)->next)
			each(MAP_RD(pool, struct entry, e)->key,
			     MAP_RD(pool, struct entry, e)->value, arg);
	}
}

static uint64_t hm_count(PGLpool *pool, pgl_oid map_oid)
{
	return MAP_RD(pool, struct hashmap, map_oid)->count;
}

const struct map_ops hashmap_tx_ops = {
	.name = "hashmap_tx",
	.create = hm_create,
	.insert = hm_insert,
	.remove = hm_remove,
	.lookup = hm_lookup,
	.foreach = hm_foreach,
	.count = hm_count,
};
