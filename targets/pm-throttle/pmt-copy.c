// SPDX-License-Identifier: GPL-2.0
/*
 * The copy of one DAX write, in the mode set (docs/design/pm-throttle.md): off (the
 * kernel's copy), semaphore (at most pmt_limit writers per region; a writer
 * under the limit never sleeps) or workqueue (copies of pmt_threshold bytes and
 * more go to the region's workers on its NUMA node, the caller waits until the
 * copy is done and fenced; smaller ones stay synchronous).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cdev.h>
#include <linux/completion.h>
#include <linux/dax.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "pmt.h"

/*
 * The head of struct dax_device (drivers/dax/super.c, private to it) in the
 * kernels built for (6.1, 6.12): the replaced function reads its flags. The
 * layout is checked against the exported accessors at load
 * (pmt_dax_layout_ok()).
 */
struct pmt_dax_head {
	struct inode inode;
	struct cdev cdev;
	void *private;
	unsigned long flags;
};

/* enum dax_device_flags of drivers/dax/super.c */
enum { PMT_DAXDEV_ALIVE, PMT_DAXDEV_WRITE_CACHE, PMT_DAXDEV_SYNC,
	PMT_DAXDEV_NOCACHE };

static unsigned long *pmt_dax_flags(struct dax_device *dax_dev)
{
	return &((struct pmt_dax_head *)dax_dev)->flags;
}

static int pmt_no_zero_page_range(struct dax_device *dax_dev, pgoff_t pgoff,
				  size_t nr_pages)
{
	return -EOPNOTSUPP;
}

/*
 * Whether struct pmt_dax_head matches the running kernel: on a dax_device of
 * its own, the private pointer and the flag bits read through it must follow
 * what the kernel's own setters and getters do. The flags of a new dax_device
 * may be stale (the kernel reuses freed ones without clearing them), so only
 * bits set or toggled here are compared.
 */
bool pmt_dax_layout_ok(void)
{
	static const struct dax_operations ops = {
		.zero_page_range = pmt_no_zero_page_range,
	};
	static int marker;
	struct dax_device *dax_dev;
	unsigned long *flags;
	bool ok;

	dax_dev = alloc_dax(&marker, &ops);
	if (IS_ERR(dax_dev))
		return false;
	flags = pmt_dax_flags(dax_dev);
	ok = ((struct pmt_dax_head *)dax_dev)->private == &marker &&
	     dax_get_private(dax_dev) == &marker;
	ok = ok && test_bit(PMT_DAXDEV_ALIVE, flags) && dax_alive(dax_dev);
	dax_write_cache(dax_dev, false);
	ok = ok && !test_bit(PMT_DAXDEV_WRITE_CACHE, flags) &&
	     !dax_write_cache_enabled(dax_dev);
	dax_write_cache(dax_dev, true);
	ok = ok && test_bit(PMT_DAXDEV_WRITE_CACHE, flags) &&
	     dax_write_cache_enabled(dax_dev);
	set_dax_nocache(dax_dev);
	ok = ok && test_bit(PMT_DAXDEV_NOCACHE, flags);
	set_dax_synchronous(dax_dev);
	ok = ok && test_bit(PMT_DAXDEV_SYNC, flags) && dax_synchronous(dax_dev);
	kill_dax(dax_dev);
	ok = ok && !test_bit(PMT_DAXDEV_ALIVE, flags) && !dax_alive(dax_dev);
	put_dax(dax_dev);
	return ok;
}

/* The kernel's own copy: non-temporal to a device that asks for it (pmem). */
static size_t pmt_copy_now(struct dax_device *dax_dev, void *addr,
			   size_t bytes, struct iov_iter *i)
{
	if (test_bit(PMT_DAXDEV_NOCACHE, pmt_dax_flags(dax_dev)))
		return _copy_from_iter_flushcache(addr, bytes, i);
	return _copy_from_iter(addr, bytes, i);
}

#define PMT_MAX_REGIONS 16
static struct pmt_region *pmt_regions[PMT_MAX_REGIONS];
static DEFINE_MUTEX(pmt_regions_lock);
atomic64_t pmt_untracked_copies;

static int pmt_node_of(void *addr)
{
	return virt_addr_valid(addr) ? page_to_nid(virt_to_page(addr)) :
				       NUMA_NO_NODE;
}

static struct pmt_region *pmt_region_new(struct dax_device *dax_dev,
					 void *addr, int id)
{
	struct pmt_region *r;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->dax_dev = dax_dev;
	r->node = pmt_node_of(addr);
	init_waitqueue_head(&r->wait);
	r->wq = alloc_workqueue("pm-throttle/%d", WQ_UNBOUND, pmt_workers, id);
	if (!r->wq) {
		kfree(r);
		return NULL;
	}
	/* on failure the kobject's release has freed the region */
	return pmt_region_kobject_add(r, id) ? NULL : r;
}

/* The region of dax_dev, made on its first copy; NULL when there is no room. */
static struct pmt_region *pmt_region_of(struct dax_device *dax_dev, void *addr)
{
	struct pmt_region *r = NULL;
	unsigned int nofs;
	int id;

	for (id = 0; id < PMT_MAX_REGIONS; id++) {
		/* pairs with the release below: a region is whole once seen */
		r = smp_load_acquire(&pmt_regions[id]);
		if (!r || r->dax_dev == dax_dev)
			break;
	}
	if (r)
		return r;
	/* In a file system's write: its allocations must not recurse into it. */
	nofs = memalloc_nofs_save();
	mutex_lock(&pmt_regions_lock);
	for (id = 0; id < PMT_MAX_REGIONS; id++) {
		r = pmt_regions[id];
		if (!r) {
			r = pmt_region_new(dax_dev, addr, id);
			if (r)
				/* pairs with the lock-free lookups' acquire */
				smp_store_release(&pmt_regions[id], r);
			break;
		}
		if (r->dax_dev == dax_dev)
			break;
	}
	mutex_unlock(&pmt_regions_lock);
	memalloc_nofs_restore(nofs);
	return id < PMT_MAX_REGIONS ? r : NULL;
}

