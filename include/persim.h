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
 *       reports count the lines it spared (docs/design/model.md, "Run-time data").
 *
 *   persim_checkpoint(n)
 *       Marks checkpoint n, as the guest tool `hypercall checkpoint N` does, without
 *       forking it: a test whose `run` is the program numbers its checkpoints 1, 2, …
 *       and Persim judges each interval n -> n+1 (docs/guides/pm-program.md, "A raw
 *       libpmem program").
 *
 * The encoding (crates/abi/src/hypercall.rs): cpuid with eax = "PERS" (0x50455253),
 * edx = the operation, rcx and rsi its arguments.
 */
#ifndef PERSIM_H
#define PERSIM_H

#include <stddef.h>
#include <stdint.h>

#define PERSIM_HYPERCALL_LEAF 0x50455253u
#define PERSIM_OP_CHECKPOINT 2u
#define PERSIM_OP_VOLATILE 5u

/* The one cpuid every request makes; ebx is written by cpuid, so it is clobbered. */
static inline void persim_hypercall_(uint32_t op, uint64_t arg, uint64_t arg2)
{
	uint32_t eax = PERSIM_HYPERCALL_LEAF;
	__asm__ __volatile__("cpuid"
			     : "+a"(eax), "+c"(arg), "+d"(op)
			     : "S"(arg2)
			     : "rbx", "memory");
}

static inline void persim_checkpoint(uint64_t n)
{
	persim_hypercall_(PERSIM_OP_CHECKPOINT, n, 0);
}

static inline void persim_volatile(const void *addr, size_t len)
{
	/* The tracer translates the range through the page tables: fault every page in. */
	const volatile char *p = (const volatile char *)addr;
	for (size_t off = 0; off < len; off += 4096)
		(void)p[off];
	if (len > 0)
		(void)p[len - 1];
	persim_hypercall_(PERSIM_OP_VOLATILE, (uint64_t)(uintptr_t)addr, (uint64_t)len);
}

#endif
