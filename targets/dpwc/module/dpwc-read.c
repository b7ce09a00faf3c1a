// SPDX-License-Identifier: GPL-2.0
/*
 * Reads of blocks with entries not yet written back (docs/design/dpwc.md, "Block
 * semantics"): served from PM, without waiting for writeback. Under dc->lock, the
 * index gives the overlapping entries; each sector takes the newest one's data
 * (copy_mc from PM) into a snapshot. A read the snapshot covers whole completes at
 * once; any other goes to the origin and gets the snapshot laid over its data when
 * it completes. The snapshot is taken before the origin is read, so a sector it
 * does not cover had no entry pending then: the origin already held its newest
 * data, or newer.
 */
#include <linux/bio.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include "dpwc.h"

/* Whether an entry acknowledged as @a takes precedence over one acknowledged as @b. */
static bool dpwc_newer(u64 a, u64 b)
{
	return DPWC_MUTANT == 9 ? a < b : a > b;
}

/* Copies sectors [@from, @to) of the read at @start from @e into the snapshot. */
static int dpwc_copy_sectors(struct dpwc *dc, struct dpwc_read *rd, struct dpwc_entry *e,
			     sector_t start, u32 from, u32 to)
{
	void *dst = rd->snap + ((size_t)from << SECTOR_SHIFT);
	size_t len = (size_t)(to - from) << SECTOR_SHIFT;
	u64 at = e->pm_offset + sizeof(struct dpwc_entry_hdr) +
		 ((start + from - e->sector) << SECTOR_SHIFT);

	if (e->flags & DPWC_FLAG_DISCARD) {
		/* The origin discards with unmapping: the range reads as zeros. */
		memset(dst, 0, len);
		return 0;
	}
	return dpwc_read_pm(dc, dst, at, len);
}

/*
 * Under dc->lock: fills the snapshot of the read of [@start, @start + @sectors),
 * newest entry first, each taking only the sectors no newer one had. Returns the
 * sectors covered, or -EIO where PM is poisoned.
 */
static int dpwc_snapshot(struct dpwc *dc, struct dpwc_read *rd, sector_t start, u32 sectors)
{
	sector_t last = start + sectors - 1;
	struct dpwc_entry *o, *best, *prev = NULL;
	u32 from, to, end;
	int r;

	while (!bitmap_full(rd->covered, sectors)) {
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
		while ((from = find_next_zero_bit(rd->covered, end, from)) < end) {
			to = find_next_bit(rd->covered, end, from);
			r = dpwc_copy_sectors(dc, rd, best, start, from, to);
			if (r)
				return r;
			bitmap_set(rd->covered, from, to - from);
			from = to;
		}
	}
	return bitmap_weight(rd->covered, sectors);
}

/* Lays the snapshot's sectors over the read's pages. */
static void dpwc_overlay(struct dpwc_read *rd, struct bio *bio)
{
	struct bvec_iter iter;
	struct bio_vec bv;
	u32 pos = 0, off, n;

	__bio_for_each_segment(bv, bio, iter, rd->iter) {
		u8 *p = bvec_kmap_local(&bv);

		for (off = 0; off < bv.bv_len; off += n) {
			u32 at = pos + off;

			n = min_t(u32, bv.bv_len - off, SECTOR_SIZE - at % SECTOR_SIZE);
			if (test_bit(at >> SECTOR_SHIFT, rd->covered))
				memcpy(p + off, rd->snap + at, n);
		}
		kunmap_local(p);
		pos += bv.bv_len;
	}
}

int dpwc_map_read(struct dpwc *dc, struct bio *bio)
{
	struct dpwc_read *rd = dm_per_bio_data(bio, sizeof(*rd));
	sector_t start = bio->bi_iter.bi_sector, last = bio_end_sector(bio) - 1;
	u32 sectors = bio_sectors(bio);
	bool pending;
	int covered;

	spin_lock(&dc->lock);
	pending = dpwc_index_first(dc, start, last);
	spin_unlock(&dc->lock);
	if (!pending)
		return DM_MAPIO_REMAPPED;
	rd->snap = kvmalloc(bio->bi_iter.bi_size + BITS_TO_LONGS(sectors) * sizeof(long),
			    GFP_NOIO);
	if (!rd->snap)
		return DM_MAPIO_REQUEUE;
	rd->covered = rd->snap + bio->bi_iter.bi_size;
	bitmap_zero(rd->covered, sectors);
	rd->iter = bio->bi_iter;
	spin_lock(&dc->lock);
	covered = dpwc_snapshot(dc, rd, start, sectors);
	if (covered > 0)
		dc->stats.read_hits++;
	spin_unlock(&dc->lock);
	if (covered < 0) {
		kvfree(rd->snap);
		rd->snap = NULL;
		return DM_MAPIO_KILL;
	}
	if (covered < sectors)
		return DM_MAPIO_REMAPPED;
	dpwc_overlay(rd, bio);
	kvfree(rd->snap);
	rd->snap = NULL;
	bio_endio(bio);
	return DM_MAPIO_SUBMITTED;
}

/* Every bio of the target ends here; a read from the origin gets its snapshot. */
int dpwc_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error)
{
	struct dpwc_read *rd = dm_per_bio_data(bio, sizeof(*rd));

	if (!rd->snap)
		return DM_ENDIO_DONE;
	if (!*error)
		dpwc_overlay(rd, bio);
	kvfree(rd->snap);
	rd->snap = NULL;
	return DM_ENDIO_DONE;
}
