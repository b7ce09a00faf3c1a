// SPDX-License-Identifier: GPL-2.0
/*
 * The on-PM side of DPWC (docs/design/dpwc.md): the superblock, formatting, opening and
 * freeing generations, appending an entry, and recovery's replay of the log.
 * Every store to PM is a non-temporal one (memcpy_flushcache) and every ordering
 * point a pmem_wmb() (sfence on x86), so that the stores are durable in the order
 * the protocol needs.
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <crypto/hash.h>
#include <linux/crc32.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/vmalloc.h>
#include "dpwc.h"

#define DM_MSG_PREFIX "dpwc"

/*
 * Standard CRC-32 (zlib's) when started with 0 and chained through its result.
 * Through the crypto API's "crc32" when the table got one: crc32-pclmul folds 64
 * bytes per step with PCLMULQDQ, where the library's crc32_le looks up a table per
 * byte (x86 before 6.14). Both compute crc32_le; the state is its raw u32.
 */
u32 dpwc_crc(struct dpwc *dc, u32 crc, const void *p, size_t len)
{
	u32 state = crc ^ ~0U;

	if (dc->crc_tfm) {
		SHASH_DESC_ON_STACK(desc, dc->crc_tfm);

		desc->tfm = dc->crc_tfm;
		crypto_shash_import(desc, &state);
		crypto_shash_update(desc, p, len);
		crypto_shash_export(desc, &state);
		return state ^ ~0U;
	}
	return crc32_le(state, p, len) ^ ~0U;
}

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

static u64 dpwc_load_u64(struct dpwc *dc, u64 offset)
{
	return le64_to_cpu(READ_ONCE(*(__le64 *)(dc->pm + offset)));
}

/* The superblock's geometry; -ENOENT without the magic, -EINVAL when corrupt. */
int dpwc_read_sb(struct dpwc *dc, struct dpwc_geometry *geo)
{
	struct dpwc_sb sb;

	memcpy(&sb, dc->pm, sizeof(sb));
	if (memcmp(sb.magic, DPWC_SB_MAGIC, sizeof(sb.magic)))
		return -ENOENT;
	if (le32_to_cpu(sb.crc) != dpwc_crc(dc, 0, &sb, offsetof(struct dpwc_sb, crc)) ||
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
	sb.crc = cpu_to_le32(dpwc_crc(dc, 0, &sb, offsetof(struct dpwc_sb, crc)));
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
	dpwc_store_u64(dc, dpwc_gen_meta(&dc->geo, gen), id);
	pmem_wmb();
}

void dpwc_free_gen(struct dpwc *dc, u32 gen)
{
	dpwc_store_u64(dc, dpwc_gen_meta(&dc->geo, gen), 0);
	pmem_wmb();
}

/* Copies @bio's data to @dst with non-temporal stores. */
static void dpwc_copy_bio(void *dst, struct bio *bio)
{
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		void *src = bvec_kmap_local(&bv);

		memcpy_flushcache(dst, src, bv.bv_len);
		kunmap_local(src);
		dst += bv.bv_len;
	}
}

/*
 * Writes the entry @e reserved in @slot's chunk: header and data, a fence, then
 * the chunk's `used` past the entry, a fence. Recovery sees the entry only once
 * `used` covers it, and `used` moves only after the entry's bytes are durable.
 */
void dpwc_append(struct dpwc *dc, struct dpwc_slot *slot, struct dpwc_entry *e,
		 struct bio *bio)
{
	struct dpwc_entry_hdr *hdr = &slot->hdr;
	void *dst = dc->pm + e->pm_offset;
	u64 used_at = dpwc_used_offset(&dc->geo, e->gen, slot->chunk);
	u64 used = slot->offset;
	u32 crc;

	if (DPWC_MUTANT == 2) {
		dpwc_store_u64(dc, used_at, used);
		pmem_wmb();
	}
	/* The slot's header is zeroed with dc; only its fields change. */
	memcpy(hdr->magic, DPWC_ENTRY_MAGIC, sizeof(hdr->magic));
	hdr->flags = cpu_to_le32(e->flags);
	hdr->entry_id = cpu_to_le64(e->entry_id);
	hdr->sector = cpu_to_le64(e->sector);
	hdr->len = cpu_to_le32(e->len);
	hdr->crc = 0;
	crc = dpwc_crc(dc, 0, hdr, sizeof(*hdr));
	if (!(e->flags & DPWC_FLAG_DISCARD)) {
		/* The data lies contiguous on PM: one CRC pass over what PM holds. */
		dpwc_copy_bio(dst + sizeof(*hdr), bio);
		crc = dpwc_crc(dc, crc, dst + sizeof(*hdr), e->len);
	}
	hdr->crc = cpu_to_le32(crc);
	memcpy_flushcache(dst, hdr, sizeof(*hdr));
	if (!DPWC_NO_USED_FENCE)
		pmem_wmb();
	if (DPWC_MUTANT != 2)
		dpwc_store_u64(dc, used_at, used);
	pmem_wmb();
}

