// SPDX-License-Identifier: GPL-2.0
/*
 * The on-PM side of DPWC (docs/design/dpwc.md): the superblock, formatting, opening and
 * freeing generations, appending an entry, and recovery's replay of the log.
 * Every store to PM is a non-temporal one (memcpy_flushcache, movnti) and every ordering
 * point a pmem_wmb() (sfence on x86), so that the stores are durable in the order
 * the protocol needs. Every load from PM is a machine-check-safe copy
 * (copy_mc_to_kernel): poisoned media is an error to report, not a kernel panic.
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include "dpwc.h"

#define DM_MSG_PREFIX "dpwc"

u64 dpwc_meta_bytes(u32 generations, u32 chunks_per_gen)
{
	return (u64)generations * DPWC_LINE * (1 + chunks_per_gen);
}

u64 dpwc_gen_meta(const struct dpwc_geometry *geo, u32 gen)
{
	return DPWC_META_OFFSET + (u64)gen * DPWC_LINE * (1 + geo->chunks_per_gen);
}

static u64 dpwc_used_offset(const struct dpwc_geometry *geo, u32 gen, u32 chunk)
{
	return dpwc_gen_meta(geo, gen) + (u64)DPWC_LINE * (1 + chunk);
}

u64 dpwc_chunk_offset(const struct dpwc_geometry *geo, u32 gen, u32 chunk)
{
	return geo->data_offset +
	       ((u64)gen * geo->chunks_per_gen + chunk) * geo->chunk_size;
}

/* An aligned 8-byte non-temporal store (movnti on x86). */
static void dpwc_store_u64(struct dpwc *dc, u64 offset, u64 value)
{
	__le64 v = cpu_to_le64(value);

	memcpy_flushcache(dc->pm + offset, &v, sizeof(v));
}

/* Copies @len bytes at @offset of PM to @dst; -EIO where the media is poisoned. */
int dpwc_read_pm(struct dpwc *dc, void *dst, u64 offset, size_t len)
{
	return copy_mc_to_kernel(dst, dc->pm + offset, len) ? -EIO : 0;
}

/*
 * A word of the generation table: @value (of @bytes bytes) and, in the bytes above
 * it, the CRC-32C of those bytes. Stored in one aligned 8-byte store, it is whole or
 * not there after a crash, so a word whose CRC fails was damaged afterwards. Zero
 * stays zero: a free generation, a chunk with nothing in it.
 */
static u64 dpwc_seal(u64 value, unsigned int bytes)
{
	__le64 v = cpu_to_le64(value);
	u64 crc = bytes == sizeof(u32) ? dpwc_crc_u32(value) : dpwc_crc(0, &v, bytes);

	return value ? value | crc << (bytes * 8) : 0;
}

/* Loads the word at @offset into @value; -EBADMSG if damaged, -EIO if poisoned. */
static int dpwc_load_sealed(struct dpwc *dc, u64 offset, unsigned int bytes, u64 *value)
{
	__le64 v;
	u64 word;

	if (dpwc_read_pm(dc, &v, offset, sizeof(v)))
		return -EIO;
	word = le64_to_cpu(v);
	*value = word & ((1ULL << (bytes * 8)) - 1);
	return dpwc_seal(*value, bytes) == word ? 0 : -EBADMSG;
}

/* The superblock's geometry; -ENOENT without the magic, -EINVAL when corrupt. */
int dpwc_read_sb(struct dpwc *dc, struct dpwc_geometry *geo)
{
	struct dpwc_sb sb;

	if (dpwc_read_pm(dc, &sb, 0, sizeof(sb)))
		return -EIO;
	if (memcmp(sb.magic, DPWC_SB_MAGIC, sizeof(sb.magic)))
		return -ENOENT;
	if (le32_to_cpu(sb.crc) != dpwc_crc(0, &sb, offsetof(struct dpwc_sb, crc)) ||
	    le32_to_cpu(sb.version) != DPWC_VERSION ||
	    le64_to_cpu(sb.meta_offset) != DPWC_META_OFFSET)
		return -EINVAL;
	geo->chunk_size = le32_to_cpu(sb.chunk_size);
	geo->chunks_per_gen = le32_to_cpu(sb.chunks_per_gen);
	geo->generations = le32_to_cpu(sb.generations);
	geo->origin_sectors = le64_to_cpu(sb.origin_sectors);
	geo->data_offset = le64_to_cpu(sb.data_offset);
	return 0;
}

