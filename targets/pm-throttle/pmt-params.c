// SPDX-License-Identifier: GPL-2.0
/*
 * The settings, module parameters that can be set at load and changed at run
 * time in /sys/module/pm_throttle/parameters/: mode, limit, workers, threshold.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dmaengine.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "pmt.h"

int pmt_mode = PMT_OFF;
unsigned int pmt_limit = 2;
unsigned int pmt_workers = 2;
unsigned int pmt_threshold = 4096;

static const char *const pmt_mode_names[PMT_MODES] = {
	[PMT_OFF] = "off",
	[PMT_SEMAPHORE] = "semaphore",
	[PMT_WORKQUEUE] = "workqueue",
	[PMT_DMA] = "dma",
};

/* DMA offload needs a dmaengine channel that copies memory. */
static int pmt_dma_refused(void)
{
	struct dma_chan *chan;
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	chan = dma_request_channel(mask, NULL, NULL);
	if (!chan) {
		pr_warn("mode dma refused: no DMA engine with a memcpy channel (e.g. ioatdma) is registered; the mode is unchanged\n");
		return -ENODEV;
	}
	dma_release_channel(chan);
	pr_warn("mode dma refused: a DMA engine is present, but this module does not offload copies to it; the mode is unchanged\n");
	return -EOPNOTSUPP;
}

const char *pmt_mode_name(int mode)
{
	return pmt_mode_names[mode];
}

static int pmt_mode_set(const char *val, const struct kernel_param *kp)
{
	int mode = sysfs_match_string(pmt_mode_names, val);

	if (mode < 0) {
		pr_warn("mode \"%.*s\" refused: one of off, semaphore, workqueue, dma\n",
			(int)strcspn(val, "\n"), val);
		return -EINVAL;
	}
	if (mode == PMT_DMA)
		return pmt_dma_refused();
	WRITE_ONCE(pmt_mode, mode);
	pr_info("mode %s\n", pmt_mode_name(mode));
	return 0;
}

static int pmt_mode_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", pmt_mode_names[READ_ONCE(pmt_mode)]);
}

static const struct kernel_param_ops pmt_mode_ops = {
	.set = pmt_mode_set,
	.get = pmt_mode_get,
};
module_param_cb(mode, &pmt_mode_ops, NULL, 0644);
MODULE_PARM_DESC(mode, "off, semaphore, workqueue or dma (refused without a DMA engine)");

static int pmt_uint_set(const char *val, const struct kernel_param *kp,
			unsigned int min, unsigned int max)
{
	unsigned int n;
	int err = kstrtouint(val, 0, &n);

	if (err || n < min || n > max) {
		pr_warn("%s must be %u to %u\n", kp->name, min, max);
		return -EINVAL;
	}
	WRITE_ONCE(*(unsigned int *)kp->arg, n);
	return 0;
}

static int pmt_limit_set(const char *val, const struct kernel_param *kp)
{
	int err = pmt_uint_set(val, kp, 1, 1024);

	if (!err)
		pmt_settings_changed();
	return err;
}

static const struct kernel_param_ops pmt_limit_ops = {
	.set = pmt_limit_set,
	.get = param_get_uint,
};
module_param_cb(limit, &pmt_limit_ops, &pmt_limit, 0644);
MODULE_PARM_DESC(limit, "semaphore mode: most concurrent writers per PM region (1-1024)");

static int pmt_workers_set(const char *val, const struct kernel_param *kp)
{
	int err = pmt_uint_set(val, kp, 1, 512);

	if (!err)
		pmt_settings_changed();
	return err;
}

static const struct kernel_param_ops pmt_workers_ops = {
	.set = pmt_workers_set,
	.get = param_get_uint,
};
module_param_cb(workers, &pmt_workers_ops, &pmt_workers, 0644);
MODULE_PARM_DESC(workers, "workqueue mode: workers per PM region (1-512)");

static int pmt_threshold_set(const char *val, const struct kernel_param *kp)
{
	return pmt_uint_set(val, kp, 0, INT_MAX);
}

static const struct kernel_param_ops pmt_threshold_ops = {
	.set = pmt_threshold_set,
	.get = param_get_uint,
};
module_param_cb(threshold, &pmt_threshold_ops, &pmt_threshold, 0644);
MODULE_PARM_DESC(threshold, "workqueue mode: copies of fewer bytes stay synchronous");