void pmt_regions_free(void)
{
	int id;

	/* the kobject's release destroys the workqueue and frees the region */
	for (id = 0; id < PMT_MAX_REGIONS && pmt_regions[id]; id++) {
		kobject_put(&pmt_regions[id]->kobj);
		pmt_regions[id] = NULL;
	}
}

static void pmt_note_writers(struct pmt_region *r, int writers)
{
	int max = atomic_read(&r->max_writers);

	while (writers > max &&
	       !atomic_try_cmpxchg(&r->max_writers, &max, writers))
		;
}

static void pmt_enter(struct pmt_region *r)
{
	pmt_note_writers(r, atomic_inc_return(&r->writers));
}

/* Enters when fewer than the limit are writing, without ever sleeping. */
static bool pmt_try_enter(struct pmt_region *r)
{
	int writers = atomic_read(&r->writers);

	do {
		if (writers >= READ_ONCE(pmt_limit))
			return false;
	} while (!atomic_try_cmpxchg(&r->writers, &writers, writers + 1));
	pmt_note_writers(r, writers + 1);
	return true;
}

static void pmt_leave(struct pmt_region *r)
{
	atomic_dec(&r->writers);
	if (wq_has_sleeper(&r->wait))
		wake_up(&r->wait);
}

static void pmt_waited(struct pmt_region *r, u64 since)
{
	atomic64_inc(&r->waits);
	atomic64_add(ktime_get_ns() - since, &r->wait_ns);
}

static void pmt_count(struct pmt_count *c, size_t bytes)
{
	atomic64_inc(&c->copies);
	atomic64_add(bytes, &c->bytes);
}

/*
 * Applies a changed limit or worker count to every region: waiters recheck the
 * limit, workqueues take the count. Setting the unchanged one again is harmless.
 */
void pmt_settings_changed(void)
{
	int id;
	struct pmt_region *r;

	for (id = 0; id < PMT_MAX_REGIONS; id++) {
		/* pairs with pmt_region_of()'s release */
		r = smp_load_acquire(&pmt_regions[id]);
		if (!r)
			break;
		wake_up_all(&r->wait);
		workqueue_set_max_active(r->wq, pmt_workers);
	}
}

/* One copy handed to a worker; it lives on the stack of the waiting caller. */
struct pmt_work {
	struct work_struct work;
	struct completion done;
	struct pmt_region *r;
	void *addr;
	size_t bytes;
	struct iov_iter *iter;
	struct mm_struct *mm;
	u64 queued_ns;
	size_t copied;
};

static void pmt_work_copy(struct work_struct *work)
{
	struct pmt_work *w = container_of(work, struct pmt_work, work);
	struct pmt_region *r = w->r;

	pmt_waited(r, w->queued_ns);
	/* a user buffer is read in the caller's address space */
	if (w->mm)
		kthread_use_mm(w->mm);
	pmt_enter(r);
	w->copied = pmt_copy_now(r->dax_dev, w->addr, w->bytes, w->iter);
	/*
	 * The non-temporal stores are this CPU's: drain them before the caller
	 * goes on, so that the write is as durable as the caller's own copy
	 * followed by the caller's fence.
	 */
	wmb();
	pmt_leave(r);
	if (w->mm)
		kthread_unuse_mm(w->mm);
	pmt_count(&r->by_workers, w->copied);
	complete(&w->done);
}

static size_t pmt_copy_by_worker(struct pmt_region *r, void *addr,
				 size_t bytes, struct iov_iter *i)
{
	struct pmt_work w = {
		.r = r,
		.addr = addr,
		.bytes = bytes,
		.iter = i,
		.mm = user_backed_iter(i) ? current->mm : NULL,
		.queued_ns = ktime_get_ns(),
	};

	INIT_WORK_ONSTACK(&w.work, pmt_work_copy);
	init_completion(&w.done);
	queue_work_node(r->node, r->wq, &w.work);
	/* not killable: the worker uses this stack and the caller's memory */
	wait_for_completion(&w.done);
	destroy_work_on_stack(&w.work);
	return w.copied;
}

size_t pmt_copy(struct dax_device *dax_dev, void *addr, size_t bytes,
		struct iov_iter *i)
{
	int mode = READ_ONCE(pmt_mode);
	struct pmt_region *r;
	size_t copied;
	u64 since;

	r = pmt_region_of(dax_dev, addr);
	if (!r) {
		atomic64_inc(&pmt_untracked_copies);
		return pmt_copy_now(dax_dev, addr, bytes, i);
	}
	if (mode == PMT_WORKQUEUE && bytes >= READ_ONCE(pmt_threshold) &&
	    (!user_backed_iter(i) || current->mm)) {
		copied = pmt_copy_by_worker(r, addr, bytes, i);
		pmt_count(&r->by_mode[mode], copied);
		return copied;
	}
	if (mode == PMT_SEMAPHORE) {
		if (!pmt_try_enter(r)) {
			since = ktime_get_ns();
			if (wait_event_killable(r->wait, pmt_try_enter(r)))
				return 0;
			pmt_waited(r, since);
		}
	} else {
		pmt_enter(r);
	}
	copied = pmt_copy_now(dax_dev, addr, bytes, i);
	pmt_leave(r);
	pmt_count(&r->by_mode[mode], copied);
	return copied;
}