/*
 * An empty log: the superblock page and the generation table zeroed and fenced
 * before the superblock is written, so that a crash never leaves a valid
 * superblock over a stale table.
 */
void dpwc_format(struct dpwc *dc)
{
	const struct dpwc_geometry *geo = &dc->geo;
	struct dpwc_sb sb = {};
	u64 off;

	for (off = 0; off < geo->data_offset; off += PAGE_SIZE)
		memcpy_flushcache(dc->pm + off, page_address(ZERO_PAGE(0)), PAGE_SIZE);
	pmem_wmb();
	memcpy(sb.magic, DPWC_SB_MAGIC, sizeof(sb.magic));
	sb.version = cpu_to_le32(DPWC_VERSION);
	sb.chunk_size = cpu_to_le32(geo->chunk_size);
	sb.chunks_per_gen = cpu_to_le32(geo->chunks_per_gen);
	sb.generations = cpu_to_le32(geo->generations);
	sb.origin_sectors = cpu_to_le64(geo->origin_sectors);
	sb.meta_offset = cpu_to_le64(DPWC_META_OFFSET);
	sb.data_offset = cpu_to_le64(geo->data_offset);
	sb.crc = cpu_to_le32(dpwc_crc(0, &sb, offsetof(struct dpwc_sb, crc)));
	memcpy_flushcache(dc->pm, &sb, sizeof(sb));
	pmem_wmb();
}

/*
 * Makes generation @gen the open one under the new id @id: its chunks' counters
 * are reset and fenced before the id, so that entries of its previous use can
 * never be replayed under the new id.
 */
void dpwc_open_gen(struct dpwc *dc, u32 gen, u64 id)
{
	u32 c;

	if (DPWC_MUTANT != 3) {
		for (c = 0; c < dc->geo.chunks_per_gen; c++)
			dpwc_store_u64(dc, dpwc_used_offset(&dc->geo, gen, c), 0);
		pmem_wmb();
	}
	dpwc_store_u64(dc, dpwc_gen_meta(&dc->geo, gen), dpwc_seal(id, DPWC_GEN_WORD_BYTES));
	pmem_wmb();
}

void dpwc_free_gen(struct dpwc *dc, u32 gen)
{
	dpwc_store_u64(dc, dpwc_gen_meta(&dc->geo, gen), 0);
	pmem_wmb();
}

/*
 * Copies @bio's data to @dst with non-temporal stores and returns its CRC, in one
 * pass. The bio's pages may change while it is in flight (a direct-I/O buffer is
 * its owner's), so the CRC must describe the bytes PM got, not the page: with the
 * crc32 instruction, each word is loaded once into a register that both the CRC
 * and the store read (dpwc_copy_crc()); without it, each segment (at most a page)
 * is copied once into the slot's stage, which the CRC and the store to PM read.
 */
static u32 dpwc_copy_bio(struct dpwc_slot *slot, void *dst, struct bio *bio)
{
	bool insn = dpwc_crc_insn();
	struct bvec_iter iter;
	struct bio_vec bv;
	u32 crc = 0;

	if (insn)
		crc = ~0U;
	bio_for_each_segment(bv, bio, iter) {
		void *src = bvec_kmap_local(&bv);

		if (insn) {
			crc = dpwc_copy_crc(dst, src, bv.bv_len, crc);
			kunmap_local(src);
		} else {
			memcpy(slot->stage, src, bv.bv_len);
			kunmap_local(src);
			crc = dpwc_crc(crc, slot->stage, bv.bv_len);
			memcpy_flushcache(dst, slot->stage, bv.bv_len);
		}
		dst += bv.bv_len;
	}
	return insn ? ~crc : crc;
}

