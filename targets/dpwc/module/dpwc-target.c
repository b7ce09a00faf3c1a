// SPDX-License-Identifier: GPL-2.0
/*
 * dm-dpwc: the "dpwc" device-mapper target, a write cache on persistent memory
 * for a block device (docs/design/dpwc.md). Writes are appended to a log on PM and
 * acknowledged once durable there; a workqueue writes them back to the origin,
 * several at once, overlapping ones in acknowledge order (dpwc-writeback.c). Reads
 * of blocks not yet written back are served from PM (dpwc-read.c).
 * Messages: writeback, drop_damaged, high_watermark P, low_watermark P.
 *
 * Table: 0 <sectors> dpwc <origin> <pm> [format] [force] [generations=N]
 *        [chunks=N] [chunk_kib=N] [slots=N] [high_watermark=P] [low_watermark=P]
 *        [writeback_depth=N]
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/dax.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include "dpwc.h"

#define DM_MSG_PREFIX "dpwc"

#define DPWC_DEFAULT_GENERATIONS 4
#define DPWC_DEFAULT_CHUNK_KIB 64
#define DPWC_MAX_CHUNK_KIB 1024
#define DPWC_DEFAULT_SLOTS 4
#define DPWC_DEFAULT_WRITEBACK_DEPTH 16
#define DPWC_MAX_WRITEBACK_DEPTH 1024
/* Entries allocated with the table: one per 4 KiB write the log holds, at most this. */
#define DPWC_MAX_SPARE_ENTRIES 32768

/* Entries come from a cache of their own: kmalloc's size lookup costs every write. */
static struct kmem_cache *dpwc_entry_cache;

/* The PM devices of the live tables: two tables on one log would corrupt it. */
static LIST_HEAD(dpwc_instances);
static DEFINE_MUTEX(dpwc_instances_lock);

struct dpwc_instance {
	struct list_head list;
	dev_t pm;
};

struct dpwc_options {
	bool format;
	bool force;
	u32 generations;
	u32 chunks;
	u32 chunk_kib;
};

/* Whether the log's bytes not yet written back reach @percent of its capacity. */
static bool dpwc_dirty_at(const struct dpwc *dc, u32 percent)
{
	return dc->dirty_bytes * 100 >= (u64)percent * dpwc_capacity(dc);
}

static bool dpwc_has_free_gen(struct dpwc *dc)
{
	bool found = false;
	u32 g;

	spin_lock(&dc->lock);
	for (g = 0; g < dc->geo.generations && !found; g++)
		found = dc->gens[g].state == DPWC_GEN_FREE;
	spin_unlock(&dc->lock);
	return found;
}

/* Under dc->lock: a free generation opened under the next id, or -1. */
static int dpwc_open_next_gen(struct dpwc *dc)
{
	u32 g;

	for (g = 0; g < dc->geo.generations; g++) {
		struct dpwc_gen *gen = &dc->gens[g];

		if (gen->state != DPWC_GEN_FREE)
			continue;
		gen->state = DPWC_GEN_OPEN;
		gen->id = ++dc->last_gen_id;
		gen->next_chunk = 0;
		gen->next_entry = 1;
		gen->pending = 0;
		dpwc_open_gen(dc, g, gen->id);
		return g;
	}
	return -1;
}

/*
 * Under dc->lock: the open generation, full or to be written back, is closed. The
 * slots give up its chunks: reopened under the same index, it starts from chunk 0,
 * and a slot appending where it left off would put new entries after stale ones.
 */
static void dpwc_close_open_gen(struct dpwc *dc)
{
	u32 s;

	if (dc->open_gen < 0)
		return;
	dc->gens[dc->open_gen].state = DPWC_GEN_CLOSED;
	for (s = 0; s < dc->nr_slots; s++)
		if (dc->slots[s].gen == dc->open_gen)
			dc->slots[s].gen = -1;
	dc->open_gen = -1;
}

/*
 * An entry for @bio: a spare one allocated with the table (see dpwc_alloc()), or
 * from the pool when none is left. Called and returns under dc->lock.
 */
static struct dpwc_entry *dpwc_get_entry(struct dpwc *dc, struct bio *bio, u32 flags)
{
	struct dpwc_entry *e;

