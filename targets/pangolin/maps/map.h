/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The maps of libpmemobj's examples (btree, ctree, hashmap_tx) written against Pangolin's
 * C ABI (pangolin.h): each map is an object whose id the pool's root holds, keys are
 * uint64_t and values are object ids (0 in the workloads, as PMDK's mapcli stores
 * OID_NULL). Every operation below runs inside the caller's transaction.
 */
#ifndef PANGOLIN_MAP_H
#define PANGOLIN_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "pangolin.h"

struct map_ops {
	const char *name;
	/* A new, empty map; 0 if allocation failed. */
	pgl_oid (*create)(PGLpool *pool, uint64_t seed);
	/* 0: inserted (or the key's value replaced); -1: failed. */
	int (*insert)(PGLpool *pool, pgl_oid map, uint64_t key, pgl_oid value);
	/* 1: removed; 0: not there; -1: failed. */
	int (*remove)(PGLpool *pool, pgl_oid map, uint64_t key);
	/* 1: found; 0: not. */
	int (*lookup)(PGLpool *pool, pgl_oid map, uint64_t key);
	/* Calls each(key, value, arg) for every entry, in no particular order. */
	void (*foreach)(PGLpool *pool, pgl_oid map,
			void (*each)(uint64_t key, pgl_oid value, void *arg), void *arg);
	/* The entries the map counts, if it counts them (NULL if not). */
	uint64_t (*count)(PGLpool *pool, pgl_oid map);
};

extern const struct map_ops btree_map_ops, ctree_map_ops, hashmap_tx_ops;

/* Type numbers of the maps' objects, as their TOID types number them in libpmemobj. */
enum map_type { MAP_ROOT_TYPE = 1, MAP_NODE_TYPE, MAP_ENTRY_TYPE, MAP_BUCKETS_TYPE };

/* The object's bytes for reading: the transaction's micro-buffer if it has one. */
#define MAP_RD(pool, type, oid) ((const type *)map_need(pgl_get((pool), (oid))))
/* The micro-buffer of a whole object, written back at commit. */
#define MAP_RW(type, oid) ((type *)map_need(pgl_tx_open(oid)))
/* The micro-buffer of an object, one field of it written back at commit. */
#define MAP_RW_FIELD(type, oid, field)                                                    \
	((type *)map_need(pgl_tx_add_range((oid), offsetof(type, field),               \
					   sizeof(((type *)0)->field))))

/* p, or the process ends (aborting its transaction) saying why it is NULL. */
void *map_need_ptr(void *p);
#define map_need(p) map_need_ptr((void *)(p))

#endif /* PANGOLIN_MAP_H */
