// SPDX-License-Identifier: GPL-2.0
/*
 * The statistics in /sys/kernel/pm_throttle/: untracked_copies (copies to
 * regions beyond the first 16), and per region regionN/ with its NUMA node,
 * copies and bytes per mode, copies and bytes done by workers, the writers now
 * and the most seen at once, and the waits and their time in nanoseconds.
 */
#include <linux/kobject.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/sysfs.h>

#include "pmt.h"

static struct kobject *pmt_kobj;

/* A read-only value of a region: an atomic_t, atomic64_t or int at offset. */
struct pmt_stat {
	struct attribute attr;
	size_t offset;
	enum { PMT_INT, PMT_ATOMIC, PMT_ATOMIC64 } kind;
};

#define PMT_STAT(_name, _field, _kind)                                        \
	static struct pmt_stat pmt_stat_##_name = {                           \
		.attr = { .name = #_name, .mode = 0444 },                     \
		.offset = offsetof(struct pmt_region, _field),                \
		.kind = _kind,                                                \
	}

PMT_STAT(node, node, PMT_INT);
PMT_STAT(writers, writers, PMT_ATOMIC);
PMT_STAT(max_writers, max_writers, PMT_ATOMIC);
PMT_STAT(waits, waits, PMT_ATOMIC64);
PMT_STAT(wait_ns, wait_ns, PMT_ATOMIC64);
PMT_STAT(copies_off, by_mode[PMT_OFF].copies, PMT_ATOMIC64);
PMT_STAT(bytes_off, by_mode[PMT_OFF].bytes, PMT_ATOMIC64);
PMT_STAT(copies_semaphore, by_mode[PMT_SEMAPHORE].copies, PMT_ATOMIC64);
PMT_STAT(bytes_semaphore, by_mode[PMT_SEMAPHORE].bytes, PMT_ATOMIC64);
PMT_STAT(copies_workqueue, by_mode[PMT_WORKQUEUE].copies, PMT_ATOMIC64);
PMT_STAT(bytes_workqueue, by_mode[PMT_WORKQUEUE].bytes, PMT_ATOMIC64);
PMT_STAT(copies_by_workers, by_workers.copies, PMT_ATOMIC64);
PMT_STAT(bytes_by_workers, by_workers.bytes, PMT_ATOMIC64);

static struct attribute *pmt_region_attrs[] = {
	&pmt_stat_node.attr,
	&pmt_stat_writers.attr,
	&pmt_stat_max_writers.attr,
	&pmt_stat_waits.attr,
	&pmt_stat_wait_ns.attr,
	&pmt_stat_copies_off.attr,
	&pmt_stat_bytes_off.attr,
	&pmt_stat_copies_semaphore.attr,
	&pmt_stat_bytes_semaphore.attr,
	&pmt_stat_copies_workqueue.attr,
	&pmt_stat_bytes_workqueue.attr,
	&pmt_stat_copies_by_workers.attr,
	&pmt_stat_bytes_by_workers.attr,
	NULL,
};
ATTRIBUTE_GROUPS(pmt_region);

static ssize_t pmt_stat_show(struct kobject *kobj, struct attribute *attr,
			     char *buf)
{
	struct pmt_stat *stat = container_of(attr, struct pmt_stat, attr);
	void *field = (void *)container_of(kobj, struct pmt_region, kobj) +
		      stat->offset;

	switch (stat->kind) {
	case PMT_INT:
		return sysfs_emit(buf, "%d\n", *(int *)field);
	case PMT_ATOMIC:
		return sysfs_emit(buf, "%d\n", atomic_read(field));
	default:
		return sysfs_emit(buf, "%lld\n", atomic64_read(field));
	}
}

static const struct sysfs_ops pmt_stat_ops = {
	.show = pmt_stat_show,
};

static void pmt_region_release(struct kobject *kobj)
{
	struct pmt_region *r = container_of(kobj, struct pmt_region, kobj);

	destroy_workqueue(r->wq);
	kfree(r);
}

static const struct kobj_type pmt_region_ktype = {
	.release = pmt_region_release,
	.sysfs_ops = &pmt_stat_ops,
	.default_groups = pmt_region_groups,
};

int pmt_region_kobject_add(struct pmt_region *r, int id)
{
	int err = kobject_init_and_add(&r->kobj, &pmt_region_ktype, pmt_kobj,
				       "region%d", id);

	if (err)
		kobject_put(&r->kobj);
	return err;
}

static ssize_t untracked_copies_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&pmt_untracked_copies));
}

static struct kobj_attribute pmt_untracked = __ATTR_RO(untracked_copies);

int pmt_sysfs_init(void)
{
	int err;

	pmt_kobj = kobject_create_and_add("pm_throttle", kernel_kobj);
	if (!pmt_kobj)
		return -ENOMEM;
	err = sysfs_create_file(pmt_kobj, &pmt_untracked.attr);
	if (err)
		kobject_put(pmt_kobj);
	return err;
}

void pmt_sysfs_exit(void)
{
	kobject_put(pmt_kobj);
}