	e = list_first_entry_or_null(&dc->spare, struct dpwc_entry, list);
	if (e) {
		list_del(&e->list);
	} else {
		spin_unlock(&dc->lock);
		e = mempool_alloc(dc->entry_pool, GFP_NOIO);
		spin_lock(&dc->lock);
	}
	e->dc = dc;
	e->sector = bio->bi_iter.bi_sector;
	e->len = bio->bi_iter.bi_size;
	e->flags = flags;
	e->submitted = false;
	return e;
}

/*
 * Reserves room for an entry of @bio in @slot's chunk, taking a new chunk (and a
 * new generation) when it is full. With no free generation the writer waits for
 * writeback.
 */
static struct dpwc_entry *dpwc_reserve(struct dpwc *dc, struct dpwc_slot *slot,
				       struct bio *bio, u32 flags)
{
	u32 size = dpwc_entry_bytes(flags, bio->bi_iter.bi_size);
	struct dpwc_entry *e;
	struct dpwc_gen *gen;
	int g;

	spin_lock(&dc->lock);
	e = dpwc_get_entry(dc, bio, flags);
	while (slot->gen < 0 || slot->gen != dc->open_gen ||
	       slot->offset + size > dc->geo.chunk_size) {
		g = dc->open_gen;
		if (g >= 0 && dc->gens[g].next_chunk < dc->geo.chunks_per_gen) {
			slot->gen = g;
			slot->chunk = dc->gens[g].next_chunk++;
			slot->offset = 0;
			continue;
		}
		dpwc_close_open_gen(dc);
		dc->open_gen = dpwc_open_next_gen(dc);
		if (dc->open_gen >= 0)
			continue;
		dc->force_seq = dc->queued_seq;
		dc->stats.throttled++;
		spin_unlock(&dc->lock);
		queue_work(dc->wq, &dc->writeback_work);
		wait_event(dc->free_wait, dpwc_has_free_gen(dc));
		spin_lock(&dc->lock);
	}
	gen = &dc->gens[slot->gen];
	e->gen = slot->gen;
	e->gen_id = gen->id;
	e->entry_id = gen->next_entry++;
	e->pm_offset = dpwc_chunk_offset(&dc->geo, slot->gen, slot->chunk) + slot->offset;
	slot->offset += size;
	gen->pending++;
	dc->dirty_bytes += size;
	spin_unlock(&dc->lock);
	return e;
}

/* A free slot, now taken by the caller, or NULL when all are busy. */
static struct dpwc_slot *dpwc_try_slot(struct dpwc *dc)
{
	u32 s;

	for (s = find_first_zero_bit(dc->slot_busy, dc->nr_slots); s < dc->nr_slots;
	     s = find_next_zero_bit(dc->slot_busy, dc->nr_slots, s + 1))
		if (!test_and_set_bit_lock(s, dc->slot_busy))
			return &dc->slots[s];
	return NULL;
}

/*
 * Takes a writer slot: at most nr_slots writers copy to PM at once. A free one is
 * taken by one atomic bit operation, with no lock (a semaphore's cost a spinlock
 * to take and another to give back); only when all are busy does the writer sleep.
 */
static struct dpwc_slot *dpwc_take_slot(struct dpwc *dc)
{
	struct dpwc_slot *slot = dpwc_try_slot(dc);

	if (!slot)
		wait_event(dc->slot_wait, (slot = dpwc_try_slot(dc)));
	return slot;
}

/*
 * The barrier orders the freed bit before the check for sleepers, which pairs
 * with the one in prepare_to_wait(): a writer either sees the bit free or is
 * seen waiting and woken.
 */
static void dpwc_put_slot(struct dpwc *dc, struct dpwc_slot *slot)
{
	clear_bit_unlock(slot - dc->slots, dc->slot_busy);
	smp_mb__after_atomic();
	if (DPWC_MUTANT != 10 && waitqueue_active(&dc->slot_wait))
		wake_up(&dc->slot_wait);
}

