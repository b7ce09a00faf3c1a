// SPDX-License-Identifier: GPL-2.0
/*
 * pm-throttle: a livepatch that replaces dax_copy_from_iter(), the data copy of
 * every DAX write (ext4, XFS: dax_iomap_iter()), with one that bounds the
 * concurrent writers of each PM region (docs/design/pm-throttle.md). Disabling the patch
 * (/sys/kernel/livepatch/pm_throttle/enabled) restores the kernel's own
 * function; then the module can be removed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dax.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/uio.h>
#include <generated/utsrelease.h>

#include "pmt.h"

static size_t pmt_dax_copy_from_iter(struct dax_device *dax_dev, pgoff_t pgoff,
				     void *addr, size_t bytes,
				     struct iov_iter *i)
{
	if (!dax_alive(dax_dev))
		return 0;
	return pmt_copy(dax_dev, addr, bytes, i);
}

/* Built against a kernel whose dax_copy_from_iter() has another prototype: no module. */
static_assert(__same_type(&dax_copy_from_iter, &pmt_dax_copy_from_iter));

static struct klp_func pmt_funcs[] = {
	{
		.old_name = "dax_copy_from_iter",
		.new_func = pmt_dax_copy_from_iter,
	},
	{}
};

static struct klp_object pmt_objs[] = {
	{
		/* name NULL: vmlinux */
		.funcs = pmt_funcs,
	},
	{}
};

static struct klp_patch pmt_patch = {
	.mod = THIS_MODULE,
	.objs = pmt_objs,
};

static int __init pmt_init(void)
{
	int err;

	if (!pmt_dax_layout_ok()) {
		pr_err("refused: struct dax_device of this kernel is not the one of %s this module was built for; dax_copy_from_iter() left alone\n",
		       UTS_RELEASE);
		return -EINVAL;
	}
	err = pmt_sysfs_init();
	if (err)
		return err;
	err = klp_enable_patch(&pmt_patch);
	if (err) {
		pr_err("refused: livepatching dax_copy_from_iter() failed (%d); the kernel's copy is unchanged\n",
		       err);
		pmt_sysfs_exit();
		return err;
	}
	pr_info("dax_copy_from_iter() replaced (kernel %s); mode %s, limit %u, workers %u, threshold %u\n",
		UTS_RELEASE, pmt_mode_name(pmt_mode), pmt_limit, pmt_workers, pmt_threshold);
	return 0;
}

static void __exit pmt_exit(void)
{
	/* The patch is disabled: no task is in pmt_dax_copy_from_iter() any more. */
	pmt_regions_free();
	pmt_sysfs_exit();
	pr_info("unloaded; dax_copy_from_iter() is the kernel's own again\n");
}

module_init(pmt_init);
module_exit(pmt_exit);
MODULE_DESCRIPTION("Bounds concurrent writers of DAX write copies per PM region");
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
