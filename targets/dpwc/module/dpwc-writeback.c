// SPDX-License-Identifier: GPL-2.0
/*
 * DPWC's writeback (docs/design/dpwc.md, "Writeback"): acknowledged entries are
 * written to the origin, up to writeback_depth at once, each submitted only once
 * every earlier entry it overlaps has completed, so that the origin gets
 * overlapping writes in the order they were acknowledged. The index, an interval
 * tree of the entries not yet written back, finds those overlaps (and serves reads,
 * dpwc-read.c). The bios carry PM's own pages where the pmem driver's DAX mapping
 * has struct pages; elsewhere a copy of the entry's data.
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/interval_tree_generic.h>
#include <linux/mm.h>
#include "dpwc.h"

#define DM_MSG_PREFIX "dpwc"

#define DPWC_START(e) ((e)->sector)
#define DPWC_LAST(e) ((e)->last)

INTERVAL_TREE_DEFINE(struct dpwc_entry, rb, sector_t, subtree_last, DPWC_START, DPWC_LAST,
		     static, dpwc_tree)

/* Under dc->lock: @e, acknowledged, becomes visible to writeback and reads. */
void dpwc_index_insert(struct dpwc *dc, struct dpwc_entry *e)
{
	e->last = e->sector + (e->len >> SECTOR_SHIFT) - 1;
	dpwc_tree_insert(e, &dc->index);
}

/* Under dc->lock: the entries not yet written back that overlap [@start, @last]. */
struct dpwc_entry *dpwc_index_first(struct dpwc *dc, sector_t start, sector_t last)
{
	return dpwc_tree_iter_first(&dc->index, start, last);
}

struct dpwc_entry *dpwc_index_next(struct dpwc_entry *e, sector_t start, sector_t last)
{
	return dpwc_tree_iter_next(e, start, last);
}

/* Under dc->lock: whether every entry up to @seq is written back. */
bool dpwc_written_upto(struct dpwc *dc, u64 seq)
{
	struct dpwc_entry *e = list_first_entry_or_null(&dc->pending, struct dpwc_entry, list);

	return !e || e->seq > seq;
}

/* Under dc->lock: whether an earlier entry overlapping @e is not written back yet. */
static bool dpwc_waits_for_earlier(struct dpwc *dc, struct dpwc_entry *e)
{
	struct dpwc_entry *o;

	if (DPWC_MUTANT == 8)
		return false;
	for (o = dpwc_index_first(dc, e->sector, e->last); o;
	     o = dpwc_index_next(o, e->sector, e->last))
		if (o->seq < e->seq)
			return true;
	return false;
}

/*
 * Under dc->lock: the next entry to submit, marked submitted, or NULL when the
 * queue is full or the watermarks say stop. Entries are taken in acknowledge order,
 * passing over those that wait for an earlier overlapping one; the bytes not yet
 * submitted decide the low watermark, so that writeback stops where it did serially.
 */
static struct dpwc_entry *dpwc_next_writeback(struct dpwc *dc)
{
	u64 low = (u64)dc->low_watermark * dpwc_capacity(dc);
	struct dpwc_entry *e;

	if (dc->stopping || dc->inflight >= dc->writeback_depth)
		return NULL;
	list_for_each_entry(e, &dc->pending, list) {
		if (e->submitted)
			continue;
		if (e->seq > dc->force_seq && dc->low_watermark &&
		    (dc->dirty_bytes - dc->inflight_bytes) * 100 <= low)
			return NULL;
		if (dpwc_waits_for_earlier(dc, e))
			continue;
		e->submitted = true;
		dc->inflight++;
		dc->stats.max_inflight = max(dc->stats.max_inflight, dc->inflight);
		dc->inflight_bytes += dpwc_entry_bytes(e->flags, e->len);
		return e;
	}
	return NULL;
}

static void dpwc_free_copy(struct bio *bio)
{
	struct bvec_iter_all iter;
	struct bio_vec *bv;

	bio_for_each_segment_all(bv, bio, iter)
		__free_page(bv->bv_page);
}

/*
 * A bio writing @e's data to the origin. With struct pages for PM, its pages are
 * the log's own (the entry stays in place until its generation is freed, after
 * this bio completes); otherwise a copy, *@copied set. NULL where PM is poisoned.
 */
static struct bio *dpwc_data_bio(struct dpwc *dc, const struct dpwc_entry *e, bool *copied)
{
	u64 at = e->pm_offset + sizeof(struct dpwc_entry_hdr);
	u32 done, n, pages = DIV_ROUND_UP(offset_in_page(at) + e->len, PAGE_SIZE);
	struct page *page;
	struct bio *bio;

	*copied = !dc->pm_pages;
	bio = bio_alloc(dc->origin->bdev, pages, REQ_OP_WRITE, GFP_NOIO);
	bio->bi_iter.bi_sector = e->sector;
	for (done = 0; done < e->len; done += n, at += n) {
		if (dc->pm_pages) {
			n = min_t(u32, e->len - done, PAGE_SIZE - offset_in_page(at));
			__bio_add_page(bio, pfn_to_page(dc->pm_pfn + (at >> PAGE_SHIFT)), n,
				       offset_in_page(at));
			continue;
		}
		n = min_t(u32, e->len - done, PAGE_SIZE);
		page = alloc_page(GFP_NOIO);
		__bio_add_page(bio, page, n, 0);
		if (dpwc_read_pm(dc, page_address(page), at, n)) {
			dpwc_free_copy(bio);
			bio_put(bio);
			return NULL;
		}
	}
	return bio;
}