/* Appends a write or discard to the log, queues its writeback, acknowledges it. */
static void dpwc_log(struct dpwc *dc, struct bio *bio, u32 flags)
{
	struct dpwc_slot *slot = dpwc_take_slot(dc);
	struct dpwc_entry *e = dpwc_reserve(dc, slot, bio, flags);
	bool kick;


	dpwc_append(dc, slot, e, bio);
	dpwc_put_slot(dc, slot);

	spin_lock(&dc->lock);
	e->seq = ++dc->queued_seq;
	list_add_tail(&e->list, &dc->pending);
	dpwc_index_insert(dc, e);
	if (flags & DPWC_FLAG_DISCARD)
		dc->stats.discards++;
	else
		dc->stats.acked++;
	kick = dpwc_dirty_at(dc, dc->high_watermark);
	spin_unlock(&dc->lock);
	if (kick)
		queue_work(dc->wq, &dc->writeback_work);
	bio_endio(bio);
}

static int dpwc_map(struct dm_target *ti, struct bio *bio)
{
	struct dpwc *dc = ti->private;
	struct dpwc_read *rd = dm_per_bio_data(bio, sizeof(*rd));

	rd->snap = NULL;
	if (!bio_sectors(bio)) {
		/* An empty flush: every acknowledged write is already durable on PM. */
		bio_endio(bio);
		return DM_MAPIO_SUBMITTED;
	}
	bio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	switch (bio_op(bio)) {
	case REQ_OP_READ:
		/* Only reads reach the origin: bio_set_dev() costs a blkcg lookup. */
		bio_set_dev(bio, dc->origin->bdev);
		return dpwc_map_read(dc, bio);
	case REQ_OP_WRITE:
		/*
		 * An entry fits in a chunk: a longer write is cut here and dm sends the
		 * rest as another bio. Not with max_io_len, which would cut every bio,
		 * reads too, at fixed boundaries of the device.
		 */
		if (bio_sectors(bio) > dc->max_write_sectors)
			dm_accept_partial_bio(bio, dc->max_write_sectors);
		dpwc_log(dc, bio, 0);
		return DM_MAPIO_SUBMITTED;
	case REQ_OP_DISCARD:
		dpwc_log(dc, bio, DPWC_FLAG_DISCARD);
		return DM_MAPIO_SUBMITTED;
	default:
		return DM_MAPIO_KILL;
	}
}

static int dpwc_parse_option(const char *arg, struct dpwc_options *opt, struct dpwc *dc)
{
	static const struct {
		const char *key;
		size_t offset;
		bool in_dc;
	} keys[] = {
		{ "generations=", offsetof(struct dpwc_options, generations), false },
		{ "chunks=", offsetof(struct dpwc_options, chunks), false },
		{ "chunk_kib=", offsetof(struct dpwc_options, chunk_kib), false },
		{ "slots=", offsetof(struct dpwc, nr_slots), true },
		{ "high_watermark=", offsetof(struct dpwc, high_watermark), true },
		{ "low_watermark=", offsetof(struct dpwc, low_watermark), true },
		{ "writeback_depth=", offsetof(struct dpwc, writeback_depth), true },
	};
	size_t i, n;

	if (!strcmp(arg, "format")) {
		opt->format = true;
		return 0;
	}
	if (!strcmp(arg, "force")) {
		opt->force = true;
		return 0;
	}
	for (i = 0; i < ARRAY_SIZE(keys); i++) {
		void *base = keys[i].in_dc ? (void *)dc : (void *)opt;

		n = strlen(keys[i].key);
		if (!strncmp(arg, keys[i].key, n))
			return kstrtou32(arg + n, 10, base + keys[i].offset);
	}
	return -EINVAL;
}

