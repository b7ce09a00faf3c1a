/*
 * A non-interactive driver of PMDK's map examples (examples/map of libpmemobj-dev, built
 * by targets/pmdk-examples/build.sh): one process opens the pool, runs a list of map
 * operations and marks a Persim checkpoint before each and after the last, so the
 * intervals hold the map's transactions and not the pool's opening.
 *
 *   pmdk-map TYPE POOL setup OP...   run the operations (no checkpoints)
 *   pmdk-map TYPE POOL run OP...     the same, checkpoint k before the k-th, and after
 *   pmdk-map TYPE POOL show [KEY...] open the pool (libpmemobj's recovery) and print the
 *                                    map as JSON: {"map", "walk", "lookup", "count",
 *                                    "objects"}
 *
 * TYPE: rtree, btree, ctree, hashmap_tx, hashmap_rp. OP: create (the map, in the pool's root
 * object), insert:KEY, remove:KEY. Values are OID_NULL, as in PMDK's mapcli, but for
 * ctree, which takes a null value for an empty slot: there every value is the root object.
 * The pool is created when POOL does not exist (setup creates the parts of a pool set
 * file). "walk" is what the map's foreach passes as keys, sorted (rtree_map passes each
 * node's key fragment, read as 8 bytes, valued or not, so it shows the tree's shape),
 * "lookup" whether each KEY is found. "objects" counts the
 * pool's allocated objects by type number: a crash that leaks a node or frees one still
 * in use changes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpmemobj.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hashmap.h"
#include "map.h"
#include "map_btree.h"
#include "map_ctree.h"
#include "map_hashmap_rp.h"
#include "map_hashmap_tx.h"
#include "map_rtree.h"
#include "persim.h"

#define LAYOUT "persim-pmdk-map"
/* hashmap_tx draws its hash function from this seed: the same run gives the same map */
#define SEED 1
#define MAX_KEYS 1024
#define MAX_TYPES 16

struct root {
	TOID(struct map) map;
};
TOID_DECLARE_ROOT(struct root);

struct keys {
	uint64_t keys[MAX_KEYS];
	size_t n;
};

static void usage(void)
{
	fprintf(stderr, "usage: pmdk-map rtree|btree|ctree|hashmap_tx|hashmap_rp POOL "
			"setup|run create|insert:KEY|remove:KEY... | show [KEY...]\n");
	exit(2);
}

static const struct map_ops *map_type(const char *name)
{
	if (strcmp(name, "rtree") == 0)
		return MAP_RTREE;
	if (strcmp(name, "btree") == 0)
		return MAP_BTREE;
	if (strcmp(name, "ctree") == 0)
		return MAP_CTREE;
	if (strcmp(name, "hashmap_tx") == 0)
		return MAP_HASHMAP_TX;
	if (strcmp(name, "hashmap_rp") == 0)
		return MAP_HASHMAP_RP;
	usage();
	return NULL;
}

static uint64_t parse_key(const char *text)
{
	char *end;
	errno = 0;
	uint64_t key = strtoull(text, &end, 10);
	if (errno || *end || end == text)
		usage();
	return key;
}

static int collect_key(uint64_t key, PMEMoid value, void *arg)
{
	(void)value;
	struct keys *seen = arg;
	if (seen->n < MAX_KEYS)
		seen->keys[seen->n++] = key;
	return 0;
}

