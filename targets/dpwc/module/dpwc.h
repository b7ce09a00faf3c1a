/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DPWC: a write cache on persistent memory for a block device, as a device-mapper
 * target. The on-PM layout (version 4) and the write protocol are described in
 * docs/design/dpwc.md; this header is their C side.
 */
#ifndef DPWC_H
#define DPWC_H

#include <linux/device-mapper.h>
#include <linux/list.h>
#include <linux/llist.h>
#include <linux/mempool.h>
#include <linux/mutex.h>
#include <linux/pfn_t.h>
#include <linux/rbtree.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#ifdef CONFIG_X86_64
#include <asm/cpufeature.h>
#endif

/*
 * Compile-time mutants of the write protocol, for Persim's tests (docs/design/dpwc.md):
 * 1 no fence between an entry's bytes and its chunk's `used`,
 * 2 `used` bumped before the entry's bytes,
 * 3 a generation reused without resetting its chunks' `used`,
 * 4 the checksum not checked on replay,
 * 5 recovery frees the log before flushing the origin it replayed to,
 * 6 mutants 1 and 4 together (without the checksum, only the fence keeps a torn
 *   entry out of the log),
 * 7 a damaged body ends the scan of its chunk (as one checksum for both did),
 * 8 writeback submits an entry while an earlier overlapping one is in flight,
 * 9 a read of cached blocks is served from the oldest overlapping entry first, so
 *   that data a newer entry supersedes wins,
 * 10 a writer that frees a slot wakes no one: a writer waiting for it sleeps on.
 */
#ifndef DPWC_MUTANT
#define DPWC_MUTANT 0
#endif
#define DPWC_NO_USED_FENCE (DPWC_MUTANT == 1 || DPWC_MUTANT == 6)
#define DPWC_NO_CRC_CHECK (DPWC_MUTANT == 4 || DPWC_MUTANT == 6)

#define DPWC_LINE 64
#define DPWC_SB_MAGIC "DPWCSUP1"
#define DPWC_VERSION 4
#define DPWC_META_OFFSET 4096
#define DPWC_ENTRY_MAGIC "DPWE"
/* The magic as the little-endian u32 of its bytes. */
#define DPWC_ENTRY_MAGIC_LE 0x45575044
#define DPWC_ENTRY_ALIGN 256
#define DPWC_FLAG_DISCARD 1u
#define DPWC_MAX_SLOTS 64
/*
 * The words of the generation table check themselves (dpwc_seal()): a generation's
 * is its id, the HELD bit (replayed, kept for the user: it has damage) and 16 bits
 * of CRC-32C; a chunk's `used` is its value and 32 bits of CRC-32C.
 */
#define DPWC_GEN_WORD_BYTES 6
#define DPWC_GEN_HELD_BIT (1ULL << 47)
#define DPWC_USED_WORD_BYTES 4

/* The superblock, the first line of the PM device. */
struct dpwc_sb {
	u8 magic[8];
	__le32 version;
	__le32 chunk_size;
	__le32 chunks_per_gen;
	__le32 generations;
	__le64 origin_sectors;
	__le64 meta_offset;
	__le64 data_offset;
	u8 reserved[12];
	__le32 crc;
} __packed;

/*
 * An entry's header; the data follows it in the chunk. Only its first line is
 * written (dpwc_store_hdr()): the rest of the reserved bytes is whatever PM held.
 */
struct dpwc_entry_hdr {
	u8 magic[4];
	__le32 flags;
	__le64 entry_id;
	__le64 sector;
	__le32 len;
	__le32 data_crc;
	__le32 hdr_crc;
	u8 reserved[220];
} __packed;

/* The geometry of a cache, as the superblock and the table options give it. */
struct dpwc_geometry {
	u32 chunk_size;
	u32 chunks_per_gen;
	u32 generations;
	u64 origin_sectors;
	u64 data_offset;
};

/* HELD: replayed at load but with damaged entries, kept until drop_damaged. */
enum dpwc_gen_state { DPWC_GEN_FREE, DPWC_GEN_OPEN, DPWC_GEN_CLOSED, DPWC_GEN_HELD };

/* A generation in memory: its state and what of it is not yet written back. */
struct dpwc_gen {
	enum dpwc_gen_state state;
	u64 id;
	u32 next_chunk;
	u64 next_entry;
	/* Entries reserved in it and not yet written back. */
	u64 pending;
};

/* A writer slot: the chunk its holder appends to. */
struct dpwc_slot {
	int gen;
	u32 chunk;
	u32 offset;
	/* The copy of a bio's data that its CRC and PM both get, see dpwc_append(). */
	void *stage;
};

/*
 * Where an entry lives and what it writes: a reservation, then, once acknowledged,
 * a pending writeback in dc->pending (acknowledge order) and in dc->index (by
 * sectors) until its write to the origin completes.
 */
struct dpwc_entry {
	struct list_head list;
	struct rb_node rb;
	sector_t last;
	sector_t subtree_last;
	struct llist_node done;
	struct dpwc *dc;
	u64 seq;
	int gen;
	u64 pm_offset;
	u64 gen_id;
	u64 entry_id;
	sector_t sector;
	u32 len;
	u32 flags;
	bool submitted;
	int error;
};

struct dpwc_stats {
	u64 acked;
	u64 discards;
	u64 written_back_bytes;
	u64 replayed;
	u64 corrupt;
	u64 throttled;
	u64 read_hits;
	/* The most writebacks ever in flight at once. */
	u32 max_inflight;
};