/* Writes @e back and waits: recovery's replay, one entry after the other. */
int dpwc_write_back_sync(struct dpwc *dc, struct dpwc_entry *e)
{
	struct bio *bio;
	bool copied;
	int r;

	if (e->flags & DPWC_FLAG_DISCARD) {
		r = blkdev_issue_discard(dc->origin->bdev, e->sector, e->len >> SECTOR_SHIFT,
					 GFP_NOIO);
		return r == -EOPNOTSUPP ? 0 : r;
	}
	bio = dpwc_data_bio(dc, e, &copied);
	if (!bio)
		return -EIO;
	r = submit_bio_wait(bio);
	if (copied)
		dpwc_free_copy(bio);
	bio_put(bio);
	return r;
}

/* Hands a finished writeback to the worker; bio completion may be in interrupt. */
static void dpwc_finish(struct dpwc_entry *e, int error)
{
	struct dpwc *dc = e->dc;

	e->error = error;
	llist_add(&e->done, &dc->done);
	queue_work(dc->wq, &dc->writeback_work);
}

static void dpwc_written(struct bio *bio)
{
	struct dpwc_entry *e = bio->bi_private;

	if (!e->dc->pm_pages && !(e->flags & DPWC_FLAG_DISCARD))
		dpwc_free_copy(bio);
	dpwc_finish(e, blk_status_to_errno(bio->bi_status));
	bio_put(bio);
}

static void dpwc_submit(struct dpwc *dc, struct dpwc_entry *e)
{
	struct bio *bio = NULL;
	bool copied;
	int r;

	if (e->flags & DPWC_FLAG_DISCARD) {
		/* The last bio of the chain completes after the others. */
		r = __blkdev_issue_discard(dc->origin->bdev, e->sector,
					   e->len >> SECTOR_SHIFT, GFP_NOIO, &bio);
		if (!bio) {
			dpwc_finish(e, r == -EOPNOTSUPP ? 0 : r);
			return;
		}
	} else {
		bio = dpwc_data_bio(dc, e, &copied);
		if (!bio) {
			dpwc_finish(e, -EIO);
			return;
		}
	}
	bio->bi_private = e;
	bio->bi_end_io = dpwc_written;
	submit_bio(bio);
}

/*
 * Frees the oldest generations that are closed and written back, after a flush of
 * the origin: once freed, their entries are no longer replayed, so the origin
 * must hold them durably. The ones to free are chosen before the flush, up to an
 * id: a generation opened and closed meanwhile has a higher one.
 */
static void dpwc_free_written_gens(struct dpwc *dc)
{
	u64 limit = U64_MAX, upto = 0;
	u32 g;
	int r;

	spin_lock(&dc->lock);
	for (g = 0; g < dc->geo.generations; g++) {
		struct dpwc_gen *gen = &dc->gens[g];

		/* A held generation is replayed already: it holds nothing back. */
		if (gen->state == DPWC_GEN_OPEN ||
		    (gen->state == DPWC_GEN_CLOSED && gen->pending))
			limit = min(limit, gen->id);
	}
	for (g = 0; g < dc->geo.generations; g++)
		if (dc->gens[g].state == DPWC_GEN_CLOSED && dc->gens[g].id < limit)
			upto = max(upto, dc->gens[g].id);
	spin_unlock(&dc->lock);
	if (!upto)
		return;
	r = blkdev_issue_flush(dc->origin->bdev);
	if (r) {
		DMERR_LIMIT("flushing %pg failed (%d): generations stay in use",
			    dc->origin->bdev, r);
		return;
	}
	spin_lock(&dc->lock);
	for (g = 0; g < dc->geo.generations; g++) {
		if (dc->gens[g].state == DPWC_GEN_CLOSED && dc->gens[g].id <= upto) {
			dpwc_free_gen(dc, g);
			dc->gens[g].state = DPWC_GEN_FREE;
		}
	}
	spin_unlock(&dc->lock);
	wake_up_all(&dc->free_wait);
}

/*
 * Takes the completed writebacks off the queue and the index; a failed one stays,
 * to be submitted again on a later run. Returns whether one failed.
 */
static bool dpwc_complete(struct dpwc *dc)
{
	struct llist_node *done = llist_del_all(&dc->done);
	struct dpwc_entry *e, *next;
	bool failed = false;

	if (!done)
		return false;
	spin_lock(&dc->lock);
	llist_for_each_entry_safe(e, next, done, done) {
		dc->inflight--;
		dc->inflight_bytes -= dpwc_entry_bytes(e->flags, e->len);
		e->submitted = false;
		if (e->error) {
			DMERR_LIMIT("writing back to %pg failed (%d): the entry stays in the log",
				    dc->origin->bdev, e->error);
			failed = true;
			dc->writeback_failed = true;
			continue;
		}
		list_del(&e->list);
		dpwc_tree_remove(e, &dc->index);
		dc->gens[e->gen].pending--;
		dc->dirty_bytes -= dpwc_entry_bytes(e->flags, e->len);
		if (!(e->flags & DPWC_FLAG_DISCARD))
			dc->stats.written_back_bytes += e->len;
		list_add(&e->list, &dc->spare);
	}
	spin_unlock(&dc->lock);
	wake_up_all(&dc->written_wait);
	return failed;
}

/* The writeback worker: completions in, then new writebacks out up to the depth. */
void dpwc_writeback_work(struct work_struct *work)
{
	struct dpwc *dc = container_of(work, struct dpwc, writeback_work);
	struct dpwc_entry *e;

	if (!dpwc_complete(dc)) {
		for (;;) {
			spin_lock(&dc->lock);
			e = dpwc_next_writeback(dc);
			spin_unlock(&dc->lock);
			if (!e)
				break;
			dpwc_submit(dc, e);
		}
	}
	dpwc_free_written_gens(dc);
}
