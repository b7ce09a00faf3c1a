// SPDX-License-Identifier: GPL-2.0
/*
 * Reads of blocks with entries not yet written back (docs/design/dpwc.md, "Block
 * semantics"): served from PM, without waiting for writeback. Under dc->lock, the
 * index gives the overlapping entries; each sector takes the newest one's data
 * (copy_mc from PM) straight into the read's pages. A read they cover whole
 * completes at once; one they cover in part keeps a snapshot of the covered
 * sectors, goes to the origin, and gets the snapshot laid over its data when it
 * completes. The copy is taken before the origin is read, so a sector it does not
 * cover had no entry pending then: the origin already held its newest data, or
 * newer. A read that overlaps nothing costs one lookup.
 */
#include <linux/bio.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include "dpwc.h"

/* Reads of up to this many sectors keep their bitmap of covered sectors on the stack. */
#define DPWC_READ_STACK_SECTORS 256

/* Whether an entry acknowledged as @a takes precedence over one acknowledged as @b. */
static bool dpwc_newer(u64 a, u64 b)
{
	return DPWC_MUTANT == 9 ? a < b : a > b;
}

/*
 * Copies sectors [@from, @to) of the read @bio from @e into its pages: from PM, or
 * zeros for a discard (the origin discards with unmapping: the range reads as zeros).
 */
static int dpwc_copy_sectors(struct dpwc *dc, struct bio *bio, struct dpwc_entry *e,
			     u32 from, u32 to)
{
	struct bvec_iter iter = bio->bi_iter;
	u32 len = (to - from) << SECTOR_SHIFT, n;
	u64 at = e->pm_offset + sizeof(struct dpwc_entry_hdr) +
		 ((bio->bi_iter.bi_sector + from - e->sector) << SECTOR_SHIFT);
	struct bio_vec bv;
	int r = 0;
	void *p;

	bio_advance_iter(bio, &iter, from << SECTOR_SHIFT);
	for (; len && !r; len -= n, at += n) {
		bv = bio_iter_iovec(bio, iter);
		n = min(len, bv.bv_len);
		p = bvec_kmap_local(&bv);
		if (e->flags & DPWC_FLAG_DISCARD)
			memset(p, 0, n);
		else
			r = dpwc_read_pm(dc, p, at, n);
		kunmap_local(p);
		bio_advance_iter_single(bio, &iter, n);
	}
	return r;
}

/*
 * Under dc->lock: copies into the read @bio's pages, newest entry first, each
 * entry's sectors that no newer one had, marking them in @covered. Returns the
 * sectors covered, or -EIO where PM is poisoned.
 */
static int dpwc_snapshot(struct dpwc *dc, struct bio *bio, unsigned long *covered)
{
	sector_t start = bio->bi_iter.bi_sector, last = bio_end_sector(bio) - 1;
	u32 sectors = bio_sectors(bio), from, to, end;
	struct dpwc_entry *o, *best, *prev = NULL;
	int r;

	while (!bitmap_full(covered, sectors)) {
		best = NULL;
		for (o = dpwc_index_first(dc, start, last); o; o = dpwc_index_next(o, start, last))
			if ((!prev || dpwc_newer(prev->seq, o->seq)) &&
			    (!best || dpwc_newer(o->seq, best->seq)))
				best = o;
		if (!best)
			break;
		prev = best;
		from = max(start, best->sector) - start;
		end = min(last, best->last) - start + 1;
		while ((from = find_next_zero_bit(covered, end, from)) < end) {
			to = find_next_bit(covered, end, from);
			r = dpwc_copy_sectors(dc, bio, best, from, to);
			if (r)
				return r;
			bitmap_set(covered, from, to - from);
			from = to;
		}
	}
	return bitmap_weight(covered, sectors);
}

/* Copies the covered sectors between the snapshot and the read's pages. */
static void dpwc_overlay(struct dpwc_read *rd, struct bio *bio, bool to_bio)
{
	struct bvec_iter iter;
	struct bio_vec bv;
	u32 pos = 0, off, n;

	__bio_for_each_segment(bv, bio, iter, rd->iter) {
		u8 *p = bvec_kmap_local(&bv);

		for (off = 0; off < bv.bv_len; off += n) {
			u32 at = pos + off;

			n = min_t(u32, bv.bv_len - off, SECTOR_SIZE - at % SECTOR_SIZE);
			if (!test_bit(at >> SECTOR_SHIFT, rd->covered))
				continue;
			if (to_bio)
				memcpy(p + off, rd->snap + at, n);
			else
				memcpy(rd->snap + at, p + off, n);
		}
		kunmap_local(p);
		pos += bv.bv_len;
	}
}

/*
 * A read covered in part: its covered sectors, already in its pages, are kept in a
 * snapshot for dpwc_end_io(), since the origin's data will overwrite them.
 */
static int dpwc_keep_snapshot(struct dpwc_read *rd, struct bio *bio,
			      const unsigned long *covered)
{
	size_t map_bytes = BITS_TO_LONGS(bio_sectors(bio)) * sizeof(long);

	rd->snap = kvmalloc(bio->bi_iter.bi_size + map_bytes, GFP_NOIO);
	if (!rd->snap)
		return DM_MAPIO_REQUEUE;
	rd->covered = rd->snap + bio->bi_iter.bi_size;
	memcpy(rd->covered, covered, map_bytes);
	rd->iter = bio->bi_iter;
	dpwc_overlay(rd, bio, false);
	return DM_MAPIO_REMAPPED;
}

int dpwc_map_read(struct dpwc *dc, struct bio *bio)
{
	struct dpwc_read *rd = dm_per_bio_data(bio, sizeof(*rd));
	unsigned long on_stack[BITS_TO_LONGS(DPWC_READ_STACK_SECTORS)];
	sector_t start = bio->bi_iter.bi_sector, last = bio_end_sector(bio) - 1;
	u32 sectors = bio_sectors(bio);
	unsigned long *covered = on_stack;
	bool pending;
	int n, r;

	if (sectors > DPWC_READ_STACK_SECTORS) {
		spin_lock(&dc->lock);
		pending = dpwc_index_first(dc, start, last);
		spin_unlock(&dc->lock);
		if (!pending)
			return DM_MAPIO_REMAPPED;
		covered = kmalloc_array(BITS_TO_LONGS(sectors), sizeof(long), GFP_NOIO);
		if (!covered)
			return DM_MAPIO_REQUEUE;
	}
	bitmap_zero(covered, sectors);
	spin_lock(&dc->lock);
	n = dpwc_snapshot(dc, bio, covered);
	if (n > 0)
		dc->stats.read_hits++;
	spin_unlock(&dc->lock);
	if (n < 0) {
		r = DM_MAPIO_KILL;
	} else if (n == sectors) {
		bio_endio(bio);
		r = DM_MAPIO_SUBMITTED;
	} else {
		r = n ? dpwc_keep_snapshot(rd, bio, covered) : DM_MAPIO_REMAPPED;
	}
	if (covered != on_stack)
		kfree(covered);
	return r;
}

/* Every bio of the target ends here; a read from the origin gets its snapshot. */
int dpwc_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error)
{
	struct dpwc_read *rd = dm_per_bio_data(bio, sizeof(*rd));

	if (!rd->snap)
		return DM_ENDIO_DONE;
	if (!*error)
		dpwc_overlay(rd, bio, true);
	kvfree(rd->snap);
	rd->snap = NULL;
	return DM_ENDIO_DONE;
}