/*
 * Stores the first line of @e's header at @dst, word by word: an 8-byte
 * memcpy_flushcache() is one inline movnti on x86, where the whole header cost
 * a call and four lines. The header's other lines are reserved and not written.
 */
static void dpwc_store_hdr(void *dst, const struct dpwc_entry *e, u32 data_crc)
{
	__le64 line[DPWC_LINE / sizeof(__le64)] = {
		cpu_to_le64(DPWC_ENTRY_MAGIC_LE | (u64)e->flags << 32),
		cpu_to_le64(e->entry_id),
		cpu_to_le64(e->sector),
		cpu_to_le64(e->len | (u64)data_crc << 32),
	};
	unsigned int i;

	BUILD_BUG_ON(offsetof(struct dpwc_entry_hdr, hdr_crc) != 4 * sizeof(__le64));
	line[4] = cpu_to_le64(dpwc_crc(0, line, offsetof(struct dpwc_entry_hdr, hdr_crc)));
	for (i = 0; i < ARRAY_SIZE(line); i++)
		memcpy_flushcache(dst + i * sizeof(line[0]), &line[i], sizeof(line[0]));
}

/*
 * Writes the entry @e reserved in @slot's chunk: header and data, a fence, then
 * the chunk's `used` past the entry, a fence. Recovery sees the entry only once
 * `used` covers it, and `used` moves only after the entry's bytes are durable.
 */
void dpwc_append(struct dpwc *dc, struct dpwc_slot *slot, struct dpwc_entry *e,
		 struct bio *bio)
{
	void *dst = dc->pm + e->pm_offset;
	u64 used_at = dpwc_used_offset(&dc->geo, e->gen, slot->chunk);
	u64 used = slot->offset;
	u32 data_crc = 0;

	if (DPWC_MUTANT == 2) {
		dpwc_store_u64(dc, used_at, dpwc_seal(used, DPWC_USED_WORD_BYTES));
		pmem_wmb();
	}
	if (!(e->flags & DPWC_FLAG_DISCARD))
		data_crc = dpwc_copy_bio(slot, dst + sizeof(struct dpwc_entry_hdr), bio);
	dpwc_store_hdr(dst, e, data_crc);
	if (!DPWC_NO_USED_FENCE)
		pmem_wmb();
	if (DPWC_MUTANT != 2)
		dpwc_store_u64(dc, used_at, dpwc_seal(used, DPWC_USED_WORD_BYTES));
	pmem_wmb();
}

/* What the scan found at an offset of a chunk. */
enum dpwc_found { DPWC_INTACT, DPWC_DAMAGED_BODY, DPWC_DAMAGED_HEADER };

/*
 * Checks the entry at @off of a chunk holding @used bytes; fills @e and *@size
 * when its header is intact (magic, flags, length, range, header CRC). A body
 * whose CRC fails, or whose media is poisoned, costs this entry alone: the
 * intact header says where the next one starts.
 */
