// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The driver of the Pangolin ports of libpmemobj's map examples, the twin of
 * targets/pmdk-examples/pmdk-map.c: the same commands and the same JSON, so that a test
 * runs one workload on both libraries (docs/design/pangolin.md).
 *
 *   pangolin-map TYPE POOL setup OP...   run the operations (no checkpoints)
 *   pangolin-map TYPE POOL run OP...     the same, checkpoint k before the k-th, and after
 *   pangolin-map TYPE POOL show [KEY...] open the pool (completing an interrupted
 *                                        transaction), scrub it (repairing from parity)
 *                                        and print the map as JSON
 *
 * TYPE: btree, ctree, hashmap_tx. OP: create, insert:KEY, remove:KEY, one transaction
 * each. The pool (8 MiB, as PMEMOBJ_MIN_POOL; 4 KiB chunk rows, 100 a zone: 1 % parity)
 * is created when POOL does not exist. show prints {"map", "walk", "lookup", "count",
 * "objects"} as pmdk-map does, or {"damage": "..."} and exits 3 when the scrub finds an
 * object parity cannot rebuild. What the scrub or the opening repaired goes to stderr and
 * the kernel log (/dev/kmsg), where `persim faults` reads that a fault was corrected.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "map.h"
#include "persim.h"

#define POOL_SIZE (8ULL << 20)
#define CHUNK_SIZE 4096
#define ROWS 100
#define LOG_SIZE (16 << 10)
/* hashmap_tx draws its hash function from this seed, as pmdk-map's does */
#define SEED 1
#define MAX_KEYS 1024
#define MAX_TYPES 16
/* exit status of show when the pool holds damage it cannot repair */
#define DAMAGE 3

struct keys {
	uint64_t keys[MAX_KEYS];
	size_t n;
};

void *map_need_ptr(void *p)
{
	if (p == NULL) {
		fprintf(stderr, "pangolin-map: %s\n", pgl_errormsg());
		exit(1);
	}
	return p;
}

static void usage(void)
{
	fprintf(stderr, "usage: pangolin-map btree|ctree|hashmap_tx POOL "
			"setup|run create|insert:KEY|remove:KEY... | show [KEY...]\n");
	exit(2);
}

static const struct map_ops *map_type(const char *name)
{
	const struct map_ops *all[] = { &btree_map_ops, &ctree_map_ops, &hashmap_tx_ops };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(name, all[i]->name) == 0)
			return all[i];
	usage();
	return NULL;
}

static uint64_t parse_key(const char *text)
{
	char *end;
	uint64_t key;

	errno = 0;
	key = strtoull(text, &end, 10);
	if (errno || *end || end == text)
		usage();
	return key;
}

static void collect_key(uint64_t key, pgl_oid value, void *arg)
{
	struct keys *seen = arg;

	(void)value;
	if (seen->n < MAX_KEYS)
		seen->keys[seen->n++] = key;
}

static int compare_keys(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Says what was repaired, on stderr and in the kernel log (best effort). The newline ends
 * the kmsg record: without it the kernel holds the record open and dmesg never shows it. */
static void report_repairs(uint64_t repairs)
{
	char line[160];
	int fd;

	snprintf(line, sizeof(line),
		 "pangolin-map: checksum or parity mismatch found and repaired: %" PRIu64
		 " repairs\n", repairs);
	fputs(line, stderr);
	fd = open("/dev/kmsg", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, line, strlen(line)) < 0)
			perror("pangolin-map: /dev/kmsg");
		close(fd);
	}
}

