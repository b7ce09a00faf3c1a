#include "common.h"

/* The flush is five calls down, deeper than the analyzer follows: a call it does not
 * follow may have flushed, so the stores before it are not judged. */
static void flush6(long *p)
{
	if (!p)
		return;
	pmem_persist(p, sizeof(*p));
}
static void flush5(long *p)
{
	if (!p)
		return;
	flush6(p);
}
static void flush4(long *p)
{
	if (!p)
		return;
	flush5(p);
}
static void flush3(long *p)
{
	if (!p)
		return;
	flush4(p);
}
static void flush2(long *p)
{
	if (!p)
		return;
	flush3(p);
}

int stamp(const char *path)
{
	size_t len;
	int is_pmem;
	long *p = pmem_map_file(path, 4096, PMEM_FILE_CREATE, 0600, &len, &is_pmem);
	if (!p)
		return 1;
	*p = 42;
	flush2(p);
	return 0;
}