static int dpwc_parse(struct dm_target *ti, struct dpwc *dc, struct dpwc_options *opt,
		      unsigned int argc, char **argv)
{
	unsigned int i;

	dc->nr_slots = DPWC_DEFAULT_SLOTS;
	dc->writeback_depth = DPWC_DEFAULT_WRITEBACK_DEPTH;
	for (i = 2; i < argc; i++) {
		if (dpwc_parse_option(argv[i], opt, dc)) {
			DMERR("bad option \"%s\"", argv[i]);
			ti->error = "Bad option (see docs/design/dpwc.md)";
			return -EINVAL;
		}
	}
	if (!dc->nr_slots || dc->nr_slots > DPWC_MAX_SLOTS) {
		ti->error = "slots= must be 1..64";
		return -EINVAL;
	}
	if (!dc->writeback_depth || dc->writeback_depth > DPWC_MAX_WRITEBACK_DEPTH) {
		ti->error = "writeback_depth= must be 1..1024";
		return -EINVAL;
	}
	if (dc->high_watermark > 100 || dc->low_watermark > dc->high_watermark) {
		ti->error = "Watermarks must be 0 <= low_watermark <= high_watermark <= 100";
		return -EINVAL;
	}
	if (opt->force && !opt->format) {
		ti->error = "force only goes with format";
		return -EINVAL;
	}
	return 0;
}

/* Maps the whole PM device through DAX. */
static int dpwc_map_pm(struct dm_target *ti, struct dpwc *dc)
{
	struct block_device *bdev = dc->pm_dev->bdev;
	sector_t start = get_start_sect(bdev);
	long pages, mapped;
	pfn_t pfn;
	int id;

	if (!dc->pm_dev->dax_dev) {
		DMERR("%pg does not support DAX", dc->pm_dev->bdev);
		ti->error = "The PM device has no DAX (need a pmem device in fsdax mode)";
		return -EOPNOTSUPP;
	}
	if (start & (PAGE_SECTORS - 1)) {
		ti->error = "The PM device does not start on a page";
		return -EINVAL;
	}
	dc->pm_size = bdev_nr_bytes(bdev);
	pages = dc->pm_size >> PAGE_SHIFT;
	id = dax_read_lock();
	mapped = dax_direct_access(dc->pm_dev->dax_dev, start >> (PAGE_SHIFT - SECTOR_SHIFT),
				   pages, DAX_ACCESS, &dc->pm, &pfn);
	dax_read_unlock(id);
	if (mapped < pages) {
		DMERR("%pg: DAX maps %ld of %ld pages", dc->pm_dev->bdev, mapped, pages);
		ti->error = "The PM device cannot be mapped at once through DAX";
		return mapped < 0 ? mapped : -EOPNOTSUPP;
	}
	/* With struct pages, writeback puts the log's own pages in its bios. */
	dc->pm_pages = pfn_t_has_page(pfn);
	dc->pm_pfn = pfn_t_to_pfn(pfn);
	return 0;
}

static bool dpwc_fits(const struct dpwc_geometry *geo, u64 pm_size)
{
	return geo->data_offset + (u64)geo->generations * geo->chunks_per_gen *
	       geo->chunk_size <= pm_size;
}

static void dpwc_layout(struct dpwc_geometry *geo)
{
	geo->data_offset = round_up(DPWC_META_OFFSET +
				    dpwc_meta_bytes(geo->generations, geo->chunks_per_gen),
				    PAGE_SIZE);
}

/* The geometry of a new log: the options, and chunks filling the device by default. */
static int dpwc_new_geometry(struct dm_target *ti, struct dpwc *dc,
			     const struct dpwc_options *opt)
{
	struct dpwc_geometry *geo = &dc->geo;
	u32 kib = opt->chunk_kib ?: DPWC_DEFAULT_CHUNK_KIB;

	geo->generations = opt->generations ?: DPWC_DEFAULT_GENERATIONS;
	if (geo->generations < 2) {
		ti->error = "generations= must be at least 2";
		return -EINVAL;
	}
	if (kib < 8 || kib % 4 || kib > DPWC_MAX_CHUNK_KIB) {
		ti->error = "chunk_kib= must be a multiple of 4 from 8 to 1024";
		return -EINVAL;
	}
	geo->chunk_size = kib * 1024;
	geo->origin_sectors = bdev_nr_sectors(dc->origin->bdev);
	geo->chunks_per_gen = opt->chunks ?:
		div64_u64(dc->pm_size, (u64)geo->generations * (geo->chunk_size + DPWC_LINE));
	for (dpwc_layout(geo); !opt->chunks && geo->chunks_per_gen; dpwc_layout(geo)) {
		if (dpwc_fits(geo, dc->pm_size))
			break;
		geo->chunks_per_gen--;
	}
	if (!geo->chunks_per_gen || !dpwc_fits(geo, dc->pm_size)) {
		DMERR("%pg (%llu bytes) cannot hold %u generations of %u chunks of %u KiB",
		      dc->pm_dev->bdev, dc->pm_size, geo->generations,
		      max(geo->chunks_per_gen, 1U), kib);
		ti->error = "The PM device is too small for this geometry";
		return -ENOSPC;
	}
	return 0;
}