/*
 * The size of the valid entry at @off of a chunk holding @used bytes, or 0 at the
 * first entry that is not (bad magic, length, range or checksum).
 */
static u32 dpwc_check_entry(struct dpwc *dc, u64 chunk_off, u32 off, u32 used,
			    struct dpwc_entry *e)
{
	const struct dpwc_entry_hdr *pm_hdr = dc->pm + chunk_off + off;
	struct dpwc_entry_hdr hdr;
	u32 size, crc;

	if (used - off < sizeof(hdr))
		return 0;
	memcpy(&hdr, pm_hdr, sizeof(hdr));
	e->flags = le32_to_cpu(hdr.flags);
	e->len = le32_to_cpu(hdr.len);
	e->sector = le64_to_cpu(hdr.sector);
	e->entry_id = le64_to_cpu(hdr.entry_id);
	if (memcmp(hdr.magic, DPWC_ENTRY_MAGIC, sizeof(hdr.magic)) ||
	    (e->flags & ~DPWC_FLAG_DISCARD) || !e->len || e->len % SECTOR_SIZE ||
	    e->sector + e->len / SECTOR_SIZE > dc->geo.origin_sectors)
		return 0;
	size = dpwc_entry_bytes(e->flags, e->len);
	if (size > used - off)
		return 0;
	hdr.crc = 0;
	crc = dpwc_crc(dc, 0, &hdr, sizeof(hdr));
	if (!(e->flags & DPWC_FLAG_DISCARD))
		crc = dpwc_crc(dc, crc, pm_hdr + 1, e->len);
	if (!DPWC_NO_CRC_CHECK && crc != le32_to_cpu(pm_hdr->crc))
		return 0;
	e->pm_offset = chunk_off + off;
	return size;
}

/*
 * Walks every chunk of every live generation up to its `used`; fills @entries
 * (when not NULL) and returns how many valid entries there are.
 */
static u64 dpwc_scan(struct dpwc *dc, struct dpwc_entry *entries, u64 *corrupt)
{
	const struct dpwc_geometry *geo = &dc->geo;
	struct dpwc_entry e;
	u64 n = 0;
	u32 g, c;

	for (g = 0; g < geo->generations; g++) {
		u64 gen_id = dpwc_load_u64(dc, dpwc_gen_meta(geo, g));

		if (!gen_id)
			continue;
		dc->last_gen_id = max(dc->last_gen_id, gen_id);
		for (c = 0; c < geo->chunks_per_gen; c++) {
			u64 chunk_off = dpwc_chunk_offset(geo, g, c);
			u64 used64 = dpwc_load_u64(dc, dpwc_used_offset(geo, g, c));
			u32 used = min_t(u64, used64, geo->chunk_size);
			u32 off = 0, size;

			while (off < used) {
				size = dpwc_check_entry(dc, chunk_off, off, used, &e);
				if (!size) {
					(*corrupt)++;
					break;
				}
				if (entries) {
					e.gen_id = gen_id;
					e.gen = g;
					entries[n] = e;
				}
				n++;
				off += size;
			}
		}
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

/* Frees every live generation: counters reset, then the id, as opening does. */
static void dpwc_free_all_gens(struct dpwc *dc)
{
	u32 g;

	for (g = 0; g < dc->geo.generations; g++)
		if (dpwc_load_u64(dc, dpwc_gen_meta(&dc->geo, g)))
			dpwc_open_gen(dc, g, 0);
}

/*
 * Recovery on table load: every valid entry of the live generations written to
 * the origin in (generation id, entry id) order, the origin flushed, then every
 * generation freed. A crash in between replays again next time: replaying a
 * write twice leaves the same blocks.
 */
int dpwc_recover(struct dpwc *dc)
{
	struct dpwc_entry *entries;
	u64 n, i, corrupt = 0;
	int r = 0;

	n = dpwc_scan(dc, NULL, &corrupt);
	if (n) {
		entries = kvmalloc_array(n, sizeof(*entries), GFP_KERNEL);
		if (!entries)
			return -ENOMEM;
		corrupt = 0;
		dpwc_scan(dc, entries, &corrupt);
		sort(entries, n, sizeof(*entries), dpwc_entry_cmp, NULL);
		for (i = 0; i < n && !r; i++)
			r = dpwc_write_back(dc, &entries[i]);
		kvfree(entries);
		if (r)
			return r;
		if (DPWC_MUTANT == 5)
			dpwc_free_all_gens(dc);
		r = blkdev_issue_flush(dc->origin->bdev);
		if (r)
			return r;
	}
	dc->stats.replayed = n;
	dc->stats.corrupt = corrupt;
	dpwc_free_all_gens(dc);
	if (n || corrupt)
		DMINFO("replayed %llu entries from %pg to %pg (%llu corrupt skipped)",
		       n, dc->pm_dev->bdev, dc->origin->bdev, corrupt);
	return 0;
}