static int compare_keys(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void show(PMEMobjpool *pop, struct map_ctx *mapc, TOID(struct map) map, int nkeys,
		 char **keys)
{
	printf("{\"map\": %s", TOID_IS_NULL(map) ? "null" : "true");
	if (!TOID_IS_NULL(map)) {
		struct keys seen = { .n = 0 };
		map_foreach(mapc, map, collect_key, &seen);
		/* the walk's order depends on the hash seed and the tree's shape */
		qsort(seen.keys, seen.n, sizeof(seen.keys[0]), compare_keys);
		printf(", \"walk\": [");
		for (size_t i = 0; i < seen.n; i++)
			printf("%s%" PRIu64, i ? ", " : "", seen.keys[i]);
		printf("], \"lookup\": {");
		for (int i = 0; i < nkeys; i++) {
			uint64_t key = parse_key(keys[i]);
			printf("%s\"%" PRIu64 "\": %s", i ? ", " : "", key,
			       map_lookup(mapc, map, key) ? "true" : "false");
		}
		printf("}");
		if (mapc->ops->count)
			printf(", \"count\": %zu", map_count(mapc, map));
	}
	/* distinct type numbers in the order the heap lists them */
	uint64_t types[MAX_TYPES];
	size_t counts[MAX_TYPES], ntypes = 0;
	PMEMoid oid;
	POBJ_FOREACH(pop, oid) {
		uint64_t type = pmemobj_type_num(oid);
		size_t t = 0;
		while (t < ntypes && types[t] != type)
			t++;
		if (t == ntypes && ntypes < MAX_TYPES) {
			types[ntypes] = type;
			counts[ntypes++] = 0;
		}
		if (t < ntypes)
			counts[t]++;
	}
	printf(", \"objects\": {");
	for (size_t t = 0; t < ntypes; t++)
		printf("%s\"%" PRIu64 "\": %zu", t ? ", " : "", types[t], counts[t]);
	printf("}}\n");
}

static void run_op(struct map_ctx *mapc, struct root *root, PMEMoid value, const char *op)
{
	if (strcmp(op, "create") == 0) {
		struct hashmap_args args = { .seed = SEED };
		if (map_create(mapc, &root->map, &args) != 0) {
			fprintf(stderr, "create failed: %s\n", pmemobj_errormsg());
			exit(1);
		}
		return;
	}
	const char *arg = strchr(op, ':');
	if (arg == NULL)
		usage();
	uint64_t key = parse_key(arg + 1);
	if (TOID_IS_NULL(root->map)) {
		fprintf(stderr, "no map in the pool: run `create` first\n");
		exit(2);
	}
	if (strncmp(op, "insert:", 7) == 0) {
		if (map_insert(mapc, root->map, key, value) < 0) {
			fprintf(stderr, "insert %" PRIu64 " failed: %s\n", key, pmemobj_errormsg());
			exit(1);
		}
	} else if (strncmp(op, "remove:", 7) == 0) {
		map_remove(mapc, root->map, key);
	} else {
		usage();
	}
}

static int is_pool_set(const char *path)
{
	FILE *file = fopen(path, "r");
	char magic[sizeof("PMEMPOOLSET")] = "";
	int set = file && fgets(magic, sizeof(magic), file) && strcmp(magic, "PMEMPOOLSET") == 0;

	if (file)
		fclose(file);
	return set;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		usage();
	const struct map_ops *ops = map_type(argv[1]);
	const char *path = argv[2];
	const char *command = argv[3];
	int checkpoints = strcmp(command, "run") == 0;
	if (!checkpoints && strcmp(command, "setup") != 0 && strcmp(command, "show") != 0)
		usage();
	PMEMobjpool *pop = access(path, F_OK) == 0
		? pmemobj_open(path, LAYOUT)
		: pmemobj_create(path, LAYOUT, PMEMOBJ_MIN_POOL, 0600);
	/* a pool set file (e.g. with a replica, Pangolin's "Pmemobj-R") exists before its
	 * parts: setup creates them, the sizes the set file gives */
	if (pop == NULL && strcmp(command, "setup") == 0 && is_pool_set(path))
		pop = pmemobj_create(path, LAYOUT, 0, 0600);
	if (pop == NULL) {
		fprintf(stderr, "%s: %s\n", path, pmemobj_errormsg());
		return 1;
	}
	struct map_ctx *mapc = map_ctx_init(ops, pop);
	if (mapc == NULL) {
		perror("map_ctx_init");
		return 1;
	}
	TOID(struct root) root = POBJ_ROOT(pop, struct root);
	/* the examples' run-time state (hashmap_rp's swap array), as mapcli does */
	if (!TOID_IS_NULL(D_RO(root)->map))
		map_init(mapc, D_RO(root)->map);
	if (strcmp(command, "show") == 0) {
		show(pop, mapc, D_RO(root)->map, argc - 4, argv + 4);
	} else {
		for (int i = 4; i < argc; i++) {
			if (checkpoints)
				persim_checkpoint((uint64_t)(i - 3));
			run_op(mapc, D_RW(root), ops == MAP_CTREE ? root.oid : OID_NULL, argv[i]);
		}
		if (checkpoints)
			persim_checkpoint((uint64_t)(argc - 3));
	}
	map_ctx_free(mapc);
	pmemobj_close(pop);
	return 0;
}