static int show(PGLpool *pool, const struct map_ops *ops, int nkeys, char **keys)
{
	uint64_t types[MAX_TYPES];
	size_t counts[MAX_TYPES], ntypes = 0;
	/* first the scrub: reads are direct, unverified, and must see the repaired pool */
	int lost = pgl_scrub(pool);
	pgl_oid map;

	if (pgl_repairs(pool) > 0)
		report_repairs(pgl_repairs(pool));
	if (lost != 0) {
		printf("{\"damage\": \"%d objects parity cannot rebuild\"}\n", lost);
		fprintf(stderr, "pangolin-map: the scrub found %d objects lost\n", lost);
		return DAMAGE;
	}
	map = *MAP_RD(pool, pgl_oid, pgl_root(pool));
	printf("{\"map\": %s", map ? "true" : "null");
	if (map) {
		struct keys seen = { .n = 0 };

		ops->foreach(pool, map, collect_key, &seen);
		qsort(seen.keys, seen.n, sizeof(seen.keys[0]), compare_keys);
		printf(", \"walk\": [");
		for (size_t i = 0; i < seen.n; i++)
			printf("%s%" PRIu64, i ? ", " : "", seen.keys[i]);
		printf("], \"lookup\": {");
		for (int i = 0; i < nkeys; i++) {
			uint64_t key = parse_key(keys[i]);

			printf("%s\"%" PRIu64 "\": %s", i ? ", " : "", key,
			       ops->lookup(pool, map, key) ? "true" : "false");
		}
		printf("}");
		if (ops->count)
			printf(", \"count\": %" PRIu64, ops->count(pool, map));
	}
	/* distinct type numbers in pool order; the root object is type 0 */
	for (pgl_oid oid = pgl_first(pool); oid; oid = pgl_next(pool, oid)) {
		int64_t type = pgl_type_num(pool, oid);
		size_t t = 0;

		while (t < ntypes && types[t] != (uint64_t)type)
			t++;
		if (t == ntypes && ntypes < MAX_TYPES) {
			types[ntypes] = (uint64_t)type;
			counts[ntypes++] = 0;
		}
		if (t < ntypes)
			counts[t]++;
	}
	printf(", \"objects\": {");
	for (size_t t = 0; t < ntypes; t++)
		printf("%s\"%" PRIu64 "\": %zu", t ? ", " : "", types[t], counts[t]);
	printf("}}\n");
	return 0;
}

/* One operation, one transaction. */
static void run_op(PGLpool *pool, const struct map_ops *ops, const char *op)
{
	pgl_oid root = pgl_root(pool);
	pgl_oid map = *MAP_RD(pool, pgl_oid, root);
	const char *arg = strchr(op, ':');
	uint64_t key = 0;
	int done = 0;

	if (strcmp(op, "create") != 0) {
		if (arg == NULL)
			usage();
		key = parse_key(arg + 1);
		if (!map) {
			fprintf(stderr, "no map in the pool: run `create` first\n");
			exit(2);
		}
	}
	map_need(pgl_tx_begin(pool) == 0 ? pool : NULL);
	if (strcmp(op, "create") == 0) {
		map = ops->create(pool, SEED);
		done = map ? 0 : -1;
		if (map)
			*(pgl_oid *)map_need(pgl_tx_add_range(root, 0, sizeof(pgl_oid))) = map;
	} else if (strncmp(op, "insert:", 7) == 0) {
		done = ops->insert(pool, map, key, 0);
	} else if (strncmp(op, "remove:", 7) == 0) {
		done = ops->remove(pool, map, key) < 0 ? -1 : 0;
	} else {
		usage();
	}
	if (done != 0 || pgl_tx_commit() != 0 || pgl_tx_end() != 0) {
		fprintf(stderr, "%s failed: %s\n", op, pgl_errormsg());
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const struct map_ops *ops;
	const char *path, *command;
	int checkpoints, status = 0;
	PGLpool *pool;

	if (argc < 4)
		usage();
	ops = map_type(argv[1]);
	path = argv[2];
	command = argv[3];
	checkpoints = strcmp(command, "run") == 0;
	if (!checkpoints && strcmp(command, "setup") != 0 && strcmp(command, "show") != 0)
		usage();
	/* show never creates the pool: a missing one is a pool that does not open */
	pool = access(path, F_OK) == 0 || strcmp(command, "show") == 0
		? pgl_open_pool(path)
		: pgl_create_pool_geometry(path, POOL_SIZE, CHUNK_SIZE, ROWS, LOG_SIZE,
					   sizeof(pgl_oid));
	if (pool == NULL) {
		fprintf(stderr, "%s: %s\n", path, pgl_errormsg());
		if (strcmp(command, "show") == 0)
			printf("{\"damage\": \"the pool does not open\"}\n");
		return strcmp(command, "show") == 0 ? DAMAGE : 1;
	}
	if (strcmp(command, "show") == 0) {
		status = show(pool, ops, argc - 4, argv + 4);
	} else {
		for (int i = 4; i < argc; i++) {
			if (checkpoints)
				persim_checkpoint((uint64_t)(i - 3));
			run_op(pool, ops, argv[i]);
		}
		if (checkpoints)
			persim_checkpoint((uint64_t)(argc - 3));
	}
	pgl_close_pool(pool);
	return status;
}
