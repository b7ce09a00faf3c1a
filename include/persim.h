/*
 * persim.h: client requests from a program under test to Persim's tracer, for C and C++.
 * Header only; without Persim (no tracer plugin, or on real hardware) every request is
 * a harmless cpuid of an unknown leaf.
 *
 *   persim_volatile(addr, len)
 *       Declares len bytes at addr, in mapped PM, run-time data: bookkeeping the program
 *       keeps in PM but never needs after a crash (statistics, caches, locks, a
 *       library's run-time state). From this point of the trace on, a dirty cache line
 *       that holds only such data is not explored by `--strategy global-prefix` or
 *       `reads`: it follows the global store order instead of doubling the crash images.
 *       `exhaustive` still explores it. Call it once per range, after mapping it; the
 *       reports count the lines it spared (docs/model.md, "Run-time data").
 *
 * The encoding (crates/abi/src/hypercall.rs): cpuid with eax = "PERS" (0x50455253),
 * edx = the operation, rcx and rsi its arguments.
 */
#ifndef PERSIM_H
#define PERSIM_H

#include <stddef.h>
#include <stdint.h>

#define PERSIM_HYPERCALL_LEAF 0x50455253u
#define PERSIM_OP_VOLATILE 5u

static inline void persim_volatile(const void *addr, size_t len)
{
	/* The tracer translates the range through the page tables: fault every page in. */
	const volatile char *p = (const volatile char *)addr;
	for (size_t off = 0; off < len; off += 4096)
		(void)p[off];
	if (len > 0)
		(void)p[len - 1];
	uint32_t eax = PERSIM_HYPERCALL_LEAF, edx = PERSIM_OP_VOLATILE;
	uint64_t rcx = (uint64_t)(uintptr_t)addr;
	__asm__ __volatile__("cpuid"
			     : "+a"(eax), "+c"(rcx), "+d"(edx)
			     : "S"((uint64_t)len)
			     : "rbx", "memory");
}

#endif