static int dpwc_check_option(const char *what, u32 given, u32 on_pm)
{
	if (!given || given == on_pm)
		return 0;
	DMERR("%s=%u but the cache was formatted with %u", what, given, on_pm);
	return -EINVAL;
}

/* The geometry of an existing log, checked against the options and the origin. */
static int dpwc_existing_geometry(struct dm_target *ti, struct dpwc *dc,
				  const struct dpwc_options *opt)
{
	struct dpwc_geometry *geo = &dc->geo;
	struct dpwc_geometry layout;
	int r = dpwc_read_sb(dc, geo);

	if (r == -ENOENT) {
		DMERR("%pg has no dpwc superblock: create the table with \"format\"",
		      dc->pm_dev->bdev);
		ti->error = "No dpwc superblock on the PM device (format it with the format option)";
		return r;
	}
	layout = *geo;
	if (!r) {
		dpwc_layout(&layout);
		if (geo->generations < 2 || !geo->chunks_per_gen ||
		    geo->chunk_size < 8192 || geo->chunk_size % PAGE_SIZE ||
		    geo->chunk_size > DPWC_MAX_CHUNK_KIB * 1024 ||
		    geo->data_offset < layout.data_offset || geo->data_offset % PAGE_SIZE ||
		    !dpwc_fits(geo, dc->pm_size))
			r = -EINVAL;
	}
	if (r) {
		DMERR("%pg: the dpwc superblock is corrupt or of another version",
		      dc->pm_dev->bdev);
		ti->error = "Corrupt or foreign dpwc superblock";
		return r;
	}
	if (dpwc_check_option("generations", opt->generations, geo->generations) ||
	    dpwc_check_option("chunks", opt->chunks, geo->chunks_per_gen) ||
	    dpwc_check_option("chunk_kib", opt->chunk_kib, geo->chunk_size / 1024)) {
		ti->error = "The options do not match the cache's geometry";
		return -EINVAL;
	}
	if (geo->origin_sectors != bdev_nr_sectors(dc->origin->bdev)) {
		DMERR("the cache on %pg was formatted for an origin of %llu sectors, %pg has %llu",
		      dc->pm_dev->bdev, geo->origin_sectors, dc->origin->bdev,
		      (u64)bdev_nr_sectors(dc->origin->bdev));
		ti->error = "The origin's size differs from the one the cache was formatted for";
		return -EINVAL;
	}
	return 0;
}

static int dpwc_claim_pm(struct dm_target *ti, struct dpwc *dc)
{
	dev_t dev = dc->pm_dev->bdev->bd_dev;
	struct dpwc_instance *in;

	mutex_lock(&dpwc_instances_lock);
	list_for_each_entry(in, &dpwc_instances, list) {
		if (in->pm == dev) {
			mutex_unlock(&dpwc_instances_lock);
			ti->error = "The PM device is in use by another dpwc table (remove it first)";
			return -EBUSY;
		}
	}
	in = kzalloc(sizeof(*in), GFP_KERNEL);
	if (in) {
		in->pm = dev;
		list_add(&in->list, &dpwc_instances);
	}
	mutex_unlock(&dpwc_instances_lock);
	return in ? 0 : -ENOMEM;
}

static void dpwc_release_pm(struct dpwc *dc)
{
	dev_t dev = dc->pm_dev->bdev->bd_dev;
	struct dpwc_instance *in;

	mutex_lock(&dpwc_instances_lock);
	list_for_each_entry(in, &dpwc_instances, list) {
		if (in->pm == dev) {
			list_del(&in->list);
			kfree(in);
			break;
		}
	}
	mutex_unlock(&dpwc_instances_lock);
}

