// SPDX-License-Identifier: GPL-2.0
/*
 * oops.ko: a real kernel oops on demand, for Persim's tests of a recovery that
 * crashes the guest kernel (docs/guides/kernel-fs.md). Writing to /proc/persim-oops takes a
 * mutex and dereferences NULL while holding it: the writer is killed by the oops,
 * the mutex stays locked, and a second writer blocks for good, as a mount does
 * after a file system oopsed with a lock held.
 */
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/proc_fs.h>

static DEFINE_MUTEX(persim_oops_lock);
static struct proc_dir_entry *persim_oops_entry;

/* Kept out of line so that the oops's RIP names this function. */
static noinline void persim_oops_dereference(int *target)
{
	WRITE_ONCE(*target, 1);
}

static ssize_t persim_oops_write(struct file *file, const char __user *buf,
			  size_t count, loff_t *pos)
{
	/* Uninterruptible, like the locks a file system takes in mount. */
	mutex_lock(&persim_oops_lock);
	persim_oops_dereference(NULL);
	mutex_unlock(&persim_oops_lock);
	return count;
}

static const struct proc_ops persim_oops_ops = {
	.proc_write = persim_oops_write,
};

static int __init persim_oops_init(void)
{
	persim_oops_entry = proc_create("persim-oops", 0200, NULL,
					&persim_oops_ops);
	return persim_oops_entry ? 0 : -ENOMEM;
}

static void __exit persim_oops_exit(void)
{
	proc_remove(persim_oops_entry);
}

module_init(persim_oops_init);
module_exit(persim_oops_exit);
MODULE_DESCRIPTION("Oopses on a write to /proc/persim-oops, holding a mutex");
MODULE_LICENSE("GPL");
