/*
 * What pi.c, rtree_map.c and ctree_map.c take from PMDK's source tree (src/examples/ex_common.h), which Debian's
 * libpmemobj-dev does not ship: written here from their use.
 */
#ifndef PERSIM_EX_COMMON_H
#define PERSIM_EX_COMMON_H

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define CREATE_MODE_RW (S_IWUSR | S_IRUSR)

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* 0 when the file exists, as pi.c expects */
static inline int file_exists(const char *path)
{
	return access(path, F_OK);
}

/* The index of the highest set bit of a non-zero value, as ctree_map.c expects */
static inline int find_last_set_64(uint64_t value)
{
	return 63 - __builtin_clzll(value);
}

#endif