/*
 * The table's memory. Entries are allocated here, as dm-writecache does, one per
 * 4 KiB write the log holds (up to DPWC_MAX_SPARE_ENTRIES): a write takes a spare
 * one and writeback gives it back, where an allocation per write cost more guest
 * instructions than the rest of the entry's bookkeeping. Beyond them, the pool.
 */
static int dpwc_alloc(struct dpwc *dc)
{
	u32 i;

	dc->gens = kcalloc(dc->geo.generations, sizeof(*dc->gens), GFP_KERNEL);
	dc->entry_pool = mempool_create_slab_pool(2 * dc->nr_slots, dpwc_entry_cache);
	dc->wq = alloc_workqueue("dpwc", WQ_MEM_RECLAIM | WQ_UNBOUND, 1);
	dc->nr_entries = min_t(u64, DPWC_MAX_SPARE_ENTRIES,
			       div_u64(dpwc_capacity(dc), DPWC_ENTRY_ALIGN + PAGE_SIZE));
	dc->entries = kvcalloc(dc->nr_entries, sizeof(*dc->entries), GFP_KERNEL);
	if (!dc->gens || !dc->entry_pool || !dc->wq || !dc->entries)
		return -ENOMEM;
	for (i = 0; i < dc->nr_entries; i++)
		list_add_tail(&dc->entries[i].list, &dc->spare);
	for (i = 0; i < dc->nr_slots; i++) {
		dc->slots[i].stage = kmalloc(PAGE_SIZE, GFP_KERNEL);
		if (!dc->slots[i].stage)
			return -ENOMEM;
	}
	return 0;
}

static void dpwc_free(struct dpwc *dc)
{
	struct dpwc_entry *e, *next;
	u32 i;

	if (dc->wq)
		destroy_workqueue(dc->wq);
	/* Entries not written back stay in the log; the next load replays them. */
	list_splice_init(&dc->pending, &dc->spare);
	list_for_each_entry_safe(e, next, &dc->spare, list)
		if (e < dc->entries || e >= dc->entries + dc->nr_entries)
			mempool_free(e, dc->entry_pool);
	kvfree(dc->entries);
	mempool_destroy(dc->entry_pool);
	for (i = 0; i < DPWC_MAX_SLOTS; i++)
		kfree(dc->slots[i].stage);
	kfree(dc->gens);
	if (dc->claimed)
		dpwc_release_pm(dc);
	if (dc->pm_dev)
		dm_put_device(dc->ti, dc->pm_dev);
	if (dc->origin)
		dm_put_device(dc->ti, dc->origin);
	kvfree(dc);
}

static int dpwc_setup(struct dm_target *ti, struct dpwc *dc, struct dpwc_options *opt,
		      unsigned int argc, char **argv)
{
	struct dpwc_geometry on_pm;
	u32 s;
	int r;

	r = dpwc_parse(ti, dc, opt, argc, argv);
	if (r)
		return r;
	DMINFO("CRC-32C by %s", dpwc_crc_insn() ? "the crc32 instruction" : "__crc32c_le");
	r = dm_get_device(ti, argv[0], dm_table_get_mode(ti->table), &dc->origin);
	if (r) {
		ti->error = "Cannot open the origin device";
		return r;
	}
	r = dm_get_device(ti, argv[1], dm_table_get_mode(ti->table), &dc->pm_dev);
	if (r) {
		ti->error = "Cannot open the PM device";
		return r;
	}
	if (ti->len > bdev_nr_sectors(dc->origin->bdev)) {
		ti->error = "The table is longer than the origin";
		return -EINVAL;
	}
	r = dpwc_map_pm(ti, dc);
	if (r)
		return r;
	r = dpwc_claim_pm(ti, dc);
	if (r)
		return r;
	dc->claimed = true;
	if (opt->format) {
		if (!opt->force && dpwc_read_sb(dc, &on_pm) == 0) {
			DMERR("%pg holds a dpwc cache: add \"force\" to format it anyway",
			      dc->pm_dev->bdev);
			ti->error = "The PM device holds a dpwc cache (format force overwrites it)";
			return -EEXIST;
		}
		r = dpwc_new_geometry(ti, dc, opt);
	} else {
		r = dpwc_existing_geometry(ti, dc, opt);
	}
	if (r)
		return r;
	r = dpwc_alloc(dc);
	if (r) {
		ti->error = "Out of memory";
		return r;
	}
	for (s = 0; s < dc->nr_slots; s++)
		dc->slots[s].gen = -1;
	init_waitqueue_head(&dc->slot_wait);
	if (opt->format) {
		dpwc_format(dc);
		return 0;
	}
	r = dpwc_recover(dc);
	if (r)
		ti->error = "Replaying the log to the origin failed";
	return r;
}