struct dpwc {
	struct dm_target *ti;
	struct dm_dev *origin;
	struct dm_dev *pm_dev;
	void *pm;
	u64 pm_size;
	struct dpwc_geometry geo;
	u32 nr_slots;
	u32 high_watermark;
	u32 low_watermark;
	u32 writeback_depth;
	/* The longest write one entry takes: a chunk less a page, for its header. */
	u32 max_write_sectors;
	/* The PM device's first page frame; pm_pages: it has struct pages for bios. */
	unsigned long pm_pfn;
	bool pm_pages;

	spinlock_t lock;
	struct dpwc_gen *gens;
	int open_gen;
	u64 last_gen_id;
	struct dpwc_slot slots[DPWC_MAX_SLOTS];
	unsigned long slot_busy[BITS_TO_LONGS(DPWC_MAX_SLOTS)];
	/* Writers waiting for a slot, all slots being busy. */
	wait_queue_head_t slot_wait;
	/* Acknowledged entries in acknowledge order, the writeback queue. */
	struct list_head pending;
	/* The same entries by the sectors they write (an interval tree). */
	struct rb_root_cached index;
	u64 queued_seq;
	u64 force_seq;
	u64 dirty_bytes;
	/* Writebacks submitted and not completed, and their bytes in the log. */
	u32 inflight;
	u64 inflight_bytes;
	/* A writeback failed since the last `writeback` message. */
	bool writeback_failed;
	bool stopping;
	bool claimed;
	wait_queue_head_t free_wait;
	wait_queue_head_t written_wait;

	struct workqueue_struct *wq;
	struct work_struct writeback_work;
	/* Entries whose writeback completed, for the worker (filled in bio completion). */
	struct llist_head done;
	/* Entries not in use: allocated with the table (entries[]) or from the pool. */
	struct list_head spare;
	struct dpwc_entry *entries;
	u32 nr_entries;
	mempool_t *entry_pool;
	struct dpwc_stats stats;
};

static inline u64 dpwc_capacity(const struct dpwc *dc)
{
	return (u64)dc->geo.generations * dc->geo.chunks_per_gen * dc->geo.chunk_size;
}

/* The bytes an entry takes in its chunk: the header, then the data rounded up. */
static inline u32 dpwc_entry_bytes(u32 flags, u32 len)
{
	if (flags & DPWC_FLAG_DISCARD)
		return DPWC_ENTRY_ALIGN;
	return DPWC_ENTRY_ALIGN + round_up(len, DPWC_ENTRY_ALIGN);
}

/*
 * dpwc-crc.c: CRC-32C, started with 0 and chained through its result. With the
 * crc32 instruction (dpwc_crc_insn()), dpwc_copy_crc() copies to PM with
 * non-temporal stores and takes the raw CRC state over the same loads.
 */
u32 dpwc_crc(u32 crc, const void *p, size_t len);
u32 dpwc_copy_crc(void *dst, const void *src, size_t len, u32 state);

static inline bool dpwc_crc_insn(void)
{
#ifdef CONFIG_X86_64
	return boot_cpu_has(X86_FEATURE_XMM4_2);
#else
	return false;
#endif
}

/*
 * CRC-32C of the 4 little-endian bytes of @value, inline: one crc32 instruction
 * per `used` word sealed, where a call to the library cost a table walk.
 */
static inline u32 dpwc_crc_u32(u32 value)
{
	__le32 v = cpu_to_le32(value);
	u32 crc = ~0U;

	if (!dpwc_crc_insn())
		return dpwc_crc(0, &v, sizeof(v));
#ifdef CONFIG_X86_64
	asm("crc32l %1, %0" : "+r" (crc) : "rm" (value));
#endif
	return ~crc;
}

/* dpwc-log.c: the on-PM layout and the write protocol. */
u64 dpwc_gen_meta(const struct dpwc_geometry *geo, u32 gen);
u64 dpwc_chunk_offset(const struct dpwc_geometry *geo, u32 gen, u32 chunk);
u64 dpwc_meta_bytes(u32 generations, u32 chunks_per_gen);
int dpwc_read_sb(struct dpwc *dc, struct dpwc_geometry *geo);
void dpwc_format(struct dpwc *dc);
void dpwc_open_gen(struct dpwc *dc, u32 gen, u64 id);
void dpwc_free_gen(struct dpwc *dc, u32 gen);
int dpwc_read_pm(struct dpwc *dc, void *dst, u64 offset, size_t len);
void dpwc_append(struct dpwc *dc, struct dpwc_slot *slot, struct dpwc_entry *e,
		 struct bio *bio);
int dpwc_recover(struct dpwc *dc);

/* dpwc-writeback.c: writing entries back to the origin. */
int dpwc_write_back_sync(struct dpwc *dc, struct dpwc_entry *e);
void dpwc_writeback_work(struct work_struct *work);
void dpwc_index_insert(struct dpwc *dc, struct dpwc_entry *e);
struct dpwc_entry *dpwc_index_first(struct dpwc *dc, sector_t start, sector_t last);
struct dpwc_entry *dpwc_index_next(struct dpwc_entry *e, sector_t start, sector_t last);
bool dpwc_written_upto(struct dpwc *dc, u64 seq);

/*
 * dpwc-read.c: reads of blocks with entries not yet written back, served from PM.
 * A read's per-bio data: the newest PM data of the sectors it covers (NULL: none),
 * to lay over what the origin returns.
 */
struct dpwc_read {
	void *snap;
	unsigned long *covered;
	struct bvec_iter iter;
};

int dpwc_map_read(struct dpwc *dc, struct bio *bio);
int dpwc_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error);

#endif
