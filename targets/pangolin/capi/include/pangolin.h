/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Pangolin: fault-tolerant persistent-memory objects (docs/design/pangolin.md), the C ABI of
 * targets/pangolin/capi (libpangolin.so / libpangolin.a). The calls mirror libpmemobj's:
 * pmemobj_tx_begin -> pgl_tx_begin, pmemobj_tx_alloc -> pgl_tx_alloc, pmemobj_tx_add_range
 * -> pgl_tx_add_range (which also returns the object's micro-buffer: write there, never
 * to PM), pmemobj_direct -> pgl_get. An object id is its offset in the pool; 0 is none.
 *
 * Threads share a pool: each has at most one transaction, its own, and they commit at once
 * on different log lanes. As with libpmemobj, a thread locks the objects it changes (its
 * own locks); pgl_scrub and pgl_close_pool need the pool to themselves. Errors return NULL, 0 or -1; pgl_errormsg() says
 * what went wrong and what to do. PGL_ACCESS names the PM access (clwb, clflushopt,
 * clflush, nt-sse2, nt-avx2, nt-avx512, eadr); the default is the cheapest flush.
 */
#ifndef PANGOLIN_H
#define PANGOLIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct PglPool PGLpool;
typedef uint64_t pgl_oid;

/* Pools: a new file of size bytes with a root object of root_size bytes; or an existing
 * one, completing a transaction a crash interrupted. */
PGLpool *pgl_create_pool(const char *path, uint64_t size, uint64_t root_size);
/* pgl_create_pool with the zones' shape: chunk rows of chunk_size bytes (a multiple of
 * 4096), rows per zone (the last one the parity), one log lane of two redo-log copies of
 * log_size bytes (threads commit in turn; pgl_create_pool makes 4 lanes). */
PGLpool *pgl_create_pool_geometry(const char *path, uint64_t size, uint64_t chunk_size,
				  uint64_t rows, uint64_t log_size, uint64_t root_size);
PGLpool *pgl_open_pool(const char *path);
void pgl_close_pool(PGLpool *pool);
pgl_oid pgl_root(PGLpool *pool);
/* Verifies every object and parity page, repairing what it can: objects lost, or -1. */
int pgl_scrub(PGLpool *pool);
/* Repairs since the pool was opened (objects rebuilt, metadata and parity rewritten),
 * those made while opening it included: what a tool reports as corrected damage. */
uint64_t pgl_repairs(PGLpool *pool);
/* The allocated objects in pool order, root included (as POBJ_FIRST/POBJ_NEXT), 0 after
 * the last; and the type number an object was allocated with, or -1. */
pgl_oid pgl_first(PGLpool *pool);
pgl_oid pgl_next(PGLpool *pool, pgl_oid oid);
int64_t pgl_type_num(PGLpool *pool, pgl_oid oid);

/* Transactions: begin, change objects through their micro-buffers, commit, end. */
int pgl_tx_begin(PGLpool *pool);
pgl_oid pgl_tx_alloc(uint64_t size, uint32_t type_num);
int pgl_tx_free(pgl_oid oid);
/* The micro-buffer of oid (verified, repaired from parity if damaged); all of it is
 * written back at commit. */
void *pgl_tx_open(pgl_oid oid);
/* The micro-buffer of oid; bytes offset..offset+len are written back at commit. */
void *pgl_tx_add_range(pgl_oid oid, uint64_t offset, uint64_t len);
/* The transaction's micro-buffer of oid if it has one, else the object on PM (read
 * directly, not verified). */
const void *pgl_get(PGLpool *pool, pgl_oid oid);
/* 0: durable; -1: aborted (e.g. a micro-buffer's canary was overwritten). */
int pgl_tx_commit(void);
/* Ends the transaction, aborting it if uncommitted: 0 if it committed. */
int pgl_tx_end(void);

/* A single-object atomic update: pgl_open returns the micro-buffer, pgl_commit commits. */
void *pgl_open(PGLpool *pool, pgl_oid oid);
int pgl_commit(void);

const char *pgl_errormsg(void);

#ifdef __cplusplus
}
#endif

#endif /* PANGOLIN_H */