static int dpwc_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dpwc_options opt = {};
	struct dpwc *dc;
	int r;

	if (argc < 2) {
		ti->error = "Usage: dpwc <origin> <pm> [format [force]] [options]";
		return -EINVAL;
	}
	dc = kvzalloc(sizeof(*dc), GFP_KERNEL);
	if (!dc) {
		ti->error = "Out of memory";
		return -ENOMEM;
	}
	dc->ti = ti;
	dc->open_gen = -1;
	spin_lock_init(&dc->lock);
	INIT_LIST_HEAD(&dc->pending);
	INIT_LIST_HEAD(&dc->spare);
	dc->index = RB_ROOT_CACHED;
	init_llist_head(&dc->done);
	init_waitqueue_head(&dc->free_wait);
	init_waitqueue_head(&dc->written_wait);
	INIT_WORK(&dc->writeback_work, dpwc_writeback_work);
	r = dpwc_setup(ti, dc, &opt, argc, argv);
	if (r) {
		dpwc_free(dc);
		return r;
	}
	dc->max_write_sectors = (dc->geo.chunk_size - PAGE_SIZE) >> SECTOR_SHIFT;
	ti->per_io_data_size = sizeof(struct dpwc_read);
	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->discards_supported = true;
	ti->private = dc;
	return 0;
}

static void dpwc_dtr(struct dm_target *ti)
{
	struct dpwc *dc = ti->private;

	spin_lock(&dc->lock);
	dc->stopping = true;
	spin_unlock(&dc->lock);
	/* Writebacks in flight end in the worker: let them. */
	wait_event(dc->written_wait, !READ_ONCE(dc->inflight));
	dpwc_free(dc);
}

/* Whether every entry up to @seq is written back. */
static bool dpwc_all_written(struct dpwc *dc, u64 seq)
{
	bool written;

	spin_lock(&dc->lock);
	written = dpwc_written_upto(dc, seq);
	spin_unlock(&dc->lock);
	return written;
}

/*
 * Writes back everything acknowledged so far and frees its generations; -EIO when
 * a writeback fails (its entry stays in the log).
 */
static int dpwc_writeback_now(struct dpwc *dc)
{
	u64 seq;

	spin_lock(&dc->lock);
	dpwc_close_open_gen(dc);
	dc->force_seq = seq = dc->queued_seq;
	dc->writeback_failed = false;
	spin_unlock(&dc->lock);
	queue_work(dc->wq, &dc->writeback_work);
	wait_event(dc->written_wait, dpwc_all_written(dc, seq) || READ_ONCE(dc->writeback_failed));
	/* The worker's run that took the last completion frees the generations. */
	flush_work(&dc->writeback_work);
	return dpwc_all_written(dc, seq) ? 0 : -EIO;
}

/* Frees the generations held for their damaged entries: the user gives them up. */
static void dpwc_drop_damaged(struct dpwc *dc)
{
	u32 g, dropped = 0;

	spin_lock(&dc->lock);
	for (g = 0; g < dc->geo.generations; g++) {
		if (dc->gens[g].state == DPWC_GEN_HELD) {
			dpwc_free_gen(dc, g);
			dc->gens[g].state = DPWC_GEN_FREE;
			dropped++;
		}
	}
	spin_unlock(&dc->lock);
	if (dropped)
		DMINFO("%pg: %u generations with damaged entries freed", dc->pm_dev->bdev,
		       dropped);
	wake_up_all(&dc->free_wait);
}

