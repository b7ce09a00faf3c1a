#include "common.h"

/* A mapped file's first word is written and never flushed. */
int stamp(const char *path)
{
	size_t len;
	int is_pmem;
	long *p = pmem_map_file(path, 4096, PMEM_FILE_CREATE, 0600, &len, &is_pmem);
	if (!p)
		return 1;
	*p = 42;
	return 0; /* rule 1 */
}
