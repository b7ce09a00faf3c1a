/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pm-throttle: bounds the concurrent writers of DAX write copies per PM region
 * (docs/design/pm-throttle.md).
 */
#ifndef PMT_H
#define PMT_H

#include <linux/atomic.h>
#include <linux/kobject.h>
#include <linux/types.h>
#include <linux/uio.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

struct dax_device;

enum pmt_mode {
	PMT_OFF,
	PMT_SEMAPHORE,
	PMT_WORKQUEUE,
	PMT_DMA,
	PMT_MODES,
};

/* Copies and bytes of one mode. */
struct pmt_count {
	atomic64_t copies;
	atomic64_t bytes;
};

/* One PM region: a dax_device, found on its first copy. */
struct pmt_region {
	struct dax_device *dax_dev;
	int node;
	struct kobject kobj;
	/* writers in a copy to this region now, and the most seen at once */
	atomic_t writers;
	atomic_t max_writers;
	/* semaphore mode: writers over the limit wait here */
	wait_queue_head_t wait;
	/* workqueue mode: its workers, queued on the region's node */
	struct workqueue_struct *wq;
	struct pmt_count by_mode[PMT_MODES];
	struct pmt_count by_workers;
	/* writers that waited (for a slot or a worker), and for how long */
	atomic64_t waits;
	atomic64_t wait_ns;
};

/* Run-time settings (pmt-params.c). */
extern int pmt_mode;
extern unsigned int pmt_limit;
extern unsigned int pmt_workers;
extern unsigned int pmt_threshold;
const char *pmt_mode_name(int mode);

size_t pmt_copy(struct dax_device *dax_dev, void *addr, size_t bytes,
		struct iov_iter *i);
bool pmt_dax_layout_ok(void);
void pmt_settings_changed(void);
void pmt_regions_free(void);

int pmt_sysfs_init(void);
void pmt_sysfs_exit(void);
int pmt_region_kobject_add(struct pmt_region *r, int id);
extern atomic64_t pmt_untracked_copies;

#endif
