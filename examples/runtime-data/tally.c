/*
 * A PM program with run-time data in PM, to show `persim_volatile` (include/persim.h).
 * It keeps a persistent running total in a file on a DAX file system, mapped with PMDK's
 * libpmem, and beside it run-time data that it updates on every call and never flushes:
 * statistics and a scratch copy of the request. Nothing reads them after a crash. Without the declaration,
 * `--strategy global-prefix` reorders the statistics lines like any other; with it, they
 * follow the store order and the crash images are those of the total alone.
 *
 *   tally FILE init              create the file: total = 0
 *   tally FILE add N             add N to the total (one 8-byte store, persisted)
 *   tally FILE add-undeclared N  the same without declaring the statistics run-time data
 *   tally FILE show              print {"total": ..} (the recovered state)
 */
#include <libpmem.h>
#include <persim.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tally {
	uint64_t total; /* persistent */
	uint64_t pad[7];
	struct {
		uint64_t calls;
		uint64_t last;
		char pad[48];
		char request[256];
	} stats; /* run-time data: five cache lines, never flushed */
};

static struct tally *map(const char *path, int create)
{
	size_t len;
	int is_pmem;
	void *addr = pmem_map_file(path, create ? sizeof(struct tally) : 0,
				   create ? PMEM_FILE_CREATE : 0, 0600, &len, &is_pmem);
	if (addr == NULL) {
		perror(path);
		exit(1);
	}
	if (len < sizeof(struct tally)) {
		fprintf(stderr, "%s: too short\n", path);
		exit(1);
	}
	return addr;
}

static void add(struct tally *t, uint64_t n)
{
	t->stats.calls++;
	memset(t->stats.request, 0, sizeof(t->stats.request));
	snprintf(t->stats.request, sizeof(t->stats.request), "add %llu", (unsigned long long)n);
	t->total += n;
	pmem_persist(&t->total, sizeof(t->total));
	t->stats.last = t->total;
}

int main(int argc, char **argv)
{
	const char *usage = "usage: tally FILE init|add N|add-undeclared N|show\n";
	if (argc < 3) {
		fputs(usage, stderr);
		return 2;
	}
	if (strcmp(argv[2], "init") == 0) {
		struct tally *t = map(argv[1], 1);
		memset(t, 0, sizeof(*t));
		pmem_persist(t, sizeof(*t));
	} else if ((strcmp(argv[2], "add") == 0 || strcmp(argv[2], "add-undeclared") == 0) &&
		   argc == 4) {
		struct tally *t = map(argv[1], 0);
		if (strcmp(argv[2], "add") == 0)
			persim_volatile(&t->stats, sizeof(t->stats));
		add(t, strtoull(argv[3], NULL, 10));
	} else if (strcmp(argv[2], "show") == 0) {
		struct tally *t = map(argv[1], 0);
		printf("{\"total\": %llu}\n", (unsigned long long)t->total);
	} else {
		fputs(usage, stderr);
		return 2;
	}
	return 0;
}