static int dpwc_message(struct dm_target *ti, unsigned int argc, char **argv,
			char *result, unsigned int maxlen)
{
	struct dpwc *dc = ti->private;
	u32 value, high, low;

	if (argc == 1 && !strcasecmp(argv[0], "writeback"))
		return dpwc_writeback_now(dc);
	if (argc == 1 && !strcasecmp(argv[0], "drop_damaged")) {
		dpwc_drop_damaged(dc);
		return 0;
	}
	if (argc == 2 && (!strcasecmp(argv[0], "high_watermark") ||
			  !strcasecmp(argv[0], "low_watermark"))) {
		if (kstrtou32(argv[1], 10, &value))
			return -EINVAL;
		spin_lock(&dc->lock);
		high = argv[0][0] == 'h' ? value : dc->high_watermark;
		low = argv[0][0] == 'l' ? value : dc->low_watermark;
		if (high <= 100 && low <= high) {
			dc->high_watermark = high;
			dc->low_watermark = low;
		}
		spin_unlock(&dc->lock);
		if (high > 100 || low > high) {
			DMERR("watermarks must be 0 <= low <= high <= 100");
			return -EINVAL;
		}
		queue_work(dc->wq, &dc->writeback_work);
		return 0;
	}
	DMERR("unknown message: use writeback, drop_damaged, high_watermark P or low_watermark P");
	return -EINVAL;
}

static void dpwc_status(struct dm_target *ti, status_type_t type, unsigned int status_flags,
			char *result, unsigned int maxlen)
{
	struct dpwc *dc = ti->private;
	struct dpwc_stats stats;
	u64 dirty;
	u32 g, in_use = 0, held = 0;
	unsigned int sz = 0;

	switch (type) {
	case STATUSTYPE_INFO:
		spin_lock(&dc->lock);
		stats = dc->stats;
		dirty = dc->dirty_bytes;
		for (g = 0; g < dc->geo.generations; g++) {
			in_use += dc->gens[g].state != DPWC_GEN_FREE;
			held += dc->gens[g].state == DPWC_GEN_HELD;
		}
		spin_unlock(&dc->lock);
		DMEMIT("acked=%llu discards=%llu written_back_bytes=%llu replayed=%llu ",
		       stats.acked, stats.discards, stats.written_back_bytes, stats.replayed);
		DMEMIT("gens_in_use=%u dirty_bytes=%llu corrupt=%llu throttled=%llu held=%u ",
		       in_use, dirty, stats.corrupt, stats.throttled, held);
		DMEMIT("read_hits=%llu max_inflight=%u", stats.read_hits, stats.max_inflight);
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s %s generations=%u chunks=%u chunk_kib=%u slots=%u ",
		       dc->origin->name, dc->pm_dev->name, dc->geo.generations,
		       dc->geo.chunks_per_gen, dc->geo.chunk_size / 1024, dc->nr_slots);
		DMEMIT("high_watermark=%u low_watermark=%u writeback_depth=%u",
		       dc->high_watermark, dc->low_watermark, dc->writeback_depth);
		break;
	default:
		break;
	}
}

static int dpwc_iterate_devices(struct dm_target *ti, iterate_devices_callout_fn fn,
				void *data)
{
	struct dpwc *dc = ti->private;

	return fn(ti, dc->origin, 0, ti->len, data);
}

static struct target_type dpwc_target = {
	.name = "dpwc",
	.version = { 2, 1, 0 },
	.module = THIS_MODULE,
	.ctr = dpwc_ctr,
	.dtr = dpwc_dtr,
	.map = dpwc_map,
	.end_io = dpwc_end_io,
	.message = dpwc_message,
	.status = dpwc_status,
	.iterate_devices = dpwc_iterate_devices,
};

static int __init dpwc_init(void)
{
	int r;

	dpwc_entry_cache = KMEM_CACHE(dpwc_entry, 0);
	if (!dpwc_entry_cache)
		return -ENOMEM;
	r = dm_register_target(&dpwc_target);
	if (r)
		kmem_cache_destroy(dpwc_entry_cache);
	return r;
}

static void __exit dpwc_exit(void)
{
	dm_unregister_target(&dpwc_target);
	kmem_cache_destroy(dpwc_entry_cache);
}

module_init(dpwc_init);
module_exit(dpwc_exit);

MODULE_DESCRIPTION("dm-dpwc: a write cache on persistent memory for a block device");
MODULE_LICENSE("GPL");
