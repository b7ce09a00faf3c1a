// SPDX-License-Identifier: GPL-2.0
/*
 * DPWC's CRC-32C (docs/design/dpwc.md, "The layout on PM"), and the copy of a write's
 * data to PM that computes it on the way. On x86-64 with SSE4.2 both use the crc32
 * instruction inline: the crypto API's crc32c-intel cost, per 4 KiB entry, a
 * descriptor, an FPU section and a second pass over a staged copy of the data, more
 * guest instructions than the CRC itself. Elsewhere the library's __crc32c_le.
 */
#include <linux/crc32.h>
#include <linux/string.h>
#include "dpwc.h"

#ifdef CONFIG_X86_64
/* The CRC-32C state @crc over the 8 bytes of @w, by one crc32 instruction. */
static __always_inline u64 dpwc_crc_word(u64 crc, u64 w)
{
	asm("crc32q %1, %0" : "+r" (crc) : "rm" (w));
	return crc;
}

static __always_inline u32 dpwc_crc_byte(u32 crc, u8 b)
{
	asm("crc32b %1, %0" : "+r" (crc) : "qm" (b));
	return crc;
}

/*
 * One word of dpwc_copy_crc(): loaded once into a register, which both the crc32
 * instruction and the non-temporal store (movnti) read, so the CRC describes the
 * bytes PM got even if *@s changes meanwhile.
 */
static __always_inline u64 dpwc_copy_word(u64 *d, const u64 *s, u64 crc)
{
	u64 w;

	asm volatile("movq %[src], %[w]\n\t"
		     "crc32q %[w], %[crc]\n\t"
		     "movnti %[w], %[dst]"
		     : [crc] "+r" (crc), [w] "=&r" (w), [dst] "=m" (*d)
		     : [src] "m" (*s));
	return crc;
}

static u32 dpwc_crc_state(u32 state, const u8 *p, size_t len)
{
	u64 crc = state, w;

	/* The library's CRC where the instruction is missing, as the copy path falls back. */
	if (!dpwc_crc_insn())
		return __crc32c_le(state, p, len);
	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&w, p, sizeof(w));
		crc = dpwc_crc_word(crc, w);
	}
	for (; len; len--)
		crc = dpwc_crc_byte(crc, *p++);
	return crc;
}

u32 dpwc_copy_crc(void *dst, const void *src, size_t len, u32 state)
{
	const u64 *s = src;
	u64 *d = dst, tail = 0;
	u64 crc = state;

	/* Sixteen words a turn: the loop's own instructions are a twelfth of the body. */
	for (; len >= 128; len -= 128, s += 16, d += 16) {
		crc = dpwc_copy_word(d, s, crc);
		crc = dpwc_copy_word(d + 1, s + 1, crc);
		crc = dpwc_copy_word(d + 2, s + 2, crc);
		crc = dpwc_copy_word(d + 3, s + 3, crc);
		crc = dpwc_copy_word(d + 4, s + 4, crc);
		crc = dpwc_copy_word(d + 5, s + 5, crc);
		crc = dpwc_copy_word(d + 6, s + 6, crc);
		crc = dpwc_copy_word(d + 7, s + 7, crc);
		crc = dpwc_copy_word(d + 8, s + 8, crc);
		crc = dpwc_copy_word(d + 9, s + 9, crc);
		crc = dpwc_copy_word(d + 10, s + 10, crc);
		crc = dpwc_copy_word(d + 11, s + 11, crc);
		crc = dpwc_copy_word(d + 12, s + 12, crc);
		crc = dpwc_copy_word(d + 13, s + 13, crc);
		crc = dpwc_copy_word(d + 14, s + 14, crc);
		crc = dpwc_copy_word(d + 15, s + 15, crc);
	}
	for (; len >= 8; len -= 8)
		crc = dpwc_copy_word(d++, s++, crc);
	if (len) {
		/* A segment that is not whole words: its tail through a copy of its own. */
		memcpy(&tail, s, len);
		crc = dpwc_crc_state(crc, (const u8 *)&tail, len);
		memcpy_flushcache(d, &tail, len);
	}
	return crc;
}
#else
static u32 dpwc_crc_state(u32 state, const u8 *p, size_t len)
{
	return __crc32c_le(state, p, len);
}
#endif

/* CRC-32C when started with 0 and chained through its result. */
u32 dpwc_crc(u32 crc, const void *p, size_t len)
{
	return dpwc_crc_state(crc ^ ~0U, p, len) ^ ~0U;
}