static enum dpwc_found dpwc_check_entry(struct dpwc *dc, u64 chunk_off, u32 off,
					u32 used, struct dpwc_entry *e, u32 *size)
{
	void *stage = dc->slots[0].stage;
	struct dpwc_entry_hdr hdr;
	u32 crc = 0, done, n;

	if (used - off < sizeof(hdr) ||
	    dpwc_read_pm(dc, &hdr, chunk_off + off, sizeof(hdr)))
		return DPWC_DAMAGED_HEADER;
	e->flags = le32_to_cpu(hdr.flags);
	e->len = le32_to_cpu(hdr.len);
	e->sector = le64_to_cpu(hdr.sector);
	e->entry_id = le64_to_cpu(hdr.entry_id);
	if (memcmp(hdr.magic, DPWC_ENTRY_MAGIC, sizeof(hdr.magic)) ||
	    (e->flags & ~DPWC_FLAG_DISCARD) || !e->len || e->len % SECTOR_SIZE ||
	    e->sector + e->len / SECTOR_SIZE > dc->geo.origin_sectors)
		return DPWC_DAMAGED_HEADER;
	*size = dpwc_entry_bytes(e->flags, e->len);
	if (*size > used - off)
		return DPWC_DAMAGED_HEADER;
	if (!DPWC_NO_CRC_CHECK &&
	    le32_to_cpu(hdr.hdr_crc) != dpwc_crc(0, &hdr, offsetof(struct dpwc_entry_hdr, hdr_crc)))
		return DPWC_DAMAGED_HEADER;
	e->pm_offset = chunk_off + off;
	if (e->flags & DPWC_FLAG_DISCARD)
		return DPWC_INTACT;
	/* No writer runs yet: slot 0's stage holds each page for its CRC. */
	for (done = 0; done < e->len; done += n) {
		n = min_t(u32, PAGE_SIZE, e->len - done);
		if (dpwc_read_pm(dc, stage, e->pm_offset + sizeof(hdr) + done, n))
			return DPWC_DAMAGED_BODY;
		crc = dpwc_crc(crc, stage, n);
	}
	if (!DPWC_NO_CRC_CHECK && crc != le32_to_cpu(hdr.data_crc))
		return DPWC_DAMAGED_BODY;
	return DPWC_INTACT;
}

/*
 * Walks a chunk of a live generation up to its `used`: the intact entries go to
 * @entries (when not NULL) from index *@n, the damaged ones are counted. A damaged
 * header ends the walk (the next entry's place is unknown), a damaged body not.
 */
static void dpwc_scan_chunk(struct dpwc *dc, u32 g, u32 c, u64 gen_id, u32 used,
			    struct dpwc_entry *entries, u64 *n, u64 *damaged)
{
	u64 chunk_off = dpwc_chunk_offset(&dc->geo, g, c);
	struct dpwc_entry e;
	u32 off, size;

	for (off = 0; off < used; off += size) {
		switch (dpwc_check_entry(dc, chunk_off, off, used, &e, &size)) {
		case DPWC_DAMAGED_HEADER:
			(*damaged)++;
			return;
		case DPWC_DAMAGED_BODY:
			(*damaged)++;
			if (DPWC_MUTANT == 7)
				return;
			continue;
		case DPWC_INTACT:
			break;
		}
		if (entries) {
			e.gen_id = gen_id;
			e.gen = g;
			entries[*n] = e;
		}
		(*n)++;
	}
}

/*
 * Walks every chunk of every live generation. Fills @entries (when not NULL) with
 * the intact entries of the generations not held, returns how many there are,
 * counts the damaged entries and table words of each generation in @damaged (held
 * ones too: they are reported at every load).
 */
static s64 dpwc_scan(struct dpwc *dc, struct dpwc_entry *entries, u64 *damaged)
{
	const struct dpwc_geometry *geo = &dc->geo;
	u64 n = 0, gen_id, used, skip;
	u32 g, c;

	for (g = 0; g < geo->generations; g++) {
		damaged[g] = 0;
		if (dpwc_load_sealed(dc, dpwc_gen_meta(geo, g), DPWC_GEN_WORD_BYTES, &gen_id)) {
			/* Live or not, id unknown: nothing replayed, held as it is. */
			damaged[g]++;
			dc->gens[g].state = DPWC_GEN_HELD;
			continue;
		}
		if (!gen_id)
			continue;
		dc->gens[g].id = gen_id & ~DPWC_GEN_HELD_BIT;
		dc->last_gen_id = max(dc->last_gen_id, dc->gens[g].id);
		for (c = 0; c < geo->chunks_per_gen; c++) {
			if (dpwc_load_sealed(dc, dpwc_used_offset(geo, g, c),
					     DPWC_USED_WORD_BYTES, &used)) {
				/* Where the chunk's entries end is unknown. */
				damaged[g]++;
				continue;
			}
			skip = 0;
			dpwc_scan_chunk(dc, g, c, dc->gens[g].id, min_t(u64, used, geo->chunk_size),
					gen_id & DPWC_GEN_HELD_BIT ? NULL : entries,
					gen_id & DPWC_GEN_HELD_BIT ? &skip : &n, &damaged[g]);
		}
		if (gen_id & DPWC_GEN_HELD_BIT)
			dc->gens[g].state = DPWC_GEN_HELD;
	}
	return n;
}

static int dpwc_entry_cmp(const void *a, const void *b)
{
	const struct dpwc_entry *x = a, *y = b;

	if (x->gen_id != y->gen_id)
		return x->gen_id < y->gen_id ? -1 : 1;
	if (x->entry_id != y->entry_id)
		return x->entry_id < y->entry_id ? -1 : 1;
	return 0;
}

/*
 * After a replay, in ascending id order: each live generation freed (counters
 * reset, then the id, as opening does), or marked held when it has damage. A crash
 * in between leaves the newest generations live, whose replay again is harmless;
 * never an older one whose replay would undo a newer one.
 */
static void dpwc_retire_gens(struct dpwc *dc, const u64 *damaged)
{
	struct dpwc_gen *gens = dc->gens;
	u32 g, next;

	for (;;) {
		next = dc->geo.generations;
		for (g = 0; g < dc->geo.generations; g++)
			if (gens[g].id && gens[g].state == DPWC_GEN_FREE &&
			    (next == dc->geo.generations || gens[g].id < gens[next].id))
				next = g;
		if (next == dc->geo.generations)
			return;
		if (damaged[next]) {
			dpwc_store_u64(dc, dpwc_gen_meta(&dc->geo, next),
				       dpwc_seal(gens[next].id | DPWC_GEN_HELD_BIT,
						 DPWC_GEN_WORD_BYTES));
			pmem_wmb();
			gens[next].state = DPWC_GEN_HELD;
		} else {
			dpwc_open_gen(dc, next, 0);
			gens[next].id = 0;
		}
	}
}

/*
 * Recovery on table load: every intact entry of the live generations not held
 * written to the origin in (generation id, entry id) order, the origin flushed,
 * then every generation freed, or held when it has damaged entries. A crash in
 * between replays again next time: replaying a write twice leaves the same blocks.
 */
int dpwc_recover(struct dpwc *dc)
{
	struct dpwc_entry *entries = NULL;
	u64 *damaged, i, corrupt = 0, held = 0;
	s64 n;
	int r = 0;

	damaged = kcalloc(dc->geo.generations, sizeof(*damaged), GFP_KERNEL);
	if (!damaged)
		return -ENOMEM;
	n = dpwc_scan(dc, NULL, damaged);
	if (n > 0) {
		entries = kvmalloc_array(n, sizeof(*entries), GFP_KERNEL);
		n = entries ? dpwc_scan(dc, entries, damaged) : -ENOMEM;
	}
	if (n > 0) {
		sort(entries, n, sizeof(*entries), dpwc_entry_cmp, NULL);
		for (i = 0; i < n && !r; i++)
			r = dpwc_write_back_sync(dc, &entries[i]);
		if (!r && DPWC_MUTANT == 5)
			dpwc_retire_gens(dc, damaged);
		if (!r)
			r = blkdev_issue_flush(dc->origin->bdev);
	}
	kvfree(entries);
	if (n < 0 || r) {
		kfree(damaged);
		return n < 0 ? n : r;
	}
	dpwc_retire_gens(dc, damaged);
	for (i = 0; i < dc->geo.generations; i++) {
		corrupt += damaged[i];
		held += dc->gens[i].state == DPWC_GEN_HELD;
	}
	kfree(damaged);
	dc->stats.replayed = n;
	dc->stats.corrupt = corrupt;
	if (n || corrupt)
		DMINFO("replayed %lld entries from %pg to %pg (%llu corrupt skipped)",
		       n, dc->pm_dev->bdev, dc->origin->bdev, corrupt);
	if (held)
		DMWARN("%pg: %llu generations with damaged entries are kept (dpwc-dump reads them); \"dmsetup message <dev> 0 drop_damaged\" frees them",
		       dc->pm_dev->bdev, held);
	return 0;
}
